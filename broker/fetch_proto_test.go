package broker

// Protocol tests: Fetch (long poll, byte limits, KIP-74, KIP-227 sessions,
// out-of-range offsets, topic ids).

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// MinBytes with nothing arriving: the answer comes after MaxWait, empty.
func TestProtoFetchLongPollTimeout(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("poll", 1, nil)

	const wait = 400 * time.Millisecond
	start := time.Now()
	resp := rc.do(fetchReq(int32(wait/time.Millisecond), 1, 1<<20, fetchPart{"poll", 0, 0, 1 << 20}), 12).(*kmsg.FetchResponse)
	took := time.Since(start)
	wantCode(t, "fetch", resp.ErrorCode, nil)
	if took < wait-50*time.Millisecond {
		t.Errorf("empty long poll answered after %v, want about MaxWait %v", took, wait)
	}
	if took > wait+5*time.Second {
		t.Errorf("empty long poll answered after %v, MaxWait was %v", took, wait)
	}
	if p := findFetchPart(resp, "poll", 0); p == nil || len(p.RecordBatches) != 0 || p.HighWatermark != 0 {
		t.Errorf("empty long poll returned %+v", p)
	}
}

// MinBytes with data arriving during the wait: the answer comes at once.
func TestProtoFetchLongPollWakes(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("wake", 1, nil)

	fc := dialRaw(t, ts.addr())
	const wait = 20 * time.Second
	start := time.Now()
	corr := fc.send(fetchReq(int32(wait/time.Millisecond), 1, 1<<20, fetchPart{"wake", 0, 0, 1 << 20}), 12)

	// Produce once the fetch is parked on the partition.
	p := ts.partition("wake", 0)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if p.Waiters() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("fetch never waited on the partition")
		}
		time.Sleep(time.Millisecond) // polling a condition, not synchronising by time
	}
	rc.produceOK("wake", 0, plainBatch(1000, "wake up").build(t))

	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	fc.recv(corr, resp)
	took := time.Since(start)
	if took > wait/2 {
		t.Errorf("long poll answered after %v although data arrived; MaxWait %v", took, wait)
	}
	fp := findFetchPart(resp, "wake", 0)
	if fp == nil {
		t.Fatalf("no partition in the response")
	}
	bs := splitBatches(t, fp.RecordBatches)
	if len(bs) != 1 || fp.HighWatermark != 1 {
		t.Errorf("woken fetch returned %d batches, high watermark %d; want 1 and 1", len(bs), fp.HighWatermark)
	}
}

// TestProtoFetchByteLimits runs once per way of sending local records:
// copied (the default) and with sendfile.
func TestProtoFetchByteLimits(t *testing.T) {
	t.Parallel()
	for _, sendfile := range []string{"false", "true"} {
		t.Run("sendfile="+sendfile, func(t *testing.T) {
			t.Parallel()
			testFetchByteLimits(t, map[string]string{"socket.sendfile.enable": sendfile})
		})
	}
}

func testFetchByteLimits(t *testing.T, sets map[string]string) {
	ts := startTestServer(t, sets)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("limits", 2, nil)
	val := strings.Repeat("v", 1000)
	var batchLen int
	for part := int32(0); part < 2; part++ {
		for i := 0; i < 10; i++ {
			raw := plainBatch(1000, val).build(t)
			batchLen = len(raw)
			rc.produceOK("limits", part, raw)
		}
	}

	// Partition max bytes: whole batches up to the limit.
	limit := int32(batchLen*3 + batchLen/2)
	fp := rc.fetchOne("limits", 0, 0, limit)
	if n := len(splitBatches(t, fp.RecordBatches)); n != 3 {
		t.Errorf("partition max bytes %d (batches of %d): %d batches, want 3", limit, batchLen, n)
	}
	if len(fp.RecordBatches) > int(limit) {
		t.Errorf("returned %d bytes over the partition limit %d", len(fp.RecordBatches), limit)
	}

	// Response MaxBytes caps the total over partitions.
	total := int32(batchLen*4 + 10)
	resp := rc.do(fetchReq(0, 0, total,
		fetchPart{"limits", 0, 0, 1 << 20}, fetchPart{"limits", 1, 0, 1 << 20}), 12).(*kmsg.FetchResponse)
	wantCode(t, "fetch", resp.ErrorCode, nil)
	sum := 0
	for _, rt := range resp.Topics {
		for _, p := range rt.Partitions {
			wantCode(t, "fetch partition", p.ErrorCode, nil)
			sum += len(p.RecordBatches)
		}
	}
	if sum == 0 || sum > int(total) {
		t.Errorf("fetch MaxBytes %d: %d bytes returned", total, sum)
	}

	// Fetching from the middle of the log starts at the requested batch.
	fp = rc.fetchOne("limits", 1, 7, 1<<20)
	bs := splitBatches(t, fp.RecordBatches)
	if len(bs) != 3 || bs[0].FirstOffset != 7 {
		t.Errorf("fetch from offset 7: %d batches starting at %v", len(bs), bs)
	}
}

// KIP-74: the first batch is returned whole even when larger than every
// limit, so the consumer makes progress.
func TestProtoFetchOversizedFirstBatch(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("kip74", 1, nil)
	raw := plainBatch(1000, strings.Repeat("x", 5000)).build(t)
	rc.produceOK("kip74", 0, raw)
	rc.produceOK("kip74", 0, raw)

	resp := rc.do(fetchReq(0, 0, 100, fetchPart{"kip74", 0, 0, 100}), 12).(*kmsg.FetchResponse)
	wantCode(t, "fetch", resp.ErrorCode, nil)
	fp := findFetchPart(resp, "kip74", 0)
	if fp == nil {
		t.Fatalf("no partition in the response")
	}
	bs := splitBatches(t, fp.RecordBatches)
	if len(bs) != 1 || len(fp.RecordBatches) != len(raw) {
		t.Errorf("limits 100: %d whole batches, %d bytes; want the first batch whole (%d bytes)", len(bs), len(fp.RecordBatches), len(raw))
	}
}

func TestProtoFetchOffsetOutOfRange(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("oor", 1, nil)
	rc.produceOK("oor", 0, plainBatch(1000, "a", "b", "c").build(t))

	fp := rc.fetchOne("oor", 0, 100, 1<<20)
	wantCode(t, "fetch at 100 of a 3-record log", fp.ErrorCode, kerr.OffsetOutOfRange)
	fp = rc.fetchOne("oor", 0, -5, 1<<20)
	wantCode(t, "fetch at -5", fp.ErrorCode, kerr.OffsetOutOfRange)
	// At the high watermark: empty, no error.
	fp = rc.fetchOne("oor", 0, 3, 1<<20)
	wantCode(t, "fetch at the high watermark", fp.ErrorCode, nil)
	if len(fp.RecordBatches) != 0 || fp.HighWatermark != 3 {
		t.Errorf("fetch at the high watermark: %d bytes, high watermark %d", len(fp.RecordBatches), fp.HighWatermark)
	}
	// Inside a batch: the batch containing the offset.
	fp = rc.fetchOne("oor", 0, 1, 1<<20)
	if bs := splitBatches(t, fp.RecordBatches); len(bs) != 1 || bs[0].FirstOffset != 0 {
		t.Errorf("fetch at offset 1 inside batch 0-2: %v", bs)
	}
	// Unknown topic and partition.
	fp = rc.fetchOne("oor", 9, 0, 1<<20)
	wantCode(t, "fetch of partition 9", fp.ErrorCode, kerr.UnknownTopicOrPartition)
}

// Fetch v13+ names topics by id.
func TestProtoFetchTopicID(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	id := rc.createTopic("byid", 1, nil)
	rc.produceOK("byid", 0, plainBatch(1000, "a", "b").build(t))

	for _, v := range []int16{13, 16} {
		req := fetchReq(0, 0, 1<<20, fetchPart{"", 0, 0, 1 << 20})
		req.Topics[0].TopicID = id
		resp := rc.do(req, v).(*kmsg.FetchResponse)
		wantCode(t, "fetch by id", resp.ErrorCode, nil)
		if len(resp.Topics) != 1 || resp.Topics[0].TopicID != id || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("v%d: response topics %+v", v, resp.Topics)
		}
		fp := resp.Topics[0].Partitions[0]
		wantCode(t, "fetch by id partition", fp.ErrorCode, nil)
		if bs := splitBatches(t, fp.RecordBatches); len(bs) != 1 || bs[0].NumRecords != 2 {
			t.Errorf("v%d: fetched %v", v, bs)
		}

		req = fetchReq(0, 0, 1<<20, fetchPart{"", 0, 0, 1 << 20})
		req.Topics[0].TopicID = [16]byte{1, 2, 3}
		resp = rc.do(req, v).(*kmsg.FetchResponse)
		code := resp.ErrorCode
		if code == 0 && len(resp.Topics) == 1 && len(resp.Topics[0].Partitions) == 1 {
			code = resp.Topics[0].Partitions[0].ErrorCode
		}
		wantCode(t, "fetch by an unknown id", code, kerr.UnknownTopicID)
	}
}

// KIP-227 incremental fetch sessions.
func TestProtoFetchSessions(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("sess", 2, nil)
	rc.produceOK("sess", 0, plainBatch(1000, "p0").build(t))
	rc.produceOK("sess", 1, plainBatch(1000, "p1").build(t))

	fc := dialRaw(t, ts.addr())
	fetch := func(id, epoch int32, parts ...fetchPart) *kmsg.FetchResponse {
		t.Helper()
		req := fetchReq(0, 0, 1<<20, parts...)
		req.SessionID, req.SessionEpoch = id, epoch
		return fc.do(req, 12).(*kmsg.FetchResponse)
	}
	count := func(resp *kmsg.FetchResponse) int {
		n := 0
		for _, rt := range resp.Topics {
			n += len(rt.Partitions)
		}
		return n
	}

	// Full fetch creating a session.
	resp := fetch(0, 0, fetchPart{"sess", 0, 0, 1 << 20}, fetchPart{"sess", 1, 0, 1 << 20})
	wantCode(t, "full fetch", resp.ErrorCode, nil)
	if resp.SessionID == 0 {
		t.Fatalf("no session created")
	}
	sid := resp.SessionID
	if count(resp) != 2 {
		t.Fatalf("full fetch returned %d partitions, want 2", count(resp))
	}

	// Incremental with new offsets for both: both had data, now nothing is
	// new, so nothing is returned.
	resp = fetch(sid, 1, fetchPart{"sess", 0, 1, 1 << 20}, fetchPart{"sess", 1, 1, 1 << 20})
	wantCode(t, "incremental fetch 1", resp.ErrorCode, nil)
	if resp.SessionID != sid {
		t.Errorf("session id changed from %d to %d", sid, resp.SessionID)
	}
	if n := count(resp); n != 0 {
		t.Errorf("incremental fetch with nothing new returned %d partitions, want 0", n)
	}

	// New data on partition 1 only: only partition 1 comes back, although
	// the request names no partition.
	rc.produceOK("sess", 1, plainBatch(1000, "p1 again").build(t))
	resp = fetch(sid, 2)
	wantCode(t, "incremental fetch 2", resp.ErrorCode, nil)
	if n := count(resp); n != 1 {
		t.Fatalf("incremental fetch returned %d partitions, want only the changed one", n)
	}
	fp := findFetchPart(resp, "sess", 1)
	if fp == nil || len(splitBatches(t, fp.RecordBatches)) != 1 || fp.HighWatermark != 2 {
		t.Fatalf("incremental fetch: partition 1 = %+v", fp)
	}

	// The session remembers partition 0's offset: data there is returned
	// without naming it.
	rc.produceOK("sess", 0, plainBatch(1000, "p0 again").build(t))
	resp = fetch(sid, 3, fetchPart{"sess", 1, 2, 1 << 20})
	if n := count(resp); n != 1 || findFetchPart(resp, "sess", 0) == nil {
		t.Fatalf("incremental fetch returned %d partitions, want partition 0 only", n)
	}

	// A wrong epoch.
	resp = fetch(sid, 7)
	wantCode(t, "wrong session epoch", resp.ErrorCode, kerr.InvalidFetchSessionEpoch)
	// An unknown session.
	resp = fetch(sid+1, 1)
	wantCode(t, "unknown session id", resp.ErrorCode, kerr.FetchSessionIDNotFound)

	// Closing the session (epoch -1) makes the id unknown.
	resp = fetch(sid, -1, fetchPart{"sess", 0, 0, 1 << 20})
	wantCode(t, "sessionless fetch closing the session", resp.ErrorCode, nil)
	if count(resp) != 1 {
		t.Errorf("sessionless fetch returned %d partitions, want 1", count(resp))
	}
	resp = fetch(sid, 4)
	wantCode(t, "closed session", resp.ErrorCode, kerr.FetchSessionIDNotFound)
}
