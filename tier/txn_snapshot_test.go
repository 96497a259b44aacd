package tier

import (
	"errors"
	"testing"
	"time"
)

// The transaction state objects: each write raises the generation, a
// partition reads back what was written, the read of all of them keeps
// only the cluster's, and a discard deletes the other clusters'.
func TestTxnStateSnapshot(t *testing.T) {
	snapshotStores(t, func(t *testing.T, store ObjectStore) {
		ctx := ctxT(t)
		if _, err := ReadTxnStatePartition(ctx, store, 3); !errors.Is(err, ErrNotFound) {
			t.Fatalf("read of a missing partition: %v, want ErrNotFound", err)
		}
		if err := WriteTxnState(ctx, store, TxnStateSnapshot{Partition: 3}); err == nil {
			t.Fatal("a write without a cluster id was taken")
		}
		tx := SnapshotTxn{TransactionalID: "app", State: "CompleteCommit", ProducerID: 7, ProducerEpoch: 4, Value: []byte{0, 1, 2}}
		for gen := int64(1); gen <= 2; gen++ {
			snap := TxnStateSnapshot{ClusterID: "A", WrittenMs: time.Now().UnixMilli(), Partition: 3, Partitions: 50, Transactions: []SnapshotTxn{tx}}
			if err := WriteTxnState(ctx, store, snap); err != nil {
				t.Fatal(err)
			}
			got, err := ReadTxnStatePartition(ctx, store, 3)
			if err != nil || got.Generation != gen || got.ClusterID != "A" || len(got.Transactions) != 1 ||
				got.Transactions[0].TransactionalID != "app" || string(got.Transactions[0].Value) != string(tx.Value) {
				t.Fatalf("write %d read back: %+v, %v", gen, got, err)
			}
		}
		if err := WriteTxnState(ctx, store, TxnStateSnapshot{ClusterID: "B", Partition: 9, Partitions: 50}); err != nil {
			t.Fatal(err)
		}
		for cluster, want := range map[string]int{"A": 1, "B": 1, "C": 0} {
			got, err := ReadTxnStates(ctx, store, cluster)
			if err != nil || len(got) != want {
				t.Fatalf("cluster %s: %d objects, %v; want %d", cluster, len(got), err, want)
			}
		}
		if _, err := UpdateClusterSnapshot(ctx, store, "A", snapshotOf("orders")); err != nil {
			t.Fatal(err)
		}
		if _, err := DiscardClusterSnapshot(ctx, store, "B", time.Now(), 0); err != nil {
			t.Fatal(err)
		}
		if got, err := ReadTxnStates(ctx, store, "A"); err != nil || len(got) != 0 {
			t.Fatalf("after the discard, cluster A's transaction state: %+v, %v", got, err)
		}
		if got, err := ReadTxnStates(ctx, store, "B"); err != nil || len(got) != 1 {
			t.Fatalf("after the discard, cluster B's transaction state: %+v, %v", got, err)
		}
	})
}

// A coordinator that lost its partition cannot write older state over
// its successor's: a write at a lower leader epoch than the object's is
// refused; the same or a higher epoch writes.
func TestTxnStateSnapshotLeaderEpochFence(t *testing.T) {
	snapshotStores(t, func(t *testing.T, store ObjectStore) {
		ctx := ctxT(t)
		write := func(epoch int32, pepoch int16) error {
			tx := SnapshotTxn{TransactionalID: "app", State: "CompleteCommit", ProducerID: 7, ProducerEpoch: pepoch}
			return WriteTxnState(ctx, store, TxnStateSnapshot{ClusterID: "A", Partition: 1, Partitions: 50, LeaderEpoch: epoch, Transactions: []SnapshotTxn{tx}})
		}
		for _, step := range []struct {
			epoch  int32
			pepoch int16
			stale  bool
		}{{3, 1, false}, {5, 4, false}, {3, 2, true}, {5, 6, false}, {4, 5, true}, {6, 7, false}} {
			err := write(step.epoch, step.pepoch)
			if stale := errors.Is(err, ErrStaleTxnState); stale != step.stale || (!step.stale && err != nil) {
				t.Fatalf("write at leader epoch %d: %v, want stale=%v", step.epoch, err, step.stale)
			}
		}
		got, err := ReadTxnStatePartition(ctx, store, 1)
		if err != nil || got.LeaderEpoch != 6 || got.Transactions[0].ProducerEpoch != 7 {
			t.Fatalf("after the writes: %+v %v", got, err)
		}
	})
}
