package broker

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/config"
	"strata/controller"
)

// startRackCluster starts len(racks) brokers, broker i in racks[i].
func startRackCluster(t *testing.T, racks []string, sets map[string]string) *testCluster {
	t.Helper()
	c := &testCluster{t: t, m: controller.NewMemory(), sets: sets, perSets: map[int32]map[string]string{},
		dirs: map[int32]string{}, servers: map[int32]*Server{}}
	for i, r := range racks {
		c.dirs[int32(i)] = t.TempDir()
		c.perSets[int32(i)] = map[string]string{"broker.rack": r}
	}
	t.Cleanup(func() {
		for _, s := range c.servers {
			s.Close()
		}
	})
	for i := range racks {
		c.start(int32(i))
	}
	return c
}

// counterValue reads a counter of s's metrics registry by name.
func counterValue(t *testing.T, s *Server, name string) float64 {
	t.Helper()
	mfs, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatalf("no counter %s", name)
	return 0
}

// rackFetch fetches ff-0 at offset from rc as a consumer at version v in
// rack.
func rackFetch(t *testing.T, rc *rawConn, v int16, rack string, offset int64) (*kmsg.FetchResponse, kmsg.FetchResponseTopicPartition) {
	t.Helper()
	req := fetchReq(0, 0, 1<<20, fetchPart{"ff", 0, offset, 1 << 20})
	req.Rack = rack
	resp := rc.do(req, v).(*kmsg.FetchResponse)
	wantCode(t, "fetch", resp.ErrorCode, nil)
	p := findFetchPart(resp, "ff", 0)
	if p == nil {
		t.Fatal("fetch response lacks ff-0")
	}
	return resp, *p
}

func TestFetchFromFollowerRackAware(t *testing.T) {
	c := startRackCluster(t, []string{"a", "b", "c"}, map[string]string{
		"replica.selector.class":  config.RackAwareReplicaSelector,
		"replica.lag.time.max.ms": "10000", // no ISR change under a loaded machine
	})
	c.createTopic("ff", []int32{0, 1, 2}, map[string]string{"min.insync.replicas": "2"})
	const half = 50
	var seeds []string
	for id := int32(0); id < 3; id++ {
		seeds = append(seeds, c.servers[id].Addr().String())
	}
	ctx := testCtx(t)
	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("ff"), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produce := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
				t.Fatalf("produce %d: %v", i, err)
			}
		}
	}
	produce(0, half)
	waitFor(t, "follower 1 at the high watermark", 10*time.Second, func() bool {
		return c.servers[1].partition("ff", 0).HW() == half
	})

	leader, follower := c.rc(0), c.rc(1)
	// The leader sends a consumer in rack b to broker 1, without records.
	_, fp := rackFetch(t, leader, 11, "b", 0)
	wantCode(t, "fetch from rack b", fp.ErrorCode, nil)
	if fp.PreferredReadReplica != 1 || len(fp.RecordBatches) != 0 || fp.HighWatermark != half {
		t.Fatalf("rack b at the leader: preferred %d, %d record bytes, high watermark %d; want 1, none, %d",
			fp.PreferredReadReplica, len(fp.RecordBatches), fp.HighWatermark, half)
	}
	// Its own rack, an unknown rack, no rack: served by the leader.
	for _, rack := range []string{"a", "elsewhere", ""} {
		_, fp := rackFetch(t, leader, 11, rack, 0)
		if fp.ErrorCode != 0 || fp.PreferredReadReplica != -1 || len(splitBatches(t, fp.RecordBatches)) != half {
			t.Fatalf("rack %q at the leader: %v, preferred %d, %d batches; want the records", rack, kerr.ErrorForCode(fp.ErrorCode), fp.PreferredReadReplica, len(splitBatches(t, fp.RecordBatches)))
		}
	}
	// An offset no follower has yet stays on the leader.
	if _, fp := rackFetch(t, leader, 11, "b", half+1); fp.PreferredReadReplica != -1 {
		t.Fatalf("fetch past every follower's log end: preferred %d, want -1", fp.PreferredReadReplica)
	}

	// The follower serves consumers of v11+ up to its high watermark.
	_, fp = rackFetch(t, follower, 11, "b", 0)
	if fp.ErrorCode != 0 || fp.HighWatermark != half || len(splitBatches(t, fp.RecordBatches)) != half || fp.PreferredReadReplica != -1 {
		t.Fatalf("v11 at the follower: %v, high watermark %d, %d batches, preferred %d", kerr.ErrorForCode(fp.ErrorCode), fp.HighWatermark, len(splitBatches(t, fp.RecordBatches)), fp.PreferredReadReplica)
	}
	_, fp = rackFetch(t, follower, 11, "b", half+5)
	wantCode(t, "v11 at the follower past its log end", fp.ErrorCode, kerr.OffsetOutOfRange)
	// Older consumers and replicas fetch from the leader only.
	_, fp = rackFetch(t, follower, 10, "", 0)
	wantCode(t, "v10 at the follower", fp.ErrorCode, kerr.NotLeaderForPartition)
	req := fetchReq(0, 0, 1<<20, fetchPart{"ff", 0, 0, 1 << 20})
	req.ReplicaID = 2
	resp := follower.do(req, 12).(*kmsg.FetchResponse)
	if p := findFetchPart(resp, "ff", 0); p == nil || p.ErrorCode != kerr.NotLeaderForPartition.Code || p.CurrentLeader.LeaderID != 0 {
		t.Fatalf("replica fetch at a follower: %+v; want NOT_LEADER_OR_FOLLOWER naming leader 0", p)
	}

	// ListOffsets: the leader only, except for the debugging replica id.
	wantCode(t, "consumer ListOffsets at the follower", follower.listOffset("ff", 0, -1).ErrorCode, kerr.NotLeaderForPartition)
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.ReplicaID = -2
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "ff"
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition, lp.Timestamp, lp.CurrentLeaderEpoch = 0, -1, -1
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	lr := follower.do(lo, 9).(*kmsg.ListOffsetsResponse)
	if p := lr.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.Offset != half {
		t.Fatalf("debugging ListOffsets at the follower: %v offset %d, want its log end %d", kerr.ErrorForCode(p.ErrorCode), p.Offset, half)
	}

	// A franz-go consumer in rack b is sent to broker 1 and reads
	// everything there, including records produced while it reads.
	servedBefore := counterValue(t, c.servers[1], "strata_server_fetch_from_follower_partitions_total")
	cons, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics("ff"), kgo.Rack("b"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	done := make(chan error, 1)
	go func() {
		next := 0
		for next < 2*half {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				done <- fmt.Errorf("consumed %d of %d records", next, 2*half)
				return
			}
			var ferr error
			fs.EachError(func(_ string, _ int32, err error) { ferr = err })
			if ferr != nil {
				done <- ferr
				return
			}
			for _, r := range fs.Records() {
				if r.Offset != int64(next) || string(r.Value) != strconv.Itoa(next) {
					done <- fmt.Errorf("record %d: offset %d value %q", next, r.Offset, r.Value)
					return
				}
				next++
			}
		}
		done <- nil
	}()
	produce(half, 2*half)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("consumer did not finish")
	}
	if n := counterValue(t, c.servers[0], "strata_server_preferred_read_replica_partitions_total"); n < 1 {
		t.Fatalf("the leader never named a preferred read replica")
	}
	if served := counterValue(t, c.servers[1], "strata_server_fetch_from_follower_partitions_total"); served <= servedBefore {
		t.Fatalf("broker 1 served no consumer fetch as a follower (%v before, %v after)", servedBefore, served)
	}
	if n := counterValue(t, c.servers[2], "strata_server_fetch_from_follower_partitions_total"); n != 0 {
		t.Fatalf("broker 2 (rack c) served %v consumer fetches as a follower; the consumer is in rack b", n)
	}
}

// TestFetchFromFollowerOff: without replica.selector.class consumers stay
// on the leader, whatever their rack.
func TestFetchFromFollowerOff(t *testing.T) {
	c := startRackCluster(t, []string{"a", "b"}, nil)
	c.createTopic("ff", []int32{0, 1}, nil)
	c.rc(0).produceOK("ff", 0, plainBatch(time.Now().UnixMilli(), "x").build(t))
	waitFor(t, "follower at the high watermark", 10*time.Second, func() bool {
		return c.servers[1].partition("ff", 0).HW() == 1
	})
	if _, fp := rackFetch(t, c.rc(0), 11, "b", 0); fp.ErrorCode != 0 || fp.PreferredReadReplica != -1 || len(fp.RecordBatches) == 0 {
		t.Fatalf("rack b without a selector: %v, preferred %d, %d record bytes; want the records from the leader",
			kerr.ErrorForCode(fp.ErrorCode), fp.PreferredReadReplica, len(fp.RecordBatches))
	}
}
