package tier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"strata/index"
)

// reconcileFixture is a MemStore on a test clock, an index, and a
// Reconciler with an hour's grace.
type reconcileFixture struct {
	store *MemStore
	idx   *index.Index
	rec   *Reconciler
	mu    sync.Mutex
	clock time.Time
}

func newReconcileFixture(t *testing.T) *reconcileFixture {
	t.Helper()
	f := &reconcileFixture{store: NewMemStore(), clock: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	f.store.now = f.now
	idx, err := index.Open(index.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { idx.Close() })
	f.idx = idx
	f.rec = &Reconciler{Store: f.store, Index: idx, BrokerID: 7, Grace: time.Hour, Now: f.now}
	return f
}

func (f *reconcileFixture) now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.clock
}

func (f *reconcileFixture) advance(d time.Duration) {
	f.mu.Lock()
	f.clock = f.clock.Add(d)
	f.mu.Unlock()
}

// segment writes a segment's .log and .index objects and, unless state
// is nil, its manifest in that state.
func (f *reconcileFixture) segment(t *testing.T, tp index.TopicIDPartition, base int64, state *index.State) index.SegmentMetadata {
	t.Helper()
	m := index.SegmentMetadata{
		Partition: tp, SegmentID: index.NewUUID(), Topic: "orders",
		StartOffset: base, EndOffset: base + 9, MaxTimestamp: 1000, EventTimestamp: 1, BrokerID: 1,
		SegmentSize: 10, LeaderEpochs: []index.EpochEntry{{Epoch: 1, StartOffset: base}},
		Objects: []index.ObjectEntry{{Kind: index.ObjectLog, Size: 10}, {Kind: index.ObjectOffsetIndex, Size: 8}},
	}
	put(t, f.store, ObjectKey(&m, index.ObjectLog), bytes.Repeat([]byte{1}, 10))
	put(t, f.store, ObjectKey(&m, index.ObjectOffsetIndex), bytes.Repeat([]byte{2}, 8))
	if state != nil {
		m.State = *state
		b, err := index.EncodeManifest(&m)
		if err != nil {
			t.Fatal(err)
		}
		put(t, f.store, ManifestKey(&m), b)
	}
	return m
}

func stemKeys(m *index.SegmentMetadata) []string {
	return []string{ObjectKey(m, index.ObjectOffsetIndex), ObjectKey(m, index.ObjectLog), ManifestKey(m)}
}

func statePtr(s index.State) *index.State { return &s }

func manifestState(t *testing.T, s ObjectStore, m *index.SegmentMetadata) (index.State, bool) {
	t.Helper()
	got, err := readManifest(ctxT(t), s, ManifestKey(m))
	if errors.Is(err, ErrNotFound) {
		return 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return got.State, true
}

// TestReconcilePartition plants every kind of segment in a partition and
// checks that only the orphans go, and only past the grace period: a
// manifest still COPY_SEGMENT_STARTED or DELETE_SEGMENT_STARTED that the
// index does not know, and objects without a manifest. Finished segments
// (known to the index or not), an upload under way on this broker,
// segments with an unreadable manifest and keys outside the layout stay.
func TestReconcilePartition(t *testing.T) {
	f := newReconcileFixture(t)
	ctx := ctxT(t)
	tp := index.TopicIDPartition{TopicID: topicX, Partition: 3}
	other := index.TopicIDPartition{TopicID: topicX, Partition: 4}

	liveOther := f.segment(t, tp, 0, statePtr(index.CopySegmentFinished)) // another broker's upload
	liveMine := f.segment(t, tp, 10, statePtr(index.CopySegmentFinished))
	liveMine.State = index.CopySegmentStarted
	if err := f.idx.AddSegment(liveMine); err != nil {
		t.Fatal(err)
	}
	if _, err := f.idx.UpdateSegment(index.SegmentUpdate{Partition: tp, SegmentID: liveMine.SegmentID, State: index.CopySegmentFinished, EventTimestamp: 2}); err != nil {
		t.Fatal(err)
	}
	orphanStarted := f.segment(t, tp, 20, statePtr(index.CopySegmentStarted))
	orphanDeleting := f.segment(t, tp, 30, statePtr(index.DeleteSegmentStarted))
	orphanBare := f.segment(t, tp, 40, nil)
	uploading := f.segment(t, tp, 50, statePtr(index.CopySegmentStarted))
	if err := f.idx.AddSegment(uploading); err != nil {
		t.Fatal(err)
	}
	corrupt := f.segment(t, tp, 60, nil)
	put(t, f.store, ManifestKey(&corrupt), []byte("not a manifest"))
	foreign := []string{PartitionPrefix(tp) + "notes.txt", segmentStem(tp, 40, orphanBare.SegmentID) + ".bak"}
	for _, k := range foreign {
		put(t, f.store, k, []byte("x"))
	}
	otherOrphan := f.segment(t, other, 0, statePtr(index.CopySegmentStarted)) // not this call's partition

	// Within the grace period only the deletion left unfinished goes:
	// nothing can bring it back, so it need not wait.
	before := slices.DeleteFunc(f.store.Keys(), func(k string) bool { return slices.Contains(stemKeys(&orphanDeleting), k) })
	f.advance(59 * time.Minute)
	st, err := f.rec.ReconcilePartition(ctx, tp)
	if err != nil {
		t.Fatal(err)
	}
	if st.Orphans != 1 || st.Objects != 3 || st.Young != 2 || !slices.Equal(f.store.Keys(), before) {
		t.Fatalf("within the grace period: %+v; keys as expected: %v", st, slices.Equal(f.store.Keys(), before))
	}

	f.advance(2 * time.Minute)
	st, err = f.rec.ReconcilePartition(ctx, tp)
	if err != nil {
		t.Fatal(err)
	}
	if st.Orphans != 2 || st.Objects != 5 || st.Corrupt != 1 || st.Unrecognized != 2 || st.Segments != 6 {
		t.Fatalf("stats %+v; want 2 orphans of 5 objects, 1 unreadable manifest, 2 unrecognized keys, 6 segments", st)
	}
	var want []string
	for _, m := range []*index.SegmentMetadata{&liveOther, &liveMine, &uploading, &otherOrphan} {
		want = append(want, stemKeys(m)...)
	}
	want = append(want, ObjectKey(&corrupt, index.ObjectLog), ObjectKey(&corrupt, index.ObjectOffsetIndex), ManifestKey(&corrupt))
	want = append(want, foreign...)
	slices.Sort(want)
	if got := f.store.Keys(); !slices.Equal(got, want) {
		t.Fatalf("left\n%v\nwant\n%v", got, want)
	}
	for _, m := range []*index.SegmentMetadata{&orphanStarted, &orphanDeleting, &orphanBare} {
		if _, ok := manifestState(t, f.store, m); ok {
			t.Errorf("orphan %d still has its manifest", m.StartOffset)
		}
	}
	// A second pass finds nothing more.
	st, err = f.rec.ReconcilePartition(ctx, tp)
	if err != nil || st.Orphans != 0 {
		t.Fatalf("second pass: %+v, %v", st, err)
	}
}

// TestReconcileMarksManifestFirst fails the deletion of an orphan's
// objects and checks that its manifest already said
// DELETE_SEGMENT_STARTED (so a rebuilt index never serves it), then that
// the next pass finishes the job.
func TestReconcileMarksManifestFirst(t *testing.T) {
	f := newReconcileFixture(t)
	ctx := ctxT(t)
	tp := index.TopicIDPartition{TopicID: topicX, Partition: 0}
	m := f.segment(t, tp, 0, statePtr(index.CopySegmentStarted))
	f.advance(2 * time.Hour)
	var ops []string
	var mu sync.Mutex
	fail := true
	f.store.SetFault(func(op Op, key string) error {
		mu.Lock()
		defer mu.Unlock()
		if op == OpPut || op == OpDelete || op == OpDeleteMany {
			ops = append(ops, fmt.Sprintf("%s %s", op, key))
		}
		if op == OpDeleteMany && fail {
			return errors.New("injected")
		}
		return nil
	})
	if _, err := f.rec.ReconcilePartition(ctx, tp); err == nil {
		t.Fatal("reconcile with failing deletes succeeded")
	}
	if s, ok := manifestState(t, f.store, &m); !ok || s != index.DeleteSegmentStarted {
		t.Fatalf("manifest after the failed deletion: %v (present %v), want DELETE_SEGMENT_STARTED", s, ok)
	}
	if ops[0] != "put "+ManifestKey(&m) {
		t.Fatalf("first write %q, want the manifest", ops[0])
	}
	// A refresh now loads the segment as being deleted, not readable.
	idx2, err := index.Open(index.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer idx2.Close()
	mu.Lock()
	fail = false
	mu.Unlock()
	if _, err := RefreshPartition(ctx, f.store, idx2, tp); err != nil {
		t.Fatal(err)
	}
	if got, err := idx2.Segment(tp, m.SegmentID); err != nil || got.State != index.DeleteSegmentStarted {
		t.Fatalf("refreshed index: %v %v", got.State, err)
	}
	st, err := f.rec.ReconcilePartition(ctx, tp)
	if err != nil || st.Orphans != 1 {
		t.Fatalf("retry: %+v, %v", st, err)
	}
	if keys := f.store.Keys(); len(keys) != 0 {
		t.Fatalf("left %v", keys)
	}
	if last := ops[len(ops)-1]; last != "delete "+ManifestKey(&m) {
		t.Fatalf("last write %q, want the manifest's deletion", last)
	}
}

// TestReconcileDeletedTopics checks the deletion of the objects of topics
// the metadata does not know: never within the grace period of the
// topic's newest object (metadata that lags behind a new topic), never
// when the metadata learns the topic meanwhile, finished segments
// included otherwise, and known topics untouched.
func TestReconcileDeletedTopics(t *testing.T) {
	f := newReconcileFixture(t)
	ctx := ctxT(t)
	known := index.TopicIDPartition{TopicID: topicX, Partition: 0}
	gone := index.TopicIDPartition{TopicID: topicY, Partition: 1}
	keep := f.segment(t, known, 0, statePtr(index.CopySegmentFinished))
	keepOrphan := f.segment(t, known, 10, statePtr(index.CopySegmentStarted)) // a partition's business, not this call's
	g1 := f.segment(t, gone, 0, statePtr(index.CopySegmentFinished))
	f.advance(30 * time.Minute)
	g2 := f.segment(t, index.TopicIDPartition{TopicID: topicY, Partition: 0}, 0, nil)
	corrupt := f.segment(t, gone, 10, nil)
	put(t, f.store, ManifestKey(&corrupt), []byte("garbage"))
	isKnown := func(id index.UUID) bool { return id == topicX }
	// The cluster recorded topicY's deletion (deletions.go; without it
	// nothing of an unknown topic goes: TestReconcileUnrecordedTopics).
	if err := RecordTopicDeletion(ctx, f.store, TopicDeletion{TopicID: topicY.String(), ClusterID: "c", DeletedMs: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := UpdateClusterSnapshot(ctx, f.store, "c", func(*ClusterSnapshot) (ClusterSnapshot, error) { return ClusterSnapshot{}, nil }); err != nil {
		t.Fatal(err)
	}
	recordKey := deletionKey(topicY)

	// An hour after the first upload, but not after the newest: the whole
	// topic waits.
	f.advance(45 * time.Minute)
	before := f.store.Keys()
	st, err := f.rec.ReconcileDeletedTopics(ctx, isKnown)
	if err != nil {
		t.Fatal(err)
	}
	if st.Orphans != 0 || st.Young != 3 || !slices.Equal(f.store.Keys(), before) {
		t.Fatalf("young topic: %+v", st)
	}

	// Past the grace period, but the metadata learns the topic during the
	// pass (it was stale): nothing goes.
	f.advance(time.Hour)
	calls := 0
	st, err = f.rec.ReconcileDeletedTopics(ctx, func(id index.UUID) bool {
		if id == topicY {
			calls++
			return calls > 1
		}
		return true
	})
	if err != nil || st.Orphans != 0 || !slices.Equal(f.store.Keys(), before) {
		t.Fatalf("topic learned during the pass: %+v, %v", st, err)
	}

	st, err = f.rec.ReconcileDeletedTopics(ctx, isKnown)
	if err != nil {
		t.Fatal(err)
	}
	if st.Orphans != 2 || st.Corrupt != 1 {
		t.Fatalf("stats %+v; want 2 segments deleted and 1 unreadable manifest left", st)
	}
	want := append(stemKeys(&keep), stemKeys(&keepOrphan)...)
	want = append(want, ObjectKey(&corrupt, index.ObjectLog), ObjectKey(&corrupt, index.ObjectOffsetIndex), ManifestKey(&corrupt), recordKey, clusterSnapshotKey)
	slices.Sort(want)
	if got := f.store.Keys(); !slices.Equal(got, want) {
		t.Fatalf("left\n%v\nwant\n%v", got, want)
	}
	for _, m := range []*index.SegmentMetadata{&g1, &g2} {
		if _, ok := manifestState(t, f.store, m); ok {
			t.Errorf("segment %s of the deleted topic kept its manifest", m.SegmentID)
		}
	}
}

// TestReconcileBounded checks that one call deletes at most MaxSegments
// segments and the next call goes on.
func TestReconcileBounded(t *testing.T) {
	f := newReconcileFixture(t)
	ctx := ctxT(t)
	tp := index.TopicIDPartition{TopicID: topicX, Partition: 0}
	for i := range 5 {
		f.segment(t, tp, int64(i*10), nil)
	}
	f.advance(2 * time.Hour)
	f.rec.MaxSegments = 2
	for _, want := range []int{2, 2, 1, 0} {
		st, err := f.rec.ReconcilePartition(ctx, tp)
		if err != nil || st.Orphans != want {
			t.Fatalf("pass: %+v, %v; want %d orphans", st, err, want)
		}
	}
	if keys := f.store.Keys(); len(keys) != 0 {
		t.Fatalf("left %v", keys)
	}
}

// FuzzReconcileKeys fills a store with arbitrary keys (one per line) and
// runs both reconciliations with every topic unknown and no grace: no
// panic, and nothing outside the layout is ever deleted.
func FuzzReconcileKeys(f *testing.F) {
	tp := index.TopicIDPartition{TopicID: topicX, Partition: 0}
	stem := segmentStem(tp, 5, topicY)
	f.Add(stem + ".log\n" + stem + ".index\n" + stem + ".bak\n" + PartitionPrefix(tp) + "x")
	f.Add(stem + ".manifest\n" + "a/b/c\n" + TopicPrefix(topicY) + "0/00000000000000000001-" + topicX.String() + ".log")
	f.Add("\n\n" + stem + "\n" + stem + "..log\n" + TopicPrefix(topicX) + "00/" + stem[len(PartitionPrefix(tp)):] + ".log")
	idx, err := index.Open(index.Options{InMemory: true}) // reconciliation only reads it
	if err != nil {
		f.Fatal(err)
	}
	defer idx.Close()
	f.Fuzz(func(t *testing.T, in string) {
		store := NewMemStore()
		ctx := context.Background()
		var kept []string
		for k := range strings.SplitSeq(in, "\n") {
			if ValidateKey(k) != nil {
				continue
			}
			if err := store.Put(ctx, k, strings.NewReader("m"), 1); err != nil {
				t.Fatal(err)
			}
			if p, err := ParseSegmentKey(k); err != nil || !knownSuffix(p.Suffix) {
				kept = append(kept, k)
			}
		}
		r := &Reconciler{Store: store, Index: idx, Logger: slog.New(slog.DiscardHandler)}
		if _, err := r.ReconcilePartition(ctx, tp); err != nil {
			t.Fatal(err)
		}
		if _, err := r.ReconcileDeletedTopics(ctx, func(index.UUID) bool { return false }); err != nil {
			t.Fatal(err)
		}
		left := store.Keys()
		for _, k := range kept {
			if !slices.Contains(left, k) {
				t.Fatalf("deleted %q, outside the layout", k)
			}
		}
	})
}

// Two leaders uploaded segments at one base offset (the old one, frozen,
// finished after the new one's refresh): the index keeps the newer
// leader's (index.Prefer), and once the grace has passed the
// reconciliation deletes the other, whose objects no index reads. A
// finished segment that nothing supersedes stays.
func TestReconcileSupersededSegment(t *testing.T) {
	f := newReconcileFixture(t)
	ctx := ctxT(t)
	tp := index.TopicIDPartition{TopicID: topicX, Partition: 3}
	oldLeader := f.segment(t, tp, 0, statePtr(index.CopySegmentFinished)) // upload epoch 0
	newLeader := oldLeader.Clone()
	newLeader.SegmentID, newLeader.UploadEpoch, newLeader.State = index.NewUUID(), 4, index.CopySegmentStarted
	put(t, f.store, ObjectKey(&newLeader, index.ObjectLog), bytes.Repeat([]byte{1}, 10))
	put(t, f.store, ObjectKey(&newLeader, index.ObjectOffsetIndex), bytes.Repeat([]byte{2}, 8))
	if err := f.idx.AddSegment(newLeader); err != nil {
		t.Fatal(err)
	}
	if _, err := f.idx.UpdateSegment(index.SegmentUpdate{Partition: tp, SegmentID: newLeader.SegmentID, State: index.CopySegmentFinished, EventTimestamp: 2}); err != nil {
		t.Fatal(err)
	}
	newLeader.State = index.CopySegmentFinished
	b, _ := index.EncodeManifest(&newLeader)
	put(t, f.store, ManifestKey(&newLeader), b)
	unrelated := f.segment(t, tp, 10, statePtr(index.CopySegmentFinished)) // unknown to the index, but nothing supersedes it

	st, err := f.rec.ReconcilePartition(ctx, tp)
	if err != nil || st.Orphans != 0 || st.Young != 1 {
		t.Fatalf("within the grace: %+v, %v; want the superseded segment left for later", st, err)
	}
	f.advance(61 * time.Minute)
	st, err = f.rec.ReconcilePartition(ctx, tp)
	if err != nil || st.Orphans != 1 {
		t.Fatalf("after the grace: %+v, %v; want the superseded segment deleted", st, err)
	}
	want := append(stemKeys(&newLeader), stemKeys(&unrelated)...)
	slices.Sort(want)
	if got := f.store.Keys(); !slices.Equal(got, want) {
		t.Fatalf("left\n%v\nwant\n%v (superseded: %s)", got, want, oldLeader.SegmentID)
	}
}

// Regression (issue 22 review): a former leader's longer finished segment
// ([0, 47], epoch 0), which landed after the new leader's refresh, lost
// to the new leader's shorter one at its base ([0, 9], epoch 4) and was
// deleted as superseded, though it alone held [10, 47], which followers'
// local retention may have let go. It is superseded only once readable
// segments of the index hold every offset of it.
func TestReconcileKeepsALongerSegmentNothingElseCovers(t *testing.T) {
	f := newReconcileFixture(t)
	ctx := ctxT(t)
	tp := index.TopicIDPartition{TopicID: topicX, Partition: 3}
	// Packed objects make the manifests version 3, which carry the
	// upload epoch.
	packed := []index.ObjectEntry{{Kind: index.ObjectIndexes, Size: 4}, {Kind: index.ObjectLeaderEpochCheckpoint, Packed: true, Size: 4}}
	old := f.segment(t, tp, 0, nil)
	old.EndOffset, old.State = 47, index.CopySegmentFinished
	old.Objects = append(old.Objects, packed...)
	b, _ := index.EncodeManifest(&old)
	put(t, f.store, ManifestKey(&old), b)
	finishInIndex := func(base, end int64) {
		m := f.segment(t, tp, base, nil)
		m.EndOffset, m.UploadEpoch, m.State = end, 4, index.CopySegmentStarted
		m.LeaderEpochs = []index.EpochEntry{{Epoch: 4, StartOffset: base}}
		m.Objects = append(m.Objects, packed...)
		if err := f.idx.AddSegment(m); err != nil {
			t.Fatal(err)
		}
		if _, err := f.idx.UpdateSegment(index.SegmentUpdate{Partition: tp, SegmentID: m.SegmentID, State: index.CopySegmentFinished, EventTimestamp: 2}); err != nil {
			t.Fatal(err)
		}
		m.State = index.CopySegmentFinished
		b, _ := index.EncodeManifest(&m)
		put(t, f.store, ManifestKey(&m), b)
	}
	finishInIndex(0, 9)
	f.advance(61 * time.Minute)
	if st, err := f.rec.ReconcilePartition(ctx, tp); err != nil || st.Orphans != 0 {
		t.Fatalf("with [10, 47] only in the old segment: %+v, %v; want it kept", st, err)
	}
	if s, ok := manifestState(t, f.store, &old); !ok || s != index.CopySegmentFinished {
		t.Fatalf("old segment's manifest: %v, %v", s, ok)
	}
	finishInIndex(10, 47)
	if st, err := f.rec.ReconcilePartition(ctx, tp); err != nil || st.Orphans != 1 {
		t.Fatalf("once the new leader's segments hold [0, 47]: %+v, %v; want the old one deleted", st, err)
	}
	if _, ok := manifestState(t, f.store, &old); ok {
		t.Fatal("the superseded segment's manifest is still there")
	}
}
