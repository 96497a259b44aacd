package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/internal/testenv"
)

// zkRestartSessionTimeout is the brokers' zookeeper.session.timeout.ms in
// the ZooKeeper restart tests.
const zkRestartSessionTimeout = 6 * time.Second

// TestClusterZooKeeperRestartWithinSession: ZooKeeper is killed with -9
// under acks=-1 load and restarted on the same port and data after 3 s,
// less than zookeeper.session.timeout.ms.
func TestClusterZooKeeperRestartWithinSession(t *testing.T) {
	zooKeeperRestart(t, 3*time.Second, false)
}

// TestClusterZooKeeperRestartAfterSessionTimeout: as above, but ZooKeeper
// stays down for 10 s, longer than zookeeper.session.timeout.ms. A
// restarted ZooKeeper server restores the sessions it had and starts their
// timeouts afresh, so brokers that reconnect at once keep their sessions.
func TestClusterZooKeeperRestartAfterSessionTimeout(t *testing.T) {
	zooKeeperRestart(t, 10*time.Second, false)
}

// TestClusterZooKeeperRestartUnansweredConnect: as in
// TestClusterZooKeeperRestartWithinSession, but for the last 1.5 s of the
// outage ZooKeeper's port accepts connections and never answers them, as
// a ZooKeeper server that is still starting can do (seen with Debian's
// server under load: its brokers then waited 40 s). Brokers must give up
// on such a connection within their session's read timeout, as Kafka's
// client does, and reach the restarted server; had their sessions
// expired meanwhile, they register again and a controller is elected
// anew.
func TestClusterZooKeeperRestartUnansweredConnect(t *testing.T) {
	zooKeeperRestart(t, 3*time.Second, true)
}

// zooKeeperRestart: three brokers on ZooKeeper, a topic with RF=3 and
// min.insync.replicas=2, two idempotent acks=-1 producers running. ZooKeeper
// is killed with -9, kept down for down, and started again with the same
// data. Then the cluster converges (one controller, named by /controller
// and by every broker's metadata; every partition led, with a full ISR;
// every broker reporting the same leader and leader epoch), no offset is
// acknowledged twice (two leaders of one partition acknowledging writes
// would do that, or lose one side's), and an independent consumer finds
// every acknowledged record at its offset, once, with no gaps. Whether
// producers were acknowledged while ZooKeeper was down is logged, not
// asserted: Kafka keeps serving with the current leaders as long as no
// ISR has to change, but does not promise it. With unanswered, the last
// 1.5 s of the outage hold every connection made to ZooKeeper's port
// unanswered (open until the test ends).
func zooKeeperRestart(t *testing.T, down time.Duration, unanswered bool) {
	zk := testenv.StartZooKeeper(t)
	const chroot = "/zkrestart"
	sets := []string{
		"min.insync.replicas=2", "replica.lag.time.max.ms=3000",
		fmt.Sprintf("zookeeper.session.timeout.ms=%d", zkRestartSessionTimeout.Milliseconds()),
	}
	bs, seeds := startZKBrokers(t, zk.Addr()+chroot, sets)
	const topic, partitions = "zk-restart", 3
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	createReplicatedTopic(t, ctx, seeds, topic, partitions)

	ids := []int32{1, 2, 3}
	converged := func(zc *gozk.Conn) (clusterView, string, bool) {
		ctl, err := zkController(zc, chroot)
		if err != nil {
			return clusterView{}, "/controller: " + err.Error(), false
		}
		var views []clusterView
		for _, id := range ids {
			v, err := brokerView(ctx, bs[id].Addr(), topic)
			if err != nil {
				return clusterView{}, fmt.Sprintf("broker %d: %v", id, err), false
			}
			views = append(views, v)
		}
		for i, v := range views {
			if s := v.String(); v.controller != ctl || v.brokers != 3 || !v.full(partitions) || s != views[0].String() {
				return clusterView{}, fmt.Sprintf("/controller names %d; broker %d sees %s", ctl, ids[i], s), false
			}
		}
		return views[0], "", true
	}
	// converge waits for the cluster to converge, logging the states it
	// passes through.
	converge := func(when string, d time.Duration) clusterView {
		t.Helper()
		zc, _, err := gozk.Connect([]string{zk.Addr()}, 5*time.Second, gozk.WithLogInfo(false))
		if err != nil {
			t.Fatal(err)
		}
		defer zc.Close()
		var last string
		logged := 0
		deadline := time.Now().Add(d)
		for {
			v, why, ok := converged(zc)
			if ok {
				return v
			}
			if why != last && logged < 20 {
				t.Logf("%s: not converged yet: %s", when, why)
				logged++
			}
			last = why
			if time.Now().After(deadline) {
				t.Fatalf("%s: the cluster did not converge within %v: %s", when, d, last)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	before := converge("after creation", 60*time.Second)
	t.Logf("before: %s", before)

	led := newLedger()
	var gapMu sync.Mutex
	var lastAck time.Time
	var maxGap time.Duration
	ack := func(r *kgo.Record, err error) {
		led.ack(r, err)
		if err != nil {
			return
		}
		now := time.Now()
		gapMu.Lock()
		if !lastAck.IsZero() && now.Sub(lastAck) > maxGap {
			maxGap = now.Sub(lastAck)
		}
		lastAck = now
		gapMu.Unlock()
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var clients []*kgo.Client
	for prod := range 2 {
		cl := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.DefaultProduceTopic(topic), kgo.MaxBufferedRecords(500), kgo.ProducerLinger(2*time.Millisecond),
			kgo.RecordRetries(1<<30))
		clients = append(clients, cl)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(prod), 11))
			for seq := 0; ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				r := &kgo.Record{
					Key:     fmt.Appendf(nil, "p%d-%d", prod, seq),
					Value:   append(fmt.Appendf(nil, "p%d-s%d|", prod, seq), randBytes(rng, 100)...),
					Headers: []kgo.RecordHeader{{Key: "seq", Value: []byte(strconv.Itoa(seq))}},
				}
				led.mu.Lock()
				led.produced++
				led.mu.Unlock()
				cl.Produce(ctx, r, ack)
				if seq%20 == 19 {
					time.Sleep(10 * time.Millisecond) // pacing (about 2,000 records/s each), not synchronisation
				}
			}
		}()
	}
	stopProducers := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}
	defer stopProducers()
	acked := func(n int, d time.Duration, what string) {
		t.Helper()
		target := led.acks() + n
		waitFor(t, d, what, func() bool { return led.acks() >= target })
	}
	acked(2000, 60*time.Second, "acks before ZooKeeper is killed")

	zk.Kill9()
	killed := time.Now()
	atKill := led.acks()
	// The outage itself is what the test is about: ZooKeeper stays down
	// for the whole of down whatever the brokers do meanwhile.
	const holdFor = 1500 * time.Millisecond
	if !unanswered {
		time.Sleep(down)
	} else {
		time.Sleep(down - holdFor)
		// go-zookeeper retries a server every second, so each broker
		// lands one connection attempt here.
		held := holdConnections(t, zk.Addr())
		time.Sleep(holdFor)
		t.Logf("held %d connections to ZooKeeper's port unanswered", held())
	}
	duringOutage := led.acks() - atKill
	zk.Start()
	restarted := time.Now()
	// Once ZooKeeper serves again, a broker reconnects within about a
	// second (Kafka's client retries at once); if its session expired
	// meanwhile it registers again and the controller is elected anew.
	// 30 s leaves room for a loaded machine.
	after := converge("after ZooKeeper restarted", 30*time.Second)
	convergedIn := time.Since(restarted)
	acked(2000, 60*time.Second, "acks after the cluster converged")

	stopProducers()
	for i, cl := range clients {
		fctx, fcancel := context.WithTimeout(ctx, 60*time.Second)
		if err := cl.Flush(fctx); err != nil {
			t.Errorf("producer %d: flush: %v", i, err)
		}
		fcancel()
	}
	gapMu.Lock()
	gap := maxGap
	gapMu.Unlock()
	t.Logf("ZooKeeper down %v (zookeeper.session.timeout.ms %v): %d records acknowledged while it was down; "+
		"converged %v after the restart (%v after the kill); longest gap between acknowledgements %v",
		down, zkRestartSessionTimeout, duringOutage, convergedIn.Round(10*time.Millisecond),
		(restarted.Sub(killed) + convergedIn).Round(10*time.Millisecond), gap.Round(time.Millisecond))
	t.Logf("after: %s", after)
	for p, a := range after.parts {
		if b := before.parts[p]; a.epoch < b.epoch {
			t.Errorf("partition %d: leader epoch went from %d back to %d", p, b.epoch, a.epoch)
		}
	}

	led.mu.Lock()
	defer led.mu.Unlock()
	t.Logf("produced %d, acknowledged %d, failed %d", led.produced, led.count, len(led.failed))
	for i, f := range led.failed {
		if i == 5 {
			t.Errorf("... %d failed records in all", len(led.failed))
			break
		}
		t.Errorf("record failed (the producers retry without limit): %s", f)
	}
	for i, c := range led.clashes {
		if i == 5 {
			t.Errorf("... %d offsets acknowledged twice in all", len(led.clashes))
			break
		}
		t.Errorf("offset acknowledged twice (two leaders acknowledged writes): %s", c)
	}
	start, end := offsets(t, seeds[0], topic)
	recs := consumeAll(t, seeds[0], topic, end)
	verifyCrashLog(t, led, recs, start, end)
	// Leader epochs only grow along a partition's log.
	lastEpoch := map[int32]int32{}
	for _, r := range recs {
		if e, ok := lastEpoch[r.Partition]; ok && r.LeaderEpoch < e {
			t.Errorf("partition %d offset %d: leader epoch %d after %d", r.Partition, r.Offset, r.LeaderEpoch, e)
		}
		lastEpoch[r.Partition] = r.LeaderEpoch
	}
}

// zkController reads the broker id in /controller under chroot with an
// independent ZooKeeper client.
func zkController(zc *gozk.Conn, chroot string) (int32, error) {
	type result struct {
		data []byte
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		b, _, err := zc.Get(chroot + "/controller")
		ch <- result{b, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-time.After(3 * time.Second):
		return -1, fmt.Errorf("no answer from ZooKeeper within 3s")
	}
	if r.err != nil {
		return -1, r.err
	}
	var ctl struct {
		BrokerID int32 `json:"brokerid"`
	}
	if err := json.Unmarshal(r.data, &ctl); err != nil {
		return -1, fmt.Errorf("%w: %s", err, r.data)
	}
	return ctl.BrokerID, nil
}

// clusterView is one broker's Metadata answer for a topic.
type clusterView struct {
	controller int32
	brokers    int
	parts      map[int32]partView
}

type partView struct {
	err      int16
	leader   int32
	epoch    int32
	replicas []int32
	isr      []int32
}

func (v clusterView) full(partitions int) bool {
	if len(v.parts) != partitions {
		return false
	}
	for _, p := range v.parts {
		if p.err != 0 || p.leader < 0 || len(p.isr) != len(p.replicas) || len(p.replicas) == 0 {
			return false
		}
	}
	return true
}

func (v clusterView) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "controller %d, %d brokers;", v.controller, v.brokers)
	ps := make([]int32, 0, len(v.parts))
	for p := range v.parts {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	for _, p := range ps {
		pv := v.parts[p]
		isr := slices.Clone(pv.isr)
		slices.Sort(isr)
		fmt.Fprintf(&sb, " %d: leader %d epoch %d isr %v", p, pv.leader, pv.epoch, isr)
		if pv.err != 0 {
			fmt.Fprintf(&sb, " error %d", pv.err)
		}
		sb.WriteString(";")
	}
	return sb.String()
}

// brokerView asks the broker at addr itself (not any broker the client
// picks) for the metadata of topic.
func brokerView(ctx context.Context, addr, topic string) (clusterView, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
	if err != nil {
		return clusterView{}, err
	}
	defer cl.Close()
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
	defer rcancel()
	kresp, err := cl.SeedBrokers()[0].Request(rctx, req)
	if err != nil {
		return clusterView{}, err
	}
	resp := kresp.(*kmsg.MetadataResponse)
	v := clusterView{controller: resp.ControllerID, brokers: len(resp.Brokers), parts: map[int32]partView{}}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		for _, p := range t.Partitions {
			v.parts[p.Partition] = partView{err: p.ErrorCode, leader: p.Leader, epoch: p.LeaderEpoch, replicas: p.Replicas, isr: p.ISR}
		}
	}
	return v, nil
}

// holdConnections listens on addr (ZooKeeper's port while it is down) and
// accepts connections without ever answering them. The listener closes
// when the returned function is called, which reports how many
// connections it accepted; they stay open until the test ends.
func holdConnections(t *testing.T, addr string) func() int {
	t.Helper()
	var l net.Listener
	var err error
	// The port was ZooKeeper's a moment ago; retry briefly if the kernel
	// has not released it yet.
	waitFor(t, 5*time.Second, "listening on ZooKeeper's port", func() bool {
		l, err = net.Listen("tcp", addr)
		return err == nil
	})
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return func() int {
		l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return len(conns)
	}
}
