package broker

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"strata/broker/txn"
	"strata/tier"
)

// A broker whose __transaction_state partitions loaded while the bucket
// was another cluster's takes in the bucket's transaction state once the
// bucket is its cluster's (a restore adopting the snapshot's cluster id,
// here a discard followed by the state of a transactional id written to
// the bucket): the id is served with its producer id and epoch, and a
// producer of it initializes at the next epoch of the same producer id.
// The coordinator's own ids are written to the bucket beside it.
func TestTxnStateMergesOnceTheBucketIsOurs(t *testing.T) {
	store := tier.NewMemStore()
	ctx := testCtx(t)
	if _, err := tier.UpdateClusterSnapshot(ctx, store, "old-cluster", func(*tier.ClusterSnapshot) (tier.ClusterSnapshot, error) {
		return tier.ClusterSnapshot{WrittenMs: time.Now().UnixMilli()}, nil
	}); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	b := startSnapshotServer(t, t.TempDir(), store, &logs)
	adm := b.admin(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	transact := func(id string) {
		t.Helper()
		cl := b.client(t, kgo.TransactionalID(id), kgo.DefaultProduceTopic("orders"))
		defer cl.Close()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(id)}).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", id, err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("commit %s: %v", id, err)
		}
	}
	transact("local") // loads __transaction_state: the bucket is not ours
	time.Sleep(2 * snapshotCheck)
	if gs, err := tier.ReadTxnStates(ctx, store, b.ctrl.Metadata().ClusterID); err != nil || len(gs) != 0 {
		t.Fatalf("transaction state written into another cluster's bucket: %+v, %v", gs, err)
	}

	id := b.ctrl.Metadata().ClusterID
	if _, err := tier.DiscardClusterSnapshot(ctx, store, id, time.Now(), 0); err != nil {
		t.Fatal(err)
	}
	v := txn.NewValue(1)
	v.ProducerID, v.ProducerEpoch, v.TimeoutMs, v.Status = 500, 3, 60000, txn.CompleteCommit
	v.Partitions = []txn.TopicPartitions{}
	v.StartMs, v.LastUpdateMs = time.Now().UnixMilli(), time.Now().UnixMilli()
	idx := txn.PartitionFor("restored", 50)
	if err := tier.WriteTxnState(ctx, store, tier.TxnStateSnapshot{ClusterID: id, Partition: idx, Partitions: 50,
		Transactions: []tier.SnapshotTxn{{TransactionalID: "restored", State: "CompleteCommit", ProducerID: 500, ProducerEpoch: 3, Value: txn.EncodeValue(v)}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the merged transactional id", 15*time.Second, func() bool {
		d, err := adm.DescribeTransactions(ctx, "restored")
		return err == nil && d["restored"].Err == nil && d["restored"].ProducerID == 500 && d["restored"].ProducerEpoch == 3
	})
	if !strings.Contains(logs.String(), "merged transaction state from the bucket's snapshot") {
		t.Fatalf("the merge was not logged:\n%s", logs.String())
	}
	transact("restored")
	d, err := adm.DescribeTransactions(ctx, "restored")
	if err != nil || d["restored"].Err != nil || d["restored"].ProducerID != 500 || d["restored"].ProducerEpoch <= 3 {
		t.Fatalf("restored after a new producer's transaction: %+v, %v; want producer 500 above epoch 3", d, err)
	}
	inBucket := func(tid string) string {
		s, err := tier.ReadTxnStatePartition(ctx, store, txn.PartitionFor(tid, 50))
		if err != nil {
			return err.Error()
		}
		for _, tx := range s.Transactions {
			if tx.TransactionalID == tid {
				return fmt.Sprintf("%s %d/%d", tx.State, tx.ProducerID, tx.ProducerEpoch)
			}
		}
		return "absent"
	}
	want := fmt.Sprintf("CompleteCommit 500/%d", d["restored"].ProducerEpoch)
	waitFor(t, "the transaction state in the bucket", 15*time.Second, func() bool {
		return inBucket("restored") == want && strings.HasPrefix(inBucket("local"), "CompleteCommit ")
	})
}
