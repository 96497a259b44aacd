package tier

import (
	"testing"
	"time"

	"strata/index"
)

// Only a deletion recorded by the cluster that owns the bucket lets a
// topic's objects go: a record of another cluster (written while the
// bucket was not its writer's: a wiped ZooKeeper's new cluster id), a
// failed discard's, or any record in a bucket without a cluster snapshot
// deletes nothing; recording again as the owner replaces such a record.
func TestDeletableTopicOwner(t *testing.T) {
	ctx := ctxT(t)
	store := NewMemStore()
	live, gone, discarded := index.NewUUID(), index.NewUUID(), index.NewUUID()
	deletable := func(id index.UUID) bool {
		t.Helper()
		snap, err := ReadSnapshotTopics(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		ok, err := DeletableTopic(ctx, store, snap, id)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	record := func(d TopicDeletion) {
		t.Helper()
		if err := RecordTopicDeletion(ctx, store, d); err != nil {
			t.Fatal(err)
		}
	}

	// No snapshot: no owner, nothing deletable.
	record(TopicDeletion{TopicID: gone.String(), ClusterID: "A", DeletedMs: 1})
	if deletable(gone) {
		t.Fatal("deletable in a bucket without a cluster snapshot")
	}
	// The bucket is A's and names live.
	if _, err := UpdateClusterSnapshot(ctx, store, "A", func(*ClusterSnapshot) (ClusterSnapshot, error) {
		return ClusterSnapshot{Topics: []SnapshotTopic{{Name: "live", TopicID: live.String(), Replicas: [][]int32{{1}}}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if !deletable(gone) {
		t.Fatal("A's recorded deletion in A's bucket is not deletable")
	}
	// A record of cluster B (B's metadata went empty; the bucket is A's).
	record(TopicDeletion{TopicID: discarded.String(), ClusterID: "B", DeletedMs: 1})
	if deletable(discarded) {
		t.Fatal("B's record deletes in A's bucket")
	}
	// A failed discard by B: its record names B as the discarder.
	record(TopicDeletion{TopicID: live.String(), ClusterID: "A", DeletedMs: 1, DiscardedBy: "B"})
	if deletable(live) {
		t.Fatal("a named topic is deletable")
	}
	if _, err := UpdateClusterSnapshot(ctx, store, "A", func(*ClusterSnapshot) (ClusterSnapshot, error) {
		return ClusterSnapshot{}, nil // A deleted live
	}); err != nil {
		t.Fatal(err)
	}
	if deletable(live) {
		t.Fatal("a failed discard's record deletes in A's bucket")
	}
	// A records the deletions itself: the records of others are replaced.
	record(TopicDeletion{TopicID: live.String(), ClusterID: "A", DeletedMs: 2})
	record(TopicDeletion{TopicID: discarded.String(), ClusterID: "A", DeletedMs: 2})
	if !deletable(live) || !deletable(discarded) {
		t.Fatal("A's own records, over other clusters', are not deletable")
	}
	// Recording again as the same writer keeps the first record.
	record(TopicDeletion{TopicID: gone.String(), ClusterID: "A", DeletedMs: 99})
	if d, err := ReadTopicDeletion(ctx, store, gone); err != nil || d.DeletedMs != 1 {
		t.Fatalf("record %+v, %v; want the first one kept", d, err)
	}

	// B discards A's snapshot naming x: B's discard records count, and
	// A's deletions no longer do.
	x := index.NewUUID()
	if _, err := UpdateClusterSnapshot(ctx, store, "A", func(*ClusterSnapshot) (ClusterSnapshot, error) {
		return ClusterSnapshot{Topics: []SnapshotTopic{{Name: "x", TopicID: x.String(), Replicas: [][]int32{{1}}}}}, nil
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := DiscardClusterSnapshot(ctx, store, "B", time.Now(), 0); err != nil {
		t.Fatal(err)
	}
	if !deletable(x) {
		t.Fatal("B's discard record in B's bucket is not deletable")
	}
	if deletable(gone) {
		t.Fatal("A's deletion record deletes in B's bucket")
	}
}
