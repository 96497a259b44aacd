package index

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

// packed gives m packed objects, so that its manifest is of version 3
// and keeps its upload epoch (versions 1 and 2 do not record it).
func packed(m SegmentMetadata) SegmentMetadata {
	m.Objects = []ObjectEntry{{Kind: ObjectLog, Size: m.SegmentSize}, {Kind: ObjectIndexes, Size: 200},
		{Kind: ObjectOffsetIndex, Size: 80, Packed: true}, {Kind: ObjectTimeIndex, Size: 120, Packed: true, Offset: 80}}
	return m
}

// spec is a segment of a resolution case: [start, end], uploaded at
// epoch up, COPY_SEGMENT_FINISHED unless started or deleting, perhaps
// marked missing.
type spec struct {
	name              string
	start, end        int64
	up                int32
	maxTS             int64
	started, deleting bool
	missing           bool
	epochs            []EpochEntry
}

func (s spec) metadata(tp TopicIDPartition) SegmentMetadata {
	m := packed(seg(tp, s.start, s.end, s.maxTS, s.epochs...))
	m.UploadEpoch = s.up
	switch {
	case s.started:
		m.State = CopySegmentStarted
	case s.deleting:
		m.State = DeleteSegmentStarted
	default:
		m.State = CopySegmentFinished
	}
	return m
}

// load writes the specs as segments of tp, through AddSegment and
// UpdateSegment or through ReplacePartition, and marks the missing ones.
func load(t *testing.T, x *Index, tp TopicIDPartition, specs []spec, replace bool) map[UUID]string {
	t.Helper()
	names := map[UUID]string{}
	var segs []SegmentMetadata
	for _, s := range specs {
		m := s.metadata(tp)
		names[m.SegmentID] = s.name
		segs = append(segs, m)
	}
	if replace {
		if err := x.ReplacePartition(tp, segs); err != nil {
			t.Fatal(err)
		}
	} else {
		for _, m := range segs {
			state := m.State
			m.State = CopySegmentStarted
			add(t, x, m, state)
		}
	}
	for i, s := range specs {
		if s.missing {
			if changed, err := x.MarkMissing(tp, segs[i].SegmentID); err != nil || !changed {
				t.Fatalf("mark %s missing: %v %v", s.name, changed, err)
			}
		}
	}
	return names
}

// TestResolution: of the readable segments holding an offset, the one of
// the greatest upload epoch serves it, then the longer, then the greater
// id; a segment another beats where both hold offsets still serves the
// offsets only it holds; unreadable segments (started, being deleted,
// marked missing) serve nothing, and where nothing else holds their
// offsets reads find nothing, as in a gap. LogStart and LogEnd are the
// least start and greatest end of the readable segments. Whether the
// segments came one by one or from a refresh makes no difference.
func TestResolution(t *testing.T) {
	type want struct {
		offsets    map[int64]string // offset → name of the segment serving it ("" none)
		start, end int64            // -1: none
	}
	for _, c := range []struct {
		name  string
		specs []spec
		want  want
	}{
		{"two finished at one base: the greater upload epoch wins", []spec{
			{name: "old", start: 0, end: 149, up: 1},
			{name: "new", start: 0, end: 149, up: 2},
		}, want{map[int64]string{0: "new", 149: "new", 150: ""}, 0, 149}},
		{"the winner shorter: the other serves the rest", []spec{
			{name: "zombie", start: 100, end: 249, up: 1},
			{name: "leader", start: 100, end: 199, up: 2},
			{name: "next", start: 200, end: 299, up: 2},
		}, want{map[int64]string{99: "", 100: "leader", 199: "leader", 200: "next", 249: "next", 299: "next", 300: ""}, 100, 299}},
		{"the loser longer, nothing after: it serves its tail", []spec{
			{name: "zombie", start: 100, end: 249, up: 1},
			{name: "leader", start: 100, end: 199, up: 2},
		}, want{map[int64]string{100: "leader", 199: "leader", 200: "zombie", 249: "zombie", 250: ""}, 100, 249}},
		{"a longer segment at an existing base, same epoch", []spec{
			{name: "short", start: 0, end: 99, up: 3},
			{name: "long", start: 0, end: 149, up: 3},
		}, want{map[int64]string{0: "long", 99: "long", 149: "long"}, 0, 149}},
		{"a newer leader's segment inside an older one", []spec{
			{name: "outer", start: 0, end: 299, up: 1},
			{name: "inner", start: 100, end: 199, up: 2},
		}, want{map[int64]string{0: "outer", 99: "outer", 100: "inner", 199: "inner", 200: "outer", 299: "outer"}, 0, 299}},
		{"an older leader's segment inside a newer one serves nothing", []spec{
			{name: "outer", start: 0, end: 299, up: 2},
			{name: "inner", start: 100, end: 199, up: 1},
		}, want{map[int64]string{0: "outer", 150: "outer", 299: "outer"}, 0, 299}},
		{"unfinished uploads serve nothing", []spec{
			{name: "done", start: 0, end: 99, up: 1},
			{name: "started", start: 0, end: 149, up: 5, started: true},
			{name: "deleting", start: 150, end: 199, up: 5, deleting: true},
		}, want{map[int64]string{0: "done", 99: "done", 100: "", 150: ""}, 0, 99}},
		{"a missing segment is skipped while another holds its offsets", []spec{
			{name: "older", start: 0, end: 99, up: 1},
			{name: "lost", start: 0, end: 149, up: 2, missing: true},
			{name: "next", start: 100, end: 199, up: 1},
		}, want{map[int64]string{0: "older", 99: "older", 100: "next", 149: "next"}, 0, 199}},
		{"a missing segment alone: a gap", []spec{
			{name: "a", start: 0, end: 99, up: 1},
			{name: "lost", start: 100, end: 199, up: 1, missing: true},
			{name: "c", start: 200, end: 299, up: 1},
		}, want{map[int64]string{99: "a", 100: "", 199: "", 200: "c"}, 0, 299}},
		{"a missing last segment: the end moves back", []spec{
			{name: "a", start: 0, end: 99, up: 1},
			{name: "lost", start: 100, end: 199, up: 2, missing: true},
		}, want{map[int64]string{99: "a", 100: ""}, 0, 99}},
		{"a missing first segment: the start moves up", []spec{
			{name: "lost", start: 0, end: 99, up: 1, missing: true},
			{name: "b", start: 100, end: 199, up: 1},
		}, want{map[int64]string{0: "", 99: "", 100: "b"}, 100, 199}},
		{"nothing readable", []spec{
			{name: "lost", start: 0, end: 99, up: 1, missing: true},
			{name: "started", start: 100, end: 199, up: 1, started: true},
		}, want{map[int64]string{0: "", 100: ""}, -1, -1}},
	} {
		for _, replace := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/replace=%v", c.name, replace), func(t *testing.T) {
				x := openMem(t)
				names := load(t, x, tpA0, c.specs, replace)
				for off, w := range c.want.offsets {
					m, err := x.SegmentForOffset(tpA0, off)
					got := names[m.SegmentID]
					if errors.Is(err, ErrNotFound) {
						got = ""
					} else if err != nil {
						t.Fatal(err)
					}
					if got != w {
						t.Errorf("offset %d served by %q, want %q", off, got, w)
					}
					// Every segment here holds epoch 0 from its start.
					m, err = x.SegmentForEpochOffset(tpA0, 0, off)
					if got := names[m.SegmentID]; err == nil && got != w || err != nil && w != "" {
						t.Errorf("epoch 0 offset %d: %q %v, want %q", off, got, err, w)
					}
				}
				for what, f := range map[string]func(TopicIDPartition) (int64, bool, error){"start": x.LogStart, "end": x.LogEnd} {
					want := map[string]int64{"start": c.want.start, "end": c.want.end}[what]
					got, ok, err := f(tpA0)
					if !ok {
						got = -1
					}
					if err != nil || got != want {
						t.Errorf("log %s %d %v, want %d", what, got, err, want)
					}
				}
			})
		}
	}
}

// TestResolutionMatchesPrefer: on random overlapping segments, every
// offset is served by the segment Prefer picks among the readable ones
// holding it, as a plain scan of them finds it.
func TestResolutionMatchesPrefer(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 30 {
		x := openMem(t)
		var specs []spec
		for i := range 2 + r.IntN(12) {
			start := r.Int64N(200)
			s := spec{name: fmt.Sprint(i), start: start, end: start + r.Int64N(80), up: r.Int32N(3)}
			switch r.IntN(6) {
			case 0:
				s.started = true
			case 1:
				s.missing = true
			}
			specs = append(specs, s)
		}
		load(t, x, tpA0, specs, round%2 == 0)
		all, err := x.Segments(tpA0)
		if err != nil {
			t.Fatal(err)
		}
		missing, _ := x.Missing(tpA0)
		for off := int64(0); off < 300; off++ {
			var best *SegmentMetadata
			for i := range all {
				m := &all[i]
				if m.State != CopySegmentFinished || slices.Contains(missing, m.SegmentID) || m.StartOffset > off || m.EndOffset < off {
					continue
				}
				if best == nil || Prefer(m, best) {
					best = m
				}
			}
			got, err := x.SegmentForOffset(tpA0, off)
			switch {
			case best == nil && !errors.Is(err, ErrNotFound):
				t.Fatalf("round %d offset %d: %s %v, want none", round, off, got.SegmentID, err)
			case best != nil && (err != nil || got.SegmentID != best.SegmentID):
				t.Fatalf("round %d offset %d: %s %v, want %s", round, off, got.SegmentID, err, best.SegmentID)
			}
		}
	}
}

func TestPrefer(t *testing.T) {
	base := packed(seg(tpA0, 0, 99, 5))
	base.State = CopySegmentFinished
	lo, hi := UUID{1}, UUID{2}
	for _, c := range []struct {
		name string
		a, b func(*SegmentMetadata)
	}{
		{"finished over started", func(m *SegmentMetadata) {}, func(m *SegmentMetadata) { m.State, m.UploadEpoch, m.EndOffset = CopySegmentStarted, 9, 500 }},
		{"greater upload epoch", func(m *SegmentMetadata) { m.UploadEpoch = 4 }, func(m *SegmentMetadata) { m.UploadEpoch, m.EndOffset = 3, 500 }},
		{"greater end", func(m *SegmentMetadata) { m.EndOffset = 120 }, func(m *SegmentMetadata) { m.SegmentID = hi }},
		{"later event time", func(m *SegmentMetadata) { m.EventTimestamp = 7 }, func(m *SegmentMetadata) { m.SegmentID, m.EventTimestamp = hi, 6 }},
		{"greater id", func(m *SegmentMetadata) { m.SegmentID = hi }, func(m *SegmentMetadata) { m.SegmentID = lo }},
	} {
		a, b := base.Clone(), base.Clone()
		a.SegmentID, b.SegmentID = lo, lo
		c.a(&a)
		c.b(&b)
		if !Prefer(&a, &b) || Prefer(&b, &a) {
			t.Errorf("%s: Prefer(a, b) %v, Prefer(b, a) %v", c.name, Prefer(&a, &b), Prefer(&b, &a))
		}
	}
}

// TestEpochAndTimestampLookups with overlapping segments: the epoch
// lookups see the readable segments not marked missing, and pick as
// offsets do; the timestamp lookup walks the offsets in order and names
// the segment serving them.
func TestEpochAndTimestampLookups(t *testing.T) {
	x := openMem(t)
	names := load(t, x, tpA0, []spec{
		// outer [0,299]: epoch 1, then 2 from 150; inner [100,199] of a
		// newer leader; lost [300,399] epoch 3, marked missing; tail
		// [300,349] epoch 3.
		{name: "outer", start: 0, end: 299, up: 1, maxTS: 300, epochs: []EpochEntry{{1, 0}, {2, 150}}},
		{name: "inner", start: 100, end: 199, up: 2, maxTS: 500, epochs: []EpochEntry{{1, 100}, {2, 150}}},
		{name: "lost", start: 300, end: 399, up: 2, maxTS: 900, epochs: []EpochEntry{{3, 300}}, missing: true},
		{name: "tail", start: 300, end: 349, up: 2, maxTS: 700, epochs: []EpochEntry{{3, 300}}},
	}, false)
	name := func(m SegmentMetadata, err error) string {
		if errors.Is(err, ErrNotFound) {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		return names[m.SegmentID]
	}
	for _, c := range []struct {
		epoch  int32
		offset int64
		want   string
	}{
		{1, 0, "outer"}, {1, 99, "outer"}, {1, 100, "inner"}, {1, 149, "inner"}, {1, 150, ""},
		{2, 150, "inner"}, {2, 199, "inner"}, {2, 200, "outer"}, {2, 299, "outer"}, {2, 120, ""},
		{3, 300, "tail"}, {3, 349, "tail"}, {3, 350, ""}, {4, 300, ""},
	} {
		if got := name(x.SegmentForEpochOffset(tpA0, c.epoch, c.offset)); got != c.want {
			t.Errorf("SegmentForEpochOffset(%d, %d) = %q, want %q", c.epoch, c.offset, got, c.want)
		}
	}
	for _, c := range []struct {
		epoch int32
		want  int64
		ok    bool
	}{{1, 149, true}, {2, 299, true}, {3, 349, true}, {4, 0, false}} {
		got, ok, err := x.HighestOffsetForEpoch(tpA0, c.epoch)
		if err != nil || ok != c.ok || got != c.want {
			t.Errorf("HighestOffsetForEpoch(%d) = %d %v %v, want %d %v", c.epoch, got, ok, err, c.want, c.ok)
		}
	}
	for _, c := range []struct {
		ts, from int64
		want     string
	}{
		{0, 0, "outer"}, {301, 0, "inner"}, {301, 150, "inner"}, {301, 200, "tail"}, {501, 0, "tail"},
		{701, 0, ""}, {0, 200, "outer"}, {0, 349, "tail"}, {0, 350, ""},
	} {
		if got := name(x.SegmentForTimestamp(tpA0, c.ts, c.from)); got != c.want {
			t.Errorf("SegmentForTimestamp(%d, from %d) = %q, want %q", c.ts, c.from, got, c.want)
		}
	}
}

// TestMissingMark: MarkMissing takes a known segment once; the mark
// survives a reopen and a ReplacePartition that holds the segment again
// (a refresh that re-read its manifest), and goes with the segment.
func TestMissingMark(t *testing.T) {
	dir := t.TempDir()
	x, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { x.Close() }()
	older := add(t, x, packed(seg(tpA0, 0, 99, 5)), CopySegmentFinished)
	newer := packed(seg(tpA0, 0, 149, 5))
	newer.UploadEpoch = 2
	newer = add(t, x, newer, CopySegmentFinished)
	serves := func(what string, off int64, want *SegmentMetadata) {
		t.Helper()
		m, err := x.SegmentForOffset(tpA0, off)
		switch {
		case want == nil && !errors.Is(err, ErrNotFound):
			t.Fatalf("%s: offset %d served by %s %v, want none", what, off, m.SegmentID, err)
		case want != nil && (err != nil || m.SegmentID != want.SegmentID):
			t.Fatalf("%s: offset %d served by %s %v, want %s", what, off, m.SegmentID, err, want.SegmentID)
		}
	}
	serves("before", 50, &newer)
	if _, err := x.MarkMissing(tpA0, NewUUID()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("mark of an unknown segment: %v", err)
	}
	if _, err := x.MarkMissing(tpA1, newer.SegmentID); !errors.Is(err, ErrNotFound) {
		t.Fatalf("mark naming another partition: %v", err)
	}
	if changed, err := x.MarkMissing(tpA0, newer.SegmentID); err != nil || !changed {
		t.Fatalf("mark: %v %v", changed, err)
	}
	if changed, err := x.MarkMissing(tpA0, newer.SegmentID); err != nil || changed {
		t.Fatalf("mark again: %v %v", changed, err)
	}
	check := func(what string, wantEnd int64) {
		t.Helper()
		serves(what, 50, &older)
		serves(what, 120, nil)
		if end, _, _ := x.LogEnd(tpA0); end != wantEnd {
			t.Fatalf("%s: log end %d, want %d", what, end, wantEnd)
		}
		if ids, err := x.Missing(tpA0); err != nil || !reflect.DeepEqual(ids, []UUID{newer.SegmentID}) {
			t.Fatalf("%s: missing %v %v", what, ids, err)
		}
		if m, err := x.Segment(tpA0, newer.SegmentID); err != nil || m.State != CopySegmentFinished {
			t.Fatalf("%s: the missing segment is no longer listed: %+v %v", what, m, err)
		}
	}
	check("marked", 99)
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if x, err = Open(Options{Dir: dir}); err != nil {
		t.Fatal(err)
	}
	check("reopened", 99)
	segs, _ := x.Segments(tpA0)
	other := packed(seg(tpA0, 150, 199, 5))
	other.State = CopySegmentFinished
	if err := x.ReplacePartition(tpA0, append(segs, other)); err != nil {
		t.Fatal(err)
	}
	check("refreshed", 199)
	// A refresh without the segment (its manifest is gone) drops the mark.
	if err := x.ReplacePartition(tpA0, []SegmentMetadata{older, other}); err != nil {
		t.Fatal(err)
	}
	if ids, _ := x.Missing(tpA0); len(ids) != 0 {
		t.Fatalf("mark of a segment refreshed away: %v", ids)
	}
	// Deleting a segment drops its mark.
	if _, err := x.MarkMissing(tpA0, other.SegmentID); err != nil {
		t.Fatal(err)
	}
	for _, s := range []State{DeleteSegmentStarted, DeleteSegmentFinished} {
		if _, err := x.UpdateSegment(SegmentUpdate{Partition: tpA0, SegmentID: other.SegmentID, State: s}); err != nil {
			t.Fatal(err)
		}
	}
	if ids, _ := x.Missing(tpA0); len(ids) != 0 {
		t.Fatalf("mark of a deleted segment: %v", ids)
	}
	// ForgetTopic drops the marks of the topic's partitions.
	if _, err := x.MarkMissing(tpA0, older.SegmentID); err != nil {
		t.Fatal(err)
	}
	if err := x.ForgetTopic(topicA); err != nil {
		t.Fatal(err)
	}
	if ids, _ := x.Missing(tpA0); len(ids) != 0 {
		t.Fatalf("mark of a forgotten topic: %v", ids)
	}
}

// TestManySegments: a partition of thousands of segments answers by
// offset from its view, built once per write, not per lookup.
func TestManySegments(t *testing.T) {
	x := openMem(t)
	var segs []SegmentMetadata
	for i := range int64(5000) {
		m := packed(seg(tpA0, i*100, i*100+99, i))
		m.State = CopySegmentFinished
		m.UploadEpoch = int32(i % 3)
		segs = append(segs, m)
		if i%10 == 0 { // a shorter upload of an older leader at every tenth base
			o := packed(seg(tpA0, i*100, i*100+49, i))
			o.State = CopySegmentFinished
			segs = append(segs, o)
		}
	}
	if err := x.ReplacePartition(tpA0, segs); err != nil {
		t.Fatal(err)
	}
	if _, err := x.SegmentForOffset(tpA0, 0); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := x.SegmentForOffset(tpA0, 123_456); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 100 {
		t.Fatalf("%.0f allocations per lookup: the partition is scanned", allocs)
	}
	v, _ := x.resolved(tpA0)
	if len(v.pieces) != 5000 {
		t.Fatalf("%d pieces, want 5000", len(v.pieces))
	}
	if end, _, _ := x.LogEnd(tpA0); end != 499_999 {
		t.Fatalf("log end %d", end)
	}
}

// ContiguousEnd: the end of the unbroken run of readable offsets from an
// offset on (from the remote log start when below it), across segments
// that meet or overlap, and from-1 where no readable segment holds it;
// a missing-marked segment breaks the run.
func TestContiguousEnd(t *testing.T) {
	x := openMem(t)
	tp := TopicIDPartition{TopicID: UUID{9}, Partition: 1}
	if _, ok, err := x.ContiguousEnd(tp, 0); err != nil || ok {
		t.Fatalf("empty partition: ok %v, %v", ok, err)
	}
	load(t, x, tp, []spec{
		{name: "a", start: 10, end: 19, up: 1},
		{name: "b", start: 20, end: 29, up: 1},
		{name: "c", start: 15, end: 39, up: 0},
		{name: "d", start: 50, end: 59, up: 2},
		{name: "e", start: 60, end: 69, up: 2, missing: true},
		{name: "f", start: 70, end: 79, up: 2},
	}, false)
	for _, c := range []struct{ from, want int64 }{
		{0, 39}, {10, 39}, {25, 39}, {39, 39}, {40, 39}, {45, 44}, {50, 59}, {55, 59}, {60, 59}, {70, 79}, {80, 79},
	} {
		if got, ok, err := x.ContiguousEnd(tp, c.from); err != nil || !ok || got != c.want {
			t.Errorf("ContiguousEnd(%d) = %d, %v, %v; want %d", c.from, got, ok, err, c.want)
		}
	}
}
