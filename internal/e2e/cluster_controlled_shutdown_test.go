package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/testenv"
)

// TestClusterControlledShutdown: three brokers on a real ZooKeeper, RF=3,
// min.insync.replicas=2, an idempotent acks=-1 producer with default
// retries running. The leader of partition 0 gets SIGTERM: it asks the
// controller to move its leadership away before it exits, so the producer
// sees no failed record, every acknowledged record is there afterwards, and
// the partitions it led are unavailable for well under a second (measured
// as the longest gap between acknowledgements of those partitions).
func TestClusterControlledShutdown(t *testing.T) {
	zk := testenv.StartZooKeeper(t)
	sets := []string{"min.insync.replicas=2", "zookeeper.session.timeout.ms=6000"}
	bs, seeds := startZKBrokers(t, zk.Addr(), sets)
	const topic, partitions = "shutdown", 3
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	createReplicatedTopic(t, ctx, seeds, topic, partitions)
	metadata := func() (kadm.Metadata, bool) {
		md, err := clusterMetadata(ctx, seeds, topic)
		return md, err == nil
	}
	var md kadm.Metadata
	waitFor(t, 30*time.Second, "a full ISR", func() bool {
		var ok bool
		md, ok = metadata()
		ps := md.Topics[topic].Partitions
		ok = ok && len(ps) == partitions
		for _, p := range ps {
			ok = ok && p.Err == nil && p.Leader > 0 && len(p.ISR) == 3
		}
		return ok
	})
	victim := md.Topics[topic].Partitions[0].Leader
	var led []int32 // partitions the victim leads
	for _, p := range md.Topics[topic].Partitions {
		if p.Leader == victim {
			led = append(led, p.Partition)
		}
	}
	var other string
	for id, b := range bs {
		if id != victim {
			other = b.Addr()
		}
	}

	l := newLedger()
	var gapMu sync.Mutex
	lastAck := map[int32]time.Time{}
	var maxGap time.Duration
	measuring := false
	ack := func(r *kgo.Record, err error) {
		l.ack(r, err)
		if err != nil || !slices.Contains(led, r.Partition) {
			return
		}
		now := time.Now()
		gapMu.Lock()
		defer gapMu.Unlock()
		if prev, ok := lastAck[r.Partition]; ok && measuring && now.Sub(prev) > maxGap {
			maxGap = now.Sub(prev)
		}
		lastAck[r.Partition] = now
	}
	cl := newClient(t, other, kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.MaxBufferedRecords(500), kgo.ProducerLinger(time.Millisecond))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(1, 7))
		for seq := 0; ; seq++ {
			select {
			case <-stop:
				return
			default:
			}
			r := &kgo.Record{
				Topic:   topic,
				Key:     fmt.Appendf(nil, "p0-%d", seq),
				Value:   append(fmt.Appendf(nil, "p0-s%d|", seq), randBytes(rng, 100)...),
				Headers: []kgo.RecordHeader{{Key: "seq", Value: []byte(strconv.Itoa(seq))}},
			}
			l.mu.Lock()
			l.produced++
			l.mu.Unlock()
			cl.Produce(ctx, r, ack)
		}
	}()
	stopProducer := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}
	defer stopProducer()
	acked := func(n int, what string) {
		t.Helper()
		target := l.acks() + n
		waitFor(t, 60*time.Second, what, func() bool { return l.acks() >= target })
	}

	acked(2000, "acks before the shutdown")
	gapMu.Lock()
	measuring = true
	gapMu.Unlock()
	// Watch for the new leaders while the victim shuts down.
	sigterm := time.Now()
	moved := make(chan time.Duration, 1)
	go func() {
		for ctx.Err() == nil {
			m, ok := metadata()
			done := ok
			for _, p := range led {
				pm := m.Topics[topic].Partitions[p]
				done = done && pm.Leader > 0 && pm.Leader != victim
			}
			if done {
				moved <- time.Since(sigterm)
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()
	t.Logf("SIGTERM to broker %d, leader of partitions %v", victim, led)
	bs[victim].Stop()
	stopped := time.Since(sigterm)
	var toNewLeader time.Duration
	select {
	case toNewLeader = <-moved:
	case <-time.After(30 * time.Second):
		t.Fatal("no new leader in metadata within 30s of SIGTERM")
	}
	acked(2000, "acks after the shutdown")
	stopProducer()
	fctx, fcancel := context.WithTimeout(ctx, 60*time.Second)
	if err := cl.Flush(fctx); err != nil {
		t.Errorf("flush: %v", err)
	}
	fcancel()

	gapMu.Lock()
	gap := maxGap
	gapMu.Unlock()
	t.Logf("broker exited %v after SIGTERM; new leaders in metadata after %v; longest gap between acknowledgements of its partitions %v",
		stopped, toNewLeader, gap)
	if gap >= 2*time.Second {
		t.Errorf("partitions unavailable for %v, want well under a second (< 2s)", gap)
	}
	if toNewLeader >= 2*time.Second {
		t.Errorf("new leaders in metadata %v after SIGTERM, want < 2s", toNewLeader)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("produced %d, acknowledged %d, failed %d", l.produced, l.count, len(l.failed))
	for i, f := range l.failed {
		if i == 5 {
			break
		}
		t.Errorf("record failed: %s", f)
	}
	for i, c := range l.clashes {
		if i == 5 {
			break
		}
		t.Errorf("offset acknowledged twice: %s", c)
	}
	start, end := offsets(t, other, topic)
	recs := consumeAll(t, other, topic, end)
	verifyCrashLog(t, l, recs, start, end)
}
