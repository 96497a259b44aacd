package broker

import (
	"encoding/binary"
	"hash/crc32"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/txn"
)

// breakIdle closes the idle connections of pc to broker id under it,
// leaving them in its pool, as a connection the other side dropped.
func (pc *peerClients) breakIdle(id int32) int {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	p := pc.peers[id]
	if p == nil {
		return 0
	}
	for _, c := range p.idle {
		c.Conn.Close()
	}
	return len(p.idle)
}

// On two brokers, the leader of the data partition verifies each
// transaction's first write with the coordinator (transaction version 2:
// every transaction), and the coordinator sends the leader each
// transaction's markers: each side dials the other once, then reuses the
// connection. A connection broken underneath is dialed again, and the
// transaction goes through. A broker gone from the metadata has its
// connections closed.
func TestTxnPeersReuseConnections(t *testing.T) {
	c, coord, other := startTxnCluster(t)
	c.createTopic("reuse", []int32{other, coord}, nil)
	c.waitISR("reuse", 0, 1)
	var verifications atomic.Int32
	hook := func(to int32, n int) { verifications.Add(1) }
	c.servers[other].txns.verifier.beforeSend.Store(&hook)
	leaderPeers, coordPeers := c.servers[other].txns.peers, c.servers[coord].txns.peers
	leaderDials, coordDials := leaderPeers.dials.Load(), coordPeers.dials.Load()

	ctx := testCtx(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.TransactionalID("tx-reuse"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const n = 10
	// Back to back: each first write races the previous markers, and
	// the leader asks again on CONCURRENT_TRANSACTIONS rather than
	// answering the producer, which franz-go retries only after a
	// metadata refresh (5 s).
	slow := 0
	for range n {
		start := time.Now()
		txnProduce(t, ctx, cl, "reuse", true, 0)
		if time.Since(start) > time.Second {
			slow++
		}
	}
	if slow > 2 {
		t.Errorf("%d of %d back-to-back transactions took more than a second", slow, n)
	}
	if v := verifications.Load(); v < n {
		t.Fatalf("%d verification requests for %d transactions, want one at least per transaction", v, n)
	}
	if d := leaderPeers.dials.Load() - leaderDials; d != 1 {
		t.Errorf("the leader dialed the coordinator %d times for %d verifications, want 1", d, verifications.Load())
	}
	waitStable(t, c.servers[other], "reuse", 0) // the last markers written
	if d := coordPeers.dials.Load() - coordDials; d != 1 {
		t.Errorf("the coordinator dialed the leader %d times for the markers of %d transactions, want 1", d, n)
	}

	if got := leaderPeers.breakIdle(coord); got != 1 {
		t.Fatalf("%d idle connections from the leader to the coordinator, want 1", got)
	}
	if got := coordPeers.breakIdle(other); got != 1 {
		t.Fatalf("%d idle connections from the coordinator to the leader, want 1", got)
	}
	txnProduce(t, ctx, cl, "reuse", true, 0)
	if d := leaderPeers.dials.Load() - leaderDials; d != 2 {
		t.Errorf("the leader dialed the coordinator %d times in all, want 2 (once more after the break)", d)
	}
	if lso := waitStable(t, c.servers[other], "reuse", 0); lso != 2*(n+1) {
		t.Errorf("last stable offset %d after %d committed transactions of one record, want %d", lso, n+1, 2*(n+1))
	}
	if d := coordPeers.dials.Load() - coordDials; d != 2 {
		t.Errorf("the coordinator dialed the leader %d times in all, want 2 (once more after the break)", d)
	}
	got := consumeCommitted(t, ctx, c.seeds(), "reuse", n+1)
	if len(got[0]) != n+1 {
		t.Errorf("read_committed consumer got %d records, want %d", len(got[0]), n+1)
	}

	// A broker leaving the metadata takes its connections along.
	c.kill(coord)
	waitFor(t, "the connections to the gone broker closed", 10*time.Second, func() bool {
		return leaderPeers.idleConns(coord) == 0
	})
}

// transactionalProduce sends a transactional Produce (v11: the leader
// only verifies) of one record of producer pid/epoch to topic-part at
// addr with timeoutMs, and returns the partition's error code.
func transactionalProduce(t *testing.T, addr, txnID, topic string, part int32, pid int64, epoch int16, timeoutMs int32) int16 {
	t.Helper()
	raw := idemBatch(pid, epoch, 0, "bounded").build(t)
	binary.BigEndian.PutUint16(raw[21:], binary.BigEndian.Uint16(raw[21:])|0x10) // transactional
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32c))
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis, req.TransactionID = 11, -1, timeoutMs, &txnID
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = part, raw
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := rawRequest(t, addr, req).(*kmsg.ProduceResponse)
	return resp.Topics[0].Partitions[0].ErrorCode
}

// A Produce waits for its verification no longer than its timeout: with
// the coordinator not answering, it is answered NOT_ENOUGH_REPLICAS
// (retriable) at its timeout, and the verification metrics count it.
func TestTxnVerifyWaitBoundedByProduceTimeout(t *testing.T) {
	c, coord, other := startTxnCluster(t)
	c.createTopic("slow", []int32{other, coord}, nil)
	c.waitISR("slow", 0, 1)
	release := make(chan struct{})
	hook := func(int32, int) { <-release } // the coordinator's answer never comes in time
	c.servers[other].txns.verifier.beforeSend.Store(&hook)
	defer close(release)

	failures := counterValue(t, c.servers[other], "kafka_server_addpartitionstotxnmanager_verificationfailurerate_total")
	addr := c.servers[other].Addr().String()
	for _, timeoutMs := range []int32{300, 700} {
		start := time.Now()
		code := transactionalProduce(t, addr, "tx-slow", "slow", 0, 4242, 0, timeoutMs)
		took := time.Since(start)
		wantCode(t, "verification past the produce timeout", code, kerr.NotEnoughReplicas)
		if limit := time.Duration(timeoutMs)*time.Millisecond + 2*time.Second; took < time.Duration(timeoutMs)*time.Millisecond || took > limit {
			t.Errorf("produce with timeout %d ms answered after %v, want between its timeout and %v", timeoutMs, took, limit)
		}
	}
	if got := counterValue(t, c.servers[other], "kafka_server_addpartitionstotxnmanager_verificationfailurerate_total"); got != failures+2 {
		t.Errorf("verification failures %v, want %v", got, failures+2)
	}
	if n := histogramCount(t, c.servers[other], "kafka_server_addpartitionstotxnmanager_verificationtimems"); n < 2 {
		t.Errorf("verification time observed %d times, want 2", n)
	}
	// The timed-out calls left the queue: only the one in flight remains.
	if q := c.servers[other].txns.verifier.queued(coord); q != 0 {
		t.Errorf("%d verifications still queued after their produces were answered", q)
	}
}

// gaugeValue reads a gauge of s's registry by name.
func gaugeValue(t *testing.T, s *Server, name string) float64 {
	t.Helper()
	return soleMetric(t, s, name).GetGauge().GetValue()
}

// The transaction gauges: open transactions at the coordinator,
// producer ids at the leader, and markers waiting for a partition
// without a leader (UnknownDestinationQueueSize), which go once it has
// one again.
func TestTxnMetrics(t *testing.T) {
	c, coord, other := startTxnCluster(t)
	c.createTopic("m", []int32{other}, nil)
	ctx := testCtx(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds()...), kgo.TransactionalID("tx-m"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const open = "strata_coordinator_transaction_open_transactions"
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "m", Partition: 0, Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if got := gaugeValue(t, c.servers[coord], open); got != 1 {
		t.Errorf("%s %v with a transaction open, want 1", open, got)
	}
	if got := gaugeValue(t, c.servers[other], "kafka_server_replicamanager_produceridcount"); got != 1 {
		t.Errorf("producer id count %v at the leader, want 1", got)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	waitFor(t, open+" back to 0", 10*time.Second, func() bool { return gaugeValue(t, c.servers[coord], open) == 0 })

	// Markers for m-0 while its only replica is gone.
	const unknown = "kafka_coordinator_transaction_transactionmarkerchannelmanager_unknowndestinationqueuesize"
	h := c.servers[coord].txns
	h.mu.Lock()
	epoch := h.led[0].term.epoch
	h.mu.Unlock()
	c.kill(other)
	waitFor(t, "m-0 without a leader", 10*time.Second, func() bool { return c.partition("m").Leader < 0 })
	h.markers.send(txn.Markers{TransactionalID: "tx-none", ProducerID: 777, ProducerEpoch: 0, Commit: false,
		CoordinatorEpoch: epoch, Partitions: []txn.TopicPartition{{Topic: "m", Partition: 0}}})
	waitFor(t, unknown+" at 1", 10*time.Second, func() bool { return gaugeValue(t, c.servers[coord], unknown) == 1 })
	c.start(other)
	waitFor(t, unknown+" back to 0", 20*time.Second, func() bool { return gaugeValue(t, c.servers[coord], unknown) == 0 })
	if got := gaugeValue(t, c.servers[coord], "kafka_coordinator_transaction_transactionmarkerchannelmanager_logappendretryqueuesize"); got != 0 {
		t.Errorf("log append retry queue %v, want 0", got)
	}
}

// When the broker at the other end dropped every kept connection (it
// restarted), a request that fails on one of them dials a new one rather
// than trying the next dead one.
func TestPeerClientsRetryDialsAfterDeadIdle(t *testing.T) {
	ts := startTestServer(t, nil)
	ctx := testCtx(t)
	pc := newPeerClients(ts.Server)
	addr := ts.addr()
	var conns []*peerConn
	for range 3 {
		c, _, err := pc.get(ctx, 0, addr)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for _, c := range conns {
		pc.put(0, c)
	}
	if n := pc.breakIdle(0); n < 2 {
		t.Fatalf("%d idle connections kept, want at least 2", n)
	}
	before := pc.dials.Load()
	resp, err := pc.roundTrip(ctx, 0, addr, "test", kmsg.NewPtrApiVersionsRequest())
	if err != nil {
		t.Fatalf("request after the kept connections died: %v", err)
	}
	if code := resp.(*kmsg.ApiVersionsResponse).ErrorCode; code != 0 {
		t.Fatalf("ApiVersions: %v", kerr.ErrorForCode(code))
	}
	if d := pc.dials.Load() - before; d != 1 {
		t.Fatalf("%d dials for the request, want 1", d)
	}
}
