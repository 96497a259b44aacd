package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/internal/testenv"
)

// reassignCluster is a ZooKeeper cluster with tiering on MinIO, for the
// reassignment tests: brokers 1-3 start at once, more with add.
type reassignCluster struct {
	t      *testing.T
	zk     *testenv.ZooKeeper
	chroot string
	ctx    context.Context
	sets   []string
	args   []string
	bs     map[int32]*testenv.Broker
	seeds  []string
}

func startReassignCluster(t *testing.T, ctx context.Context, chroot string) *reassignCluster {
	zk := testenv.StartZooKeeper(t)
	m := testenv.SharedMinIO(t)
	bucket := m.NewBucket(t)
	t.Setenv("AWS_ACCESS_KEY_ID", m.AccessKey())
	t.Setenv("AWS_SECRET_ACCESS_KEY", m.SecretKey())
	c := &reassignCluster{t: t, ctx: ctx, bs: map[int32]*testenv.Broker{}, zk: zk, chroot: "/" + chroot,
		sets: []string{
			"min.insync.replicas=2", "replica.lag.time.max.ms=3000", "zookeeper.session.timeout.ms=3000",
			"remote.log.manager.task.interval.ms=200", "log.retention.check.interval.ms=200",
		},
		args: []string{"--zookeeper", zk.Addr() + "/" + chroot, "--tier", "s3://" + bucket + "/strata",
			"--s3-endpoint", m.Endpoint(), "--s3-region", testenv.MinIORegion},
	}
	for id := int32(1); id <= 3; id++ {
		c.add(id)
	}
	return c
}

// add starts broker id on an empty data directory.
func (c *reassignCluster) add(id int32) *testenv.Broker {
	b := testenv.StartBroker(c.t, testenv.BrokerOptions{ID: int(id), Sets: c.sets, Args: c.args, Metrics: "127.0.0.1:0"})
	c.bs[id] = b
	c.seeds = append(c.seeds, b.Addr())
	return b
}

func (c *reassignCluster) admin() *kadm.Client {
	return kadm.NewClient(newClient(c.t, c.seeds[0], kgo.SeedBrokers(c.seeds...)))
}

// state is partition 0's leader, replicas and ISR as a fresh client sees
// them; leader -1 when it cannot tell.
func (c *reassignCluster) state(topic string) (leader int32, replicas, isr []int32) {
	md, err := clusterMetadata(c.ctx, c.seeds, topic)
	if err != nil {
		return -1, nil, nil
	}
	p, ok := md.Topics[topic].Partitions[0]
	if !ok || p.Err != nil {
		return -1, nil, nil
	}
	return p.Leader, p.Replicas, p.ISR
}

// reassigning lists the reassignments in progress (all of them: a null
// topic list, which kadm cannot send).
func (c *reassignCluster) reassigning() (map[string][]int32, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.seeds...))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = 5000
	rctx, cancel := context.WithTimeout(c.ctx, 5*time.Second)
	defer cancel()
	resp, err := req.RequestWith(rctx, cl)
	if err != nil {
		return nil, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return nil, err
	}
	out := map[string][]int32{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[fmt.Sprintf("%s-%d", t.Topic, p.Partition)] = p.AddingReplicas
		}
	}
	return out, nil
}

func (c *reassignCluster) createTiered(topic string, segBytes, localBytes int) {
	str := func(s string) *string { return &s }
	if r, err := c.admin().CreateTopic(c.ctx, 1, 3, map[string]*string{
		"remote.storage.enable": str("true"), "segment.bytes": str(strconv.Itoa(segBytes)),
		"local.retention.bytes": str(strconv.Itoa(localBytes)), "file.delete.delay.ms": str("0"),
		"min.insync.replicas": str("2"),
	}, topic); err != nil || r.Err != nil {
		c.t.Fatalf("create topic: %v %v", err, r.Err)
	}
	waitFor(c.t, 30*time.Second, "a full ISR", func() bool {
		l, _, isr := c.state(topic)
		return l > 0 && len(isr) == 3
	})
}

// ackLog records what an idempotent acks=-1 producer had acknowledged.
type ackLog struct {
	mu    sync.Mutex
	acked map[int64][]byte
	errs  []error
}

func (a *ackLog) add(r *kgo.Record, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		a.errs = append(a.errs, err)
		return
	}
	a.acked[r.Offset] = r.Value
}

func (a *ackLog) n() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.acked)
}

// moveValue is record i's value: unique, so that duplicates show.
func moveValue(i, size int) []byte {
	v := fmt.Appendf(nil, "%08d-", i)
	return append(v, bytes.Repeat([]byte{byte('a' + i%26)}, size-len(v))...)
}

// verifyAcked reads partition 0 from offset 0 with a fresh consumer and
// checks every acknowledged record at its offset, and no value twice.
func verifyAcked(t *testing.T, ctx context.Context, seeds []string, topic string, a *ackLog) {
	t.Helper()
	verifyPartition(t, ctx, seeds, topic, 0, a)
}

// verifyPartition is verifyAcked for partition part.
func verifyPartition(t *testing.T, ctx context.Context, seeds []string, topic string, part int32, a *ackLog) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	var end int64
	for o := range a.acked {
		end = max(end, o+1)
	}
	cons := newClient(t, seeds[0], kgo.SeedBrokers(seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {part: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(200*time.Millisecond))
	seen := map[string]int64{}
	next := int64(0)
	for next < end {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed up to offset %d of %d before the deadline", next, end)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("consume: %v", err) })
		for _, r := range fs.Records() {
			if r.Offset != next {
				t.Fatalf("consumer saw offset %d after %d", r.Offset, next-1)
			}
			if want, ok := a.acked[r.Offset]; ok && !bytes.Equal(r.Value, want) {
				t.Fatalf("offset %d: %q, acknowledged %q", r.Offset, r.Value[:min(len(r.Value), 16)], want[:16])
			}
			k := string(r.Value)
			if prev, dup := seen[k]; dup {
				t.Fatalf("value %.16q at offsets %d and %d: an idempotent duplicate", k, prev, r.Offset)
			}
			seen[k] = r.Offset
			next++
		}
	}
	for o := range a.acked {
		if o >= next {
			t.Fatalf("acknowledged offset %d missing", o)
		}
	}
}

// TestClusterReassignTailOnly moves a replica of a tiered partition with
// a long, mostly uploaded history to a broker that never saw it, while an
// idempotent acks=-1 producer and a consumer run. The partition's leader
// is the replica removed, so leadership moves too. The new replica starts
// at the leader's last tiered offset: the bytes it fetched from other
// brokers are about the local tail, not the history; it joins the ISR,
// the reassignment completes, the removed broker deletes its copy, and
// every acknowledged record reads back once, the old ones from the
// bucket.
func TestClusterReassignTailOnly(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := startReassignCluster(t, ctx, "reassign")
	const topic, segBytes, localBytes, valueSize = "moving", 65536, 262144, 1000
	c.createTiered(topic, segBytes, localBytes)

	acks := &ackLog{acked: map[int64][]byte{}}
	prod := newClient(t, c.seeds[0], kgo.SeedBrokers(c.seeds...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MetadataMinAge(100*time.Millisecond))
	i := 0
	produce := func(n int) {
		t.Helper()
		var recs []*kgo.Record
		for range n {
			recs = append(recs, &kgo.Record{Value: moveValue(i, valueSize), Partition: 0})
			i++
		}
		for _, r := range prod.ProduceSync(ctx, recs...) {
			acks.add(r.Record, r.Err)
		}
		if len(acks.errs) > 0 {
			t.Fatalf("produce: %v", acks.errs[0])
		}
	}
	for range 200 {
		produce(20) // about 4 MB: 15 times the local retention
	}
	history := int64(acks.n()) * valueSize
	var leader int32 = -1
	waitFor(t, 30*time.Second, "a leader", func() bool {
		leader, _, _ = c.state(topic)
		return leader > 0
	})
	waitState(t, 90*time.Second, "the history uploaded but for the last segments, and gone from the leader's disk", func() (string, bool) {
		tiered, msg := ownOffset(ctx, t, leader, c.bs[leader].Addr(), topic, -5)
		start, _ := ownOffset(ctx, t, leader, c.bs[leader].Addr(), topic, -4)
		return fmt.Sprintf("last tiered %d %s, local start %d", tiered, msg, start),
			tiered >= int64(acks.n())-3*segBytes/valueSize && start > 0
	})

	b4 := c.add(4)
	// Load during the move: an idempotent producer and a consumer.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			var recs []*kgo.Record
			for range 10 {
				recs = append(recs, &kgo.Record{Value: moveValue(i, valueSize), Partition: 0})
				i++
			}
			for _, r := range prod.ProduceSync(ctx, recs...) {
				acks.add(r.Record, r.Err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	var consumeErr error
	consumed := 0
	go func() {
		defer wg.Done()
		cons, err := kgo.NewClient(kgo.SeedBrokers(c.seeds...), kgo.ConsumeTopics(topic),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
		if err != nil {
			consumeErr = err
			return
		}
		defer cons.Close()
		for {
			select {
			case <-stop:
				return
			default:
			}
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			fs := cons.PollFetches(pctx)
			pcancel()
			fs.EachError(func(_ string, _ int32, err error) {
				if !errors.Is(err, context.DeadlineExceeded) && !kerr.IsRetriable(err) && consumeErr == nil {
					consumeErr = err
				}
			})
			consumed += fs.NumRecords()
		}
	}()

	var target []int32
	target = append(target, 4)
	for id := int32(1); id <= 3; id++ {
		if id != leader {
			target = append(target, id)
		}
	}
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, target)
	res, err := c.admin().AlterPartitionAssignments(ctx, req)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("alter partition reassignments to %v: %v", target, err)
	}
	began := time.Now()
	last := waitState(t, 90*time.Second, fmt.Sprintf("the reassignment to %v done", target), func() (string, bool) {
		ra, err := c.reassigning()
		l, replicas, isr := c.state(topic)
		s := fmt.Sprintf("in progress %v (%v), leader %d, replicas %v, isr %v", ra, err, l, replicas, isr)
		return s, err == nil && len(ra) == 0 && slices.Equal(replicas, target) && slices.Contains(isr, 4) && slices.Contains(target, l)
	})
	took := time.Since(began)
	close(stop)
	wg.Wait()
	if len(acks.errs) > 0 {
		t.Fatalf("produce during the move: %v", acks.errs[0])
	}
	if consumeErr != nil {
		t.Fatalf("consume during the move: %v", consumeErr)
	}
	t.Logf("moved in %v: %s; %d records acknowledged, %d consumed meanwhile", took, last, acks.n(), consumed)

	if !strings.Contains(b4.Logs(), "rebuilt follower log from remote storage") {
		t.Fatal("the new replica did not start from the bucket")
	}
	copied := metricValue(t, b4, "kafka_server_brokertopicmetrics_replicationbytesin_total")
	t.Logf("the new replica fetched %.0f bytes from brokers; history %d bytes, local retention %d", copied, history, localBytes)
	for line := range strings.Lines(b4.Logs()) {
		if strings.Contains(line, "rebuilt follower log") {
			t.Log(strings.TrimSpace(line))
		}
	}
	if copied*4 > float64(history) {
		t.Fatalf("the new replica fetched %.0f bytes from brokers of %d bytes of history: not a tail-only move", copied, history)
	}
	waitFor(t, 30*time.Second, fmt.Sprintf("broker %d deleting its replica", leader), func() bool {
		_, err := os.Stat(filepath.Join(c.bs[leader].DataDir(), topic+"-0"))
		return os.IsNotExist(err)
	})
	verifyAcked(t, ctx, c.seeds, topic, acks)
}

// TestClusterReassignThrottled moves replicas of an untiered partition
// (the whole log is copied, as Kafka does) under Kafka's replication
// throttles: first with follower.replication.throttled.rate on the new
// replica's broker and the partition in follower.replication.throttled.replicas,
// then with leader.replication.throttled.rate on every broker and "*" in
// leader.replication.throttled.replicas. Each copy of about 1.5 MB at
// 300 kB/s cannot take less than about 4 s (one second of the rate may
// go at once), where an unthrottled copy on loopback takes well under
// one; every record reads back after both moves.
func TestClusterReassignThrottled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := startReassignCluster(t, ctx, "throttle")
	const topic, valueSize, rate = "throttled", 1000, 300000
	adm := c.admin()
	if r, err := adm.CreateTopic(ctx, 1, 3, nil, topic); err != nil || r.Err != nil {
		t.Fatalf("create topic: %v %v", err, r.Err)
	}
	waitFor(t, 30*time.Second, "a full ISR", func() bool {
		l, _, isr := c.state(topic)
		return l > 0 && len(isr) == 3
	})
	acks := c.fill(topic, 1500, valueSize)
	c.add(4)
	rateStr := strconv.Itoa(rate)
	set := func(what string, err error, rs kadm.AlterConfigsResponses) {
		t.Helper()
		alterOK(t, "set "+what, err, rs)
	}
	move := func(target []int32) time.Duration {
		t.Helper()
		var req kadm.AlterPartitionAssignmentsReq
		req.Assign(topic, 0, target)
		began := time.Now()
		res, err := adm.AlterPartitionAssignments(ctx, req)
		if err == nil {
			err = res.Error()
		}
		if err != nil {
			t.Fatalf("reassign to %v: %v", target, err)
		}
		waitState(t, 60*time.Second, fmt.Sprintf("the reassignment to %v done", target), func() (string, bool) {
			ra, err := c.reassigning()
			l, replicas, isr := c.state(topic)
			return fmt.Sprintf("in progress %v (%v), leader %d, replicas %v, isr %v", ra, err, l, replicas, isr),
				err == nil && len(ra) == 0 && slices.Equal(replicas, target) && len(isr) == len(target)
		})
		return time.Since(began)
	}
	leader, replicas, _ := c.state(topic)
	kept := []int32{leader} // the leader and one follower stay
	var gone int32
	for _, r := range replicas {
		switch {
		case r == leader:
		case len(kept) < 2:
			kept = append(kept, r)
		default:
			gone = r
		}
	}

	// Follower side: broker 4 fetches the copy at the bound.
	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "follower.replication.throttled.rate", Value: &rateStr}}, 4)
	set("follower.replication.throttled.rate", err, rs)
	list := "0:4"
	rs, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "follower.replication.throttled.replicas", Value: &list}}, topic)
	set("follower.replication.throttled.replicas", err, rs)
	took := move(append(slices.Clone(kept), 4))
	t.Logf("follower-throttled copy to broker 4 took %v", took)
	if took < 3*time.Second {
		t.Fatalf("a 1.5 MB copy at follower.replication.throttled.rate=%d took %v", rate, took)
	}

	// Leader side: the copy back to the broker removed goes at the bound
	// of the leader.
	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "leader.replication.throttled.rate", Value: &rateStr}})
	set("leader.replication.throttled.rate", err, rs)
	all := "*"
	rs, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{
		{Name: "leader.replication.throttled.replicas", Value: &all},
		{Name: "follower.replication.throttled.replicas", Op: kadm.DeleteConfig},
	}, topic)
	set("leader.replication.throttled.replicas", err, rs)
	took = move(append(slices.Clone(kept), gone))
	t.Logf("leader-throttled copy to broker %d took %v", gone, took)
	if took < 3*time.Second {
		t.Fatalf("a 1.5 MB copy at leader.replication.throttled.rate=%d took %v", rate, took)
	}
	verifyAcked(t, ctx, c.seeds, topic, acks)
}

// fill produces n records of valueSize (unique values) to partition 0 of
// an untiered topic with acks=-1 and returns what was acknowledged.
func (c *reassignCluster) fill(topic string, n, valueSize int) *ackLog {
	c.t.Helper()
	acks := &ackLog{acked: map[int64][]byte{}}
	prod := newClient(c.t, c.seeds[0], kgo.SeedBrokers(c.seeds...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := 0; i < n; i += 50 {
		var recs []*kgo.Record
		for j := range 50 {
			recs = append(recs, &kgo.Record{Value: moveValue(i+j, valueSize)})
		}
		for _, r := range prod.ProduceSync(c.ctx, recs...) {
			acks.add(r.Record, r.Err)
		}
	}
	if len(acks.errs) > 0 {
		c.t.Fatalf("produce: %v", acks.errs[0])
	}
	return acks
}

// alterOK fails the test when a config change failed.
func alterOK(t *testing.T, what string, err error, rs kadm.AlterConfigsResponses) {
	t.Helper()
	for _, r := range rs {
		if err == nil {
			err = r.Err
		}
	}
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}
