package broker

// read_committed Fetch and ListOffsets (fetch_txn.go, 02_list_offsets.go)
// and DescribeProducers, over transactional batches and markers appended
// through the partition's log as a transaction coordinator's markers
// would be.

import (
	"encoding/binary"
	"hash/crc32"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/plog"
	"strata/tier"
)

// txnBatchOf is a transactional batch of producer pid (epoch 0) from
// sequence seq, records timestamped ts.
func txnBatchOf(t testing.TB, pid int64, seq int32, ts int64, values ...string) []byte {
	t.Helper()
	bs := idemBatch(pid, 0, seq, values...)
	bs.firstTS = ts
	raw := bs.build(t)
	binary.BigEndian.PutUint16(raw[21:], binary.BigEndian.Uint16(raw[21:])|0x10) // transactional
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32c))
	return raw
}

// appendLeader appends records to partition 0 of topic as its leader and
// moves the high watermark to the log end; it returns the first offset.
func appendLeader(t testing.TB, ts *testServer, topic string, records []byte) int64 {
	t.Helper()
	p := ts.partition(topic, 0)
	info, err := p.Log().Append(records, p.LeaderEpoch())
	if err != nil {
		t.Fatalf("append to %s-0: %v", topic, err)
	}
	p.AdvanceHW(p.Log().LogEndOffset())
	return info.FirstOffset
}

// endTxn appends producer pid's COMMIT or ABORT marker to partition 0 of
// topic and moves the high watermark past it; it returns its offset.
func endTxn(t testing.TB, ts *testServer, topic string, pid int64, typ plog.ControlType) int64 {
	t.Helper()
	p := ts.partition(topic, 0)
	info, err := p.Log().AppendControl(pid, 0, plog.EndTxnMarker{Type: typ}, p.LeaderEpoch(), 0)
	if err != nil {
		t.Fatalf("%s marker of %d in %s-0: %v", typ, pid, topic, err)
	}
	p.AdvanceHW(p.Log().LogEndOffset())
	return info.FirstOffset
}

// fetchIso fetches partition 0 of topic at offset at Fetch v12 with an
// isolation level, without waiting.
func fetchIso(t testing.TB, rc *rawConn, topic string, offset int64, isolation int8) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := fetchReq(0, 0, 1<<20, fetchPart{topic, 0, offset, 1 << 20})
	req.IsolationLevel = isolation
	resp := rc.do(req, 12).(*kmsg.FetchResponse)
	wantCode(t, "fetch", resp.ErrorCode, nil)
	p := findFetchPart(resp, topic, 0)
	if p == nil {
		t.Fatalf("fetch response lacks %s-0", topic)
	}
	wantCode(t, "fetch partition", p.ErrorCode, nil)
	return *p
}

// batchOffsets lists the base offsets of the batches of a fetch answer.
func batchOffsets(t testing.TB, records []byte) []int64 {
	t.Helper()
	var out []int64
	for _, b := range splitBatches(t, records) {
		out = append(out, b.FirstOffset)
	}
	return out
}

// listOffsetIso asks ListOffsets v9 for partition 0 of topic with an
// isolation level and returns the offset, failing on errors.
func listOffsetIso(t testing.TB, rc *rawConn, topic string, ts int64, isolation int8) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID, req.IsolationLevel = -1, isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = 0, ts, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := rc.do(req, 9).(*kmsg.ListOffsetsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("list offsets: %d topics in response", len(resp.Topics))
	}
	sp := resp.Topics[0].Partitions[0]
	wantCode(t, "list offsets", sp.ErrorCode, nil)
	return sp.Offset
}

// waitWaiting waits until a fetch is parked on partition 0 of topic.
func waitWaiting(t testing.TB, ts *testServer, topic string) {
	t.Helper()
	p := ts.partition(topic, 0)
	deadline := time.Now().Add(10 * time.Second)
	for p.Waiters() == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("fetch never waited on %s-0", topic)
		}
		time.Sleep(time.Millisecond) // polling a condition, not synchronising by time
	}
}

// An open transaction keeps read_committed fetches and ListOffsets below
// its first offset while read_uncommitted ones read past it; a
// read_committed long poll parked at the LSO is answered when a commit
// moves the LSO, not when the high watermark alone moves.
func TestFetchReadCommittedOpenTransaction(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("rcopen", 1, nil)

	base := time.Now().UnixMilli()
	rc.produceOK("rcopen", 0, plainBatch(base, "p0").build(t))                // 0
	appendLeader(t, ts, "rcopen", txnBatchOf(t, 100, 0, base+10, "t1", "t2")) // 1-2
	rc.produceOK("rcopen", 0, plainBatch(base+20, "p1").build(t))             // 3

	committed := fetchIso(t, rc, "rcopen", 0, 1)
	if got := batchOffsets(t, committed.RecordBatches); !slices.Equal(got, []int64{0}) {
		t.Errorf("read_committed fetch returned batches at %v, want [0] (below the open transaction)", got)
	}
	if committed.HighWatermark != 4 || committed.LastStableOffset != 1 {
		t.Errorf("read_committed: high watermark %d, LSO %d; want 4 and 1", committed.HighWatermark, committed.LastStableOffset)
	}
	if committed.AbortedTransactions == nil || len(committed.AbortedTransactions) != 0 {
		t.Errorf("read_committed: aborted transactions %v, want an empty list", committed.AbortedTransactions)
	}
	uncommitted := fetchIso(t, rc, "rcopen", 0, 0)
	if got := batchOffsets(t, uncommitted.RecordBatches); !slices.Equal(got, []int64{0, 1, 3}) {
		t.Errorf("read_uncommitted fetch returned batches at %v, want [0 1 3]", got)
	}
	if uncommitted.LastStableOffset != 1 || uncommitted.AbortedTransactions != nil {
		t.Errorf("read_uncommitted: LSO %d, aborted transactions %v; want 1 and null", uncommitted.LastStableOffset, uncommitted.AbortedTransactions)
	}
	if got := fetchIso(t, rc, "rcopen", 1, 1); len(got.RecordBatches) != 0 || got.LastStableOffset != 1 {
		t.Errorf("read_committed fetch at the LSO: %d bytes, LSO %d; want none and 1", len(got.RecordBatches), got.LastStableOffset)
	}

	for _, c := range []struct {
		what       string
		ts         int64
		committed  int64
		uncommited int64
	}{
		{"latest", -1, 1, 4},
		{"max timestamp (in the last, unstable batch)", -3, -1, 3},
		{"timestamp of the first batch", base, 0, 0},
		{"timestamp inside the open transaction", base + 5, -1, 1},
		{"timestamp after the open transaction", base + 15, -1, 3},
		{"earliest", -2, 0, 0},
	} {
		if got := listOffsetIso(t, rc, "rcopen", c.ts, 1); got != c.committed {
			t.Errorf("ListOffsets %s, read_committed: %d, want %d", c.what, got, c.committed)
		}
		if got := listOffsetIso(t, rc, "rcopen", c.ts, 0); got != c.uncommited {
			t.Errorf("ListOffsets %s, read_uncommitted: %d, want %d", c.what, got, c.uncommited)
		}
	}

	lo, err := ts.admin(t).ListCommittedOffsets(testCtx(t), "rcopen")
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := lo.Lookup("rcopen", 0); !ok || o.Err != nil || o.Offset != 1 {
		t.Errorf("kadm ListCommittedOffsets: %+v, want offset 1 (the LSO)", o)
	}

	// A read_committed consumer waits at the LSO.
	fc := dialRaw(t, ts.addr())
	const wait = 20 * time.Second
	req := fetchReq(int32(wait/time.Millisecond), 1, 1<<20, fetchPart{"rcopen", 0, 1, 1 << 20})
	req.IsolationLevel = 1
	start := time.Now()
	corr := fc.send(req, 12)
	waitWaiting(t, ts, "rcopen")
	rc.produceOK("rcopen", 0, plainBatch(base+30, "p2").build(t)) // 4: the high watermark moves, the LSO does not
	commit := endTxn(t, ts, "rcopen", 100, plog.ControlCommit)    // 5
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	fc.recv(corr, resp)
	if took := time.Since(start); took > wait/2 {
		t.Errorf("read_committed long poll answered after %v although the commit moved the LSO", took)
	}
	fp := findFetchPart(resp, "rcopen", 0)
	if fp == nil {
		t.Fatal("no partition in the woken fetch's answer")
	}
	if got := batchOffsets(t, fp.RecordBatches); !slices.Equal(got, []int64{1, 3, 4, commit}) {
		t.Errorf("woken read_committed fetch returned batches at %v, want [1 3 4 %d]", got, commit)
	}
	if fp.LastStableOffset != commit+1 || fp.HighWatermark != commit+1 {
		t.Errorf("after the commit: LSO %d, high watermark %d; want both %d", fp.LastStableOffset, fp.HighWatermark, commit+1)
	}
	if got := listOffsetIso(t, rc, "rcopen", -1, 1); got != commit+1 {
		t.Errorf("ListOffsets latest, read_committed, after the commit: %d, want %d", got, commit+1)
	}
	if got := listOffsetIso(t, rc, "rcopen", base+15, 1); got != 3 {
		t.Errorf("ListOffsets by timestamp, read_committed, after the commit: %d, want 3", got)
	}
}

// An aborted transaction is listed in the read_committed answer, and
// franz-go's read_committed consumer, which filters by that list, skips
// its records while a committed one's are read; read_uncommitted reads
// both.
func TestFetchReadCommittedAbortedTransactions(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("rcabort", 1, nil)

	now := time.Now().UnixMilli()
	rc.produceOK("rcabort", 0, plainBatch(now, "p0").build(t))             // 0
	appendLeader(t, ts, "rcabort", txnBatchOf(t, 100, 0, now, "a1", "a2")) // 1-2
	appendLeader(t, ts, "rcabort", txnBatchOf(t, 200, 0, now, "b1"))       // 3
	rc.produceOK("rcabort", 0, plainBatch(now, "p1").build(t))             // 4
	appendLeader(t, ts, "rcabort", txnBatchOf(t, 100, 2, now, "a3"))       // 5
	abort := endTxn(t, ts, "rcabort", 100, plog.ControlAbort)              // 6
	endTxn(t, ts, "rcabort", 200, plog.ControlCommit)                      // 7
	rc.produceOK("rcabort", 0, plainBatch(now, "p2").build(t))             // 8

	fp := fetchIso(t, rc, "rcabort", 0, 1)
	if fp.LastStableOffset != 9 || len(splitBatches(t, fp.RecordBatches)) != 8 {
		t.Errorf("read_committed after both markers: LSO %d, %d batches; want 9 and 8", fp.LastStableOffset, len(splitBatches(t, fp.RecordBatches)))
	}
	if len(fp.AbortedTransactions) != 1 || fp.AbortedTransactions[0].ProducerID != 100 || fp.AbortedTransactions[0].FirstOffset != 1 {
		t.Errorf("read_committed from 0: aborted transactions %+v, want producer 100 from offset 1", fp.AbortedTransactions)
	}
	if fp := fetchIso(t, rc, "rcabort", 5, 1); len(fp.AbortedTransactions) != 1 {
		t.Errorf("read_committed from 5 (inside the aborted transaction): aborted transactions %+v, want producer 100's", fp.AbortedTransactions)
	}
	if fp := fetchIso(t, rc, "rcabort", abort+1, 1); fp.AbortedTransactions == nil || len(fp.AbortedTransactions) != 0 {
		t.Errorf("read_committed after the abort marker: aborted transactions %+v, want an empty list", fp.AbortedTransactions)
	}
	if fp := fetchIso(t, rc, "rcabort", 0, 0); fp.AbortedTransactions != nil {
		t.Errorf("read_uncommitted: aborted transactions %+v, want null", fp.AbortedTransactions)
	}

	values := func(rs []*kgo.Record) []string {
		var out []string
		for _, r := range rs {
			out = append(out, string(r.Value))
		}
		return out
	}
	got := values(consumeAll(t, ts, "rcabort", 4, kgo.FetchIsolationLevel(kgo.ReadCommitted())))
	if want := []string{"p0", "b1", "p1", "p2"}; !slices.Equal(got, want) {
		t.Errorf("read_committed consumer read %q, want %q", got, want)
	}
	got = values(consumeAll(t, ts, "rcabort", 7, kgo.FetchIsolationLevel(kgo.ReadUncommitted())))
	if want := []string{"p0", "a1", "a2", "b1", "p1", "a3", "p2"}; !slices.Equal(got, want) {
		t.Errorf("read_uncommitted consumer read %q, want %q", got, want)
	}
}

// An incremental fetch session sends a read_committed consumer's
// partition when its LSO moves, and wakes its long poll for it.
func TestFetchReadCommittedSessionLSO(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("rcsess", 1, nil)
	appendLeader(t, ts, "rcsess", txnBatchOf(t, 100, 0, time.Now().UnixMilli(), "t")) // 0, open

	fetch := func(id, epoch int32, waitMs int32, offset int64) *kmsg.FetchResponse {
		req := fetchReq(waitMs, 1, 1<<20, fetchPart{"rcsess", 0, offset, 1 << 20})
		req.IsolationLevel, req.SessionID, req.SessionEpoch = 1, id, epoch
		if epoch > 0 {
			req.Topics = nil // nothing changed in the session
		}
		resp := rc.do(req, 12).(*kmsg.FetchResponse)
		wantCode(t, "fetch", resp.ErrorCode, nil)
		return resp
	}
	first := fetch(0, 0, 0, 0)
	fp := findFetchPart(first, "rcsess", 0)
	if first.SessionID == 0 || fp == nil || fp.LastStableOffset != 0 || fp.HighWatermark != 1 || len(fp.RecordBatches) != 0 {
		t.Fatalf("session start: id %d, partition %+v; want a session, LSO 0, high watermark 1, no records", first.SessionID, fp)
	}
	if again := fetch(first.SessionID, 1, 0, 0); len(again.Topics) != 0 {
		t.Errorf("incremental fetch with nothing changed sent %d topics", len(again.Topics))
	}

	fc := dialRaw(t, ts.addr())
	req := fetchReq(20000, 1, 1<<20)
	req.IsolationLevel, req.SessionID, req.SessionEpoch = 1, first.SessionID, 2
	corr := fc.send(req, 12)
	waitWaiting(t, ts, "rcsess")
	commit := endTxn(t, ts, "rcsess", 100, plog.ControlCommit) // 1
	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	fc.recv(corr, resp)
	wantCode(t, "incremental fetch", resp.ErrorCode, nil)
	fp = findFetchPart(resp, "rcsess", 0)
	if fp == nil {
		t.Fatal("incremental fetch left out the partition whose LSO moved")
	}
	if fp.LastStableOffset != commit+1 || !slices.Equal(batchOffsets(t, fp.RecordBatches), []int64{0, commit}) {
		t.Errorf("incremental fetch after the commit: LSO %d, batches %v; want %d and [0 %d]",
			fp.LastStableOffset, batchOffsets(t, fp.RecordBatches), commit+1, commit)
	}
}

// cutPinnedBelow keeps the batches of a remote read below the LSO, also
// when headers straddle the read's parts.
func TestCutPinnedBelow(t *testing.T) {
	var all []byte
	var ends []int
	for i, n := range []int{2, 1, 3} { // batches at 0-1, 2, 3-5
		vals := make([]string, n)
		for j := range vals {
			vals[j] = "v"
		}
		b := plainBatch(1, vals...).build(t)
		first := []int64{0, 2, 3}[i]
		binary.BigEndian.PutUint64(b, uint64(first))
		all = append(all, b...)
		ends = append(ends, len(all))
	}
	split := func() tier.Pinned { // parts of 10 bytes: every header straddles
		var parts [][]byte
		for i := 0; i < len(all); i += 10 {
			parts = append(parts, all[i:min(i+10, len(all))])
		}
		return tier.Pinned{Parts: parts, Len: int64(len(all))}
	}
	for _, c := range []struct {
		upper    int64
		wantLen  int
		wantLast int64
	}{
		{0, 0, -1}, {1, 0, -1}, {2, ends[0], 1}, {3, ends[1], 2}, {5, ends[1], 2}, {6, ends[2], 5}, {100, ends[2], 5},
	} {
		p := split()
		last := cutPinnedBelow(&p, c.upper)
		if last != c.wantLast || p.Len != int64(c.wantLen) {
			t.Errorf("below %d: last offset %d, %d bytes; want %d and %d", c.upper, last, p.Len, c.wantLast, c.wantLen)
			continue
		}
		if got := p.Bytes(); c.wantLen > 0 && string(got) != string(all[:c.wantLen]) {
			t.Errorf("below %d: the bytes kept are not the first %d", c.upper, c.wantLen)
		}
	}
}

// DescribeProducers lists a partition's producers with their open
// transactions, and refuses what Kafka refuses.
func TestDescribeProducers(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("dprod", 1, nil)
	now := time.Now().UnixMilli()
	rc.produceOK("dprod", 0, idemBatch(50, 3, 0, "i0", "i1").build(t))   // 0-1: idempotent
	open := appendLeader(t, ts, "dprod", txnBatchOf(t, 60, 0, now, "t")) // 2: open
	appendLeader(t, ts, "dprod", txnBatchOf(t, 70, 0, now, "u"))         // 3
	marker := endTxn(t, ts, "dprod", 70, plog.ControlAbort)              // 4

	req := kmsg.NewPtrDescribeProducersRequest()
	for _, c := range []struct {
		topic string
		parts []int32
	}{{"dprod", []int32{0, 1, -1}}, {"nosuchtopic", []int32{0}}} {
		rt := kmsg.NewDescribeProducersRequestTopic()
		rt.Topic, rt.Partitions = c.topic, c.parts
		req.Topics = append(req.Topics, rt)
	}
	kresp, err := handleDescribeProducers(ts.Server, nil, req)
	if err != nil {
		t.Fatal(err)
	}
	resp := kresp.(*kmsg.DescribeProducersResponse)
	if len(resp.Topics) != 2 || len(resp.Topics[0].Partitions) != 3 || len(resp.Topics[1].Partitions) != 1 {
		t.Fatalf("response shape %+v, want the request's topics and partitions", resp.Topics)
	}
	p0 := resp.Topics[0].Partitions[0]
	wantCode(t, "dprod-0", p0.ErrorCode, nil)
	type prod struct {
		id                    int64
		epoch, lastSeq, coord int32
		txnStart              int64
	}
	var got []prod
	for _, ap := range p0.ActiveProducers {
		got = append(got, prod{ap.ProducerID, ap.ProducerEpoch, ap.LastSequence, ap.CoordinatorEpoch, ap.CurrentTxnStartOffset})
		if ap.LastTimestamp <= 0 {
			t.Errorf("producer %d: last timestamp %d", ap.ProducerID, ap.LastTimestamp)
		}
	}
	want := []prod{{50, 3, 1, -1, -1}, {60, 0, 0, -1, open}, {70, 0, 0, 0, -1}}
	if !slices.Equal(got, want) {
		t.Errorf("producers of dprod-0 (marker at %d): %+v, want %+v", marker, got, want)
	}
	wantCode(t, "partition 1 of a 1-partition topic", resp.Topics[0].Partitions[1].ErrorCode, kerr.UnknownTopicOrPartition)
	wantCode(t, "partition -1", resp.Topics[0].Partitions[2].ErrorCode, kerr.UnknownTopicOrPartition)
	wantCode(t, "unknown topic", resp.Topics[1].Partitions[0].ErrorCode, kerr.UnknownTopicOrPartition)

	// With an authorizer, READ on the topic is needed; the anonymous
	// principal has none.
	as := startTestServer(t, map[string]string{
		"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
		"super.users":           "User:admin",
	})
	req = kmsg.NewPtrDescribeProducersRequest()
	rt := kmsg.NewDescribeProducersRequestTopic()
	rt.Topic, rt.Partitions = "dprod", []int32{0, 1}
	req.Topics = append(req.Topics, rt)
	kresp, err = handleDescribeProducers(as.Server, nil, req)
	if err != nil {
		t.Fatal(err)
	}
	resp = kresp.(*kmsg.DescribeProducersResponse)
	for _, sp := range resp.Topics[0].Partitions {
		wantCode(t, "without READ on the topic", sp.ErrorCode, kerr.TopicAuthorizationFailed)
	}
}

// A follower's fetch reads past the last stable offset whatever isolation
// level it names: replicas copy open transactions too.
func TestFetchReplicaNotBoundedByLSO(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2, nil)
	c.createTopic("rcrepl", []int32{0, 1}, nil)
	c.waitISR("rcrepl", 0, 1)
	pm := c.partition("rcrepl")
	leader, follower := pm.Leader, int32(1-pm.Leader)
	lp := c.servers[leader].partition("rcrepl", 0)
	now := time.Now().UnixMilli()
	for i, recs := range [][]byte{plainBatch(now, "p0").build(t), txnBatchOf(t, 100, 0, now, "t"), plainBatch(now, "p1").build(t)} {
		if _, err := lp.Log().Append(recs, lp.LeaderEpoch()); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	waitFor(t, "the follower's copy of the open transaction", 10*time.Second, func() bool {
		return c.leo(follower, "rcrepl") == 3 && lp.HW() == 3
	})
	if got := c.servers[follower].partition("rcrepl", 0).Log().FirstUnstableOffset(); got != 1 {
		t.Errorf("the follower's first unstable offset %d, want 1 (the replicated open transaction)", got)
	}

	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.IsolationLevel, req.MaxBytes, req.SessionEpoch = follower, 1, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "rcrepl"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.FetchOffset, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes, rp.LogStartOffset, rp.LastFetchedEpoch = 0, pm.LeaderEpoch, 1<<20, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := c.rc(leader).do(req, 12).(*kmsg.FetchResponse)
	fp := findFetchPart(resp, "rcrepl", 0)
	if fp == nil {
		t.Fatal("no partition in the replica fetch's answer")
	}
	wantCode(t, "replica fetch", fp.ErrorCode, nil)
	if got := batchOffsets(t, fp.RecordBatches); !slices.Equal(got, []int64{0, 1, 2}) || fp.LastStableOffset != 1 {
		t.Errorf("replica fetch naming read_committed: batches %v, LSO %d; want [0 1 2] and 1", got, fp.LastStableOffset)
	}
	if fp.AbortedTransactions != nil {
		t.Errorf("replica fetch: aborted transactions %v, want null (replicas keep aborted records)", fp.AbortedTransactions)
	}
	if got := fetchIso(t, c.rc(leader), "rcrepl", 0, 1); !slices.Equal(batchOffsets(t, got.RecordBatches), []int64{0}) {
		t.Errorf("consumer read_committed fetch of the same partition: batches %v, want [0]", batchOffsets(t, got.RecordBatches))
	}
}

// read_committed reads of tiered data: batches read from the bucket, the
// LSO and an (empty) aborted-transactions list; franz-go's read_committed
// consumer reads every record from offset 0.
func TestFetchReadCommittedTiered(t *testing.T) {
	t.Parallel()
	const topic, n = "rctiered", 300
	ts, p, _ := tieredBroker(t, tier.NewMemStore(), topic, 1, n)
	if p.Log().LogStartOffset() == 0 {
		t.Fatal("nothing was moved out of the local log")
	}
	rc := dialRaw(t, ts.addr())
	fp := fetchIso(t, rc, topic, 0, 1)
	if got := batchOffsets(t, fp.RecordBatches); len(got) == 0 || got[0] != 0 {
		t.Errorf("read_committed fetch at 0 (remote): batches at %v, want from 0", got)
	}
	if fp.LastStableOffset != n || fp.HighWatermark != n {
		t.Errorf("read_committed fetch at 0 (remote): LSO %d, high watermark %d; want both %d", fp.LastStableOffset, fp.HighWatermark, n)
	}
	if fp.AbortedTransactions == nil || len(fp.AbortedTransactions) != 0 {
		t.Errorf("read_committed fetch at 0 (remote): aborted transactions %v, want an empty list", fp.AbortedTransactions)
	}
	recs := consumeAll(t, ts, topic, n, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	for i, r := range recs {
		if r.Offset != int64(i) {
			t.Fatalf("read_committed consumer: record %d at offset %d", i, r.Offset)
		}
	}
}

// A read_committed answer cut by the partition's max bytes lists only the
// aborted transactions that overlap what it returns: the offset index
// bounds the search just past the slice (Kafka's fetchUpperBoundOffset),
// not at the LSO.
func TestFetchReadCommittedAbortedBound(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("rcbound", 1, map[string]string{"index.interval.bytes": "1"})
	now := time.Now().UnixMilli()
	for _, v := range []string{"p0", "p1", "p2"} { // 0, 1, 2
		rc.produceOK("rcbound", 0, plainBatch(now, v).build(t))
	}
	appendLeader(t, ts, "rcbound", txnBatchOf(t, 100, 0, now, "a")) // 3
	endTxn(t, ts, "rcbound", 100, plog.ControlAbort)                // 4

	req := fetchReq(0, 0, 1<<20, fetchPart{"rcbound", 0, 0, 1}) // one batch (KIP-74)
	req.IsolationLevel = 1
	fp := findFetchPart(rc.do(req, 12).(*kmsg.FetchResponse), "rcbound", 0)
	if fp == nil {
		t.Fatal("no partition in the answer")
	}
	if got := batchOffsets(t, fp.RecordBatches); !slices.Equal(got, []int64{0}) || fp.LastStableOffset != 5 {
		t.Fatalf("fetch of one batch: batches %v, LSO %d; want [0] and 5", got, fp.LastStableOffset)
	}
	if fp.AbortedTransactions == nil || len(fp.AbortedTransactions) != 0 {
		t.Errorf("fetch of offset 0 only: aborted transactions %+v, want none (the aborted one starts at 3)", fp.AbortedTransactions)
	}
	if fp := fetchIso(t, rc, "rcbound", 0, 1); len(fp.AbortedTransactions) != 1 || fp.AbortedTransactions[0].FirstOffset != 3 {
		t.Errorf("fetch of every batch: aborted transactions %+v, want producer 100's from 3", fp.AbortedTransactions)
	}
}

// read_committed over tiered data holding an aborted transaction whose
// records are in the bucket and whose ABORT marker is local: the remote
// fetch lists it, and franz-go's read_committed consumer, reading from 0
// across the remote and local logs, skips every record of it.
func TestFetchReadCommittedTieredAborted(t *testing.T) {
	t.Parallel()
	const topic, pid = "rctieredabort", 1 << 41
	ts, p, _ := tieredBroker(t, tier.NewMemStore(), topic, 1, 300)
	ctx := testCtx(t)
	cl := ts.client(t, kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	plain := 300
	produce := func(n int) {
		t.Helper()
		for i := range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: tierValue(plain + i)}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
		plain += n
	}
	l := p.Log()
	first := int64(-1)
	for i := range 4 { // the transaction spans several segments
		off := appendLeader(t, ts, topic, txnRecords(pid, int32(3*i), 3))
		if first < 0 {
			first = off
		}
		produce(60)
	}
	marker := endTxn(t, ts, topic, pid, plog.ControlAbort)
	waitFor(t, "the transaction's first records leave the local log", 60*time.Second, func() bool {
		return l.LogStartOffset() > first
	})
	if marker < l.LogStartOffset() {
		t.Fatalf("the marker at %d left the local log (from %d) too: the test wants it local", marker, l.LogStartOffset())
	}

	rc := dialRaw(t, ts.addr())
	fp := fetchIso(t, rc, topic, first, 1)
	if got := batchOffsets(t, fp.RecordBatches); len(got) == 0 || got[0] != first {
		t.Fatalf("read_committed fetch at %d (remote): batches at %v", first, got)
	}
	if len(fp.AbortedTransactions) != 1 || fp.AbortedTransactions[0].ProducerID != pid || fp.AbortedTransactions[0].FirstOffset != first {
		t.Errorf("read_committed fetch at %d (remote records, local marker): aborted transactions %+v, want producer %d's from %d",
			first, fp.AbortedTransactions, int64(pid), first)
	}

	isTxn := func(r *kgo.Record) bool { return r.ProducerID == pid }
	recs := consumeAll(t, ts, topic, plain, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	for _, r := range recs {
		if isTxn(r) {
			t.Fatalf("read_committed consumer read a record of the aborted transaction at offset %d", r.Offset)
		}
	}
	n := 0
	for _, r := range consumeAll(t, ts, topic, plain+12) {
		if isTxn(r) {
			n++
		}
	}
	if n != 12 {
		t.Errorf("read_uncommitted consumer read %d records of the aborted transaction, want 12", n)
	}
}
