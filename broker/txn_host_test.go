package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/txn"
	"strata/controller"
)

// startClusterOf starts n brokers of c (startTierCluster with c's
// fields, such as transactions, set by the caller).
func startClusterOf(c *testCluster, n int) {
	c.t.Helper()
	c.m, c.dirs, c.servers = controller.NewMemory(), map[int32]string{}, map[int32]*Server{}
	for i := int32(0); i < int32(n); i++ {
		c.dirs[i] = c.t.TempDir()
	}
	c.t.Cleanup(func() {
		for _, s := range c.servers {
			s.Close()
		}
	})
	for i := int32(0); i < int32(n); i++ {
		c.start(i)
	}
}

// markerStandIn stands in for the marker sender (txn_markers.go): it
// records the markers the coordinator hands out and completes each
// transaction at once (no control batch is written in its partitions).
type markerStandIn struct {
	mu  sync.Mutex
	got []txn.Markers
}

func standInMarkers(s *Server) *markerStandIn {
	m := &markerStandIn{}
	f := func(mk txn.Markers) {
		m.mu.Lock()
		m.got = append(m.got, mk)
		m.mu.Unlock()
		go s.txns.coord.CompleteTxn(mk) // SendMarkers must not block
	}
	s.txns.writeMarkers.Store(&f)
	return m
}

func (m *markerStandIn) markers() []txn.Markers {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.got)
}

func advertised(t *testing.T, ctx context.Context, cl *kgo.Client) map[int16][2]int16 {
	t.Helper()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int16][2]int16{}
	for _, k := range resp.ApiKeys {
		out[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
	}
	return out
}

// The transactional APIs are advertised at the versions served
// (KIP-890's: AddPartitionsToTxn v5 with its batched broker form, EndTxn
// v5, TxnOffsetCommit v5).
func TestTransactionalAPIsAdvertised(t *testing.T) {
	ctx := testCtx(t)
	on := startTestServer(t, nil)
	got := advertised(t, ctx, on.client(t))
	want := map[int16][2]int16{24: {0, 5}, 25: {0, 4}, 26: {0, 5}, 27: {0, 2}, 28: {0, 5}, 61: {0, 0}, 65: {0, 0}, 66: {0, 2}, 22: {0, 5}, 10: {0, 5}}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s advertised %v, want %v", kmsg.NameForKey(k), got[k], w)
		}
	}
}

func describeTxn(t *testing.T, ctx context.Context, adm *kadm.Client, id string) kadm.DescribedTransaction {
	t.Helper()
	ds, err := adm.DescribeTransactions(ctx, id)
	if err != nil {
		t.Fatalf("describe %s: %v", id, err)
	}
	d, ok := ds[id]
	if !ok || d.Err != nil {
		t.Fatalf("describe %s: %+v", id, d)
	}
	return d
}

func waitTxnState(t *testing.T, ctx context.Context, adm *kadm.Client, id, state string) kadm.DescribedTransaction {
	t.Helper()
	var d kadm.DescribedTransaction
	waitFor(t, id+" in state "+state, 10*time.Second, func() bool {
		ds, err := adm.DescribeTransactions(ctx, id)
		if err != nil {
			return false
		}
		d = ds[id]
		return d.Err == nil && d.State == state
	})
	return d
}

func wantTopics(t *testing.T, what string, got kadm.TopicsSet, topic string, parts ...int32) {
	t.Helper()
	var have []int32
	for p := range got[topic] {
		have = append(have, p)
	}
	slices.Sort(have)
	if len(got) != 1 || !slices.Equal(have, parts) {
		t.Errorf("%s: partitions %v, want %s %v", what, got, topic, parts)
	}
}

// A franz-go transactional producer against the coordinator: InitProducerId
// with a transactional id, AddPartitionsToTxn through its produce, EndTxn;
// the state seen by DescribeTransactions and ListTransactions at each
// step; the markers handed to the (stood-in) marker writer; and a second
// producer with the same transactional id fencing the first, whose open
// transaction is aborted.
// Under transaction.version 1 the epoch stays put at a commit; under 2
// (KIP-890 part 2, the default) the coordinator bumps it at every end.
func TestTransactionalProducer(t *testing.T) {
	for _, tv := range []string{"1", "2"} {
		t.Run("transaction.version="+tv, func(t *testing.T) { testTransactionalProducer(t, tv) })
	}
}

func testTransactionalProducer(t *testing.T, tv string) {
	ts := startTestServer(t, map[string]string{"transaction.state.log.num.partitions": "3", "transaction.version": tv})
	var bump int16
	if tv == "2" {
		bump = 1
	}
	mk := standInMarkers(ts.Server)
	ctx := testCtx(t)
	admCl := ts.client(t)
	adm := kadm.NewClient(admCl)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "txn"); err != nil {
		t.Fatal(err)
	}
	const id = "tx-a"
	opts := []kgo.Opt{kgo.TransactionalID(id), kgo.DefaultProduceTopic("txn"),
		kgo.TransactionTimeout(30 * time.Second), kgo.RecordPartitioner(kgo.ManualPartitioner())}
	p1 := ts.client(t, opts...)
	produce := func(cl *kgo.Client, parts ...int32) {
		t.Helper()
		for _, p := range parts {
			if err := cl.ProduceSync(ctx, &kgo.Record{Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatalf("produce to txn-%d: %v", p, err)
			}
		}
	}

	if err := p1.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(p1, 0, 1)
	d := describeTxn(t, ctx, adm, id)
	if d.State != "Ongoing" || d.ProducerID < 0 || d.ProducerEpoch != 0 || d.TimeoutMillis != 30000 || d.StartTimestamp <= 0 {
		t.Errorf("describe after produce: %+v", d)
	}
	wantTopics(t, "ongoing transaction", d.Topics, "txn", 0, 1)
	pid := d.ProducerID
	ls, err := adm.ListTransactions(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if l, ok := ls[id]; !ok || l.State != "Ongoing" || l.ProducerID != pid {
		t.Errorf("list: %+v", ls)
	}
	if ls, err = adm.ListTransactions(ctx, nil, []string{"CompleteCommit"}); err != nil || len(ls) != 0 {
		t.Errorf("list CompleteCommit while ongoing: %v %v", ls, err)
	}

	if err := p1.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("commit: %v", err)
	}
	d = waitTxnState(t, ctx, adm, id, "CompleteCommit")
	if d.ProducerID != pid || d.ProducerEpoch != bump {
		t.Errorf("after commit: %+v, want epoch %d", d, bump)
	}
	if got := mk.markers(); len(got) != 1 || !got[0].Commit || got[0].TransactionalID != id || got[0].ProducerID != pid ||
		!slices.Equal(got[0].Partitions, []txn.TopicPartition{{Topic: "txn", Partition: 0}, {Topic: "txn", Partition: 1}}) {
		t.Errorf("markers after commit: %+v", got)
	}
	if ls, err = adm.ListTransactions(ctx, []int64{pid}, []string{"CompleteCommit"}); err != nil || ls[id].State != "CompleteCommit" {
		t.Errorf("list CompleteCommit by producer id: %v %v", ls, err)
	}

	// A second producer with the same id while the first has a
	// transaction open: the open one is aborted, the epoch bumped.
	if err := p1.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(p1, 1)
	p2 := ts.client(t, opts...)
	if err := p2.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	produce(p2, 0)
	d = describeTxn(t, ctx, adm, id)
	if d.State != "Ongoing" || d.ProducerID != pid || d.ProducerEpoch < 1+bump {
		t.Errorf("describe after the second producer's produce: %+v", d)
	}
	wantTopics(t, "second producer's transaction", d.Topics, "txn", 0)
	got := mk.markers()
	if len(got) != 2 || got[1].Commit || got[1].ProducerEpoch < 1 ||
		!slices.Equal(got[1].Partitions, []txn.TopicPartition{{Topic: "txn", Partition: 1}}) {
		t.Errorf("markers after fencing: %+v", got)
	}
	err = p1.EndTransaction(ctx, kgo.TryCommit)
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Errorf("fenced producer's commit: %v, want PRODUCER_FENCED", err)
	}
	if err := p2.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatalf("second producer's abort: %v", err)
	}
	waitTxnState(t, ctx, adm, id, "CompleteAbort")

	// The coordinator's answers straight: a stale epoch is fenced, an
	// unknown id has no state.
	end := kmsg.NewPtrEndTxnRequest()
	end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = id, pid, 0, true
	rc := dialRaw(t, ts.addr()) // the only broker: the coordinator
	if code := rc.do(end, 3).(*kmsg.EndTxnResponse).ErrorCode; code != kerr.ProducerFenced.Code {
		t.Errorf("EndTxn v3 at a stale epoch: %v, want PRODUCER_FENCED", kerr.ErrorForCode(code))
	}
	// Before KIP-588.
	if code := rc.do(end, 1).(*kmsg.EndTxnResponse).ErrorCode; code != kerr.InvalidProducerEpoch.Code {
		t.Errorf("EndTxn v1 at a stale epoch: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(code))
	}
	ds, err := adm.DescribeTransactions(ctx, "nobody")
	if err == nil && ds["nobody"].Err == nil {
		t.Errorf("describe an unknown id: %+v", ds)
	}
}

// With the authorizer on: a transactional id needs Describe to find its
// coordinator and to be described or listed, Write to init a producer,
// add partitions, add offsets, end a transaction and produce
// transactionally; the topic needs Write for AddPartitionsToTxn and the
// group Read for AddOffsetsToTxn.
func TestTransactionACLs(t *testing.T) {
	b := startACLBroker(t, map[string]string{"transaction.state.log.num.partitions": "1"})
	standInMarkers(b.Server)
	ctx := testCtx(t)
	adm := kadm.NewClient(b.as(t, "admin"))
	for _, topic := range []string{"orders", "secret"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	mustACLs(t, ctx, adm, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpWrite, kadm.OpDescribe))
	mustACLs(t, ctx, adm, kadm.NewACLs().Allow("User:alice").TransactionalIDs("alice-tx").Operations(kadm.OpWrite, kadm.OpDescribe))
	mustACLs(t, ctx, adm, kadm.NewACLs().Allow("User:bob").TransactionalIDs("alice-tx").Operations(kadm.OpDescribe))

	// alice's transactional producer works end to end.
	alice := b.as(t, "alice", kgo.TransactionalID("alice-tx"), kgo.DefaultProduceTopic("orders"))
	if err := alice.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := alice.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("alice's transactional produce: %v", err)
	}
	d := describeTxn(t, ctx, kadm.NewClient(b.as(t, "bob")), "alice-tx")
	if d.State != "Ongoing" || len(d.Topics) != 0 {
		// bob may describe the id, not the topic: it is left out.
		t.Errorf("bob describes alice-tx: %+v", d)
	}

	ac := b.as(t, "alice")
	coordReq := func(r kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := ac.Request(ctx, r)
		if err != nil {
			t.Fatalf("%s: %v", kmsg.NameForKey(r.Key()), err)
		}
		return resp
	}
	raw := func(cl *kgo.Client, r kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := cl.Broker(0).Request(ctx, r)
		if err != nil {
			t.Fatalf("%s: %v", kmsg.NameForKey(r.Key()), err)
		}
		return resp
	}
	pid := d.ProducerID

	// AddPartitionsToTxn: the topic needs Write; the others are not attempted.
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.Version, add.TransactionalID, add.ProducerID, add.ProducerEpoch = 3, "alice-tx", pid, 0
	add.Topics = []kmsg.AddPartitionsToTxnRequestTopic{{Topic: "orders", Partitions: []int32{0}}, {Topic: "secret", Partitions: []int32{0}}}
	ar := coordReq(add).(*kmsg.AddPartitionsToTxnResponse)
	codes := map[string]int16{}
	for _, rt := range ar.Topics {
		for _, rp := range rt.Partitions {
			codes[rt.Topic] = rp.ErrorCode
		}
	}
	wantACLCode(t, "AddPartitionsToTxn secret", codes["secret"], kerr.TopicAuthorizationFailed)
	wantACLCode(t, "AddPartitionsToTxn orders beside secret", codes["orders"], kerr.OperationNotAttempted)

	// AddOffsetsToTxn: the group needs Read.
	ao := kmsg.NewPtrAddOffsetsToTxnRequest()
	ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = "alice-tx", pid, 0, "g"
	wantACLCode(t, "AddOffsetsToTxn without group Read", coordReq(ao).(*kmsg.AddOffsetsToTxnResponse).ErrorCode, kerr.GroupAuthorizationFailed)
	mustACLs(t, ctx, adm, kadm.NewACLs().Allow("User:alice").Groups("g").Operations(kadm.OpRead))
	if code := coordReq(ao).(*kmsg.AddOffsetsToTxnResponse).ErrorCode; code != 0 {
		t.Errorf("AddOffsetsToTxn with group Read: %v", kerr.ErrorForCode(code))
	}

	// bob may describe alice-tx, not write it; anonymous may do neither.
	bob := b.as(t, "bob")
	anon := b.anonymous(t)
	for _, c := range []struct {
		who  string
		cl   *kgo.Client
		find int16
	}{{"bob", bob, 0}, {"anonymous", anon, errTxnIDAuth}} {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey, fc.CoordinatorKeys, fc.CoordinatorType = "alice-tx", []string{"alice-tx"}, 1
		fr := raw(c.cl, fc).(*kmsg.FindCoordinatorResponse)
		code := fr.ErrorCode
		if len(fr.Coordinators) == 1 {
			code = fr.Coordinators[0].ErrorCode
		}
		if code != c.find || fr.Version >= 4 && len(fr.Coordinators) != 1 {
			t.Errorf("%s FindCoordinator(alice-tx): %+v", c.who, fr)
		}
		ip := kmsg.NewPtrInitProducerIDRequest()
		ip.TransactionalID, ip.TransactionTimeoutMillis = kmsg.StringPtr("alice-tx"), 10000
		wantACLCode(t, c.who+" InitProducerId", raw(c.cl, ip).(*kmsg.InitProducerIDResponse).ErrorCode, kerr.TransactionalIDAuthorizationFailed)
		end := kmsg.NewPtrEndTxnRequest()
		end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = "alice-tx", pid, 0, true
		wantACLCode(t, c.who+" EndTxn", raw(c.cl, end).(*kmsg.EndTxnResponse).ErrorCode, kerr.TransactionalIDAuthorizationFailed)
		ao := kmsg.NewPtrAddOffsetsToTxnRequest()
		ao.TransactionalID, ao.ProducerID, ao.ProducerEpoch, ao.Group = "alice-tx", pid, 0, "g"
		wantACLCode(t, c.who+" AddOffsetsToTxn", raw(c.cl, ao).(*kmsg.AddOffsetsToTxnResponse).ErrorCode, kerr.TransactionalIDAuthorizationFailed)
		add.Topics = add.Topics[:1]
		for _, rt := range raw(c.cl, add).(*kmsg.AddPartitionsToTxnResponse).Topics {
			wantACLCode(t, c.who+" AddPartitionsToTxn", rt.Partitions[0].ErrorCode, kerr.TransactionalIDAuthorizationFailed)
		}
		lt := kmsg.NewPtrListTransactionsRequest()
		lr := raw(c.cl, lt).(*kmsg.ListTransactionsResponse)
		if n := len(lr.TransactionStates); lr.ErrorCode != 0 || (c.find == 0) != (n == 1) {
			t.Errorf("%s ListTransactions: %+v", c.who, lr)
		}
	}
	dt := kmsg.NewPtrDescribeTransactionsRequest()
	dt.TransactionalIDs = []string{"alice-tx"}
	wantACLCode(t, "anonymous DescribeTransactions", raw(anon, dt).(*kmsg.DescribeTransactionsResponse).TransactionStates[0].ErrorCode,
		kerr.TransactionalIDAuthorizationFailed)

	// A transactional produce needs Write on the transactional id.
	pr := kmsg.NewPtrProduceRequest()
	pr.TransactionID, pr.Acks, pr.TimeoutMillis = kmsg.StringPtr("alice-tx"), -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = "orders"
	rp := kmsg.NewProduceRequestTopicPartition()
	rt.Partitions = append(rt.Partitions, rp)
	pr.Topics = append(pr.Topics, rt)
	mustACLs(t, ctx, adm, kadm.NewACLs().Allow("User:bob").Topics("orders").Operations(kadm.OpWrite))
	wantACLCode(t, "bob's produce with alice-tx", raw(bob, pr).(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode,
		kerr.TransactionalIDAuthorizationFailed)

	if err := alice.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatalf("alice's commit: %v", err)
	}
}

// The coordinator fails over with the leadership of its
// __transaction_state partition: the new leader loads the transactional
// id (same producer id, same epoch, its committed state), and a producer
// of that id is served there from the loaded state.
func TestTransactionCoordinatorFailover(t *testing.T) {
	c := &testCluster{t: t, sets: map[string]string{
		"transaction.state.log.num.partitions": "1", "transaction.state.log.replication.factor": "2",
		"transaction.state.log.min.isr": "1",
	}}
	startClusterOf(c, 2)
	for _, s := range c.servers {
		standInMarkers(s)
	}
	seeds := func() (out []string) {
		for _, s := range c.servers {
			out = append(out, s.Addr().String())
		}
		return out
	}
	ctx := testCtx(t)
	c.createTopic("txn", []int32{0, 1}, nil)
	// New clients each time: kgo keeps a coordinator it found until a
	// request to it fails with a coordinator error, and a dead broker
	// fails at the dial (or is unknown once the metadata drops it).
	client := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds()...)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	admin := func() *kadm.Client { return kadm.NewClient(client()) }
	txnOnce := func(n int) {
		t.Helper()
		cl := client(kgo.TransactionalID("tx-f"), kgo.DefaultProduceTopic("txn"))
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(n))}).FirstErr(); err != nil {
			t.Fatalf("transaction %d: produce: %v", n, err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatalf("transaction %d: commit: %v", n, err)
		}
	}
	txnOnce(1)
	before := waitTxnState(t, ctx, admin(), "tx-f", "CompleteCommit")
	c.waitISR(txnStateTopic, 0, 1)
	old := c.partition(txnStateTopic).Leader
	c.kill(old)
	for _, topic := range []string{txnStateTopic, "txn"} {
		waitFor(t, "a new leader of "+topic, 10*time.Second, func() bool {
			l := c.partition(topic).Leader
			return l >= 0 && l != old
		})
	}
	after := waitTxnState(t, ctx, admin(), "tx-f", "CompleteCommit")
	if after.ProducerID != before.ProducerID || after.ProducerEpoch != before.ProducerEpoch || after.Coordinator == old {
		t.Errorf("after failover: %+v, before: %+v", after, before)
	}
	// A producer of the same id at the new coordinator: the loaded id's
	// epoch is bumped at InitProducerId and again at the commit
	// (transaction.version 2); a new id would get a new producer id.
	txnOnce(2)
	d := waitTxnState(t, ctx, admin(), "tx-f", "CompleteCommit")
	if d.ProducerID != before.ProducerID || d.ProducerEpoch != before.ProducerEpoch+2 {
		t.Errorf("after a transaction at the new coordinator: %+v, before the failover: %+v", d, before)
	}
}

// The coordinator's periodic task, at
// transaction.abort.timed.out.transaction.cleanup.interval.ms, aborts a
// transaction open longer than its transaction.timeout.ms and fences its
// producer.
func TestTransactionTimeoutAbort(t *testing.T) {
	ts := startTestServer(t, map[string]string{"transaction.state.log.num.partitions": "1",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms": "100"})
	mk := standInMarkers(ts.Server)
	ctx := testCtx(t)
	adm := ts.admin(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "txn"); err != nil {
		t.Fatal(err)
	}
	cl := ts.client(t, kgo.TransactionalID("tx-t"), kgo.DefaultProduceTopic("txn"), kgo.TransactionTimeout(time.Second))
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	d := waitTxnState(t, ctx, adm, "tx-t", "CompleteAbort")
	if d.ProducerEpoch < 1 {
		t.Errorf("after the timeout: %+v, want the producer fenced", d)
	}
	if got := mk.markers(); len(got) != 1 || got[0].Commit || got[0].TransactionalID != "tx-t" {
		t.Errorf("markers: %+v", got)
	}
	err := cl.EndTransaction(ctx, kgo.TryCommit)
	if !errors.Is(err, kerr.ProducerFenced) && !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Errorf("commit after the timeout abort: %v, want the producer fenced", err)
	}
}
