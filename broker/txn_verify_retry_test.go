package broker

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// With transaction version 2 the first write of a transaction can reach
// its leader while the markers of the producer's previous transaction are
// still being written, and the coordinator answers the leader's adding of
// the partition CONCURRENT_TRANSACTIONS. As Kafka's ReplicaManager, the
// leader asks again every 20 ms for up to 100 ms before it answers the
// Produce NOT_ENOUGH_REPLICAS (which the client would retry only after
// its own backoff).
func TestKIP890ConcurrentTransactionsAskedAgain(t *testing.T) {
	for _, tc := range []struct {
		name string
		// hold is how long the markers to the leader wait; 0: until the
		// leader has asked the coordinator twice.
		hold time.Duration
		want int16
	}{
		{"markers written meanwhile", 0, 0},
		{"markers held longer", time.Second, kerr.NotEnoughReplicas.Code},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, coord, other := startTxnCluster(t)
			c.createTopic("cc", []int32{other, coord}, nil)
			c.waitISR("cc", 0, 1)
			ctx := testCtx(t)
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.TransactionalID("tx-cc"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			txnProduce(t, ctx, cl, "cc", true, 0)

			var asks atomic.Int32 // the leader's requests to the coordinator
			ask := func(to int32, _ int) {
				if to == coord {
					asks.Add(1)
				}
			}
			c.servers[other].txns.verifier.beforeSend.Store(&ask)
			hold := func(to int32) {
				if to != other {
					return
				}
				if tc.hold > 0 {
					time.Sleep(tc.hold)
					return
				}
				base := asks.Load()
				for deadline := time.Now().Add(5 * time.Second); asks.Load() < base+2 && time.Now().Before(deadline); {
					time.Sleep(time.Millisecond)
				}
			}
			c.servers[coord].txns.markers.beforeSend.Store(&hold)

			// Commit (its markers to the leader held), then write the next
			// transaction's first record at the bumped epoch.
			txnProduce(t, ctx, cl, "cc", true, 0)
			pid, epoch := clientProducer(t, ctx, cl)
			before := asks.Load()
			start := time.Now()
			code := lateWrite(t, c.servers[other].Addr().String(), 12, "tx-cc", "cc", 0, pid, epoch)
			took := time.Since(start)
			n := asks.Load() - before
			if code != tc.want {
				t.Errorf("first write of the next transaction: %v after %v and %d requests to the coordinator, want %v",
					kerr.ErrorForCode(code), took, n, kerr.ErrorForCode(tc.want))
			}
			if n < 2 {
				t.Errorf("the leader asked the coordinator %d times, want it to ask again", n)
			}
			// The last ask is within one backoff of addPartitionsRetryMax.
			if least := addPartitionsRetryMax - addPartitionsRetryBackoff; tc.hold > 0 && (took < least || took >= tc.hold) {
				t.Errorf("answered after %v, want after %v of asking again and before the markers (%v)", took, least, tc.hold)
			}
		})
	}
}
