package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/tier"
)

// deleteRecordsOn sends DeleteRecords for partition 0 of topic to rc and
// returns the low watermark, failing on an error.
func deleteRecordsOn(t *testing.T, rc *rawConn, topic string, off int64) int64 {
	t.Helper()
	p := deleteRecordsWithin(t, rc, topic, off, 10000)
	wantCode(t, fmt.Sprintf("delete records before %d", off), p.ErrorCode, nil)
	return p.LowWatermark
}

func deleteRecordsWithin(t *testing.T, rc *rawConn, topic string, off int64, timeoutMs int32) kmsg.DeleteRecordsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrDeleteRecordsRequest()
	req.TimeoutMillis = timeoutMs
	rt := kmsg.NewDeleteRecordsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewDeleteRecordsRequestTopicPartition()
	rp.Partition, rp.Offset = 0, off
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return rc.do(req, 2).(*kmsg.DeleteRecordsResponse).Topics[0].Partitions[0]
}

// TestFollowerFollowsLogStart: a follower moves its log start offset up
// to the leader's after DeleteRecords, as Kafka's does, so the deleted
// records stay deleted once it leads.
func TestFollowerFollowsLogStart(t *testing.T) {
	c := startCluster(t, 2, nil)
	c.createTopic("ls", []int32{0, 1}, nil)
	c.waitISR("ls", 0, 1)
	rc := c.rc(0)
	for i := range 10 {
		rc.produceOK("ls", 0, plainBatch(1000, fmt.Sprint(i)).build(t))
	}
	// The answer waits for the follower, as Kafka's DelayedDeleteRecords.
	if low := deleteRecordsOn(t, rc, "ls", 6); low != 6 {
		t.Fatalf("low watermark %d, want 6", low)
	}
	p1 := c.servers[1].partition("ls", 0)
	if got := p1.Log().LogStartOffset(); got != 6 {
		t.Fatalf("DeleteRecords answered with the follower's log start at %d, want 6", got)
	}
	// A follower that does not fetch holds the answer until the timeout.
	c.servers[1].pauseReplication(true)
	start := time.Now()
	p := deleteRecordsWithin(t, rc, "ls", 8, 300)
	wantCode(t, "delete records with the follower paused", p.ErrorCode, kerr.RequestTimedOut)
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Fatalf("answered after %v, before the 300 ms timeout", waited)
	}
	c.servers[1].pauseReplication(false)
	waitFor(t, "the follower's log start follows the leader's", 10*time.Second, func() bool { return p1.Log().LogStartOffset() == 8 })
	c.kill(0)
	waitFor(t, "broker 1 leads", 10*time.Second, func() bool { return c.partition("ls").Leader == 1 })
	rc1 := c.rc(1)
	waitFor(t, "the new leader answers", 10*time.Second, func() bool { return rc1.listOffset("ls", 0, -2).ErrorCode == 0 })
	if got := rc1.offsetAt("ls", 0, -2); got != 8 {
		t.Fatalf("earliest offset on the new leader %d, want 8: deleted records came back", got)
	}
}

// TestTieredFollowerFollowsLogStart: DeleteRecords below a tiered
// partition's local log start is recorded in the followers' remote indexes
// too (the leader tells them the log start below its local log), so a
// follower that comes to lead serves nothing below it from the bucket;
// and a follower never records its leader's local log start as the log
// start (the remote records stay readable).
func TestTieredFollowerFollowsLogStart(t *testing.T) {
	store := tier.NewMemStore()
	c := startTierCluster(t, 2, tierClusterSets(), store)
	const topic, segBytes = "tls", 4096
	c.createTopic(topic, []int32{0, 1}, map[string]string{
		"remote.storage.enable": "true", "segment.bytes": fmt.Sprint(segBytes),
		"local.retention.bytes": fmt.Sprint(3 * segBytes), "file.delete.delay.ms": "0",
	})
	c.waitISR(topic, 0, 1)
	rc := c.rc(0)
	for i := range 300 {
		rc.produceOK(topic, 0, plainBatch(time.Now().UnixMilli(), fmt.Sprintf("%0100d", i)).build(t))
	}
	p0, p1 := c.servers[0].partition(topic, 0), c.servers[1].partition(topic, 0)
	tp := tierPartition(p0)
	waitFor(t, "both replicas hold only a local tail", 60*time.Second, func() bool {
		_, ok1, _ := c.servers[1].tier.idx.LogEnd(tp)
		return p0.Log().LogStartOffset() > 50 && p1.Log().LogStartOffset() > 50 && ok1
	})
	// The leader's local log start is not the log start: the follower's
	// index records none above the remote log start (0).
	time.Sleep(300 * time.Millisecond)
	if off, ok, _ := c.servers[1].tier.idx.LogStartOffset(tp); ok && off > 0 {
		t.Fatalf("the follower recorded log start %d, the remote log starts at 0", off)
	}
	del := p0.Log().LogStartOffset() / 2 // below both local logs
	if low := deleteRecordsOn(t, rc, topic, del); low != del {
		t.Fatalf("low watermark %d, want %d", low, del)
	}
	waitFor(t, "the follower's index records the log start", 10*time.Second, func() bool {
		off, ok, _ := c.servers[1].tier.idx.LogStartOffset(tp)
		return ok && off == del
	})
	c.kill(0)
	waitFor(t, "broker 1 leads", 10*time.Second, func() bool { return c.partition(topic).Leader == 1 })
	rc1 := c.rc(1)
	waitFor(t, "the new leader answers", 30*time.Second, func() bool { return rc1.listOffset(topic, 0, -2).ErrorCode == 0 })
	if got := rc1.offsetAt(topic, 0, -2); got != del {
		t.Fatalf("earliest offset on the new leader %d, want %d", got, del)
	}
}
