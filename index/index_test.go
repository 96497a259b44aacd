package index

import (
	"errors"
	"reflect"
	"testing"
)

var (
	topicA = UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	tpA0   = TopicIDPartition{TopicID: topicA, Partition: 0}
	tpA1   = TopicIDPartition{TopicID: topicA, Partition: 1}
)

// seg returns metadata of a segment [start, end] in COPY_SEGMENT_STARTED.
func seg(tp TopicIDPartition, start, end, maxTS int64, epochs ...EpochEntry) SegmentMetadata {
	if len(epochs) == 0 {
		epochs = []EpochEntry{{Epoch: 0, StartOffset: start}}
	}
	return SegmentMetadata{
		Partition: tp, SegmentID: NewUUID(), Topic: "orders",
		StartOffset: start, EndOffset: end, MaxTimestamp: maxTS, EventTimestamp: 1000,
		BrokerID: 1, SegmentSize: 4096, LeaderEpochs: epochs, State: CopySegmentStarted,
		Objects: []ObjectEntry{{Kind: ObjectLog, Size: 4096}, {Kind: ObjectOffsetIndex, Size: 80}, {Kind: ObjectTimeIndex, Size: 120}},
	}
}

func openMem(t *testing.T) *Index {
	t.Helper()
	x, err := Open(Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { x.Close() })
	return x
}

// add adds m and moves it to state.
func add(t *testing.T, x *Index, m SegmentMetadata, state State) SegmentMetadata {
	t.Helper()
	if err := x.AddSegment(m); err != nil {
		t.Fatalf("add %d: %v", m.StartOffset, err)
	}
	path := map[State][]State{
		CopySegmentStarted:   nil,
		CopySegmentFinished:  {CopySegmentFinished},
		DeleteSegmentStarted: {CopySegmentFinished, DeleteSegmentStarted},
	}[state]
	for _, s := range path {
		var err error
		m, err = x.UpdateSegment(SegmentUpdate{Partition: m.Partition, SegmentID: m.SegmentID, State: s, EventTimestamp: 2000, BrokerID: 2})
		if err != nil {
			t.Fatalf("update %d to %s: %v", m.StartOffset, s, err)
		}
	}
	return m
}

func TestValidTransition(t *testing.T) {
	states := []State{CopySegmentStarted, CopySegmentFinished, DeleteSegmentStarted, DeleteSegmentFinished}
	// allowed[from][to], from Kafka's RemoteLogSegmentState.isValidTransition.
	allowed := map[State][]State{
		CopySegmentStarted:    {CopySegmentStarted, CopySegmentFinished, DeleteSegmentStarted},
		CopySegmentFinished:   {CopySegmentFinished, DeleteSegmentStarted},
		DeleteSegmentStarted:  {DeleteSegmentStarted, DeleteSegmentFinished},
		DeleteSegmentFinished: {DeleteSegmentFinished},
	}
	for _, to := range states {
		if got := ValidTransition(nil, to); got != (to == CopySegmentStarted) {
			t.Errorf("nil -> %s: %v", to, got)
		}
	}
	for _, from := range states {
		for _, to := range states {
			want := false
			for _, a := range allowed[from] {
				want = want || a == to
			}
			if got := ValidTransition(&from, to); got != want {
				t.Errorf("%s -> %s: %v, want %v", from, to, got, want)
			}
		}
	}
	bad := State(9)
	if ValidTransition(&bad, bad) || ValidTransition(nil, bad) {
		t.Error("unknown state accepted")
	}
}

func TestStateMachineInIndex(t *testing.T) {
	x := openMem(t)
	m := seg(tpA0, 0, 99, 500)
	upd := func(s State) error {
		_, err := x.UpdateSegment(SegmentUpdate{Partition: tpA0, SegmentID: m.SegmentID, State: s, EventTimestamp: 3000, BrokerID: 3})
		return err
	}
	if err := upd(CopySegmentFinished); !errors.Is(err, ErrNotFound) {
		t.Fatalf("update of unknown segment: %v, want ErrNotFound", err)
	}
	done := m
	done.State = CopySegmentFinished
	if err := x.AddSegment(done); !errors.Is(err, ErrInvalidTransition) {
		t.Fatalf("add in COPY_SEGMENT_FINISHED: %v, want ErrInvalidTransition", err)
	}
	if err := x.AddSegment(m); err != nil {
		t.Fatal(err)
	}
	if err := x.AddSegment(m); err != nil {
		t.Fatalf("idempotent re-add: %v", err)
	}
	// Another segment id at the same base is no conflict (a new leader's
	// upload beside its predecessor's).
	other := seg(tpA0, 0, 50, 500)
	if err := x.AddSegment(other); err != nil {
		t.Fatalf("second segment at the same base: %v", err)
	}
	changed := m
	changed.EndOffset = 98
	if err := x.AddSegment(changed); !errors.Is(err, ErrSegmentExists) {
		t.Fatalf("re-add with other metadata: %v, want ErrSegmentExists", err)
	}
	if _, err := x.SegmentForOffset(tpA0, 10); !errors.Is(err, ErrNotFound) {
		t.Fatalf("COPY_SEGMENT_STARTED segment readable: %v", err)
	}
	if err := upd(DeleteSegmentFinished); !errors.Is(err, ErrInvalidTransition) {
		t.Fatalf("STARTED -> DELETE_FINISHED: %v", err)
	}
	if err := upd(CopySegmentFinished); err != nil {
		t.Fatal(err)
	}
	if err := upd(CopySegmentFinished); err != nil {
		t.Fatalf("repeated COPY_SEGMENT_FINISHED: %v", err)
	}
	if err := upd(CopySegmentStarted); !errors.Is(err, ErrInvalidTransition) {
		t.Fatalf("FINISHED -> STARTED: %v", err)
	}
	got, err := x.SegmentForOffset(tpA0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != CopySegmentFinished || got.BrokerID != 3 || got.EventTimestamp != 3000 {
		t.Fatalf("after update: %+v", got)
	}
	if err := upd(DeleteSegmentStarted); err != nil {
		t.Fatal(err)
	}
	if _, err := x.SegmentForOffset(tpA0, 10); !errors.Is(err, ErrNotFound) {
		t.Fatalf("DELETE_SEGMENT_STARTED segment readable: %v", err)
	}
	if _, err := x.SegmentForEpochOffset(tpA0, 0, 10); !errors.Is(err, ErrNotFound) {
		t.Fatalf("DELETE_SEGMENT_STARTED segment readable by epoch: %v", err)
	}
	if got, err := x.Segment(tpA0, m.SegmentID); err != nil || got.State != DeleteSegmentStarted {
		t.Fatalf("segment while deleting: %+v %v", got, err)
	}
	if err := upd(CopySegmentFinished); !errors.Is(err, ErrInvalidTransition) {
		t.Fatalf("DELETE_STARTED -> COPY_FINISHED: %v", err)
	}
	if err := upd(DeleteSegmentFinished); err != nil {
		t.Fatal(err)
	}
	if segs, _ := x.Segments(tpA0); len(segs) != 1 || segs[0].SegmentID != other.SegmentID {
		t.Fatalf("segments after DELETE_SEGMENT_FINISHED: %+v, want the other one only", segs)
	}
	if err := upd(DeleteSegmentFinished); !errors.Is(err, ErrNotFound) {
		t.Fatalf("update after removal: %v, want ErrNotFound", err)
	}
	// An abandoned upload may go straight to deletion.
	if _, err := x.UpdateSegment(SegmentUpdate{Partition: tpA0, SegmentID: other.SegmentID, State: DeleteSegmentStarted}); err != nil {
		t.Fatalf("STARTED -> DELETE_STARTED: %v", err)
	}
	// The update must name the right partition.
	if _, err := x.UpdateSegment(SegmentUpdate{Partition: tpA1, SegmentID: other.SegmentID, State: DeleteSegmentFinished}); !errors.Is(err, ErrNotFound) {
		t.Fatalf("update naming another partition: %v", err)
	}
}

func TestLookups(t *testing.T) {
	x := openMem(t)
	// Partition 0: [0,99] epoch 0, [100,199] epochs 0 then 1 at 150,
	// [200,299] being copied, [300,399] epoch 2, [400,499] being deleted.
	add(t, x, seg(tpA0, 0, 99, 1000), CopySegmentFinished)
	add(t, x, seg(tpA0, 100, 199, 900, EpochEntry{0, 100}, EpochEntry{1, 150}), CopySegmentFinished)
	add(t, x, seg(tpA0, 200, 299, 5000, EpochEntry{1, 200}), CopySegmentStarted)
	add(t, x, seg(tpA0, 300, 399, 3000, EpochEntry{2, 300}), CopySegmentFinished)
	add(t, x, seg(tpA0, 400, 499, 9000, EpochEntry{2, 400}), DeleteSegmentStarted)
	add(t, x, seg(tpA1, 50, 60, 10), CopySegmentFinished)

	startOf := func(m SegmentMetadata, err error) int64 {
		if errors.Is(err, ErrNotFound) {
			return -1
		}
		if err != nil {
			t.Fatal(err)
		}
		return m.StartOffset
	}
	for _, c := range []struct {
		offset, want int64
	}{
		{0, 0}, {99, 0}, {100, 100}, {199, 100}, {200, -1}, {250, -1}, {300, 300}, {399, 300}, {400, -1}, {10000, -1},
	} {
		if got := startOf(x.SegmentForOffset(tpA0, c.offset)); got != c.want {
			t.Errorf("SegmentForOffset(%d) = %d, want %d", c.offset, got, c.want)
		}
	}
	if got := startOf(x.SegmentForOffset(tpA1, 10)); got != -1 {
		t.Errorf("tp1 offset below its first segment: %d", got)
	}
	if got := startOf(x.SegmentForOffset(TopicIDPartition{TopicID: topicA, Partition: 7}, 0)); got != -1 {
		t.Errorf("unknown partition: %d", got)
	}

	for _, c := range []struct {
		epoch        int32
		offset, want int64
	}{
		{0, 0, 0}, {0, 120, 100}, {0, 149, 100}, {0, 150, -1}, {1, 150, 100}, {1, 199, 100},
		{1, 120, -1}, {1, 250, -1}, {2, 350, 300}, {2, 450, -1}, {3, 350, -1},
	} {
		if got := startOf(x.SegmentForEpochOffset(tpA0, c.epoch, c.offset)); got != c.want {
			t.Errorf("SegmentForEpochOffset(%d, %d) = %d, want %d", c.epoch, c.offset, got, c.want)
		}
	}
	for _, c := range []struct {
		epoch int32
		want  int64
		ok    bool
	}{{0, 149, true}, {1, 199, true}, {2, 399, true}, {3, 0, false}} {
		got, ok, err := x.HighestOffsetForEpoch(tpA0, c.epoch)
		if err != nil || ok != c.ok || got != c.want {
			t.Errorf("HighestOffsetForEpoch(%d) = %d, %v, %v; want %d, %v", c.epoch, got, ok, err, c.want, c.ok)
		}
	}

	for _, c := range []struct {
		ts, from, want int64
	}{
		{0, 0, 0}, {1000, 0, 0}, {1001, 0, 300}, {950, 100, 300}, {900, 100, 100}, {3000, 0, 300}, {3001, 0, -1}, {0, 400, -1},
	} {
		if got := startOf(x.SegmentForTimestamp(tpA0, c.ts, c.from)); got != c.want {
			t.Errorf("SegmentForTimestamp(%d, from %d) = %d, want %d", c.ts, c.from, got, c.want)
		}
	}

	if s, ok, err := x.LogStart(tpA0); err != nil || !ok || s != 0 {
		t.Errorf("LogStart = %d, %v, %v", s, ok, err)
	}
	if e, ok, err := x.LogEnd(tpA0); err != nil || !ok || e != 399 {
		t.Errorf("LogEnd = %d, %v, %v; want 399", e, ok, err)
	}
	if _, ok, _ := x.LogStart(TopicIDPartition{TopicID: topicA, Partition: 9}); ok {
		t.Error("LogStart of an empty partition")
	}

	segs, err := x.Segments(tpA0)
	if err != nil {
		t.Fatal(err)
	}
	var starts []int64
	for _, m := range segs {
		starts = append(starts, m.StartOffset)
	}
	if !reflect.DeepEqual(starts, []int64{0, 100, 200, 300, 400}) {
		t.Errorf("Segments starts = %v", starts)
	}
	parts, err := x.Partitions()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(parts, []TopicIDPartition{tpA0, tpA1}) {
		t.Errorf("Partitions = %v", parts)
	}
	got, err := x.Segment(tpA0, segs[1].SegmentID)
	if err != nil || !reflect.DeepEqual(got, segs[1]) {
		t.Errorf("Segment by id = %+v, %v; want %+v", got, err, segs[1])
	}
}

func TestPersistsAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	x, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	m := add(t, x, seg(tpA0, 0, 9, 7, EpochEntry{4, 0}), CopySegmentFinished)
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := x.Segments(tpA0); !errors.Is(err, ErrClosed) {
		t.Fatalf("use after close: %v", err)
	}
	x, err = Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	got, err := x.SegmentForEpochOffset(tpA0, 4, 5)
	if err != nil || !reflect.DeepEqual(got, m) {
		t.Fatalf("after reopen: %+v, %v; want %+v", got, err, m)
	}
}

func TestReplacePartition(t *testing.T) {
	x := openMem(t)
	old := add(t, x, seg(tpA0, 0, 9, 7), CopySegmentFinished)
	keep := add(t, x, seg(tpA1, 0, 9, 7), CopySegmentFinished)
	a, b := seg(tpA0, 10, 19, 8, EpochEntry{1, 10}), seg(tpA0, 20, 29, 9, EpochEntry{2, 20})
	a.State, b.State = CopySegmentFinished, DeleteSegmentStarted
	if err := x.ReplacePartition(tpA0, []SegmentMetadata{a, b}); err != nil {
		t.Fatal(err)
	}
	segs, _ := x.Segments(tpA0)
	if !reflect.DeepEqual(segs, []SegmentMetadata{a, b}) {
		t.Fatalf("after replace: %+v", segs)
	}
	if _, err := x.Segment(tpA0, old.SegmentID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("replaced segment still known by id: %v", err)
	}
	if _, err := x.SegmentForEpochOffset(tpA0, 0, 5); !errors.Is(err, ErrNotFound) {
		t.Fatalf("replaced segment still found by epoch: %v", err)
	}
	if _, err := x.SegmentForEpochOffset(tpA0, 1, 15); err != nil {
		t.Fatalf("loaded segment by epoch: %v", err)
	}
	if _, err := x.SegmentForEpochOffset(tpA0, 2, 25); !errors.Is(err, ErrNotFound) {
		t.Fatalf("loaded DELETE_SEGMENT_STARTED segment readable by epoch: %v", err)
	}
	if segs, _ := x.Segments(tpA1); !reflect.DeepEqual(segs, []SegmentMetadata{keep}) {
		t.Fatalf("other partition changed: %+v", segs)
	}
	if err := x.ReplacePartition(tpA0, []SegmentMetadata{a, a}); !errors.Is(err, ErrSegmentExists) {
		t.Fatalf("one segment id twice: %v", err)
	}
	// Two segments at one base offset (two leaders uploaded the range):
	// both are kept, and whatever the order the bucket lists them in,
	// every broker reads the same one (Prefer).
	for _, c := range []struct {
		name      string
		win, lose func(m *SegmentMetadata)
	}{
		{"finished over started", func(m *SegmentMetadata) { m.State = CopySegmentFinished }, func(m *SegmentMetadata) { m.State = CopySegmentStarted; m.UploadEpoch = 9 }},
		{"newer leader", func(m *SegmentMetadata) { m.State, m.UploadEpoch = CopySegmentFinished, 4 }, func(m *SegmentMetadata) { m.State, m.UploadEpoch = CopySegmentFinished, 3 }},
		{"longer", func(m *SegmentMetadata) { m.State, m.EndOffset = CopySegmentFinished, a.EndOffset+5 }, func(m *SegmentMetadata) { m.State = CopySegmentFinished }},
	} {
		win, lose := packed(a.Clone()), packed(a.Clone())
		win.SegmentID, lose.SegmentID = NewUUID(), NewUUID()
		c.win(&win)
		c.lose(&lose)
		for _, order := range [][]SegmentMetadata{{win, lose}, {lose, win}} {
			if err := x.ReplacePartition(tpA0, order); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			segs, _ := x.Segments(tpA0)
			if len(segs) != 2 {
				t.Fatalf("%s: kept %+v, want both", c.name, segs)
			}
			if got, err := x.SegmentForOffset(tpA0, a.StartOffset); err != nil || got.SegmentID != win.SegmentID {
				t.Fatalf("%s: read from %v %v, want %s", c.name, got.SegmentID, err, win.SegmentID)
			}
		}
	}
	if err := x.ReplacePartition(tpA1, []SegmentMetadata{a}); err == nil {
		t.Fatal("segment of another partition accepted")
	}
	if err := x.ReplacePartition(tpA0, nil); err != nil {
		t.Fatal(err)
	}
	if segs, _ := x.Segments(tpA0); len(segs) != 0 {
		t.Fatalf("after replacing with nothing: %+v", segs)
	}
}

func TestAddValidates(t *testing.T) {
	x := openMem(t)
	for name, mut := range map[string]func(*SegmentMetadata){
		"zero topic id":      func(m *SegmentMetadata) { m.Partition.TopicID = UUID{} },
		"negative partition": func(m *SegmentMetadata) { m.Partition.Partition = -1 },
		"zero segment id":    func(m *SegmentMetadata) { m.SegmentID = UUID{} },
		"end before start":   func(m *SegmentMetadata) { m.EndOffset = m.StartOffset - 1 },
		"negative start":     func(m *SegmentMetadata) { m.StartOffset, m.LeaderEpochs[0].StartOffset = -1, -1 },
		"no epochs":          func(m *SegmentMetadata) { m.LeaderEpochs = nil },
		"epoch not at start": func(m *SegmentMetadata) { m.LeaderEpochs[0].StartOffset++ },
		"epochs descending": func(m *SegmentMetadata) {
			m.LeaderEpochs = []EpochEntry{{3, m.StartOffset}, {2, m.StartOffset + 1}}
		},
		"epoch past end":    func(m *SegmentMetadata) { m.LeaderEpochs = append(m.LeaderEpochs, EpochEntry{9, m.EndOffset + 1}) },
		"unknown object":    func(m *SegmentMetadata) { m.Objects = append(m.Objects, ObjectEntry{Kind: 40}) },
		"object twice":      func(m *SegmentMetadata) { m.Objects = append(m.Objects, m.Objects[1]) },
		"log size mismatch": func(m *SegmentMetadata) { m.Objects[0].Size++ },
		"long topic":        func(m *SegmentMetadata) { m.Topic = string(make([]byte, 250)) },
		"bad max timestamp": func(m *SegmentMetadata) { m.MaxTimestamp = -2 },
		"negative segsize":  func(m *SegmentMetadata) { m.SegmentSize, m.Objects = -1, nil },
	} {
		m := seg(tpA0, 10, 20, 5)
		mut(&m)
		if err := x.AddSegment(m); !errors.Is(err, ErrInvalidMetadata) {
			t.Errorf("%s: %v, want ErrInvalidMetadata", name, err)
		}
	}
}

func TestUUIDString(t *testing.T) {
	u := NewUUID()
	s := u.String()
	if len(s) != 22 {
		t.Fatalf("%q: want 22 characters", s)
	}
	back, err := ParseUUID(s)
	if err != nil || back != u {
		t.Fatalf("ParseUUID(%q) = %v, %v", s, back, err)
	}
	// Kafka's Uuid.toString of the all-0x01 id.
	var ones UUID
	for i := range ones {
		ones[i] = 1
	}
	if got := ones.String(); got != "AQEBAQEBAQEBAQEBAQEBAQ" {
		t.Fatalf("String = %q", got)
	}
	for _, bad := range []string{"", "AQEBAQEBAQEBAQEBAQEBA", "AQEBAQEBAQEBAQEBAQEBA+", "AQEBAQEBAQEBAQEBAQEBAR"} {
		if _, err := ParseUUID(bad); err == nil {
			t.Errorf("ParseUUID(%q) accepted", bad)
		}
	}
}
