package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/txn"
	"strata/controller"
	"strata/tier"
)

// Transactions open while their coordinator, or the leader or the
// replicas of the partitions they wrote, change: the state carried over,
// real markers written where the partitions are at the end, and
// read_committed readers served exactly the committed records.

// startTxnMoveCluster starts n brokers with transactions (and sets) on,
// creates __transaction_state with one partition of rf replicas, and
// returns the cluster and that partition's replicas.
func startTxnMoveCluster(t *testing.T, n, rf int, sets map[string]string, store tier.ObjectStore) (*testCluster, []int32) {
	t.Helper()
	all := map[string]string{
		"transaction.state.log.num.partitions":     "1",
		"transaction.state.log.replication.factor": fmt.Sprint(rf),
		"transaction.state.log.min.isr":            "1",
		"group.initial.rebalance.delay.ms":         "0",
	}
	for k, v := range sets {
		all[k] = v
	}
	c := startTierCluster(t, n, all, store)
	tt, err := c.servers[0].ensureTxnStateTopic()
	if err != nil {
		t.Fatal(err)
	}
	return c, tt.Partitions[0].Replicas
}

// client is a client of the cluster's live brokers.
func (c *testCluster) client(opts ...kgo.Opt) *kgo.Client {
	c.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.seeds()...), kgo.MetadataMinAge(100 * time.Millisecond),
		kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(cl.Close)
	return cl
}

// beginTxn begins a transaction of cl.
func beginTxn(t *testing.T, cl *kgo.Client) {
	t.Helper()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
}

// txnValue produces one record of value v to partition 0 of topic in cl's
// open transaction and returns its offset.
func txnValue(t *testing.T, ctx context.Context, cl *kgo.Client, topic, v string) int64 {
	t.Helper()
	r := &kgo.Record{Topic: topic, Value: []byte(v)}
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatalf("produce %s to %s-0: %v", v, topic, err)
	}
	return r.Offset
}

// endTxnOf ends cl's open transaction.
func endTxnOf(t *testing.T, ctx context.Context, cl *kgo.Client, commit bool) {
	t.Helper()
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatalf("end transaction (commit %v): %v", commit, err)
	}
}

// readValues reads partition 0 of topic from its start with iso until it
// has want records and returns their values, in offset order.
func readValues(t *testing.T, ctx context.Context, seeds []string, topic string, want int, iso kgo.IsolationLevel) []string {
	t.Helper()
	var out []string
	for _, r := range consumeWith(t, ctx, seeds, topic, want, iso)[0] {
		out = append(out, string(r.Value))
	}
	return out
}

// wantValues compares values read with those wanted, in order.
func wantValues(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s read %d records %q,\nwant %d: %q", what, len(got), got, len(want), want)
	}
}

// openAt checks that partition 0 of topic on broker s has producer pid's
// transaction open from first and its last stable offset there, and that
// a read_committed fetch at the leader stops below it.
func (c *testCluster) openAt(t *testing.T, id int32, topic string, pid, first int64) {
	t.Helper()
	p := c.servers[id].partition(topic, 0)
	if p == nil {
		t.Fatalf("broker %d has no %s-0", id, topic)
	}
	if open, ok := p.Log().OpenTransaction(pid); !ok || open != first {
		t.Errorf("broker %d: producer %d's transaction open at %d (%v), want open from %d", id, pid, open, ok, first)
	}
	waitFor(t, fmt.Sprintf("broker %d's high watermark of %s-0 past %d", id, topic, first), 10*time.Second, func() bool {
		return p.HW() > first
	})
	if lso := p.LastStableOffset(); lso != first {
		t.Errorf("broker %d: last stable offset of %s-0 %d, want %d (the open transaction's first offset)", id, topic, lso, first)
	}
	rc := c.rc(id)
	fp := fetchIso(t, rc, topic, first, 1)
	if fp.LastStableOffset != first || fp.HighWatermark <= first || len(fp.RecordBatches) != 0 {
		t.Errorf("broker %d: read_committed fetch at %d: LSO %d, HW %d, %d bytes; want LSO %d and nothing read",
			id, first, fp.LastStableOffset, fp.HighWatermark, len(fp.RecordBatches), first)
	}
	if lo := listOffsetIso(t, rc, topic, -1, 1); lo != first {
		t.Errorf("broker %d: read_committed ListOffsets latest %d, want %d", id, lo, first)
	}
	// DescribeProducers shows the open transaction too.
	req := kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	req.Topics = append(req.Topics, rt)
	kresp, err := handleDescribeProducers(c.servers[id], nil, req)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, ap := range kresp.(*kmsg.DescribeProducersResponse).Topics[0].Partitions[0].ActiveProducers {
		if ap.ProducerID == pid {
			found = true
			if ap.CurrentTxnStartOffset != first {
				t.Errorf("broker %d: DescribeProducers: producer %d's transaction from %d, want %d", id, pid, ap.CurrentTxnStartOffset, first)
			}
		}
	}
	if !found {
		t.Errorf("broker %d: DescribeProducers of %s-0 lacks producer %d", id, topic, pid)
	}
}

// The transaction coordinator fails over while transactions are open in
// a partition: one Ongoing that its producer continues and commits at the
// new coordinator, one Ongoing whose transactional id a fresh producer
// takes over (the new coordinator aborts the old transaction with real
// ABORT markers), and one in PrepareCommit and one in PrepareAbort whose
// markers the old coordinator never wrote (the new coordinator writes
// them when it loads them). read_committed readers get the committed
// records, never the aborted ones. The coordinator's broker dies (the
// data partition led by another broker, or by the dying one and moving
// to its follower), or __transaction_state is reassigned away from it
// (it stays up and refuses the transactional ids it no longer
// coordinates).
func TestTxnCoordinatorFailoverOpenTransactions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		reassign bool // move __transaction_state instead of killing its leader
		withData bool // the data partition led by the coordinator's broker too
	}{
		{"kill", false, false},
		{"kill with the data leader", false, true},
		{"reassign", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) { testTxnCoordinatorFailover(t, tc.reassign, tc.withData) })
	}
}

func testTxnCoordinatorFailover(t *testing.T, reassign, withData bool) {
	c, tsReplicas := startTxnMoveCluster(t, 3, 2, nil, nil)
	old := c.partition(txnStateTopic).Leader
	var third, survivor int32 = -1, -1
	for id := range c.servers {
		switch {
		case !slices.Contains(tsReplicas, id):
			third = id
		case id != old:
			survivor = id
		}
	}
	if withData {
		c.createTopic("d", []int32{old, third}, nil)
		c.waitISR("d", slices.Sorted(slices.Values([]int32{old, third}))...)
	} else {
		c.createTopic("d", []int32{third}, nil)
	}
	dataLeader := func() *Server { return c.servers[c.partition("d").Leader] }
	ctx := testCtx(t)
	c.waitISR(txnStateTopic, slices.Sorted(slices.Values(tsReplicas))...)

	keep := c.client(kgo.TransactionalID("tx-keep"))
	fence := c.client(kgo.TransactionalID("tx-fence"))
	prep := c.client(kgo.TransactionalID("tx-prep"))
	pab := c.client(kgo.TransactionalID("tx-pab"))
	beginTxn(t, keep)
	txnValue(t, ctx, keep, "d", "keep-1")
	endTxnOf(t, ctx, keep, true)
	beginTxn(t, keep)
	keepFirst := txnValue(t, ctx, keep, "d", "keep-2")
	beginTxn(t, fence)
	txnValue(t, ctx, fence, "d", "fence-1")
	beginTxn(t, prep)
	txnValue(t, ctx, prep, "d", "prep-1")
	beginTxn(t, pab)
	txnValue(t, ctx, pab, "d", "pab-1")

	// The old coordinator loses the markers of tx-prep's commit and of
	// tx-pab's abort: it dies before writing them.
	lostc := make(chan txn.Markers, 10)
	drop := func(mk txn.Markers) { lostc <- mk }
	c.servers[old].txns.writeMarkers.Store(&drop)
	endTxnOf(t, ctx, prep, true)
	endTxnOf(t, ctx, pab, false)
	adm := kadm.NewClient(c.client())
	if d := describeTxn(t, ctx, adm, "tx-prep"); d.State != "PrepareCommit" {
		t.Fatalf("tx-prep in %s before the failover, want PrepareCommit", d.State)
	}
	pabBefore := describeTxn(t, ctx, adm, "tx-pab")
	if pabBefore.State != "PrepareAbort" {
		t.Fatalf("tx-pab in %s before the failover, want PrepareAbort", pabBefore.State)
	}
	keepPID := describeTxn(t, ctx, adm, "tx-keep").ProducerID
	fenceBefore := describeTxn(t, ctx, adm, "tx-fence")
	c.openAt(t, c.partition("d").Leader, "d", keepPID, keepFirst)

	c.waitISR(txnStateTopic, slices.Sorted(slices.Values(tsReplicas))...)
	if reassign {
		target := []int32{survivor, third}
		res, err := c.m.AlterPartitionReassignments(ctx, map[controller.TopicPartition][]int32{{Topic: txnStateTopic}: target})
		if err != nil || res[controller.TopicPartition{Topic: txnStateTopic}] != nil {
			t.Fatalf("reassign %s-0 to %v: %v %v", txnStateTopic, target, res, err)
		}
		waitFor(t, txnStateTopic+" moved", 20*time.Second, func() bool {
			pm := c.partition(txnStateTopic)
			return !pm.Reassigning() && pm.Leader == survivor && c.servers[old].partition(txnStateTopic, 0) == nil
		})
	} else {
		c.kill(old)
		waitFor(t, "a new leader of "+txnStateTopic, 10*time.Second, func() bool {
			l := c.partition(txnStateTopic).Leader
			return l >= 0 && l != old
		})
	}
	lost := map[string]bool{}
	for len(lostc) > 0 {
		mk := <-lostc
		lost[mk.TransactionalID] = mk.Commit
	}
	if commit, ok := lost["tx-prep"]; len(lost) != 2 || !ok || !commit {
		t.Fatalf("markers handed to the old coordinator's (dropping) sender: %v, want tx-prep's commit and tx-pab's abort", lost)
	}
	if commit, ok := lost["tx-pab"]; !ok || commit {
		t.Fatalf("markers handed to the old coordinator's (dropping) sender: %v, want tx-prep's commit and tx-pab's abort", lost)
	}
	adm = kadm.NewClient(c.client())

	// The new coordinator loads the transactions as they were.
	d := waitTxnState(t, ctx, adm, "tx-prep", "CompleteCommit")
	if d.Coordinator == old {
		t.Errorf("tx-prep still coordinated by the old coordinator %d", old)
	}
	waitTxnState(t, ctx, adm, "tx-pab", "CompleteAbort")
	for _, id := range []string{"tx-keep", "tx-fence"} {
		d := describeTxn(t, ctx, adm, id)
		if d.State != "Ongoing" || len(d.Topics["d"]) != 1 {
			t.Errorf("%s at the new coordinator: %+v, want Ongoing in d-0", id, d)
		}
	}
	// The producer of tx-keep goes on at the new coordinator.
	txnValue(t, ctx, keep, "d", "keep-3")
	endTxnOf(t, ctx, keep, true)
	waitTxnState(t, ctx, adm, "tx-keep", "CompleteCommit")
	// A fresh producer of tx-fence aborts the old transaction and fences
	// its producer.
	fresh := c.client(kgo.TransactionalID("tx-fence"))
	beginTxn(t, fresh)
	txnValue(t, ctx, fresh, "d", "fence-2")
	endTxnOf(t, ctx, fresh, true)
	d = waitTxnState(t, ctx, adm, "tx-fence", "CompleteCommit")
	if d.ProducerID != fenceBefore.ProducerID || d.ProducerEpoch <= fenceBefore.ProducerEpoch {
		t.Errorf("tx-fence after the fresh producer: %+v, before: %+v", d, fenceBefore)
	}
	if err := fence.EndTransaction(ctx, kgo.TryCommit); !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Errorf("the fenced producer's commit: %v, want PRODUCER_FENCED", err)
	}

	leo := waitStable(t, dataLeader(), "d", 0)
	p := dataLeader().partition("d", 0)
	for _, pid := range []int64{keepPID, fenceBefore.ProducerID, d.ProducerID} {
		if at, open := p.Log().OpenTransaction(pid); open {
			t.Errorf("producer %d's transaction still open at %d in d-0", pid, at)
		}
	}
	var abPIDs []int64
	for _, a := range p.Log().AbortedTransactions(0, leo) {
		abPIDs = append(abPIDs, a.ProducerID)
	}
	if slices.Sort(abPIDs); !slices.Equal(abPIDs, slices.Sorted(slices.Values([]int64{fenceBefore.ProducerID, pabBefore.ProducerID}))) {
		t.Errorf("aborted transactions of d-0 by producers %v, want tx-fence's first and tx-pab's", abPIDs)
	}
	// The aborted records are before the last committed ones: a reader
	// that got them all was served past them.
	committed := readValues(t, ctx, c.seeds(), "d", 5, kgo.ReadCommitted())
	wantValues(t, "read_committed", committed, []string{"keep-1", "keep-2", "prep-1", "keep-3", "fence-2"})
	all := readValues(t, ctx, c.seeds(), "d", 7, kgo.ReadUncommitted())
	wantValues(t, "read_uncommitted", all, []string{"keep-1", "keep-2", "fence-1", "prep-1", "pab-1", "keep-3", "fence-2"})
}

// The leader of a partition with an open transaction dies; its follower,
// leading, has the transaction open from the same first offset and its
// last stable offset there; the producer writes more to the new leader in
// the same transaction and commits it, and the COMMIT marker lands
// there.
func TestTxnDataLeaderChangeOpenTransaction(t *testing.T) {
	c, tsReplicas := startTxnMoveCluster(t, 3, 1, nil, nil)
	coord := tsReplicas[0]
	var others []int32
	for _, id := range []int32{0, 1, 2} {
		if id != coord {
			others = append(others, id)
		}
	}
	c.createTopic("l", others, nil)
	c.waitISR("l", others...)
	leader := c.partition("l").Leader
	follower := others[0] + others[1] - leader
	ctx := testCtx(t)
	prod := c.client(kgo.TransactionalID("tx-l"), kgo.RequiredAcks(kgo.AllISRAcks()))
	beginTxn(t, prod)
	txnValue(t, ctx, prod, "l", "c-1")
	endTxnOf(t, ctx, prod, true)
	beginTxn(t, prod)
	txnValue(t, ctx, prod, "l", "a-1")
	endTxnOf(t, ctx, prod, false)
	beginTxn(t, prod)
	first := txnValue(t, ctx, prod, "l", "open-1")
	txnValue(t, ctx, prod, "l", "open-2")
	adm := kadm.NewClient(c.client())
	pid := describeTxn(t, ctx, adm, "tx-l").ProducerID
	c.openAt(t, leader, "l", pid, first)
	waitFor(t, "the follower to replicate the open transaction", 10*time.Second, func() bool {
		return c.leo(follower, "l") == c.leo(leader, "l")
	})
	c.waitISR("l", others...)

	c.kill(leader)
	waitFor(t, "the follower leading", 10*time.Second, func() bool { return c.partition("l").Leader == follower })
	waitFor(t, "the follower's broker leading locally", 10*time.Second, func() bool {
		s := c.servers[follower]
		return s.isLeader(s.partition("l", 0))
	})
	c.openAt(t, follower, "l", pid, first)

	txnValue(t, ctx, prod, "l", "open-3")
	endTxnOf(t, ctx, prod, true)
	waitTxnState(t, ctx, adm, "tx-l", "CompleteCommit")
	leo := waitStable(t, c.servers[follower], "l", 0)
	if _, open := c.servers[follower].partition("l", 0).Log().OpenTransaction(pid); open {
		t.Error("the transaction is still open at the new leader after its commit")
	}
	// c-1 C a-1 A open-1 open-2 open-3 C
	if leo != 8 {
		t.Errorf("new leader's log end %d, want 8 (5 records, 3 markers)", leo)
	}
	// A transaction after the commit, at the new leader.
	beginTxn(t, prod)
	txnValue(t, ctx, prod, "l", "c-2")
	endTxnOf(t, ctx, prod, true)
	waitStable(t, c.servers[follower], "l", 0)
	seeds := []string{c.servers[follower].Addr().String()}
	wantValues(t, "read_committed", readValues(t, ctx, seeds, "l", 5, kgo.ReadCommitted()),
		[]string{"c-1", "open-1", "open-2", "open-3", "c-2"})
	wantValues(t, "read_uncommitted", readValues(t, ctx, seeds, "l", 6, kgo.ReadUncommitted()),
		[]string{"c-1", "a-1", "open-1", "open-2", "open-3", "c-2"})
}

// A partition with an open transaction is reassigned from one broker to
// another (its leader moves with it): the new replica, leading, has the
// transaction open from its first offset and its last stable offset
// there; read_committed stops there; the producers go on at the new
// leader (the transactional one in its open transaction); the commit's
// marker lands there; and read_committed then reads exactly the committed
// records, an earlier aborted transaction filtered. Tiered, the new
// replica copies the local tail only (it starts at the old leader's last
// tiered offset), with the aborted transaction wholly in the bucket.
func TestTxnReassignOpenTransaction(t *testing.T) {
	t.Run("untiered", func(t *testing.T) { testTxnReassignOpen(t, false) })
	t.Run("tiered", func(t *testing.T) { testTxnReassignOpen(t, true) })
}

func testTxnReassignOpen(t *testing.T, tiered bool) {
	var sets, topicConfigs map[string]string
	var store tier.ObjectStore
	if tiered {
		sets = tierClusterSets()
		store = tier.NewMemStore()
		topicConfigs = map[string]string{"remote.storage.enable": "true", "segment.bytes": "8192", "file.delete.delay.ms": "0",
			"local.retention.bytes": "20000"}
	}
	c, tsReplicas := startTxnMoveCluster(t, 3, 1, sets, store)
	coord := tsReplicas[0]
	var from, to int32 = (coord + 1) % 3, (coord + 2) % 3
	const topic = "mv"
	c.createTopic(topic, []int32{from}, topicConfigs)
	ctx := testCtx(t)

	plain := c.client(kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
	var want []string // the committed values, in order
	n := 0
	produce := func(k int) {
		t.Helper()
		for range k {
			v := string(tierValue(n))
			n++
			if err := plain.ProduceSync(ctx, &kgo.Record{Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			want = append(want, v)
		}
	}
	prod := c.client(kgo.TransactionalID("tx-mv"), kgo.ProducerBatchCompression(kgo.NoCompression()))
	produce(30)
	beginTxn(t, prod)
	aborted := txnValue(t, ctx, prod, topic, "aborted-1")
	txnValue(t, ctx, prod, topic, "aborted-2")
	endTxnOf(t, ctx, prod, false)
	produce(30)
	beginTxn(t, prod)
	txnValue(t, ctx, prod, topic, "committed-1")
	endTxnOf(t, ctx, prod, true)
	want = append(want, "committed-1")
	produce(40)
	src := c.servers[from]
	p := src.partition(topic, 0)
	if tiered {
		tp := tierPartition(p)
		waitFor(t, "uploads past the aborted transaction", 30*time.Second, func() bool {
			end, ok, _ := src.tier.idx.LogEnd(tp)
			return ok && end > aborted+2
		})
	}
	beginTxn(t, prod)
	first := txnValue(t, ctx, prod, topic, "open-1")
	txnValue(t, ctx, prod, topic, "open-2")
	produce(5) // after the open transaction: beyond the LSO
	adm := kadm.NewClient(c.client())
	pid := describeTxn(t, ctx, adm, "tx-mv").ProducerID
	c.openAt(t, from, topic, pid, first)

	res, err := c.m.AlterPartitionReassignments(ctx, map[controller.TopicPartition][]int32{{Topic: topic, Partition: 0}: {to}})
	if err != nil || res[controller.TopicPartition{Topic: topic, Partition: 0}] != nil {
		t.Fatalf("reassign %s-0 to %d: %v %v", topic, to, res, err)
	}
	waitFor(t, fmt.Sprintf("%s-0 moved to broker %d", topic, to), 20*time.Second, func() bool {
		pm := c.partition(topic)
		s := c.servers[to]
		return !pm.Reassigning() && slices.Equal(pm.Replicas, []int32{to}) && pm.Leader == to &&
			s.partition(topic, 0) != nil && s.isLeader(s.partition(topic, 0)) && src.partition(topic, 0) == nil
	})
	moved := c.servers[to].partition(topic, 0)
	if start := moved.Log().LogStartOffset(); tiered != (start > aborted+2) {
		t.Errorf("the moved replica's log starts at %d (tiered %v; the aborted transaction ends at %d)", start, tiered, aborted+2)
	}
	c.openAt(t, to, topic, pid, first)

	// Read_committed stops at the open transaction: the committed
	// records before it, the aborted ones (in the bucket when tiered)
	// filtered.
	before := readValues(t, ctx, c.seeds(), topic, len(want)-5, kgo.ReadCommitted())
	wantValues(t, "read_committed during the open transaction", before, want[:len(want)-5])
	committedBefore, after := want[:len(want)-5], slices.Clone(want[len(want)-5:])

	// The producers go on at the new leader, from the sequences they
	// had: the idempotent one and the transactional one in its open
	// transaction.
	want = nil
	produce(3)
	after = append(after, want...)
	txnValue(t, ctx, prod, topic, "open-3")
	endTxnOf(t, ctx, prod, true)
	waitTxnState(t, ctx, adm, "tx-mv", "CompleteCommit")
	leo := waitStable(t, c.servers[to], topic, 0)
	if _, open := moved.Log().OpenTransaction(pid); open {
		t.Error("the transaction is still open at the new leader after its commit")
	}
	if ab := moved.Log().AbortedTransactions(first, leo); len(ab) != 0 {
		t.Errorf("aborted transactions after the open one's first offset: %+v", ab)
	}
	if got, code := c.servers[to].abortedTransactions(moved, aborted, aborted+1); code != 0 || len(got) != 1 || got[0].ProducerID != pid || got[0].FirstOffset != aborted {
		t.Errorf("the new leader's aborted transactions at %d: %+v (code %d), want producer %d's from %d", aborted, got, code, pid, aborted)
	}
	// A last transaction at the new leader.
	beginTxn(t, prod)
	txnValue(t, ctx, prod, topic, "committed-2")
	endTxnOf(t, ctx, prod, true)
	waitStable(t, c.servers[to], topic, 0)
	full := append(slices.Clone(committedBefore), "open-1", "open-2")
	full = append(append(full, after...), "open-3", "committed-2")
	wantValues(t, "read_committed after the commit", readValues(t, ctx, c.seeds(), topic, len(full), kgo.ReadCommitted()), full)
}

// A transaction aborted by its timeout (the coordinator's periodic task)
// gets real ABORT markers: read_committed readers never see its records,
// read_uncommitted ones do, and the last stable offset passes it.
func TestTxnTimeoutAbortReaders(t *testing.T) {
	ts := startTestServer(t, map[string]string{"transaction.state.log.num.partitions": "1",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"})
	ctx := testCtx(t)
	adm := ts.admin(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "to"); err != nil {
		t.Fatal(err)
	}
	cl := ts.client(t, kgo.TransactionalID("tx-to"), kgo.DefaultProduceTopic("to"), kgo.TransactionTimeout(time.Second),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	beginTxn(t, cl)
	txnValue(t, ctx, cl, "to", "c-1")
	endTxnOf(t, ctx, cl, true)
	waitTxnState(t, ctx, adm, "tx-to", "CompleteCommit")
	beginTxn(t, cl)
	txnValue(t, ctx, cl, "to", "timed-out-1")
	txnValue(t, ctx, cl, "to", "timed-out-2")
	d := waitTxnState(t, ctx, adm, "tx-to", "CompleteAbort")
	// c-1 C timed-out-1 timed-out-2 A
	if lso := waitStable(t, ts.Server, "to", 0); lso != 5 {
		t.Errorf("last stable offset %d after the timeout abort, want 5 (past its marker)", lso)
	}
	if ab := ts.partition("to", 0).Log().AbortedTransactions(0, 5); len(ab) != 1 || ab[0].ProducerID != d.ProducerID || ab[0].FirstOffset != 2 || ab[0].LastOffset != 4 {
		t.Errorf("aborted transactions %+v, want producer %d's from 2 to its marker at 4", ab, d.ProducerID)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Errorf("commit after the timeout abort: %v, want the producer fenced", err)
	}
	// A fresh producer of the id commits after it: a read_committed
	// reader that has its record was served past the aborted ones.
	fresh := ts.client(t, kgo.TransactionalID("tx-to"), kgo.DefaultProduceTopic("to"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	beginTxn(t, fresh)
	txnValue(t, ctx, fresh, "to", "c-2")
	endTxnOf(t, ctx, fresh, true)
	waitStable(t, ts.Server, "to", 0)
	seeds := []string{ts.addr()}
	wantValues(t, "read_committed", readValues(t, ctx, seeds, "to", 2, kgo.ReadCommitted()), []string{"c-1", "c-2"})
	wantValues(t, "read_uncommitted", readValues(t, ctx, seeds, "to", 4, kgo.ReadUncommitted()),
		[]string{"c-1", "timed-out-1", "timed-out-2", "c-2"})
}

// A transaction open when its coordinator's broker dies keeps its start
// time at the new coordinator, which aborts it once it has been open
// longer than its timeout: its ABORT marker hides it from read_committed
// readers, read_uncommitted ones see it.
func TestTxnTimeoutAbortAfterFailover(t *testing.T) {
	c, tsReplicas := startTxnMoveCluster(t, 2, 2, map[string]string{
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"}, nil)
	old := c.partition(txnStateTopic).Leader
	survivor := tsReplicas[0] + tsReplicas[1] - old
	c.createTopic("tf", []int32{survivor}, nil)
	c.waitISR(txnStateTopic, 0, 1)
	ctx := testCtx(t)
	cl := c.client(kgo.TransactionalID("tx-tf"), kgo.TransactionTimeout(3*time.Second))
	beginTxn(t, cl)
	txnValue(t, ctx, cl, "tf", "c-1")
	endTxnOf(t, ctx, cl, true)
	beginTxn(t, cl)
	txnValue(t, ctx, cl, "tf", "timed-out-1")
	before := describeTxn(t, ctx, kadm.NewClient(c.client()), "tx-tf")
	if before.State != "Ongoing" {
		t.Fatalf("tx-tf before the failover: %+v", before)
	}
	c.waitISR(txnStateTopic, 0, 1)
	c.kill(old)
	adm := kadm.NewClient(c.client())
	var d kadm.DescribedTransaction
	waitFor(t, "tx-tf described by the new coordinator", 10*time.Second, func() bool {
		ds, err := adm.DescribeTransactions(ctx, "tx-tf")
		d = ds["tx-tf"]
		return err == nil && d.Err == nil
	})
	if d.State != "Ongoing" || d.StartTimestamp != before.StartTimestamp {
		t.Errorf("tx-tf at the new coordinator: %s from %d; before the failover: %s from %d", d.State, d.StartTimestamp, before.State, before.StartTimestamp)
	}
	d = waitTxnState(t, ctx, adm, "tx-tf", "CompleteAbort")
	if d.Coordinator != survivor || d.ProducerEpoch <= before.ProducerEpoch {
		t.Errorf("after the timeout at the new coordinator: %+v, before the failover: %+v", d, before)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Errorf("commit after the timeout abort: %v, want the producer fenced", err)
	}
	fresh := c.client(kgo.TransactionalID("tx-tf"))
	beginTxn(t, fresh)
	txnValue(t, ctx, fresh, "tf", "c-2")
	endTxnOf(t, ctx, fresh, true)
	waitStable(t, c.servers[survivor], "tf", 0)
	wantValues(t, "read_committed", readValues(t, ctx, c.seeds(), "tf", 2, kgo.ReadCommitted()), []string{"c-1", "c-2"})
	wantValues(t, "read_uncommitted", readValues(t, ctx, c.seeds(), "tf", 3, kgo.ReadUncommitted()),
		[]string{"c-1", "timed-out-1", "c-2"})
}

// The coordinator's broker dies after writing the markers of a commit
// and of an abort to one of their two partitions, before the other: the
// new coordinator writes them to both, so one partition gets each marker
// twice. The second marker of a transaction already ended changes
// nothing readers see: read_committed reads the committed records of
// both partitions, never the aborted ones, and later transactions of the
// same ids work. Under transaction version 2 the repeated marker carries
// the epoch the partition already has (the coordinator bumped it at the
// end), under 1 the transaction's own.
func TestTxnCoordinatorFailoverMarkersHalfWritten(t *testing.T) {
	for _, tv := range []string{"1", "2"} {
		t.Run("transaction.version="+tv, func(t *testing.T) { testTxnMarkersHalfWritten(t, tv) })
	}
}

func testTxnMarkersHalfWritten(t *testing.T, tv string) {
	c, tsReplicas := startTxnMoveCluster(t, 3, 2, map[string]string{"transaction.version": tv}, nil)
	old := c.partition(txnStateTopic).Leader
	var third, survivor int32
	for id := range c.servers {
		switch {
		case !slices.Contains(tsReplicas, id):
			third = id
		case id != old:
			survivor = id
		}
	}
	c.createTopic("h0", []int32{third}, nil)
	c.createTopic("h1", []int32{survivor}, nil)
	c.waitISR(txnStateTopic, slices.Sorted(slices.Values(tsReplicas))...)
	ctx := testCtx(t)
	both := func(cl *kgo.Client, v string) {
		t.Helper()
		for _, topic := range []string{"h0", "h1"} {
			txnValue(t, ctx, cl, topic, v)
		}
	}
	hc := c.client(kgo.TransactionalID("tx-hc"))
	ha := c.client(kgo.TransactionalID("tx-ha"))
	beginTxn(t, hc)
	both(hc, "c-1")
	endTxnOf(t, ctx, hc, true)
	beginTxn(t, hc)
	both(hc, "c-2")
	beginTxn(t, ha)
	both(ha, "a-1")

	// The old coordinator writes the markers to h0 only, then dies.
	h0 := c.rc(third)
	half := func(mk txn.Markers) {
		resp := h0.do(markersRequest(mk, []txn.TopicPartition{{Topic: "h0"}}), 1).(*kmsg.WriteTxnMarkersResponse)
		if code := resp.Markers[0].Topics[0].Partitions[0].ErrorCode; code != 0 {
			t.Errorf("marker of %s to h0: %v", mk.TransactionalID, kerr.ErrorForCode(code))
		}
	}
	c.servers[old].txns.writeMarkers.Store(&half)
	endTxnOf(t, ctx, hc, true)
	endTxnOf(t, ctx, ha, false)
	adm := kadm.NewClient(c.client())
	for id, state := range map[string]string{"tx-hc": "PrepareCommit", "tx-ha": "PrepareAbort"} {
		if d := describeTxn(t, ctx, adm, id); d.State != state {
			t.Fatalf("%s in %s before the failover, want %s", id, d.State, state)
		}
	}
	// c-1 C c-2 a-1 C A in h0: the markers written, the LSO past them.
	if lso := waitStable(t, c.servers[third], "h0", 0); lso != 6 {
		t.Fatalf("h0's last stable offset %d after its markers, want 6", lso)
	}
	c.kill(old)
	adm = kadm.NewClient(c.client())
	waitTxnState(t, ctx, adm, "tx-hc", "CompleteCommit")
	waitTxnState(t, ctx, adm, "tx-ha", "CompleteAbort")
	// h0 has each marker twice, h1 once.
	if lso := waitStable(t, c.servers[third], "h0", 0); lso != 8 {
		t.Errorf("h0's log end %d after the new coordinator's markers, want 8 (each marker twice)", lso)
	}
	if lso := waitStable(t, c.servers[survivor], "h1", 0); lso != 6 {
		t.Errorf("h1's log end %d, want 6", lso)
	}

	beginTxn(t, hc)
	both(hc, "c-3")
	endTxnOf(t, ctx, hc, true)
	fresh := c.client(kgo.TransactionalID("tx-ha"))
	beginTxn(t, fresh)
	both(fresh, "a-2")
	endTxnOf(t, ctx, fresh, false)
	beginTxn(t, fresh)
	both(fresh, "c-4")
	endTxnOf(t, ctx, fresh, true)
	for _, topic := range []string{"h0", "h1"} {
		leader := c.servers[c.partition(topic).Leader]
		waitStable(t, leader, topic, 0)
		seeds := []string{leader.Addr().String()}
		wantValues(t, topic+" read_committed", readValues(t, ctx, seeds, topic, 4, kgo.ReadCommitted()),
			[]string{"c-1", "c-2", "c-3", "c-4"})
		wantValues(t, topic+" read_uncommitted", readValues(t, ctx, seeds, topic, 6, kgo.ReadUncommitted()),
			[]string{"c-1", "c-2", "a-1", "c-3", "a-2", "c-4"})
	}
}
