package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestGroupCoordinatorNewLeaderLoadsPastItsHighWatermark: the regression
// test of a lost commit on coordinator failover. A follower learns the high
// watermark one fetch late, so when it becomes leader of a
// __consumer_offsets partition its log holds acknowledged commits beyond
// its own high watermark. Its coordinator must answer
// COORDINATOR_LOAD_IN_PROGRESS until those are committed again (here: until
// the other follower, paused, fetches from it) and then serve them; it
// used to load only up to its stale high watermark and serve the commit
// before the last.
func TestGroupCoordinatorNewLeaderLoadsPastItsHighWatermark(t *testing.T) {
	c := startCluster(t, 3, map[string]string{
		"offsets.topic.num.partitions": "1", "offsets.topic.replication.factor": "3",
		"replica.lag.time.max.ms": "30000", // no ISR change while a follower is paused
	})
	var seeds []string
	for _, s := range c.servers {
		seeds = append(seeds, s.Addr().String())
	}
	ctx := testCtx(t)
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(50*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	const group, topic = "g", "t"
	c.createTopic(topic, []int32{0, 1, 2}, nil)
	commit := func(at int64) {
		t.Helper()
		os := kadm.Offsets{}
		os.Add(kadm.Offset{Topic: topic, Partition: 0, At: at, LeaderEpoch: -1})
		r, err := adm.CommitOffsets(ctx, group, os)
		if err == nil {
			err = r.Error()
		}
		if err != nil {
			t.Fatalf("commit %d: %v", at, err)
		}
	}
	commit(10) // creates __consumer_offsets through FindCoordinator
	c.waitISR(offsetsTopic, 0, 1, 2)
	old := c.partition(offsetsTopic).Leader
	var followers []int32
	for id := range c.servers {
		if id != old {
			followers = append(followers, id)
		}
	}
	commit(10) // once more with the full ISR, so that every replica has it below its high watermark
	before := c.leo(old, offsetsTopic)
	waitFor(t, "followers at the leader's high watermark", 10*time.Second, func() bool {
		for _, id := range followers {
			if c.servers[id].partition(offsetsTopic, 0).HW() < before {
				return false
			}
		}
		return true
	})
	commit(20) // acknowledged: every follower has it in its log
	end := c.leo(old, offsetsTopic)
	for _, id := range followers {
		c.servers[id].pauseReplication(true)
		if got := c.leo(id, offsetsTopic); got != end {
			t.Fatalf("broker %d: log end %d after an acknowledged commit, want %d", id, got, end)
		}
		// As if the fetch that brought the new high watermark had not
		// come back yet.
		c.servers[id].partition(offsetsTopic, 0).StoreHW(before)
	}
	c.kill(old)
	leader := c.partition(offsetsTopic).Leader
	if leader == old || leader < 0 {
		t.Fatalf("leader %d after killing %d", leader, old)
	}
	other := followers[0]
	if other == leader {
		other = followers[1]
	}
	rc := c.rc(leader)
	fetch := func() (int16, int64) {
		req := kmsg.NewPtrOffsetFetchRequest()
		req.Group = group
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = topic, []int32{0}
		req.Topics = append(req.Topics, rt)
		resp := rc.do(req, 7).(*kmsg.OffsetFetchResponse)
		if resp.ErrorCode != 0 || len(resp.Topics) == 0 || len(resp.Topics[0].Partitions) == 0 {
			return resp.ErrorCode, -1
		}
		return 0, resp.Topics[0].Partitions[0].Offset
	}
	// While the other follower is paused, the new leader's high watermark
	// stays behind its log end.
	waitFor(t, fmt.Sprintf("broker %d to answer COORDINATOR_LOAD_IN_PROGRESS", leader), 10*time.Second, func() bool {
		code, off := fetch()
		if code == 0 {
			t.Fatalf("broker %d served offset %d before its high watermark reached the acknowledged commit of 20", leader, off)
		}
		return code == kerr.CoordinatorLoadInProgress.Code
	})
	c.servers[other].pauseReplication(false)
	var got int64
	waitFor(t, fmt.Sprintf("broker %d to serve the group", leader), 10*time.Second, func() bool {
		var code int16
		code, got = fetch()
		return code == 0
	})
	if got != 20 {
		t.Fatalf("new coordinator serves offset %d, want the acknowledged 20", got)
	}
}

// TestGroupCommitBelowMinInsyncReplicas: an offset commit is an acks=-1
// write of __consumer_offsets, so with the partition's ISR below
// min.insync.replicas it is refused, and Kafka's coordinator answers
// COORDINATOR_NOT_AVAILABLE (the client retries; the offset is not
// acknowledged from a single copy).
func TestGroupCommitBelowMinInsyncReplicas(t *testing.T) {
	c := startCluster(t, 3, map[string]string{
		"offsets.topic.num.partitions": "1", "offsets.topic.replication.factor": "3",
		"min.insync.replicas": "2",
	})
	const group, topic = "g", "t"
	c.createTopic(topic, []int32{0, 1, 2}, nil)
	commit := func(rc *rawConn, at int64) int16 {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = group, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset = 0, at
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		return rc.do(req, 8).(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
	}
	// FindCoordinator creates __consumer_offsets.
	fc := kmsg.NewPtrFindCoordinatorRequest()
	fc.CoordinatorKey = group
	c.rc(0).do(fc, 3)
	waitFor(t, "__consumer_offsets open", 10*time.Second, func() bool { return c.m.Metadata().Topics[offsetsTopic] != nil })
	c.waitISR(offsetsTopic, 0, 1, 2)
	leader := c.partition(offsetsTopic).Leader
	rc := c.rc(leader)
	waitFor(t, "a commit with the full ISR", 10*time.Second, func() bool { return commit(rc, 5) == 0 })
	for id := range c.servers {
		if id != leader {
			c.kill(id)
		}
	}
	c.waitISR(offsetsTopic, leader)
	waitFor(t, "the leader to see its ISR of one", 10*time.Second, func() bool {
		return c.servers[leader].partition(offsetsTopic, 0).ISRSize() == 1
	})
	if code := commit(rc, 7); code != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("commit with ISR 1 < min.insync.replicas 2: error %v, want COORDINATOR_NOT_AVAILABLE", kerr.ErrorForCode(code))
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	resp := rc.do(req, 7).(*kmsg.OffsetFetchResponse)
	if len(resp.Topics) != 1 || resp.Topics[0].Partitions[0].Offset != 5 {
		t.Fatalf("OffsetFetch after the refused commit: %+v, want offset 5", resp.Topics)
	}
}
