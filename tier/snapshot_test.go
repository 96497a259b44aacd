package tier

import (
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"strata/index"
)

// snapshotStores runs fn on each store kind: memory, a directory, MinIO.
func snapshotStores(t *testing.T, fn func(t *testing.T, store ObjectStore)) {
	t.Run("mem", func(t *testing.T) { fn(t, NewMemStore()) })
	t.Run("file", func(t *testing.T) {
		s, err := OpenFileStore(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		fn(t, s)
	})
	t.Run("s3", func(t *testing.T) {
		s, _ := newMinIOStore(t, nil)
		fn(t, s)
	})
}

func snapshotOf(topics ...string) func(*ClusterSnapshot) (ClusterSnapshot, error) {
	return func(*ClusterSnapshot) (ClusterSnapshot, error) {
		snap := ClusterSnapshot{WrittenMs: time.Now().UnixMilli()}
		for _, name := range topics {
			snap.Topics = append(snap.Topics, SnapshotTopic{Name: name, TopicID: index.NewUUID().String(), Replicas: [][]int32{{1}}})
		}
		return snap, nil
	}
}

// The cluster snapshot belongs to the cluster that wrote it first: its
// generation moves up by one a write, another cluster's write is refused
// without touching it, and a discard hands it over at the next
// generation, recording the deletion of the discarded topics and
// removing their group offsets.
func TestClusterSnapshotOwnership(t *testing.T) {
	snapshotStores(t, func(t *testing.T, store ObjectStore) {
		ctx := ctxT(t)
		for gen := int64(1); gen <= 2; gen++ {
			snap, err := UpdateClusterSnapshot(ctx, store, "A", snapshotOf("orders", "payments"))
			if err != nil {
				t.Fatal(err)
			}
			if snap.Generation != gen || snap.ClusterID != "A" {
				t.Fatalf("write %d: generation %d of %q", gen, snap.Generation, snap.ClusterID)
			}
		}
		a, err := ReadClusterSnapshot(ctx, store)
		if err != nil || a.Generation != 2 || len(a.Topics) != 2 {
			t.Fatalf("read: %+v, %v", a, err)
		}
		if err := WriteGroupOffsets(ctx, store, GroupOffsetsSnapshot{ClusterID: "A", Partition: 3, Partitions: 50,
			Groups: map[string]map[string]map[int32]SnapshotOffset{"g": {"orders": {0: {Offset: 42, LeaderEpoch: 1}}}}}); err != nil {
			t.Fatal(err)
		}

		called := false
		_, err = UpdateClusterSnapshot(ctx, store, "B", func(*ClusterSnapshot) (ClusterSnapshot, error) {
			called = true
			return ClusterSnapshot{}, nil
		})
		var foreign *ForeignSnapshotError
		if !errors.As(err, &foreign) || foreign.Snapshot.ClusterID != "A" || called {
			t.Fatalf("another cluster's write: %v (next called %v)", err, called)
		}
		if !strings.Contains(err.Error(), "cluster A") || !strings.Contains(err.Error(), "generation 2") {
			t.Fatalf("error %q names neither the owner nor its generation", err)
		}
		if b, _ := ReadClusterSnapshot(ctx, store); b.ClusterID != "A" || b.Generation != 2 {
			t.Fatalf("after a refused write: %+v", b)
		}
		if gs, err := ReadGroupOffsets(ctx, store, "A"); err != nil || len(gs) != 1 || gs[0].Groups["g"]["orders"][0].Offset != 42 {
			t.Fatalf("group offsets of A: %+v, %v", gs, err)
		}
		if gs, err := ReadGroupOffsets(ctx, store, "B"); err != nil || len(gs) != 0 {
			t.Fatalf("group offsets of B: %+v, %v", gs, err)
		}

		if _, err := DiscardClusterSnapshot(ctx, store, "A", time.Now(), 0); !errors.Is(err, ErrOwnSnapshot) {
			t.Fatalf("discard by the owner: %v", err)
		}
		// Written a minute ago: its cluster may be running; nothing is
		// written, nothing recorded.
		keys := snapshotKeys(t, store)
		var recent *RecentSnapshotError
		if _, err := DiscardClusterSnapshot(ctx, store, "B", time.UnixMilli(a.WrittenMs).Add(time.Minute), 3*time.Minute); !errors.As(err, &recent) ||
			recent.Age != time.Minute || recent.Snapshot.ClusterID != "A" || !strings.Contains(err.Error(), "written 1m0s ago") {
			t.Fatalf("discard of a recent snapshot: %v", err)
		}
		if got := snapshotKeys(t, store); !slices.Equal(got, keys) {
			t.Fatalf("a refused discard wrote: %v, was %v", got, keys)
		}
		if b, err := ReadClusterSnapshot(ctx, store); err != nil || b.ClusterID != "A" || b.Generation != 2 {
			t.Fatalf("after a refused discard: %+v, %v", b, err)
		}
		old, err := DiscardClusterSnapshot(ctx, store, "B", time.UnixMilli(a.WrittenMs).Add(3*time.Minute), 3*time.Minute)
		if err != nil || old.ClusterID != "A" || old.Generation != 2 {
			t.Fatalf("discard: %+v, %v", old, err)
		}
		b, err := ReadClusterSnapshot(ctx, store)
		if err != nil || b.ClusterID != "B" || b.Generation != 3 || len(b.Topics) != 0 ||
			b.Discarded == nil || b.Discarded.ClusterID != "A" || b.Discarded.Generation != 2 || b.Discarded.Topics != 2 {
			t.Fatalf("after the discard: %+v, %v", b, err)
		}
		for _, tp := range a.Topics {
			id, _ := index.ParseUUID(tp.TopicID)
			if ok, err := TopicDeletionRecorded(ctx, store, id); err != nil || !ok {
				t.Fatalf("deletion of discarded topic %s recorded: %v, %v", tp.Name, ok, err)
			}
		}
		if gs, err := ReadGroupOffsets(ctx, store, "A"); err != nil || len(gs) != 0 {
			t.Fatalf("group offsets of the discarded snapshot left: %+v, %v", gs, err)
		}
		if _, err := UpdateClusterSnapshot(ctx, store, "A", snapshotOf()); !errors.As(err, &foreign) {
			t.Fatalf("the old owner's write after the discard: %v", err)
		}
		snap, err := UpdateClusterSnapshot(ctx, store, "B", func(cur *ClusterSnapshot) (ClusterSnapshot, error) {
			return ClusterSnapshot{Discarded: cur.Discarded}, nil
		})
		if err != nil || snap.Generation != 4 {
			t.Fatalf("the new owner's write: %+v, %v", snap, err)
		}
	})
}

// Two writers that read the same version: the second write fails with
// ErrSnapshotChanged and leaves the first's.
func TestClusterSnapshotCompareAndSwap(t *testing.T) {
	snapshotStores(t, func(t *testing.T, store ObjectStore) {
		ctx := ctxT(t)
		for _, first := range []bool{true, false} { // the race on the first write (If-None-Match), then on a replacement (If-Match)
			_, err := UpdateClusterSnapshot(ctx, store, "A", func(cur *ClusterSnapshot) (ClusterSnapshot, error) {
				if first != (cur == nil) {
					t.Fatalf("current snapshot %+v", cur)
				}
				// Another controller writes meanwhile.
				if _, err := UpdateClusterSnapshot(ctx, store, "A", snapshotOf("theirs")); err != nil {
					t.Fatal(err)
				}
				return snapshotOf("mine")(cur)
			})
			if !errors.Is(err, ErrSnapshotChanged) {
				t.Fatalf("a write over a changed snapshot: %v", err)
			}
			got, err := ReadClusterSnapshot(ctx, store)
			if err != nil || len(got.Topics) != 1 || got.Topics[0].Name != "theirs" {
				t.Fatalf("after the race: %+v, %v", got, err)
			}
		}
		// Group offsets: each write raises the object's generation.
		for want := int64(1); want <= 3; want++ {
			if err := WriteGroupOffsets(ctx, store, GroupOffsetsSnapshot{ClusterID: "A", Partition: 0}); err != nil {
				t.Fatal(err)
			}
			if g, err := ReadGroupOffsetsPartition(ctx, store, 0); err != nil || g.Generation != want || g.ClusterID != "A" {
				t.Fatalf("group offsets: %+v, %v; want generation %d", g, err, want)
			}
		}
	})
}

// A topic the cluster does not know keeps its objects however old they
// are, unless its deletion is recorded; a recorded one the cluster
// snapshot still names keeps them too.
func TestReconcileUnrecordedTopics(t *testing.T) {
	f := newReconcileFixture(t)
	f.rec.Logger = slog.New(slog.DiscardHandler)
	ctx := ctxT(t)
	other := index.NewUUID()
	a := f.segment(t, index.TopicIDPartition{TopicID: topicY, Partition: 0}, 0, statePtr(index.CopySegmentFinished))
	b := f.segment(t, index.TopicIDPartition{TopicID: other, Partition: 0}, 0, statePtr(index.CopySegmentFinished))
	f.advance(48 * time.Hour)
	unknown := func(index.UUID) bool { return false }
	keys := f.store.Keys()
	if st, err := f.rec.ReconcileDeletedTopics(ctx, unknown); err != nil || st.Orphans != 0 || !slices.Equal(f.store.Keys(), keys) {
		t.Fatalf("unrecorded topics: %+v, %v", st, err)
	}

	// Both recorded; the snapshot names topicY (a restore adopted it).
	for _, id := range []index.UUID{topicY, other} {
		if err := RecordTopicDeletion(ctx, f.store, TopicDeletion{TopicID: id.String(), ClusterID: "A"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := UpdateClusterSnapshot(ctx, f.store, "A", func(*ClusterSnapshot) (ClusterSnapshot, error) {
		return ClusterSnapshot{Topics: []SnapshotTopic{{Name: "y", TopicID: topicY.String(), Replicas: [][]int32{{1}}}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	st, err := f.rec.ReconcileDeletedTopics(ctx, unknown)
	if err != nil || st.Orphans != 1 {
		t.Fatalf("recorded topics: %+v, %v", st, err)
	}
	for _, k := range stemKeys(&a) {
		if !slices.Contains(f.store.Keys(), k) {
			t.Fatalf("deleted %s of a topic the snapshot names", k)
		}
	}
	for _, k := range stemKeys(&b) {
		if slices.Contains(f.store.Keys(), k) {
			t.Fatalf("kept %s of a deleted topic", k)
		}
	}
}

// snapshotKeys lists the keys under SnapshotPrefix.
func snapshotKeys(t *testing.T, store ObjectStore) []string {
	t.Helper()
	var out []string
	for info, err := range store.List(ctxT(t), SnapshotPrefix) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, info.Key)
	}
	slices.Sort(out)
	return out
}
