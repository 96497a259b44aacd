package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/testenv"
)

// TestClusterKill9LeaderThenController: three brokers on a real ZooKeeper,
// a topic with RF=3 and min.insync.replicas=2, idempotent acks=-1
// producers running. The leader of partition 0 is killed with -9 and
// restarted, then the controller; after each, the cluster converges back
// to a full ISR, and at the end an independent consumer finds every
// acknowledged record at its offset, with no gaps and nothing twice.
func TestClusterKill9LeaderThenController(t *testing.T) {
	zk := testenv.StartZooKeeper(t)
	sets := []string{
		"min.insync.replicas=2", "replica.lag.time.max.ms=3000",
		"zookeeper.session.timeout.ms=2000", "log.segment.bytes=1048576",
	}
	bs, seeds := startZKBrokers(t, zk.Addr()+"/cluster", sets)
	const topic, partitions = "replicated", 3
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	createReplicatedTopic(t, ctx, seeds, topic, partitions)
	// fullISR reports whether every partition has all three replicas in
	// sync with a live leader, as a fresh client sees it.
	state := func() (string, kadm.Metadata, bool) {
		md, err := clusterMetadata(ctx, seeds, topic)
		if err != nil {
			return err.Error(), md, false
		}
		var sb strings.Builder
		// A topic the answering broker does not yet know whole has no
		// partitions (LEADER_NOT_AVAILABLE): not converged.
		ok := len(md.Brokers) == 3 && len(md.Topics[topic].Partitions) == partitions
		for _, p := range md.Topics[topic].Partitions.Sorted() {
			fmt.Fprintf(&sb, "%d:leader %d isr %v; ", p.Partition, p.Leader, p.ISR)
			ok = ok && p.Err == nil && p.Leader >= 0 && len(p.ISR) == 3
		}
		return sb.String(), md, ok
	}
	converge := func(when string) kadm.Metadata {
		t.Helper()
		var last string
		deadline := time.Now().Add(60 * time.Second)
		for {
			s, m, ok := state()
			if ok {
				return m
			}
			last = s
			_ = m
			if time.Now().After(deadline) {
				t.Fatalf("%s: no full ISR after 60s: %s", when, last)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	md := converge("after creation")

	led := newLedger()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var clients []*kgo.Client
	for prod := range 2 {
		cl := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()),
			kgo.MaxBufferedRecords(500), kgo.ProducerLinger(time.Millisecond), kgo.RecordRetries(1<<30))
		clients = append(clients, cl)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(prod), 7))
			for seq := 0; ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				r := &kgo.Record{
					Topic:   topic,
					Key:     fmt.Appendf(nil, "p%d-%d", prod, seq),
					Value:   append(fmt.Appendf(nil, "p%d-s%d|", prod, seq), randBytes(rng, 100)...),
					Headers: []kgo.RecordHeader{{Key: "seq", Value: []byte(strconv.Itoa(seq))}},
				}
				led.mu.Lock()
				led.produced++
				led.mu.Unlock()
				cl.Produce(ctx, r, led.ack)
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
	acked := func(n int, what string) {
		t.Helper()
		target := led.acks() + n
		waitFor(t, 90*time.Second, what, func() bool { return led.acks() >= target })
	}

	acked(2000, "acks before the first kill")
	leader := md.Topics[topic].Partitions[0].Leader
	t.Logf("killing broker %d, leader of partition 0", leader)
	bs[leader].Kill9()
	acked(2000, "acks after the leader was killed")
	bs[leader].Restart()
	md = converge("after the old leader restarted")

	acked(1000, "acks before killing the controller")
	ctrl := md.Controller
	t.Logf("killing broker %d, the controller", ctrl)
	bs[ctrl].Kill9()
	acked(2000, "acks after the controller was killed")
	bs[ctrl].Restart()
	converge("after the old controller restarted")
	acked(500, "acks after both restarts")

	stopProducers()
	for i, cl := range clients {
		fctx, fcancel := context.WithTimeout(ctx, 60*time.Second)
		if err := cl.Flush(fctx); err != nil {
			t.Errorf("producer %d: flush: %v", i, err)
		}
		fcancel()
	}
	led.mu.Lock()
	defer led.mu.Unlock()
	t.Logf("produced %d, acknowledged %d, failed %d", led.produced, led.count, len(led.failed))
	for i, f := range led.failed {
		if i == 5 {
			break
		}
		t.Errorf("record failed: %s", f)
	}
	for i, c := range led.clashes {
		if i == 5 {
			break
		}
		t.Errorf("offset acknowledged twice: %s", c)
	}
	start, end := offsets(t, seeds[0], topic)
	recs := consumeAll(t, seeds[0], topic, end)
	verifyCrashLog(t, led, recs, start, end)
}

// TestClusterPausedFollowerLeavesAndRejoinsISR: a follower stopped with
// SIGSTOP drops out of the ISR (the leader sees it lag past
// replica.lag.time.max.ms, or the controller sees its ZooKeeper session
// expire), producers with acks=-1 keep going on the other two, and after
// SIGCONT it catches up and rejoins the ISR.
func TestClusterPausedFollowerLeavesAndRejoinsISR(t *testing.T) {
	zk := testenv.StartZooKeeper(t)
	sets := []string{"min.insync.replicas=2", "replica.lag.time.max.ms=1500", "zookeeper.session.timeout.ms=4000"}
	bs, seeds := startZKBrokers(t, zk.Addr(), sets)
	const topic = "paused"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createReplicatedTopic(t, ctx, seeds, topic, 1)
	isr := func() (leader int32, isr []int32) {
		md, err := clusterMetadata(ctx, seeds, topic)
		if err != nil {
			return -1, nil
		}
		p := md.Topics[topic].Partitions[0]
		return p.Leader, p.ISR
	}
	var leader int32
	waitFor(t, 30*time.Second, "a full ISR", func() bool {
		var s []int32
		leader, s = isr()
		return leader > 0 && len(s) == 3
	})
	follower := int32(1)
	for follower == leader {
		follower++
	}
	prod := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	produce := func(n int) {
		t.Helper()
		for i := 0; i < n; i++ {
			if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
	}
	produce(100)
	if err := bs[follower].Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	defer func() {
		if !resumed {
			bs[follower].Signal(syscall.SIGCONT)
		}
	}()
	waitFor(t, 30*time.Second, fmt.Sprintf("broker %d out of the ISR", follower), func() bool {
		produce(5) // acks=-1 keeps working with ISR 2 >= min.insync.replicas
		_, s := isr()
		return len(s) == 2 && !containsBroker(s, follower)
	})
	produce(100)
	if err := bs[follower].Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	waitFor(t, 60*time.Second, fmt.Sprintf("broker %d back in the ISR", follower), func() bool {
		_, s := isr()
		return len(s) == 3
	})
}

func containsBroker(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
