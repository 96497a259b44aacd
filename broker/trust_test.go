package broker

// Issue 25, items 1-6, reproduced as the review did but with in-process
// brokers on a real ZooKeeper (the zk controller): forged controller
// requests, a forged ControlledShutdown, replica fetches by someone who
// is not the replica, a topic named ../victim, and a drain set in the
// future. Each must be refused with nothing lost, with security off.

import (
	"context"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/config"
	"strata/controller"
	zkctl "strata/controller/zk"
	"strata/internal/testenv"
)

// zkCluster is in-process brokers on a real ZooKeeper.
type zkCluster struct {
	t       testing.TB
	zk      *testenv.ZooKeeper
	sets    map[string]string
	dirs    map[int32]string
	servers map[int32]*Server
	// logs, when set, receives the brokers' logs (at INFO and above).
	logs *syncBuffer
}

func startZKCluster(t testing.TB, n int, sets map[string]string) *zkCluster {
	t.Helper()
	c := &zkCluster{t: t, zk: testenv.StartZooKeeper(t), sets: sets, dirs: map[int32]string{}, servers: map[int32]*Server{}}
	t.Cleanup(func() {
		for _, s := range c.servers {
			s.Close()
		}
	})
	for i := int32(1); i <= int32(n); i++ {
		c.dirs[i] = t.TempDir()
		c.start(i)
	}
	return c
}

func (c *zkCluster) start(id int32) {
	c.t.Helper()
	props := map[string]string{
		"broker.id":                       strconv.Itoa(int(id)),
		"listeners":                       "PLAINTEXT://127.0.0.1:0",
		"log.dirs":                        c.dirs[id],
		"zookeeper.connect":               c.zk.Addr(),
		"controlled.shutdown.max.retries": "0",
	}
	for k, v := range c.sets {
		props[k] = v
	}
	cfg, err := config.Load(props)
	if err != nil {
		c.t.Fatalf("config: %v", err)
	}
	var s *Server
	newCtl := func(self controller.Broker) (controller.Controller, error) {
		controlPlane, interBroker, interBrokerProtocol, dial := s.ControlPlaneDialer()
		return zkctl.New(context.Background(), zkctl.Options{Connect: c.zk.Addr(), Broker: self, SessionTimeout: 6 * time.Second,
			InterBrokerListener: interBroker, InterBrokerProtocol: interBrokerProtocol, ControlPlaneListener: controlPlane, Dial: dial})
	}
	var logger *slog.Logger
	if c.logs != nil {
		logger = slog.New(slog.NewTextHandler(c.logs, nil)).With("broker", id)
	}
	s, err = New(Options{Config: cfg, Listen: cfg.ListenAddr(), NewController: newCtl, Logger: logger})
	if err != nil {
		c.t.Fatalf("new: %v", err)
	}
	if err := s.Start(); err != nil {
		c.t.Fatalf("start: %v", err)
	}
	c.servers[id] = s
}

func (c *zkCluster) ctl(id int32) *zkctl.Controller { return c.servers[id].ctrl.(*zkctl.Controller) }

// active returns the id of the active controller.
func (c *zkCluster) active() int32 {
	c.t.Helper()
	var id int32 = -1
	waitFor(c.t, "an active controller", 20*time.Second, func() bool {
		for i := range c.servers {
			if c.ctl(i).IsActive() {
				id = i
				return true
			}
		}
		return false
	})
	return id
}

func (c *zkCluster) rc(id int32) *rawConn { return dialRaw(c.t, c.servers[id].Addr().String()) }

// createTopic creates a one-partition topic with these replicas (the
// first leads) and waits until every replica hosts it and the ISR is all
// of them.
func (c *zkCluster) createTopic(name string, replicas []int32, configs map[string]string) *controller.Topic {
	c.t.Helper()
	act := c.active()
	top, err := c.ctl(act).CreateTopic(context.Background(), controller.CreateTopicRequest{Name: name, Assignments: [][]int32{replicas}, Configs: configs})
	if err != nil {
		c.t.Fatal(err)
	}
	c.waitISR(name, replicas...)
	return top
}

func (c *zkCluster) partitionState(topic string) controller.Partition {
	if t := c.ctl(c.active()).Metadata().Topics[topic]; t != nil {
		return t.Partitions[0]
	}
	return controller.Partition{}
}

func (c *zkCluster) waitISR(topic string, want ...int32) {
	c.t.Helper()
	want = slices.Sorted(slices.Values(want))
	waitFor(c.t, "ISR of "+topic, 20*time.Second, func() bool {
		for _, id := range c.partitionState(topic).Replicas {
			if s := c.servers[id]; s == nil || s.partition(topic, 0) == nil {
				return false
			}
		}
		return slices.Equal(slices.Sorted(slices.Values(c.partitionState(topic).ISR)), want)
	})
}

func partDir(s *Server, topic string) string { return filepath.Join(s.cfg.DataDir, topic+"-0") }

// Item 1: an UpdateMetadata from an ordinary client with controller epoch
// 2147483647, broker epoch -1 and no topics deleted every partition; a
// StopReplica with delete and the current controller epoch deleted one.
func TestForgedUpdateMetadataAndStopReplicaRefused(t *testing.T) {
	c := startZKCluster(t, 2, nil)
	c.createTopic("keep", []int32{1, 2}, nil)
	off := c.rc(1).produceOK("keep", 0, plainBatch(time.Now().UnixMilli(), "a", "b").build(t))

	for id, s := range c.servers {
		own := c.ctl(id).BrokerEpoch(id)
		if own <= 0 {
			t.Fatalf("broker %d knows no epoch of its own", id)
		}
		forge := func(ctrlEpoch int32, brokerEpoch int64) int16 {
			um := kmsg.NewPtrUpdateMetadataRequest()
			um.ControllerID, um.ControllerEpoch, um.BrokerEpoch = 2, ctrlEpoch, brokerEpoch
			lb := kmsg.NewUpdateMetadataRequestLiveBroker()
			lb.ID, lb.Host, lb.Port = 7, "attacker.example", 9092
			um.LiveBrokers = append(um.LiveBrokers, lb)
			return c.rc(id).do(um, 8).(*kmsg.UpdateMetadataResponse).ErrorCode
		}
		wantCode(t, "UpdateMetadata, epoch 2147483647, broker epoch -1", forge(math.MaxInt32, -1), kerr.StaleBrokerEpoch)
		// Even one who knows the broker's epoch cannot claim an epoch
		// ZooKeeper does not confirm.
		wantCode(t, "UpdateMetadata, epoch 2147483647, right broker epoch", forge(math.MaxInt32, own), kerr.StaleControllerEpoch)

		epoch := c.ctl(c.active()).ControllerEpoch()
		for _, be := range []int64{-1, own + 1} {
			stop := kmsg.NewPtrStopReplicaRequest()
			stop.ControllerID, stop.ControllerEpoch, stop.BrokerEpoch = c.active(), epoch, be
			st := kmsg.NewStopReplicaRequestTopic()
			st.Topic = "keep"
			sp := kmsg.NewStopReplicaRequestTopicPartitionState()
			sp.Partition, sp.LeaderEpoch, sp.Delete = 0, -2, true
			st.PartitionStates = append(st.PartitionStates, sp)
			stop.Topics = append(stop.Topics, st)
			wantCode(t, "StopReplica with delete, current controller epoch, broker epoch "+strconv.FormatInt(be, 10),
				c.rc(id).do(stop, 4).(*kmsg.StopReplicaResponse).ErrorCode, kerr.StaleBrokerEpoch)
		}
		if _, err := os.Stat(partDir(s, "keep")); err != nil {
			t.Fatalf("broker %d lost its partition directory: %v", id, err)
		}
		if md := s.ctrl.Metadata(); md.Topics["keep"] == nil || slices.ContainsFunc(md.Brokers, func(b controller.Broker) bool { return b.ID == 7 }) {
			t.Fatalf("broker %d took the forged metadata: topics %v, brokers %v", id, md.Topics, md.Brokers)
		}
	}
	if got := c.rc(1).fetchOne("keep", 0, off, 1<<20); got.ErrorCode != 0 || len(got.RecordBatches) == 0 {
		t.Fatalf("after the forgeries a fetch of the acknowledged records: error %v, %d bytes", kerr.ErrorForCode(got.ErrorCode), len(got.RecordBatches))
	}
	// The real controller is not shut out: a new topic reaches both.
	c.createTopic("after", []int32{2, 1}, nil)
}

// fakeLeader is a TCP listener that answers nothing and counts who
// connects: a forged LeaderAndIsr that names it must never make a broker
// fetch from (or truncate to) it.
func fakeLeader(t *testing.T) (addr *net.TCPAddr, conns *atomic.Int32) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conns = new(atomic.Int32)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	return ln.Addr().(*net.TCPAddr), conns
}

// Item 2 and item 5: a forged LeaderAndIsr naming a leader at an address
// the attacker runs made the real leader truncate to what that address
// answered; one naming ../victim put a log outside the data directory.
func TestForgedLeaderAndIsrRefused(t *testing.T) {
	c := startZKCluster(t, 2, nil)
	top := c.createTopic("keep", []int32{1, 2}, nil)
	rc := c.rc(1)
	for i := range 3 {
		rc.produceOK("keep", 0, plainBatch(time.Now().UnixMilli(), "v"+strconv.Itoa(i)).build(t))
	}
	leo := c.servers[1].partition("keep", 0).Log().LogEndOffset()
	addr, conns := fakeLeader(t)
	pm := c.partitionState("keep")

	lai := func(to, ctrlID, ctrlEpoch int32, brokerEpoch int64, topic string, id [16]byte) *kmsg.LeaderAndISRResponse {
		req := kmsg.NewPtrLeaderAndISRRequest()
		req.ControllerID, req.ControllerEpoch, req.BrokerEpoch = ctrlID, ctrlEpoch, brokerEpoch
		lv := kmsg.NewLeaderAndISRRequestLiveLeader()
		lv.BrokerID, lv.Host, lv.Port = 99, addr.IP.String(), int32(addr.Port)
		req.LiveLeaders = append(req.LiveLeaders, lv)
		ts := kmsg.NewLeaderAndISRRequestTopicState()
		ts.Topic, ts.TopicID = topic, id
		ps := kmsg.NewLeaderAndISRRequestTopicPartition()
		ps.Topic, ps.Partition, ps.Leader, ps.LeaderEpoch, ps.ZKVersion = topic, 0, 99, pm.LeaderEpoch+1, pm.PartitionEpoch+1
		ps.ISR, ps.Replicas = []int32{99, 1}, []int32{99, 1, 2}
		ts.PartitionStates = append(ts.PartitionStates, ps)
		req.TopicStates = append(req.TopicStates, ts)
		return c.rc(to).do(req, 7).(*kmsg.LeaderAndISRResponse)
	}
	own, act := c.ctl(1).BrokerEpoch(1), c.active()
	epoch := c.ctl(act).ControllerEpoch()
	wantCode(t, "LeaderAndIsr naming a fake leader, broker epoch -1", lai(1, act, epoch, -1, "keep", top.ID).ErrorCode, kerr.StaleBrokerEpoch)
	wantCode(t, "LeaderAndIsr naming a fake leader, epoch 2147483647", lai(1, act, math.MaxInt32, own, "keep", top.ID).ErrorCode, kerr.StaleControllerEpoch)
	wantCode(t, "LeaderAndIsr naming a fake leader, from a broker that is not the controller", lai(1, 99, epoch+1, own, "keep", top.ID).ErrorCode, kerr.StaleControllerEpoch)

	// ../victim: even with every epoch right, the name is refused (sent
	// to a broker that is not the controller, which takes such requests).
	other := 3 - act
	resp := lai(other, act, epoch, c.ctl(other).BrokerEpoch(other), "../victim", controller.NewTopicID())
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("LeaderAndIsr for ../victim: error %v, %d topics", kerr.ErrorForCode(resp.ErrorCode), len(resp.Topics))
	}
	wantCode(t, "LeaderAndIsr for ../victim", resp.Topics[0].Partitions[0].ErrorCode, kerr.InvalidTopicException)
	for _, s := range c.servers {
		outside := filepath.Join(filepath.Dir(s.cfg.DataDir), "victim-0")
		if _, err := os.Stat(outside); !os.IsNotExist(err) {
			t.Fatalf("%s exists (err %v): a log outside the data directory", outside, err)
		}
	}

	// Give a wrongly believed request time to act, then check nothing did.
	time.Sleep(time.Second)
	p := c.servers[1].partition("keep", 0)
	if got := p.Log().LogEndOffset(); got != leo {
		t.Fatalf("the leader's log end is %d, was %d: it truncated", got, leo)
	}
	if !c.servers[1].isLeader(p) {
		t.Fatal("the real leader no longer leads")
	}
	if n := conns.Load(); n != 0 {
		t.Fatalf("brokers connected %d times to the fake leader", n)
	}
	rc.produceOK("keep", 0, plainBatch(time.Now().UnixMilli(), "after").build(t))
}

// Item 3: a ControlledShutdown v0 or v1 for another broker took it out of
// every ISR, and acks=-1 writes then failed.
func TestForgedControlledShutdownRefused(t *testing.T) {
	c := startZKCluster(t, 2, map[string]string{"min.insync.replicas": "2"})
	c.createTopic("keep", []int32{1, 2}, nil)
	act := c.active()
	victim := int32(3 - act)
	for _, v := range []int16{0, 1, 2, 3} {
		req := kmsg.NewPtrControlledShutdownRequest()
		req.BrokerID = victim
		if v >= 2 {
			req.BrokerEpoch = c.ctl(victim).BrokerEpoch(victim) + 1
		}
		resp := c.rc(act).do(req, v).(*kmsg.ControlledShutdownResponse)
		wantCode(t, "ControlledShutdown v"+strconv.Itoa(int(v))+" for broker "+strconv.Itoa(int(victim)), resp.ErrorCode, kerr.StaleBrokerEpoch)
	}
	time.Sleep(500 * time.Millisecond)
	if isr := c.partitionState("keep").ISR; len(isr) != 2 {
		t.Fatalf("after forged ControlledShutdowns the ISR is %v", isr)
	}
	c.rc(1).produceOK("keep", 0, plainBatch(time.Now().UnixMilli(), "acks-all").build(t))
}

// replicaFetch is a Fetch that claims to come from replica id at version
// v (v15+: with broker epoch epoch), for one partition from offset.
func forgedReplicaFetch(topic string, topicID [16]byte, id int32, epoch int64, leaderEpoch int32, offset int64, v int16) *kmsg.FetchRequest {
	req := fetchReq(0, 0, 1<<20, fetchPart{topic, 0, offset, 1 << 20})
	req.ReplicaID = id
	if v >= 15 {
		req.ReplicaID = -1
		req.ReplicaState.ID, req.ReplicaState.Epoch = id, epoch
	}
	req.Topics[0].TopicID = topicID
	req.Topics[0].Partitions[0].CurrentLeaderEpoch = leaderEpoch
	return req
}

func fetchAnswer(t *testing.T, resp *kmsg.FetchResponse) kmsg.FetchResponseTopicPartition {
	t.Helper()
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch: error %v, %d topics", kerr.ErrorForCode(resp.ErrorCode), len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0]
}

// Item 4: with the follower frozen, a client fetching as that follower got
// an acks=-1 write acknowledged and kept the follower in the ISR; replica
// id 99 read past the high watermark.
func TestForgedReplicaFetchRefused(t *testing.T) {
	c := startZKCluster(t, 2, map[string]string{"min.insync.replicas": "2", "replica.lag.time.max.ms": "2000"})
	top := c.createTopic("keep", []int32{1, 2}, nil)
	leader, follower := c.servers[1], c.servers[2]
	rc := c.rc(1)
	rc.produceOK("keep", 0, plainBatch(time.Now().UnixMilli(), "committed").build(t))
	waitFor(t, "the follower to catch up", 10*time.Second, func() bool {
		return follower.partition("keep", 0).Log().LogEndOffset() == leader.partition("keep", 0).Log().LogEndOffset()
	})
	p := leader.partition("keep", 0)
	epoch := p.LeaderEpoch()
	followerEpoch := c.ctl(2).BrokerEpoch(2)

	// Freeze the follower (the review used SIGSTOP), then write with
	// acks=-1 while a forger fetches as the follower from the new end.
	follower.pauseReplication(true)
	hw := p.HW()
	pc := c.rc(1)
	corr := pc.send(produceReq("keep", 0, -1, plainBatch(time.Now().UnixMilli(), "unreplicated").build(t)), 9)
	waitFor(t, "the write to be appended", 5*time.Second, func() bool { return p.Log().LogEndOffset() > hw })
	end := p.Log().LogEndOffset()

	// Replica id 99 (no replica) and this broker's own id read nothing,
	// least of all past the high watermark (Kafka's followerReplicaOrThrow
	// errors).
	if p.HW() >= end {
		t.Fatalf("no records above the high watermark to test with (HW %d, LEO %d)", p.HW(), end)
	}
	for _, f := range []struct {
		id          int32
		v           int16
		leaderEpoch int32
		want        *kerr.Error
	}{{99, 12, -1, kerr.NotLeaderForPartition}, {99, 12, epoch, kerr.UnknownLeaderEpoch}, {99, 15, epoch, kerr.UnknownLeaderEpoch}, {1, 12, -1, kerr.NotLeaderForPartition}} {
		got := fetchAnswer(t, c.rc(1).do(forgedReplicaFetch("keep", top.ID, f.id, -1, f.leaderEpoch, p.HW(), f.v), f.v).(*kmsg.FetchResponse))
		wantCode(t, "replica fetch as replica "+strconv.Itoa(int(f.id)), got.ErrorCode, f.want)
		if len(got.RecordBatches) > 0 {
			t.Fatalf("replica %d read %d bytes past the high watermark", f.id, len(got.RecordBatches))
		}
	}

	forger := c.rc(1)
	deadline := time.Now().Add(4 * time.Second) // past replica.lag.time.max.ms
	for time.Now().Before(deadline) {
		for _, f := range []struct {
			what  string
			v     int16
			epoch int64
		}{{"v12 (no broker epoch)", 12, -1}, {"v15, broker epoch -1", 15, -1}, {"v15, wrong broker epoch", 15, followerEpoch + 1}} {
			got := fetchAnswer(t, forger.do(forgedReplicaFetch("keep", top.ID, 2, f.epoch, epoch, end, f.v), f.v).(*kmsg.FetchResponse))
			wantCode(t, "replica fetch as the frozen follower, "+f.what, got.ErrorCode, kerr.StaleBrokerEpoch)
			if len(got.RecordBatches) > 0 {
				t.Fatalf("replica fetch as the frozen follower, %s: %d bytes of records", f.what, len(got.RecordBatches))
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	presp := kmsg.NewPtrProduceResponse()
	presp.SetVersion(9)
	pc.recv(corr, presp)
	if code := presp.Topics[0].Partitions[0].ErrorCode; code == 0 {
		t.Fatal("an acks=-1 write was acknowledged with the only follower frozen")
	}
	waitFor(t, "the frozen follower to leave the ISR", 10*time.Second, func() bool {
		return !slices.Contains(c.partitionState("keep").ISR, 2)
	})

	// The real follower, with its broker epoch (Fetch v15), comes back.
	follower.pauseReplication(false)
	c.waitISR("keep", 1, 2)
	rc.produceOK("keep", 0, plainBatch(time.Now().UnixMilli(), "both again").build(t))
}

// Item 6: AlterConfigs with strata.drain.requested.ms far in the future
// blocked every write, even after a restart.
func TestFarFutureDrainRefused(t *testing.T) {
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("keep", 1, nil)
	for _, v := range []string{"9000000000000000000", strconv.FormatInt(time.Now().Add(time.Hour).UnixMilli(), 10)} {
		req := kmsg.NewPtrAlterConfigsRequest()
		r := kmsg.NewAlterConfigsRequestResource()
		r.ResourceType = kmsg.ConfigResourceTypeBroker
		cfg := kmsg.NewAlterConfigsRequestResourceConfig()
		cfg.Name, cfg.Value = "strata.drain.requested.ms", kmsg.StringPtr(v)
		r.Configs = append(r.Configs, cfg)
		req.Resources = append(req.Resources, r)
		resp := rc.do(req, 2).(*kmsg.AlterConfigsResponse)
		wantCode(t, "AlterConfigs strata.drain.requested.ms="+v, resp.Resources[0].ErrorCode, kerr.InvalidConfig)
		if m := resp.Resources[0].ErrorMessage; m == nil || *m == "" {
			t.Fatal("refused drain without a message")
		}

		ireq := kmsg.NewPtrIncrementalAlterConfigsRequest()
		ir := kmsg.NewIncrementalAlterConfigsRequestResource()
		ir.ResourceType = kmsg.ConfigResourceTypeBroker
		ic := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		ic.Name, ic.Value = "strata.drain.requested.ms", kmsg.StringPtr(v)
		ir.Configs = append(ir.Configs, ic)
		ireq.Resources = append(ireq.Resources, ir)
		iresp := rc.do(ireq, 1).(*kmsg.IncrementalAlterConfigsResponse)
		wantCode(t, "IncrementalAlterConfigs strata.drain.requested.ms="+v, iresp.Resources[0].ErrorCode, kerr.InvalidConfig)
	}
	rc.produceOK("keep", 0, plainBatch(time.Now().UnixMilli(), "writable").build(t))
	// A marker stored in the future by other means is ignored.
	if err := ts.ctrl.SetBrokerConfigs(context.Background(), "", map[string]string{DrainConfig: "9000000000000000000"}); err != nil {
		t.Fatal(err)
	}
	ts.applyNow()
	rc.produceOK("keep", 0, plainBatch(time.Now().UnixMilli(), "still writable").build(t))
}

// In the embedded single-node mode there is no other broker: controller
// requests and replica fetches from the network are refused.
func TestEmbeddedRefusesInterBrokerRequests(t *testing.T) {
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	id := rc.createTopic("keep", 1, nil)
	rc.produceOK("keep", 0, plainBatch(time.Now().UnixMilli(), "a").build(t))

	um := kmsg.NewPtrUpdateMetadataRequest()
	um.ControllerEpoch, um.BrokerEpoch = math.MaxInt32, -1
	wantCode(t, "UpdateMetadata", rc.do(um, 8).(*kmsg.UpdateMetadataResponse).ErrorCode, kerr.StaleControllerEpoch)
	stop := kmsg.NewPtrStopReplicaRequest()
	stop.ControllerEpoch = math.MaxInt32
	st := kmsg.NewStopReplicaRequestTopic()
	st.Topic = "keep"
	sp := kmsg.NewStopReplicaRequestTopicPartitionState()
	sp.Delete = true
	st.PartitionStates = append(st.PartitionStates, sp)
	stop.Topics = append(stop.Topics, st)
	wantCode(t, "StopReplica", rc.do(stop, 4).(*kmsg.StopReplicaResponse).ErrorCode, kerr.StaleControllerEpoch)
	lai := kmsg.NewPtrLeaderAndISRRequest()
	lai.ControllerEpoch = math.MaxInt32
	wantCode(t, "LeaderAndIsr", rc.do(lai, 7).(*kmsg.LeaderAndISRResponse).ErrorCode, kerr.StaleControllerEpoch)

	cs := kmsg.NewPtrControlledShutdownRequest()
	cs.BrokerID, cs.BrokerEpoch = 0, -1
	wantCode(t, "ControlledShutdown", rc.do(cs, 3).(*kmsg.ControlledShutdownResponse).ErrorCode, kerr.StaleBrokerEpoch)

	for _, rid := range []int32{0, 99} {
		got := fetchAnswer(t, rc.do(forgedReplicaFetch("keep", id, rid, -1, -1, 0, 12), 12).(*kmsg.FetchResponse))
		wantCode(t, "replica fetch as "+strconv.Itoa(int(rid)), got.ErrorCode, kerr.NotLeaderForPartition)
	}
	if _, err := os.Stat(partDir(ts.Server, "keep")); err != nil {
		t.Fatal(err)
	}
	rc.produceOK("keep", 0, plainBatch(time.Now().UnixMilli(), "b").build(t))
}

// With the inter-broker listener apart from the clients' one, the
// requests only brokers send are refused on the clients' listener
// whatever their epochs (CLUSTER_AUTHORIZATION_FAILED, as Kafka answers
// a principal without ClusterAction), and the cluster, which sends them
// on its own listener, goes on working.
func TestInterBrokerRequestsOnlyOnInterBrokerListener(t *testing.T) {
	c := startZKCluster(t, 2, map[string]string{
		"listeners":                      "PLAINTEXT://127.0.0.1:0,REPLICATION://127.0.0.1:0",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT",
		"inter.broker.listener.name":     "REPLICATION",
	})
	c.createTopic("keep", []int32{1, 2}, nil)
	c.waitISR("keep", 1, 2)
	s := c.servers[1]
	client, _ := s.ListenerAddr("PLAINTEXT")
	rc := dialRaw(t, client.String())
	own := c.ctl(1).BrokerEpoch(1)
	epoch := c.ctl(c.active()).ControllerEpoch()

	um := kmsg.NewPtrUpdateMetadataRequest()
	um.ControllerID, um.ControllerEpoch, um.BrokerEpoch = c.active(), epoch, own
	wantCode(t, "UpdateMetadata on the client listener", rc.do(um, 8).(*kmsg.UpdateMetadataResponse).ErrorCode, kerr.ClusterAuthorizationFailed)

	stop := kmsg.NewPtrStopReplicaRequest()
	stop.ControllerID, stop.ControllerEpoch, stop.BrokerEpoch = c.active(), epoch, own
	st := kmsg.NewStopReplicaRequestTopic()
	st.Topic = "keep"
	sp := kmsg.NewStopReplicaRequestTopicPartitionState()
	sp.Partition, sp.LeaderEpoch, sp.Delete = 0, -2, true
	st.PartitionStates = append(st.PartitionStates, sp)
	stop.Topics = append(stop.Topics, st)
	wantCode(t, "StopReplica on the client listener", rc.do(stop, 4).(*kmsg.StopReplicaResponse).ErrorCode, kerr.ClusterAuthorizationFailed)

	cs := kmsg.NewPtrControlledShutdownRequest()
	cs.BrokerID, cs.BrokerEpoch = 2, c.ctl(2).BrokerEpoch(2)
	wantCode(t, "ControlledShutdown on the client listener", rc.do(cs, 3).(*kmsg.ControlledShutdownResponse).ErrorCode, kerr.ClusterAuthorizationFailed)

	if _, err := os.Stat(partDir(s, "keep")); err != nil {
		t.Fatalf("broker 1 lost its partition directory: %v", err)
	}
	// Replication, on the REPLICATION listener, goes on: both brokers
	// stay in the ISR of a new topic and serve what was acknowledged.
	c.createTopic("after", []int32{2, 1}, nil)
	c.waitISR("after", 2, 1)
	off := c.rc(1).produceOK("keep", 0, plainBatch(time.Now().UnixMilli(), "a").build(t))
	if got := c.rc(1).fetchOne("keep", 0, off, 1<<20); got.ErrorCode != 0 || len(got.RecordBatches) == 0 {
		t.Fatalf("fetch after the refusals: error %v, %d bytes", kerr.ErrorForCode(got.ErrorCode), len(got.RecordBatches))
	}
}
