package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/txn"
	"strata/controller"
)

// txnProduce produces one record per partition named in a transaction of
// cl, and ends it with commit.
func txnProduce(t *testing.T, ctx context.Context, cl *kgo.Client, topic string, commit bool, parts ...int32) {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		r := &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "%s-%d-%v", topic, p, commit)}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce to %s-%d: %v", topic, p, err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end transaction (commit %v): %v", commit, err)
	}
}

// waitStable waits until partition topic-part of s has its last stable
// offset at its log end offset (every transaction in it ended, its
// marker below the high watermark), and returns that offset.
func waitStable(t *testing.T, s *Server, topic string, part int32) int64 {
	t.Helper()
	var lso, leo int64
	waitFor(t, fmt.Sprintf("the last stable offset of %s-%d at its log end", topic, part), 10*time.Second, func() bool {
		p := s.partition(topic, part)
		if p == nil {
			return false
		}
		leo = p.Log().LogEndOffset()
		lso = p.Log().LastStableOffset(p.HW())
		return lso == leo
	})
	return lso
}

// consumeUncommitted reads topic from its start with read_uncommitted until it
// has want records, and returns them by partition.
func consumeUncommitted(t *testing.T, ctx context.Context, seeds []string, topic string, want int) map[int32][]*kgo.Record {
	t.Helper()
	return consumeWith(t, ctx, seeds, topic, want, kgo.ReadUncommitted())
}

// consumeCommitted is consumeUncommitted with read_committed.
func consumeCommitted(t *testing.T, ctx context.Context, seeds []string, topic string, want int) map[int32][]*kgo.Record {
	t.Helper()
	return consumeWith(t, ctx, seeds, topic, want, kgo.ReadCommitted())
}

func consumeWith(t *testing.T, ctx context.Context, seeds []string, topic string, want int, iso kgo.IsolationLevel) map[int32][]*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(iso), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond)) // a waiting fetch holds the server's Close
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	out := map[int32][]*kgo.Record{}
	n := 0
	for n < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %d of %d records of %s: %v", n, want, topic, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("consume %s: %v", topic, err) })
		fs.EachRecord(func(r *kgo.Record) {
			out[r.Partition] = append(out[r.Partition], r)
			n++
		})
	}
	return out
}

func recordOffsets(rs []*kgo.Record) []int64 {
	var out []int64
	for _, r := range rs {
		out = append(out, r.Offset)
	}
	return out
}

// On one broker: a transactional producer commits a transaction, aborts
// the next and commits a third, over two partitions. Each partition gets
// its COMMIT and ABORT markers (its log end counts them), the last
// stable offset passes them, the partition's .txnindex holds the aborted
// transaction, a read_uncommitted consumer gets every data record and no
// marker, and a read_committed one every committed record and no aborted
// one.
func TestTxnMarkersCommitAndAbort(t *testing.T) {
	ts := startTestServer(t, map[string]string{"transaction.state.log.num.partitions": "1"})
	ctx := testCtx(t)
	adm := ts.admin(t)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "m"); err != nil {
		t.Fatal(err)
	}
	cl := ts.client(t, kgo.TransactionalID("tx-m"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	txnProduce(t, ctx, cl, "m", true, 0, 0, 1) // p0: 0 1 C2, p1: 0 C1
	waitTxnState(t, ctx, adm, "tx-m", "CompleteCommit")
	txnProduce(t, ctx, cl, "m", false, 0, 1) // p0: 3 A4, p1: 2 A3
	d := waitTxnState(t, ctx, adm, "tx-m", "CompleteAbort")
	for part, leo := range map[int32]int64{0: 5, 1: 4} {
		if got := waitStable(t, ts.Server, "m", part); got != leo {
			t.Errorf("m-%d: last stable offset %d after the abort, want %d (past both markers)", part, got, leo)
		}
	}
	txnProduce(t, ctx, cl, "m", true, 0, 1) // p0: 5 C6, p1: 4 C5
	waitTxnState(t, ctx, adm, "tx-m", "CompleteCommit")

	wantLEO := map[int32]int64{0: 7, 1: 6}
	wantAborted := map[int32][2]int64{0: {3, 4}, 1: {2, 3}} // first offset and marker of the aborted transaction
	for part, leo := range wantLEO {
		if got := waitStable(t, ts.Server, "m", part); got != leo {
			t.Errorf("m-%d: last stable offset %d, want %d (past every marker)", part, got, leo)
		}
		p := ts.partition("m", part)
		ab := p.Log().AbortedTransactions(0, leo)
		if w := wantAborted[part]; len(ab) != 1 || ab[0].ProducerID != d.ProducerID || ab[0].FirstOffset != w[0] || ab[0].LastOffset != w[1] {
			t.Errorf("m-%d: aborted transactions %+v, want producer %d from %d to the marker at %d", part, ab, d.ProducerID, w[0], w[1])
		}
		if _, open := p.Log().OpenTransaction(d.ProducerID); open {
			t.Errorf("m-%d: the producer's transaction is still open", part)
		}
	}
	ends, err := adm.ListEndOffsets(ctx, "m")
	if err != nil {
		t.Fatal(err)
	}
	for part, leo := range wantLEO {
		if o, _ := ends.Lookup("m", part); o.Offset != leo {
			t.Errorf("m-%d: end offset %d, want %d", part, o.Offset, leo)
		}
	}
	got := consumeUncommitted(t, ctx, []string{ts.addr()}, "m", 7)
	for part, want := range map[int32][]int64{0: {0, 1, 3, 5}, 1: {0, 2, 4}} {
		if offs := recordOffsets(got[part]); !slices.Equal(offs, want) {
			t.Errorf("m-%d: read_uncommitted consumer got offsets %v, want %v (the markers skipped)", part, offs, want)
		}
	}
	// The last committed records come after the aborted ones: a consumer
	// that has them has been served past the aborted transaction.
	got = consumeCommitted(t, ctx, []string{ts.addr()}, "m", 5)
	for part, want := range map[int32][]int64{0: {0, 1, 5}, 1: {0, 4}} {
		if offs := recordOffsets(got[part]); !slices.Equal(offs, want) {
			t.Errorf("m-%d: read_committed consumer got offsets %v, want %v", part, offs, want)
		}
	}
}

// franz-go's GroupTransactSession, consume-transform-produce on one
// broker: every input record is copied to the output in transactions
// that also commit the group's offsets (TxnOffsetCommit, whose markers in
// __consumer_offsets complete them). Afterwards the group's committed
// offsets are the input's end offsets, and the output holds each input
// record exactly once: read with read_committed, and read with
// read_uncommitted and filtered by the partitions' aborted transactions
// (their .txnindex).
func TestTxnMarkersGroupTransactSession(t *testing.T) {
	ts := startTestServer(t, map[string]string{"transaction.state.log.num.partitions": "1", "offsets.topic.num.partitions": "1",
		"group.initial.rebalance.delay.ms": "0"})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := ts.admin(t)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "in"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "out"); err != nil {
		t.Fatal(err)
	}
	copyInTransactions(t, ctx, []string{ts.addr()}, func(string, int32) *Server { return ts.Server })
}

// copyInTransactions copies topic "in" to topic "out" with franz-go's
// GroupTransactSession (group g-gts), then checks the group's committed
// offsets and the committed output; leaderOf names the broker leading a
// partition.
func copyInTransactions(t *testing.T, ctx context.Context, seeds []string, leaderOf func(topic string, part int32) *Server) {
	newClient := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	adm := kadm.NewClient(newClient())
	const n = 300
	prod := newClient(kgo.DefaultProduceTopic("in"))
	for i := range n {
		r := &kgo.Record{Key: fmt.Appendf(nil, "k%d", i%7), Value: fmt.Appendf(nil, "v%d", i)}
		if err := prod.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(seeds...), kgo.TransactionalID("tx-gts"),
		kgo.ConsumerGroup("g-gts"), kgo.ConsumeTopics("in"), kgo.DefaultProduceTopic("out"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond)) // a waiting fetch holds the server's Close
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close()
	copied, txns := 0, 0
	for copied < n {
		fs := sess.PollRecords(ctx, 40) // several transactions
		if ctx.Err() != nil {
			t.Fatalf("copied %d of %d records: %v", copied, n, ctx.Err())
		}
		fs.EachError(func(topic string, p int32, err error) { t.Fatalf("consume %s-%d: %v", topic, p, err) })
		if err := sess.Begin(); err != nil {
			t.Fatal(err)
		}
		var batch int
		fs.EachRecord(func(r *kgo.Record) {
			batch++
			sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: r.Value}, func(_ *kgo.Record, err error) {
				if err != nil {
					t.Errorf("produce: %v", err)
				}
			})
		})
		committed, err := sess.End(ctx, kgo.TryCommit)
		if err != nil {
			t.Fatalf("end transaction %d: %v", txns, err)
		}
		if committed {
			copied += batch
			txns++
		}
	}
	if txns < 2 {
		t.Errorf("%d transactions, want several", txns)
	}

	ends, err := adm.ListEndOffsets(ctx, "in")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the group's committed offsets at the input's end", 10*time.Second, func() bool {
		os, err := adm.FetchOffsets(ctx, "g-gts")
		if err != nil {
			return false
		}
		ok := true
		ends.Each(func(e kadm.ListedOffset) {
			o, found := os.Lookup(e.Topic, e.Partition)
			ok = ok && found && o.Err == nil && o.At == e.Offset
		})
		return ok
	})
	// OffsetFetch with require_stable: nothing pending after the markers.
	of := kmsg.NewPtrOffsetFetchRequest()
	of.Version, of.Group, of.RequireStable = 7, "g-gts", true
	if resp, err := of.RequestWith(ctx, newClient()); err != nil || resp.ErrorCode != 0 {
		t.Fatalf("require_stable offset fetch: %v %v", resp, err)
	}

	outEnds, err := adm.ListEndOffsets(ctx, "out")
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	outEnds.Each(func(e kadm.ListedOffset) {
		waitStable(t, leaderOf("out", e.Partition), "out", e.Partition)
		total += int(e.Offset)
	})
	// The output holds at least n data records plus a marker per
	// transaction and partition; read them all.
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics("out"),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond)) // a waiting fetch holds the server's Close
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[string]int{}
	// The last record of a partition is a marker, which consumers do not
	// see: the last data record is before it.
	pos := map[int32]int64{}
	done := func() bool {
		ok := true
		outEnds.Each(func(e kadm.ListedOffset) { ok = ok && pos[e.Partition] >= e.Offset-2 })
		return ok
	}
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read the output: %v (positions %v, ends %v)", ctx.Err(), pos, outEnds)
		}
		fs.EachRecord(func(r *kgo.Record) {
			pos[r.Partition] = r.Offset
			aborted := false
			for _, a := range leaderOf("out", r.Partition).partition("out", r.Partition).Log().AbortedTransactions(r.Offset, r.Offset+1) {
				aborted = aborted || a.ProducerID == r.ProducerID && a.FirstOffset <= r.Offset && r.Offset <= a.LastOffset
			}
			if !aborted {
				seen[string(r.Value)]++
			}
		})
	}
	for i := range n {
		if c := seen[fmt.Sprintf("v%d", i)]; c != 1 {
			t.Errorf("input record v%d is in the committed output %d times", i, c)
		}
	}
	if len(seen) != n {
		t.Errorf("committed output holds %d distinct records, want %d", len(seen), n)
	}
	// A read_committed consumer finds the same: each input record once.
	committed := map[string]int{}
	for _, rs := range consumeCommitted(t, ctx, seeds, "out", n) {
		for _, r := range rs {
			committed[string(r.Value)]++
		}
	}
	for i := range n {
		if c := committed[fmt.Sprintf("v%d", i)]; c != 1 {
			t.Errorf("input record v%d read %d times by a read_committed consumer of the output", i, c)
		}
	}
}

// startTxnCluster starts two brokers, and returns
// the cluster, the coordinator of __transaction_state's one partition and
// the other broker.
func startTxnCluster(t *testing.T) (c *testCluster, coord, other int32) {
	c = &testCluster{t: t, sets: map[string]string{
		"transaction.state.log.num.partitions": "1", "transaction.state.log.replication.factor": "1",
		"group.initial.rebalance.delay.ms": "0",
	}}
	startClusterOf(c, 2)
	tt, err := c.servers[0].ensureTxnStateTopic()
	if err != nil {
		t.Fatal(err)
	}
	coord = tt.Partitions[0].Leader
	return c, coord, 1 - coord
}

func (c *testCluster) seeds() (out []string) {
	for _, s := range c.servers {
		out = append(out, s.Addr().String())
	}
	return out
}

// On two brokers, the data partition's leader is not the transaction
// coordinator: the markers of a commit and of an abort go to it in a
// WriteTxnMarkers on the inter-broker listener, reach its follower too,
// and the leader's last stable offset passes them.
func TestTxnMarkersAcrossBrokers(t *testing.T) {
	c, coord, other := startTxnCluster(t)
	var sends atomic.Int32
	hook := func(to int32) {
		if to == other {
			sends.Add(1)
		}
	}
	c.servers[coord].txns.markers.beforeSend.Store(&hook)
	c.createTopic("x", []int32{other, coord}, nil)
	c.waitISR("x", 0, 1)
	ctx := testCtx(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.TransactionalID("tx-x"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	txnProduce(t, ctx, cl, "x", true, 0, 0)
	waitTxnState(t, ctx, adm, "tx-x", "CompleteCommit")
	txnProduce(t, ctx, cl, "x", false, 0)
	d := waitTxnState(t, ctx, adm, "tx-x", "CompleteAbort")
	txnProduce(t, ctx, cl, "x", true, 0)
	waitTxnState(t, ctx, adm, "tx-x", "CompleteCommit")
	if d.Coordinator != coord {
		t.Fatalf("coordinator %d, want %d", d.Coordinator, coord)
	}
	if got := sends.Load(); got < 3 {
		t.Errorf("%d WriteTxnMarkers sent to the leader, want one per transaction", got)
	}
	// 0 1 C2 3 A4 5 C6 on the leader, and on its follower.
	if lso := waitStable(t, c.servers[other], "x", 0); lso != 7 {
		t.Errorf("leader's last stable offset %d, want 7", lso)
	}
	waitFor(t, "the follower to replicate the markers", 10*time.Second, func() bool { return c.leo(coord, "x") == 7 })
	for _, id := range []int32{other, coord} {
		ab := c.servers[id].partition("x", 0).Log().AbortedTransactions(0, 7)
		if len(ab) != 1 || ab[0].ProducerID != d.ProducerID || ab[0].FirstOffset != 3 || ab[0].LastOffset != 4 {
			t.Errorf("broker %d: aborted transactions %+v, want producer %d from 3 to 4", id, ab, d.ProducerID)
		}
	}
	got := consumeUncommitted(t, ctx, c.seeds(), "x", 4)
	if offs := recordOffsets(got[0]); !slices.Equal(offs, []int64{0, 1, 3, 5}) {
		t.Errorf("read_uncommitted consumer got offsets %v, want [0 1 3 5]", offs)
	}
	got = consumeCommitted(t, ctx, c.seeds(), "x", 3)
	if offs := recordOffsets(got[0]); !slices.Equal(offs, []int64{0, 1, 5}) {
		t.Errorf("read_committed consumer got offsets %v, want [0 1 5]", offs)
	}

	// A WriteTxnMarkers from a client to the broker that does not lead
	// the partition: NOT_LEADER_OR_FOLLOWER; of an unknown topic:
	// UNKNOWN_TOPIC_OR_PARTITION.
	req := markersRequest(txn.Markers{ProducerID: d.ProducerID, ProducerEpoch: d.ProducerEpoch, Commit: true},
		[]txn.TopicPartition{{Topic: "x", Partition: 0}, {Topic: "nope", Partition: 0}})
	resp := c.rc(coord).do(req, 1).(*kmsg.WriteTxnMarkersResponse)
	codes := map[string]int16{}
	for _, rt := range resp.Markers[0].Topics {
		codes[rt.Topic] = rt.Partitions[0].ErrorCode
	}
	wantCode(t, "markers at a follower", codes["x"], kerr.NotLeaderForPartition)
	wantCode(t, "markers of an unknown topic", codes["nope"], kerr.UnknownTopicOrPartition)
}

// The data partition's leadership moves while its markers are pending:
// the first WriteTxnMarkers reaches the old leader after it stepped down
// (NOT_LEADER_OR_FOLLOWER), and the sender retries at the new leader,
// which is the coordinator's broker itself.
func TestTxnMarkersRetryAfterLeaderChange(t *testing.T) {
	c, coord, other := startTxnCluster(t)
	c.createTopic("y", []int32{other, coord}, nil)
	c.waitISR("y", 0, 1)
	var once sync.Once
	var sends atomic.Int32
	moved := make(chan error, 1)
	hook := func(to int32) {
		sends.Add(1)
		once.Do(func() {
			// Move the leadership to the coordinator's broker, and send
			// once the old leader has stepped down.
			_, err := c.m.ControlledShutdown(context.Background(), other, 0)
			if err == nil {
				deadline := time.Now().Add(10 * time.Second)
				for c.servers[other].isLeader(c.servers[other].partition("y", 0)) {
					if time.Now().After(deadline) {
						err = errors.New("the old leader did not step down")
						break
					}
					time.Sleep(10 * time.Millisecond)
				}
			}
			moved <- err
		})
	}
	c.servers[coord].txns.markers.beforeSend.Store(&hook)
	ctx := testCtx(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.TransactionalID("tx-y"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	txnProduce(t, ctx, cl, "y", true, 0, 0)
	select {
	case err := <-moved:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("no WriteTxnMarkers sent to the leader")
	}
	d := waitTxnState(t, ctx, kadm.NewClient(cl), "tx-y", "CompleteCommit")
	if l := c.partition("y").Leader; l != coord {
		t.Fatalf("leader of y is %d, want %d", l, coord)
	}
	// The records 0 1 and the COMMIT marker at 2, written by the new
	// leader.
	if lso := waitStable(t, c.servers[coord], "y", 0); lso != 3 {
		t.Errorf("new leader's last stable offset %d, want 3", lso)
	}
	p := c.servers[coord].partition("y", 0)
	if _, open := p.Log().OpenTransaction(d.ProducerID); open {
		t.Error("the producer's transaction is still open at the new leader")
	}
	if got := sends.Load(); got != 1 {
		t.Errorf("%d WriteTxnMarkers sent to another broker, want 1 (the retry is local)", got)
	}
}

// WriteTxnMarkers is a broker's request: with the authorizer on it needs
// ClusterAction on the cluster, and it is served only on the inter-broker
// listener (here PLAINTEXT, the default); otherwise every partition
// answers CLUSTER_AUTHORIZATION_FAILED and nothing is written.
func TestWriteTxnMarkersNeedsClusterAction(t *testing.T) {
	b := startACLBroker(t, map[string]string{"transaction.state.log.num.partitions": "1"})
	ctx := testCtx(t)
	adm := kadm.NewClient(b.as(t, "admin"))
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "w"); err != nil {
		t.Fatal(err)
	}
	req := func() *kmsg.WriteTxnMarkersRequest {
		return markersRequest(txn.Markers{ProducerID: 4000, Commit: true}, []txn.TopicPartition{{Topic: "w", Partition: 0}})
	}
	code := func(resp kmsg.Response) int16 {
		return resp.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode
	}
	leo := func() int64 { return b.partition("w", 0).Log().LogEndOffset() }

	// No ClusterAction on the inter-broker listener.
	plain, _ := b.ListenerAddr("PLAINTEXT")
	wantCode(t, "WriteTxnMarkers without ClusterAction", code(dialRaw(t, plain.String()).do(req(), 1)), kerr.ClusterAuthorizationFailed)
	// ClusterAction, but on a listener that is not the inter-broker one.
	mustACLs(t, ctx, adm, kadm.NewACLs().Allow("User:alice", "User:ANONYMOUS").Clusters().Operations(kadm.OpClusterAction))
	// (franz-go looks the partition's leader up first.)
	mustACLs(t, ctx, adm, kadm.NewACLs().Allow("User:alice").Topics("w").Operations(kadm.OpDescribe))
	resp, err := req().RequestWith(ctx, b.as(t, "alice"))
	if err != nil {
		t.Fatal(err)
	}
	wantCode(t, "WriteTxnMarkers outside the inter-broker listener", code(resp), kerr.ClusterAuthorizationFailed)
	if got := leo(); got != 0 {
		t.Fatalf("a refused marker was written: log end %d", got)
	}
	// ClusterAction on the inter-broker listener: written (a marker of a
	// producer with no transaction here is written too, as in Kafka).
	if c := code(dialRaw(t, plain.String()).do(req(), 1)); c != 0 {
		t.Fatalf("WriteTxnMarkers with ClusterAction on the inter-broker listener: %v", kerr.ErrorForCode(c))
	}
	if got := leo(); got != 1 {
		t.Fatalf("log end %d after the marker, want 1", got)
	}
}

// A topic deleted while its markers are pending is dropped from the
// transaction (Kafka does the same), which completes with the markers of
// its other partitions.
func TestTxnMarkersDeletedTopicDropped(t *testing.T) {
	c, coord, other := startTxnCluster(t)
	c.createTopic("gone", []int32{other}, nil)
	c.createTopic("kept", []int32{coord}, nil)
	var once sync.Once
	deleted := make(chan error, 1)
	hook := func(to int32) {
		once.Do(func() { deleted <- c.m.DeleteTopic(context.Background(), "gone") })
	}
	c.servers[coord].txns.markers.beforeSend.Store(&hook)
	ctx := testCtx(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.TransactionalID("tx-g"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"gone", "kept"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-deleted:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("no WriteTxnMarkers sent to the leader of the deleted topic")
	}
	waitTxnState(t, ctx, kadm.NewClient(cl), "tx-g", "CompleteCommit")
	if lso := waitStable(t, c.servers[coord], "kept", 0); lso != 2 {
		t.Errorf("last stable offset of kept-0: %d, want 2 (past its marker)", lso)
	}
}

// GroupTransactSession on two brokers, with the group's
// __consumer_offsets partition and the output on the broker that is not
// the transaction coordinator: the markers that commit the group's
// transactional offsets cross brokers too, and complete them there.
func TestTxnMarkersGroupTransactSessionAcrossBrokers(t *testing.T) {
	c, coord, other := startTxnCluster(t)
	var sends atomic.Int32
	hook := func(to int32) {
		if to == other {
			sends.Add(1)
		}
	}
	c.servers[coord].txns.markers.beforeSend.Store(&hook)
	if _, err := c.m.CreateTopic(context.Background(), controller.CreateTopicRequest{Name: offsetsTopic,
		Assignments: [][]int32{{other}}, Configs: map[string]string{"cleanup.policy": "compact"}}); err != nil {
		t.Fatal(err)
	}
	c.createTopic("in", []int32{coord}, nil)
	c.createTopic("out", []int32{other}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	copyInTransactions(t, ctx, c.seeds(), func(topic string, _ int32) *Server {
		return c.servers[c.partition(topic).Leader]
	})
	if sends.Load() == 0 {
		t.Error("no WriteTxnMarkers sent to the leader of __consumer_offsets and of the output")
	}
}
