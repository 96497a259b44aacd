package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// v3Versions caps a client at the transactional versions before KIP-890
// part 2 (AddPartitionsToTxn v3, EndTxn v4, Produce v11, TxnOffsetCommit
// v4): franz-go then adds partitions itself and no epoch is bumped.
func v3Versions() kgo.Opt {
	v := kversion.Stable()
	v.SetMaxKeyVersion(24, 3)
	v.SetMaxKeyVersion(26, 4)
	v.SetMaxKeyVersion(0, 11)
	v.SetMaxKeyVersion(28, 4)
	return kgo.MaxVersions(v)
}

// keyCounter counts the requests a client writes, by API key.
type keyCounter struct{ n [100]atomic.Int32 }

func (k *keyCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err == nil && key >= 0 && int(key) < len(k.n) {
		k.n[key].Add(1)
	}
}

// rawRequest sends req to addr on a connection of its own.
func rawRequest(t *testing.T, addr string, req kmsg.Request) kmsg.Response {
	t.Helper()
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	resp, err := roundTrip(conn, "kip890-test", req)
	if err != nil {
		t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	return resp
}

// lateWrite sends a transactional Produce of one record of producer
// pid/epoch to topic-part at addr, at version v, and returns the
// partition's error code.
func lateWrite(t *testing.T, addr string, v int16, txnID, topic string, part int32, pid int64, epoch int16) int16 {
	t.Helper()
	raw := idemBatch(pid, epoch, 0, "late").build(t)
	binary.BigEndian.PutUint16(raw[21:], binary.BigEndian.Uint16(raw[21:])|0x10) // transactional
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32c))
	req := kmsg.NewPtrProduceRequest()
	req.Version, req.Acks, req.TimeoutMillis, req.TransactionID = v, -1, 5000, &txnID
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = part, raw
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := rawRequest(t, addr, req).(*kmsg.ProduceResponse)
	return resp.Topics[0].Partitions[0].ErrorCode
}

// clientProducer is the producer id and epoch cl uses now.
func clientProducer(t *testing.T, ctx context.Context, cl *kgo.Client) (int64, int16) {
	t.Helper()
	id, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return id, epoch
}

func TestKIP890ApiVersionsFeature(t *testing.T) {
	for _, tc := range []struct {
		sets      map[string]string
		finalized int16 // -1: none
	}{
		{nil, 2},
		{map[string]string{"transaction.version": "1"}, 1},
		{map[string]string{"transaction.version": "0"}, -1},
	} {
		ts := startTestServer(t, tc.sets)
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version, req.ClientSoftwareName, req.ClientSoftwareVersion = 3, "test", "1"
		resp := rawRequest(t, ts.addr(), req).(*kmsg.ApiVersionsResponse)
		if len(resp.SupportedFeatures) != 1 || resp.SupportedFeatures[0].Name != "transaction.version" ||
			resp.SupportedFeatures[0].MinVersion != 0 || resp.SupportedFeatures[0].MaxVersion != 2 {
			t.Errorf("%v: supported features %+v, want transaction.version 0-2", tc.sets, resp.SupportedFeatures)
		}
		switch {
		case tc.finalized < 0 && len(resp.FinalizedFeatures) != 0:
			t.Errorf("%v: finalized features %+v, want none", tc.sets, resp.FinalizedFeatures)
		case tc.finalized >= 0 && (len(resp.FinalizedFeatures) != 1 || resp.FinalizedFeatures[0].MaxVersionLevel != tc.finalized ||
			resp.FinalizedFeatures[0].MinVersionLevel != tc.finalized || resp.FinalizedFeaturesEpoch < 0):
			t.Errorf("%v: finalized features %+v (epoch %d), want transaction.version %d", tc.sets, resp.FinalizedFeatures,
				resp.FinalizedFeaturesEpoch, tc.finalized)
		}
		var endTxn, addParts int16 = -1, -1
		for _, k := range resp.ApiKeys {
			switch k.ApiKey {
			case 26:
				endTxn = k.MaxVersion
			case 24:
				addParts = k.MaxVersion
			}
		}
		if endTxn != 5 || addParts != 5 {
			t.Errorf("EndTxn max v%d, AddPartitionsToTxn max v%d; want 5 and 5", endTxn, addParts)
		}
	}
}

// With transaction.version 2, franz-go sends no AddPartitionsToTxn (the
// leader adds the partitions) and every end bumps the epoch; a client
// capped at the versions before KIP-890 part 2 adds partitions itself
// and keeps its epoch. Both commit and abort.
func TestKIP890TV2AndV3Clients(t *testing.T) {
	ts := startTestServer(t, map[string]string{"transaction.state.log.num.partitions": "1"})
	ctx := testCtx(t)
	adm := ts.admin(t)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "tv"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		id   string
		opts []kgo.Opt
		tv2  bool
	}{
		{"tx-tv2", nil, true},
		{"tx-v3", []kgo.Opt{v3Versions()}, false},
	} {
		var kc keyCounter
		opts := append([]kgo.Opt{kgo.TransactionalID(tc.id), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.WithHooks(&kc)}, tc.opts...)
		cl := ts.client(t, opts...)
		txnProduce(t, ctx, cl, "tv", true, 0, 1)
		waitTxnState(t, ctx, adm, tc.id, "CompleteCommit")
		pid, e1 := clientProducer(t, ctx, cl)
		txnProduce(t, ctx, cl, "tv", false, 1)
		d := waitTxnState(t, ctx, adm, tc.id, "CompleteAbort")
		pid2, e2 := clientProducer(t, ctx, cl)
		txnProduce(t, ctx, cl, "tv", true, 0)
		waitTxnState(t, ctx, adm, tc.id, "CompleteCommit")
		_, e3 := clientProducer(t, ctx, cl)
		if pid2 != pid || d.ProducerID != pid || d.ProducerEpoch != e2 {
			t.Errorf("%s: producer %d/%d after the abort, coordinator has %d/%d", tc.id, pid2, e2, d.ProducerID, d.ProducerEpoch)
		}
		adds := kc.n[24].Load()
		if tc.tv2 {
			if e2 != e1+1 || e3 != e2+1 {
				t.Errorf("%s: epochs %d, %d, %d after three ends, want one more each time", tc.id, e1, e2, e3)
			}
			if adds != 0 {
				t.Errorf("%s: %d AddPartitionsToTxn sent, want none with transaction version 2", tc.id, adds)
			}
		} else {
			if e2 != e1 || e3 != e1 {
				t.Errorf("%s: epochs %d, %d, %d, want no bump before transaction version 2", tc.id, e1, e2, e3)
			}
			if adds == 0 {
				t.Errorf("%s: no AddPartitionsToTxn sent by a client capped at v3", tc.id)
			}
		}
		// Committed: p0 two records, p1 one (its second was aborted).
		for part, want := range map[int32]int{0: 2, 1: 1} {
			if got := committedCount(t, ctx, ts.addr(), "tv", part, ts.partition("tv", part).Log().LogEndOffset()); got < want {
				t.Errorf("%s: tv-%d has %d committed records, want at least %d", tc.id, part, got, want)
			}
		}
	}
}

// committedCount reads topic-part read_committed up to end and counts
// the records.
func committedCount(t *testing.T, ctx context.Context, addr, topic string, part int32, end int64) int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {part: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	n := 0
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		fctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cl.PollFetches(fctx)
		cancel()
		last := int64(-1)
		fs.EachRecord(func(r *kgo.Record) { n++; last = r.Offset })
		if last >= end-2 || (last < 0 && n > 0) {
			return n
		}
	}
	return n
}

// A write of a transaction that has ended (a late retry, a zombie) is
// refused by the partition leader after asking the coordinator, in the
// coordinator's own partitions and, on two brokers, in another broker's;
// nothing is appended. With transaction version 2 the old epoch is
// fenced; before it, the partition is not in the transaction.
func TestKIP890LateWriteRefused(t *testing.T) {
	check := func(t *testing.T, addr string, leaderLEO func() int64, adm *kadm.Client, cl, v3 *kgo.Client, topic string) {
		ctx := testCtx(t)
		txnProduce(t, ctx, cl, topic, true, 0)
		waitTxnState(t, ctx, adm, "tx-late", "CompleteCommit")
		pid, epoch := clientProducer(t, ctx, cl)
		before := leaderLEO()
		// The epoch of the committed transaction, one behind the bump.
		if code := lateWrite(t, addr, 12, "tx-late", topic, 0, pid, epoch-1); code != kerr.InvalidProducerEpoch.Code {
			t.Errorf("late write at the old epoch: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(code))
		}
		// Not in a transaction at all: the current epoch, verify only (v11).
		if code := lateWrite(t, addr, 11, "tx-late", topic, 0, pid, epoch); code != kerr.TransactionAbortable.Code {
			t.Errorf("write outside a transaction (v11): %v, want TRANSACTION_ABORTABLE", kerr.ErrorForCode(code))
		}
		if got := leaderLEO(); got != before {
			t.Errorf("log end offset %d after the refused writes, want %d", got, before)
		}

		txnProduce(t, ctx, v3, topic, true, 0)
		waitTxnState(t, ctx, adm, "tx-late-v3", "CompleteCommit")
		pid, epoch = clientProducer(t, ctx, v3)
		before = leaderLEO()
		for v, want := range map[int16]int16{11: kerr.TransactionAbortable.Code, 9: kerr.InvalidTxnState.Code} {
			if code := lateWrite(t, addr, v, "tx-late-v3", topic, 0, pid, epoch); code != want {
				t.Errorf("late write after a v3 commit (Produce v%d): %v, want %v", v, kerr.ErrorForCode(code), kerr.ErrorForCode(want))
			}
		}
		if got := leaderLEO(); got != before {
			t.Errorf("log end offset %d after the refused v3 writes, want %d", got, before)
		}
		// The producers go on.
		txnProduce(t, ctx, cl, topic, false, 0)
		txnProduce(t, ctx, v3, topic, true, 0)
	}
	clients := func(t *testing.T, seeds ...string) (cl, v3 *kgo.Client) {
		var err error
		opts := []kgo.Opt{kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner())}
		if cl, err = kgo.NewClient(append(opts, kgo.TransactionalID("tx-late"))...); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		if v3, err = kgo.NewClient(append(opts, kgo.TransactionalID("tx-late-v3"), v3Versions())...); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(v3.Close)
		return cl, v3
	}
	t.Run("one broker", func(t *testing.T) {
		ts := startTestServer(t, map[string]string{"transaction.state.log.num.partitions": "1"})
		adm := ts.admin(t)
		if _, err := adm.CreateTopic(testCtx(t), 1, 1, nil, "late"); err != nil {
			t.Fatal(err)
		}
		cl, v3 := clients(t, ts.addr())
		check(t, ts.addr(), func() int64 { return ts.partition("late", 0).Log().LogEndOffset() }, adm, cl, v3, "late")
	})
	t.Run("two brokers", func(t *testing.T) {
		c, coord, other := startTxnCluster(t)
		c.createTopic("late", []int32{other, coord}, nil)
		c.waitISR("late", 0, 1)
		cl, v3 := clients(t, c.seeds()...)
		leader := c.servers[other]
		check(t, leader.Addr().String(), func() int64 { return leader.partition("late", 0).Log().LogEndOffset() },
			kadm.NewClient(cl), cl, v3, "late")
	})
}

// A producer fenced by a newer one with its transactional id cannot end
// its transaction, with transaction version 2 too; the newer one can.
func TestKIP890FencingTV2(t *testing.T) {
	ts := startTestServer(t, map[string]string{"transaction.state.log.num.partitions": "1"})
	ctx := testCtx(t)
	adm := ts.admin(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "fence"); err != nil {
		t.Fatal(err)
	}
	old := ts.client(t, kgo.TransactionalID("tx-fence"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := old.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := old.ProduceSync(ctx, &kgo.Record{Topic: "fence", Value: []byte("old")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	oldPID, oldEpoch := clientProducer(t, ctx, old)
	newer := ts.client(t, kgo.TransactionalID("tx-fence"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	txnProduce(t, ctx, newer, "fence", true, 0)
	if err := old.EndTransaction(ctx, kgo.TryCommit); err == nil {
		t.Fatal("the fenced producer committed its transaction")
	}
	if code := lateWrite(t, ts.addr(), 12, "tx-fence", "fence", 0, oldPID, oldEpoch); code != kerr.InvalidProducerEpoch.Code {
		t.Errorf("fenced producer's write: %v, want INVALID_PRODUCER_EPOCH", kerr.ErrorForCode(code))
	}
	txnProduce(t, ctx, newer, "fence", true, 0)
	waitTxnState(t, ctx, adm, "tx-fence", "CompleteCommit")
}

// TxnOffsetCommit v5 (transaction version 2, no AddOffsetsToTxn) adds the
// group's __consumer_offsets partition to the transaction; v4 and v3
// without AddOffsetsToTxn are refused as Kafka refuses them.
func TestKIP890TxnOffsetCommit(t *testing.T) {
	ts := startTestServer(t, map[string]string{"transaction.state.log.num.partitions": "1"})
	ctx := testCtx(t)
	adm := ts.admin(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "in"); err != nil {
		t.Fatal(err)
	}
	if _, err := adm.FetchOffsets(ctx, "g890"); err != nil { // loads the group's coordinator
		t.Fatal(err)
	}
	commit := func(id string, v int16) int16 {
		cl := ts.client(t, kgo.TransactionalID(id))
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "in", Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		pid, epoch := clientProducer(t, ctx, cl)
		r := kmsg.NewPtrTxnOffsetCommitRequest()
		r.Version, r.TransactionalID, r.Group, r.ProducerID, r.ProducerEpoch, r.Generation = v, id, "g890", pid, epoch, -1
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = "in"
		rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
		rp.Offset = 1
		rt.Partitions = append(rt.Partitions, rp)
		r.Topics = append(r.Topics, rt)
		resp := rawRequest(t, ts.addr(), r).(*kmsg.TxnOffsetCommitResponse)
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if code := commit("tx-o5", 5); code != 0 {
		t.Fatalf("TxnOffsetCommit v5: %v", kerr.ErrorForCode(code))
	}
	ds, err := adm.DescribeTransactions(ctx, "tx-o5")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ds["tx-o5"].Topics["__consumer_offsets"]; !ok {
		t.Errorf("transaction's partitions %v: no __consumer_offsets partition after TxnOffsetCommit v5", ds["tx-o5"].Topics)
	}
	if code := commit("tx-o4", 4); code != kerr.TransactionAbortable.Code {
		t.Errorf("TxnOffsetCommit v4 without AddOffsetsToTxn: %v, want TRANSACTION_ABORTABLE", kerr.ErrorForCode(code))
	}
	if code := commit("tx-o3", 3); code != kerr.InvalidTxnState.Code {
		t.Errorf("TxnOffsetCommit v3 without AddOffsetsToTxn: %v, want INVALID_TXN_STATE", kerr.ErrorForCode(code))
	}
}

// AddPartitionsToTxn v4+ is the brokers' form: a client without
// ClusterAction is refused, as Kafka refuses it.
func TestKIP890AddPartitionsV4NeedsClusterAction(t *testing.T) {
	b := startACLBroker(t, nil)
	alice := &clientConn{env: &envelopeOrigin{principal: "User:alice", host: "127.0.0.1"}}
	for _, v := range []int16{4, 5} {
		r := kmsg.NewPtrAddPartitionsToTxnRequest()
		r.Version = v
		tr := kmsg.NewAddPartitionsToTxnRequestTransaction()
		tr.TransactionalID, tr.ProducerID, tr.VerifyOnly = "tx", 1, true
		r.Transactions = append(r.Transactions, tr)
		resp, err := handleAddPartitionsToTxn(b.Server, alice, r)
		if err != nil {
			t.Fatal(err)
		}
		if code := resp.(*kmsg.AddPartitionsToTxnResponse).ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
			t.Errorf("AddPartitionsToTxn v%d from a client: %v, want CLUSTER_AUTHORIZATION_FAILED", v, kerr.ErrorForCode(code))
		}
	}
}

// The verifications bound for one coordinator broker go in one request
// while another is in flight: 1 + the rest.
func TestKIP890VerificationsBatched(t *testing.T) {
	c, coord, other := startTxnCluster(t)
	c.createTopic("batch", []int32{other, coord}, nil)
	c.waitISR("batch", 0, 1)
	const n = 12
	vb := c.servers[other].txns.verifier
	var mu sync.Mutex
	var sizes []int
	hook := func(to int32, size int) {
		mu.Lock()
		first := len(sizes) == 0
		sizes = append(sizes, size)
		mu.Unlock()
		if first { // hold the first request until the others are queued
			// (a timeout shows in the sizes asserted below)
			for deadline := time.Now().Add(10 * time.Second); vb.queued(to) < n-1 && time.Now().Before(deadline); {
				time.Sleep(5 * time.Millisecond)
			}
		}
	}
	vb.beforeSend.Store(&hook)
	addr := c.servers[other].Addr().String()
	codes := make([]int16, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			codes[i] = lateWrite(t, addr, 11, fmt.Sprintf("tx-batch-%d", i), "batch", 0, int64(9000+i), 0)
		})
	}
	wg.Wait()
	for i, code := range codes {
		if code != kerr.InvalidProducerIDMapping.Code {
			t.Errorf("write %d of an unknown transactional id: %v, want INVALID_PRODUCER_ID_MAPPING", i, kerr.ErrorForCode(code))
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(sizes) != 2 || sizes[0] != 1 || sizes[1] != n-1 {
		t.Errorf("requests of %v transactions, want [1 %d]", sizes, n-1)
	}
}
