package e2e

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/internal/testenv"
)

// fdLimit is the broker's RLIMIT_NOFILE in these tests (ulimit -n).
const fdLimit = 256

// createOn sends CreateTopics for one topic on rc and returns
// its answer.
func createOn(rc *rawConn, topic string, parts int32) kmsg.CreateTopicsResponseTopic {
	rc.t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.SetVersion(5)
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, parts, 1
	req.Topics = append(req.Topics, rt)
	return rc.request(req).(*kmsg.CreateTopicsResponse).Topics[0]
}

// logDirOnline asks the broker, on rc, whether its log directory is
// online (DescribeLogDirs: no error on the directory).
func logDirOnline(rc *rawConn) (bool, string) {
	rc.t.Helper()
	req := kmsg.NewPtrDescribeLogDirsRequest()
	req.SetVersion(1)
	resp := rc.request(req).(*kmsg.DescribeLogDirsResponse)
	if len(resp.Dirs) != 1 {
		rc.t.Fatalf("DescribeLogDirs: %d directories", len(resp.Dirs))
	}
	d := resp.Dirs[0]
	if d.ErrorCode == 0 {
		return true, d.Dir
	}
	return false, d.Dir + ": " + kerr.ErrorForCode(d.ErrorCode).Error()
}

// holdIdle dials n idle connections to addr (fewer if dials fail) and
// returns them; they close when the test ends or on close.
func holdIdle(t *testing.T, addr string, n int) (conns []net.Conn, close func()) {
	for range n {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			break
		}
		conns = append(conns, c)
	}
	closeAll := func() {
		for _, c := range conns {
			c.Close()
		}
	}
	t.Cleanup(closeAll)
	return conns, closeAll
}

// produceAcked produces n records to topic with acks=all and fails the
// test unless all are acknowledged.
func produceAcked(t *testing.T, addr, topic string, n int) {
	t.Helper()
	cl := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(20))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rs []*kgo.Record
	for i := range n {
		rs = append(rs, &kgo.Record{Key: []byte("k" + strconv.Itoa(i)), Value: []byte("v" + strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatalf("produce to %s: %v", topic, err)
	}
}

// TestDescriptorBudget (issue 25): under ulimit -n 256 with nothing
// configured, the broker derives max.connections from the limit and
// refuses a CreateTopics whose partitions would pass its descriptor
// budget with INVALID_PARTITIONS; many idle connections are refused past
// max.connections instead of exhausting descriptors. The log directory
// stays online, acknowledged data reads back, and once the connections
// close the broker serves new clients again.
func TestDescriptorBudget(t *testing.T) {
	b := testenv.StartBroker(t, testenv.BrokerOptions{NoFile: fdLimit})
	addr := b.Addr()
	createTopic(t, addr, "acked", 1, nil)
	produceAcked(t, addr, "acked", 100)
	admin := dialRaw(t, addr)

	got := createOn(admin, "wide", 200)
	if got.ErrorCode != kerr.InvalidPartitions.Code || got.ErrorMessage == nil || !strings.Contains(*got.ErrorMessage, "ulimit") {
		msg := ""
		if got.ErrorMessage != nil {
			msg = *got.ErrorMessage
		}
		t.Fatalf("200 partitions under ulimit -n %d: %v %q, want INVALID_PARTITIONS naming the limit", fdLimit, kerr.ErrorForCode(got.ErrorCode), msg)
	}
	if got := createOn(admin, "narrow", 8); got.ErrorCode != 0 {
		t.Fatalf("8 partitions under ulimit -n %d: %v", fdLimit, kerr.ErrorForCode(got.ErrorCode))
	}

	// 400 idle connections: the broker keeps max.connections (64 by
	// default here) and closes the rest; it never runs out.
	conns, closeIdle := holdIdle(t, addr, 400)
	t.Logf("%d idle connections dialed", len(conns))
	time.Sleep(time.Second)
	if online, what := logDirOnline(admin); !online {
		t.Fatalf("log directory offline with idle connections: %s", what)
	}
	if strings.Contains(b.Logs(), "no file descriptor left") {
		t.Errorf("the broker ran out of descriptors under its default max.connections:\n%s", b.Logs())
	}
	closeIdle()

	produceAcked(t, addr, "narrow", 50)
	_, end := offsets(t, addr, "acked")
	if recs := consumeAll(t, addr, "acked", end); len(recs) != 100 {
		t.Fatalf("read back %d acknowledged records of 100", len(recs))
	}
	if online, what := logDirOnline(dialRaw(t, addr)); !online {
		t.Fatalf("log directory offline: %s", what)
	}
}

// TestDescriptorExhaustion (issue 25): with max.connections set far past
// what ulimit -n 256 allows, idle connections exhaust the broker's
// descriptors. Accepts back off and are logged once, not per attempt; a
// CreateTopics on a connection opened before is answered with a
// retriable error for the partitions it could not open, and the log
// directory stays online (it used to go offline until a restart). Once
// the connections close, the broker accepts again, opens the new topic's
// partitions, serves them, and acknowledged data reads back.
func TestDescriptorExhaustion(t *testing.T) {
	b := testenv.StartBroker(t, testenv.BrokerOptions{NoFile: fdLimit, Sets: []string{"max.connections=100000",
		"replica.high.watermark.checkpoint.interval.ms=200"}})
	addr := b.Addr()
	createTopic(t, addr, "acked", 1, nil)
	produceAcked(t, addr, "acked", 100)
	admin := dialRaw(t, addr)

	conns, closeIdle := holdIdle(t, addr, 400)
	t.Logf("%d idle connections dialed", len(conns))
	if !holdsSoon(10*time.Second, func() bool { return strings.Contains(b.Logs(), "too many open files") }) {
		t.Fatalf("the broker did not run out of descriptors with %d idle connections:\n%s", len(conns), b.Logs())
	}
	got := createOn(admin, "late", 10)
	t.Logf("CreateTopics while out of descriptors: %v", kerr.ErrorForCode(got.ErrorCode))
	if got.ErrorMessage != nil {
		t.Logf("message: %s", *got.ErrorMessage)
	}
	time.Sleep(time.Second) // high-watermark checkpoints fail meanwhile
	if online, what := logDirOnline(admin); !online {
		t.Fatalf("log directory offline after descriptor exhaustion: %s", what)
	}
	if got.ErrorCode != 0 && got.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("CreateTopics while out of descriptors: %v, want none or KAFKA_STORAGE_ERROR", kerr.ErrorForCode(got.ErrorCode))
	}
	if n := strings.Count(b.Logs(), "accept4: too many open files"); n > 2 {
		t.Errorf("%d failed accepts logged, want one", n)
	}
	closeIdle()

	// A client retries a retriable error; the topic, or what of it was
	// created, is there once descriptors are free.
	if got.ErrorCode != 0 {
		if got := createOn(dialRaw(t, addr), "late", 10); got.ErrorCode != 0 && got.ErrorCode != kerr.TopicAlreadyExists.Code {
			t.Fatalf("CreateTopics once descriptors are free: %v", kerr.ErrorForCode(got.ErrorCode))
		}
	}
	produceAcked(t, addr, "late", 50) // its partitions open once descriptors are free
	produceAcked(t, addr, "acked", 10)
	_, end := offsets(t, addr, "acked")
	if recs := consumeAll(t, addr, "acked", end); len(recs) != 110 {
		t.Fatalf("read back %d acknowledged records of 110", len(recs))
	}
	if online, what := logDirOnline(dialRaw(t, addr)); !online {
		t.Fatalf("log directory offline: %s", what)
	}
	if !strings.Contains(b.Logs(), "accepting connections again") {
		t.Errorf("no line saying accepts work again")
	}
}

// holdsSoon polls cond every 50 ms until it holds or d passes.
func holdsSoon(d time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(d)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}
