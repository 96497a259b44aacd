package broker

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/config"
	"strata/controller"
	"strata/tier"
)

// testCluster is several in-process brokers sharing a controller.Memory.
type testCluster struct {
	t       testing.TB
	m       *controller.Memory
	sets    map[string]string
	perSets map[int32]map[string]string // per-broker configs over sets (broker.rack)
	dirs    map[int32]string
	servers map[int32]*Server
	store   tier.ObjectStore // the brokers' tier (nil: none)
}

func startCluster(t testing.TB, n int, sets map[string]string) *testCluster {
	t.Helper()
	return startTierCluster(t, n, sets, nil)
}

// tierClusterSets turns tiered storage on, with task and retention
// passes every 100 ms, for startTierCluster.
func tierClusterSets() map[string]string {
	return map[string]string{
		"remote.log.storage.system.enable":    "true",
		"remote.log.manager.task.interval.ms": "100",
		"log.retention.check.interval.ms":     "100",
	}
}

// startTierCluster is startCluster with the brokers' tier store.
func startTierCluster(t testing.TB, n int, sets map[string]string, store tier.ObjectStore) *testCluster {
	t.Helper()
	c := &testCluster{t: t, m: controller.NewMemory(), sets: sets, dirs: map[int32]string{}, servers: map[int32]*Server{}, store: store}
	for i := int32(0); i < int32(n); i++ {
		c.dirs[i] = t.TempDir()
	}
	t.Cleanup(func() { // before the directories are removed
		for _, s := range c.servers {
			s.Close()
		}
	})
	for i := int32(0); i < int32(n); i++ {
		c.start(i)
	}
	return c
}

// start starts (or restarts) broker id on its data directory.
func (c *testCluster) start(id int32) *Server {
	c.t.Helper()
	props := map[string]string{
		"broker.id":               strconv.Itoa(int(id)),
		"listeners":               "PLAINTEXT://127.0.0.1:0",
		"log.dirs":                c.dirs[id],
		"replica.lag.time.max.ms": "500",
	}
	for k, v := range c.sets {
		props[k] = v
	}
	for k, v := range c.perSets[id] {
		props[k] = v
	}
	cfg, err := config.Load(props)
	if err != nil {
		c.t.Fatalf("config: %v", err)
	}
	s, err := New(Options{Config: cfg, Listen: cfg.ListenAddr(), Controller: c.m, TierStore: c.store})
	if err != nil {
		c.t.Fatalf("new: %v", err)
	}
	if err := s.Start(); err != nil {
		c.t.Fatalf("start: %v", err)
	}
	c.servers[id] = s
	return s
}

// kill stops broker id and tells the controller it is gone.
func (c *testCluster) kill(id int32) {
	c.t.Helper()
	c.servers[id].Close()
	delete(c.servers, id)
	c.m.Kill(id)
}

func (c *testCluster) partition(topic string) controller.Partition {
	return c.m.Metadata().Topics[topic].Partitions[0]
}

func (c *testCluster) rc(id int32) *rawConn { return dialRaw(c.t, c.servers[id].Addr().String()) }

func (c *testCluster) leo(id int32, topic string) int64 {
	if p := c.servers[id].partition(topic, 0); p != nil {
		return p.Log().LogEndOffset()
	}
	return -1
}

func (c *testCluster) createTopic(name string, replicas []int32, configs map[string]string) {
	c.t.Helper()
	if _, err := c.m.CreateTopic(context.Background(), controller.CreateTopicRequest{Name: name, Assignments: [][]int32{replicas}, Configs: configs}); err != nil {
		c.t.Fatal(err)
	}
	waitFor(c.t, "replicas of "+name+" open", 10*time.Second, func() bool {
		for _, id := range replicas {
			if c.servers[id].partition(name, 0) == nil {
				return false
			}
		}
		return true
	})
}

func (c *testCluster) waitISR(topic string, want ...int32) {
	c.t.Helper()
	waitFor(c.t, fmt.Sprintf("ISR of %s = %v", topic, want), 10*time.Second, func() bool {
		isr := slices.Sorted(slices.Values(c.partition(topic).ISR))
		return slices.Equal(isr, want)
	})
}

func TestReplicationAcksAllAndISR(t *testing.T) {
	c := startCluster(t, 3, nil)
	c.createTopic("r", []int32{0, 1, 2}, map[string]string{"min.insync.replicas": "2"})
	rc := c.rc(0)
	batch := func(v string) []byte { return plainBatch(time.Now().UnixMilli(), v).build(t) }

	if off := rc.produceOK("r", 0, batch("a")); off != 0 {
		t.Fatalf("first offset %d", off)
	}
	for _, id := range []int32{1, 2} {
		if leo := c.leo(id, "r"); leo < 1 {
			t.Fatalf("acks=-1 answered before broker %d replicated (its log end %d)", id, leo)
		}
	}

	// A follower redirects producers to the leader (KIP-951, Produce v10+).
	pr := c.rc(1).do(produceReq("r", 0, -1, batch("z")), 10).(*kmsg.ProduceResponse)
	rp := pr.Topics[0].Partitions[0]
	wantCode(t, "produce to a follower", rp.ErrorCode, kerr.NotLeaderForPartition)
	if rp.CurrentLeader.LeaderID != 0 || rp.CurrentLeader.LeaderEpoch != 0 || len(pr.Brokers) != 1 || pr.Brokers[0].NodeID != 0 ||
		int(pr.Brokers[0].Port) != c.servers[0].Addr().(*net.TCPAddr).Port {
		t.Fatalf("redirect: current leader %+v, brokers %+v; want broker 0 at epoch 0 with its endpoint", rp.CurrentLeader, pr.Brokers)
	}

	// A paused follower leaves the ISR after replica.lag.time.max.ms; the
	// produce waiting meanwhile completes with the smaller ISR.
	c.servers[2].pauseReplication(true)
	start := time.Now()
	rc.produceOK("r", 0, batch("b"))
	if isr := c.partition("r").ISR; slices.Contains(isr, 2) || time.Since(start) < 400*time.Millisecond {
		t.Fatalf("produce answered after %v with ISR %v; want broker 2 out after the lag time", time.Since(start), isr)
	}
	if leo := c.leo(1, "r"); leo < 2 {
		t.Fatalf("broker 1 log end %d after acks=-1", leo)
	}

	// The second follower too: the waiting produce ends with
	// NOT_ENOUGH_REPLICAS_AFTER_APPEND, later ones are refused up front.
	c.servers[1].pauseReplication(true)
	got := rc.producePart("r", 0, batch("c"))
	wantCode(t, "produce as the ISR shrinks to the leader", got.ErrorCode, kerr.NotEnoughReplicasAfterAppend)
	got = rc.producePart("r", 0, batch("d"))
	wantCode(t, "produce with ISR [0]", got.ErrorCode, kerr.NotEnoughReplicas)

	// Both catch up and rejoin.
	c.servers[1].pauseReplication(false)
	c.servers[2].pauseReplication(false)
	c.waitISR("r", 0, 1, 2)
	if off := rc.produceOK("r", 0, batch("e")); off != 3 {
		t.Fatalf("offset %d after rejoin, want 3", off)
	}
	for _, id := range []int32{1, 2} {
		if leo := c.leo(id, "r"); leo != 4 {
			t.Fatalf("broker %d log end %d, want 4", id, leo)
		}
	}
	recs := consumeAll(t, &testServer{Server: c.servers[0]}, "r", 4)
	for i, want := range []string{"a", "b", "c", "e"} {
		if recs[i].Offset != int64(i) || string(recs[i].Value) != want {
			t.Fatalf("record %d = %d:%q, want %d:%q", i, recs[i].Offset, recs[i].Value, i, want)
		}
	}
}

func TestReplicationLeaderFailover(t *testing.T) {
	c := startCluster(t, 3, nil)
	c.createTopic("f", []int32{0, 1, 2}, map[string]string{"min.insync.replicas": "2"})
	var seeds []string
	for _, s := range c.servers {
		seeds = append(seeds, s.Addr().String())
	}
	ctx := testCtx(t)
	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("f"), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MetadataMinAge(50*time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()

	// A consumer reads throughout and checks that offsets have no gaps.
	const total = 300
	cons, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics("f"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond), kgo.MetadataMinAge(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var (
		cmu      sync.Mutex
		consumed = map[int64]string{}
		consErr  error
		next     int64
	)
	consDone := make(chan struct{})
	go func() {
		defer close(consDone)
		for ctx.Err() == nil {
			fs := cons.PollFetches(ctx)
			cmu.Lock()
			for _, r := range fs.Records() {
				if r.Offset != next && consErr == nil {
					consErr = fmt.Errorf("consumer saw offset %d after %d", r.Offset, next-1)
				}
				next = r.Offset + 1
				consumed[r.Offset] = string(r.Value)
			}
			n := len(consumed)
			cmu.Unlock()
			if n >= total {
				return
			}
		}
	}()

	acked := map[int64]string{}
	for i := 0; i < total; i++ {
		if i == total/3 {
			c.kill(c.partition("f").Leader)
		}
		v := strconv.Itoa(i)
		r, err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(v), Partition: 0}).First()
		if err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		acked[r.Offset] = v
	}
	pm := c.partition("f")
	if pm.Leader == 0 || pm.LeaderEpoch < 1 {
		t.Fatalf("after the kill: leader %d epoch %d", pm.Leader, pm.LeaderEpoch)
	}
	select {
	case <-consDone:
	case <-ctx.Done():
		t.Fatal("consumer did not see every record")
	}
	cmu.Lock()
	defer cmu.Unlock()
	if consErr != nil {
		t.Fatal(consErr)
	}
	for off, v := range acked {
		if consumed[off] != v {
			t.Fatalf("acknowledged record %q at offset %d: consumer saw %q", v, off, consumed[off])
		}
	}
}

func TestReplicationTruncatesDivergentTail(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"replica.lag.time.max.ms": "30000"})
	c.createTopic("d", []int32{0, 1, 2}, map[string]string{"min.insync.replicas": "2"})
	batch := func(v string) []byte { return plainBatch(time.Now().UnixMilli(), v).build(t) }
	c.rc(0).produceOK("d", 0, batch("a"))

	// Broker 0 takes a write its followers never see (acks=1), then dies.
	c.servers[1].pauseReplication(true)
	c.servers[2].pauseReplication(true)
	resp := c.rc(0).do(produceReq("d", 0, 1, batch("x")), 9).(*kmsg.ProduceResponse)
	wantCode(t, "acks=1 produce", resp.Topics[0].Partitions[0].ErrorCode, nil)
	c.kill(0)
	c.servers[1].pauseReplication(false)
	c.servers[2].pauseReplication(false)
	pm := c.partition("d")
	if pm.Leader != 1 || pm.LeaderEpoch != 1 {
		t.Fatalf("after the kill: leader %d epoch %d, want 1 and 1", pm.Leader, pm.LeaderEpoch)
	}
	// Broker 1 takes writes once it has applied its leadership, which the
	// controller announced before (a client retries NOT_LEADER).
	rc1 := c.rc(1)
	waitFor(t, "broker 1 to take a write as leader", 10*time.Second, func() bool {
		return rc1.producePart("d", 0, batch("y")).ErrorCode == 0
	})

	// Broker 0 returns as a follower: "x" must go, "y" replace it. Its
	// log end is 2 before it truncates as well as after, so the test
	// waits for a record it can only have fetched from the new leader:
	// "z", acknowledged by the whole ISR (acks=-1), at offset 2.
	c.start(0)
	c.waitISR("d", 0, 1, 2)
	resp = c.rc(1).do(produceReq("d", 0, -1, batch("z")), 9).(*kmsg.ProduceResponse)
	wantCode(t, "acks=-1 produce after broker 0's return", resp.Topics[0].Partitions[0].ErrorCode, nil)
	waitFor(t, "broker 0 caught up", 10*time.Second, func() bool { return c.leo(0, "d") == 3 })
	p := c.servers[0].partition("d", 0)
	sl, err := p.Log().Read(0, 3, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, sl.Len)
	if _, err := sl.File.ReadAt(buf, sl.Pos); err != nil {
		t.Fatal(err)
	}
	bs := splitBatches(t, buf)
	if len(bs) != 3 || bs[0].PartitionLeaderEpoch != 0 || bs[1].FirstOffset != 1 || bs[1].PartitionLeaderEpoch != 1 ||
		bs[2].FirstOffset != 2 || bs[2].PartitionLeaderEpoch != 1 {
		t.Fatalf("broker 0 batches after rejoining: %+v; want offset 0 at epoch 0, offsets 1 and 2 at epoch 1", bs)
	}
}

// TestProducePipelinedOnOneConnection: acks=-1 produces sent back to back
// on one connection are all appended while the first waits for
// replication (a producer keeps several in flight), and their responses,
// and that of a request behind them, come back in request order once the
// followers replicate.
func TestProducePipelinedOnOneConnection(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"replica.lag.time.max.ms": "30000"})
	c.createTopic("pl", []int32{0, 1, 2}, map[string]string{"min.insync.replicas": "2"})
	rc := c.rc(0)
	batch := func(v string) []byte { return plainBatch(time.Now().UnixMilli(), v).build(t) }
	if off := rc.produceOK("pl", 0, batch("warm")); off != 0 {
		t.Fatalf("first offset %d", off)
	}
	c.servers[1].pauseReplication(true)
	c.servers[2].pauseReplication(true)
	var corrs []int32
	for _, v := range []string{"a", "b", "c"} {
		corrs = append(corrs, rc.send(produceReq("pl", 0, -1, batch(v)), 9))
	}
	mdCorr := rc.send(kmsg.NewPtrMetadataRequest(), 12)
	waitFor(t, "the three pipelined batches appended while the first waits", 10*time.Second, func() bool { return c.leo(0, "pl") == 4 })
	c.servers[1].pauseReplication(false)
	c.servers[2].pauseReplication(false)
	for i, corr := range corrs {
		resp := kmsg.NewPtrProduceResponse()
		resp.SetVersion(9)
		rc.recv(corr, resp) // fails unless the responses come in order
		if p := resp.Topics[0].Partitions[0]; p.ErrorCode != 0 || p.BaseOffset != int64(1+i) {
			t.Fatalf("produce %d: error %d, base offset %d; want offset %d", i, p.ErrorCode, p.BaseOffset, 1+i)
		}
	}
	md := kmsg.NewPtrMetadataResponse()
	md.SetVersion(12)
	rc.recv(mdCorr, md)
	for _, id := range []int32{1, 2} {
		if leo := c.leo(id, "pl"); leo != 4 {
			t.Fatalf("broker %d log end %d after the acknowledgements, want 4", id, leo)
		}
	}
}
