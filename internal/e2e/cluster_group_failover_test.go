package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
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

// TestClusterGroupCoordinatorFailover: three brokers on a real ZooKeeper,
// __consumer_offsets with replication factor 3, a consumer group of two
// franz-go members committing what they process while an acks=-1
// producer writes. The broker coordinating the group (the leader of its
// __consumer_offsets partition) is killed with -9: the group finds the new
// coordinator, which serves every offset committed before the kill (never
// less), and consumption goes on. The killed broker is then restarted and
// leadership of the offsets partition moved back to it (preferred leader
// election): the interim coordinator unloads the group and answers
// NOT_COORDINATOR, the restarted broker loads what the interim one had
// committed. At the end the group has processed every record in the log,
// never reprocessing one whose commit was confirmed, and its committed
// offsets are the log end offsets; an independent consumer checks the log
// against the producer's acknowledgements.
func TestClusterGroupCoordinatorFailover(t *testing.T) {
	zk := testenv.StartZooKeeper(t)
	sets := []string{
		"min.insync.replicas=2", "replica.lag.time.max.ms=3000", "zookeeper.session.timeout.ms=2000",
		"offsets.topic.replication.factor=3", "offsets.topic.num.partitions=3",
		"group.initial.rebalance.delay.ms=200", "group.min.session.timeout.ms=500",
		"auto.leader.rebalance.enable=false", // leadership moves only when the test says so
	}
	bs, seeds := startZKBrokers(t, zk.Addr()+"/groups", sets)
	const topic, partitions, group = "orders", 3, "failover-group"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	createReplicatedTopic(t, ctx, seeds, topic, partitions)

	// The first FindCoordinator creates __consumer_offsets.
	adm := kadm.NewClient(newClient(t, seeds[0], kgo.SeedBrokers(seeds...)))
	coordinator := func() (int32, error) {
		fctx, fcancel := context.WithTimeout(ctx, 3*time.Second)
		defer fcancel()
		r := adm.FindGroupCoordinators(fctx, group)[group]
		if r.Err != nil {
			return -1, r.Err
		}
		return r.NodeID, nil
	}
	waitFor(t, 30*time.Second, "a group coordinator", func() bool { _, err := coordinator(); return err == nil })
	offsetsPart := groupPartition(group, 3)
	fullISR := func(name string, n int, preferred bool) (kadm.Metadata, bool) {
		md, err := clusterMetadata(ctx, seeds, name)
		if err != nil || len(md.Brokers) != 3 || len(md.Topics[name].Partitions) != n {
			return md, false
		}
		for _, p := range md.Topics[name].Partitions {
			if p.Err != nil || p.Leader < 0 || len(p.ISR) != 3 || (preferred && p.Leader != p.Replicas[0]) {
				return md, false
			}
		}
		return md, true
	}
	var omd kadm.Metadata
	waitFor(t, 60*time.Second, "full ISRs led by preferred replicas", func() bool {
		_, ok := fullISR(topic, partitions, true)
		var ook bool
		omd, ook = fullISR(offsetsTopicName, 3, true)
		return ok && ook
	})
	victim := omd.Topics[offsetsTopicName].Partitions[offsetsPart].Leader
	if c, err := coordinator(); err != nil || c != victim {
		t.Fatalf("FindCoordinator names broker %d (%v), but broker %d leads %s-%d", c, err, victim, offsetsTopicName, offsetsPart)
	}

	led := newLedger()
	prod := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic(topic), kgo.MaxBufferedRecords(500), kgo.ProducerLinger(5*time.Millisecond),
		kgo.RecordRetries(1<<30))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(3, 5))
		for seq := 0; ; seq++ {
			select {
			case <-stop:
				return
			default:
			}
			r := &kgo.Record{
				Key:     fmt.Appendf(nil, "p0-%d", seq),
				Value:   append(fmt.Appendf(nil, "p0-s%d|", seq), randBytes(rng, 100)...),
				Headers: []kgo.RecordHeader{{Key: "seq", Value: []byte(strconv.Itoa(seq))}},
			}
			led.mu.Lock()
			led.produced++
			led.mu.Unlock()
			prod.Produce(ctx, r, led.ack)
			if seq%20 == 19 {
				time.Sleep(10 * time.Millisecond) // pacing (about 2,000 records/s), not synchronisation
			}
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

	gl := newGroupLedger()
	members := []*committingMember{
		startCommittingMember(t, seeds, "m1", group, topic, gl),
		startCommittingMember(t, seeds, "m2", group, topic, gl),
	}
	processed := func(n int, what string) {
		t.Helper()
		target := gl.processings() + n
		waitFor(t, 60*time.Second, what, func() bool { return gl.processings() >= target })
	}
	processed(2000, "the group to process records before the kill")

	// Every answer to OffsetFetch, from any broker, must be an error or
	// hold at least what the group had committed before it was asked.
	watch := newOffsetWatch(t, ctx, bs, group, gl)
	defer watch.stop()

	t.Logf("kill -9 broker %d, coordinator of %s (leader of %s-%d); controller %d", victim, group, offsetsTopicName, offsetsPart, omd.Controller)
	bs[victim].Kill9()
	before := gl.committedSnapshot()
	t.Logf("offsets committed before the kill: %v", before)
	var interim int32
	waitFor(t, 60*time.Second, "a new coordinator", func() bool {
		c, err := coordinator()
		interim = c
		return err == nil && c != victim && c > 0
	})
	got := fetchCommitted(t, ctx, adm, group, topic)
	t.Logf("broker %d coordinates %s now; it serves offsets %v", interim, group, got)
	requireAtLeast(t, "new coordinator after the kill", got, before)
	processed(2000, "the group to go on processing after the failover")

	bs[victim].Restart()
	waitFor(t, 60*time.Second, "full ISRs after the restart", func() bool {
		_, ok := fullISR(topic, partitions, false)
		_, ook := fullISR(offsetsTopicName, 3, false)
		return ok && ook
	})
	moveBack := gl.committedSnapshot()
	res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{offsetsTopicName: {offsetsPart: {}}})
	if err != nil {
		t.Fatalf("elect leaders: %v", err)
	}
	if r := res[offsetsTopicName][offsetsPart]; r.Err != nil {
		t.Fatalf("preferred leader election of %s-%d: %v", offsetsTopicName, offsetsPart, r.Err)
	}
	waitFor(t, 60*time.Second, fmt.Sprintf("broker %d to coordinate %s again", victim, group), func() bool {
		c, err := coordinator()
		return err == nil && c == victim
	})
	got = fetchCommitted(t, ctx, adm, group, topic)
	t.Logf("broker %d coordinates %s again; it serves offsets %v", victim, group, got)
	requireAtLeast(t, "restarted coordinator after the preferred election", got, moveBack)
	// The brokers that do not lead the group's offsets partition say so.
	for id, b := range bs {
		if id == victim {
			continue
		}
		waitFor(t, 30*time.Second, fmt.Sprintf("broker %d to answer NOT_COORDINATOR", id), func() bool {
			code, _, err := offsetFetchAt(ctx, b.Addr(), group)
			return err == nil && code == kerr.NotCoordinator.Code
		})
	}
	processed(1000, "the group to go on processing after the move back")

	stopProducer()
	fctx, fcancel := context.WithTimeout(ctx, 60*time.Second)
	if err := prod.Flush(fctx); err != nil {
		t.Errorf("flush: %v", err)
	}
	fcancel()
	start, end := offsets(t, seeds[0], topic)
	waitFor(t, 90*time.Second, fmt.Sprintf("the group to commit the end offsets %v", end), func() bool {
		c := gl.committedSnapshot()
		for p, e := range end {
			if c[p] < e && e > start[p] {
				return false
			}
		}
		return true
	})
	for _, m := range members {
		m.stop()
	}
	watch.stop()
	got = fetchCommitted(t, ctx, adm, group, topic)
	for p, e := range end {
		if got[p] != e && e > start[p] {
			t.Errorf("partition %d: OffsetFetch gives %d after the group consumed to the end, want the end offset %d", p, got[p], e)
		}
	}

	led.mu.Lock()
	defer led.mu.Unlock()
	t.Logf("produced %d, acknowledged %d, failed %d; group: %d processings, %d failed commits; watcher: %d OffsetFetch answers, codes %v",
		led.produced, led.count, len(led.failed), gl.processings(), gl.failedCommits(), watch.answers(), watch.codes())
	for i, f := range led.failed {
		if i == 5 {
			break
		}
		t.Errorf("record failed: %s", f)
	}
	recs := consumeAll(t, seeds[0], topic, end)
	verifyCrashLog(t, led, recs, start, end)
	gl.check(t, recs)
	watch.check()
}

// offsetsTopicName is Kafka's internal topic of committed offsets.
const offsetsTopicName = "__consumer_offsets"

// groupPartition is Kafka's partition of a group among n offsets
// partitions: abs(Java String.hashCode) % n. Written out here so that the
// test does not trust the broker's own function.
func groupPartition(group string, n int32) int32 {
	var h int32
	for _, r := range group { // ASCII group names: UTF-16 units are the bytes
		h = 31*h + r
	}
	if h == -1<<31 {
		h = 0 // Kafka's Utils.abs
	} else if h < 0 {
		h = -h
	}
	return h % n
}

// groupLedger records what the members of a group processed and which
// processings a confirmed commit covers.
type groupLedger struct {
	mu        sync.Mutex
	seen      map[string][]bool // record key → per processing: commit confirmed
	committed map[int32]int64   // partition → highest confirmed committed offset
	count     int
	failed    int
}

func newGroupLedger() *groupLedger {
	return &groupLedger{seen: map[string][]bool{}, committed: map[int32]int64{}}
}

func (g *groupLedger) processings() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.count
}

func (g *groupLedger) failedCommits() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.failed
}

func (g *groupLedger) committedSnapshot() map[int32]int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	m := map[int32]int64{}
	for p, o := range g.committed {
		m[p] = o
	}
	return m
}

// check: every record of the log was processed, and none again after a
// commit covering it was confirmed.
func (g *groupLedger) check(t *testing.T, log []*kgo.Record) {
	t.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	errs := 0
	for _, r := range log {
		k := string(r.Key)
		ps := g.seen[k]
		switch {
		case len(ps) == 0:
			errs++
			if errs <= 10 {
				t.Errorf("record %s (partition %d offset %d) never processed by the group", k, r.Partition, r.Offset)
			}
		case slices.Contains(ps[:len(ps)-1], true):
			errs++
			if errs <= 10 {
				t.Errorf("record %s (partition %d offset %d) processed again after its commit was confirmed (%v)", k, r.Partition, r.Offset, ps)
			}
		}
	}
	if errs > 10 {
		t.Errorf("... %d problems in all", errs)
	}
	dups := 0
	for _, ps := range g.seen {
		dups += len(ps) - 1
	}
	t.Logf("group processed %d distinct records, %d again (their commits were not confirmed)", len(g.seen), dups)
}

// committingMember is a franz-go group member that processes a poll's
// records and commits them before it lets a rebalance happen.
type committingMember struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

func startCommittingMember(t *testing.T, seeds []string, name, group, topic string, gl *groupLedger) *committingMember {
	t.Helper()
	cl := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.ClientID(name),
		kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(300*time.Millisecond),
		kgo.RebalanceTimeout(10*time.Second), kgo.FetchMaxWait(500*time.Millisecond),
		kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }))
	ctx, cancel := context.WithCancel(context.Background())
	m := &committingMember{cl: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		defer cl.AllowRebalance()
		for ctx.Err() == nil {
			recs := cl.PollRecords(ctx, 500).Records()
			if len(recs) == 0 {
				cl.AllowRebalance()
				continue
			}
			gl.mu.Lock()
			idx := make([]int, len(recs))
			for i, r := range recs {
				k := string(r.Key)
				gl.seen[k] = append(gl.seen[k], false)
				idx[i] = len(gl.seen[k]) - 1
				gl.count++
			}
			gl.mu.Unlock()
			cctx, ccancel := context.WithTimeout(context.Background(), 15*time.Second)
			err := cl.CommitRecords(cctx, recs...)
			ccancel()
			gl.mu.Lock()
			if err != nil {
				gl.failed++
			} else {
				for i, r := range recs {
					gl.seen[string(r.Key)][idx[i]] = true
					if r.Offset+1 > gl.committed[r.Partition] {
						gl.committed[r.Partition] = r.Offset + 1
					}
				}
			}
			gl.mu.Unlock()
			cl.AllowRebalance()
		}
	}()
	t.Cleanup(m.stop)
	return m
}

// stop ends the poll loop; the client leaves the group when it is closed.
func (m *committingMember) stop() {
	m.cancel()
	<-m.done
}

// fetchCommitted asks the group's coordinator (through kadm, which finds
// it) for the group's committed offsets of topic, retrying while the
// coordinator moves or loads.
func fetchCommitted(t *testing.T, ctx context.Context, adm *kadm.Client, group, topic string) map[int32]int64 {
	t.Helper()
	var got map[int32]int64
	var last error
	deadline := time.Now().Add(30 * time.Second)
	for {
		fctx, fcancel := context.WithTimeout(ctx, 5*time.Second)
		r, err := adm.FetchOffsets(fctx, group)
		fcancel()
		if err == nil {
			err = r.Error()
		}
		if err == nil {
			got = map[int32]int64{}
			r.Each(func(o kadm.OffsetResponse) {
				if o.Topic == topic {
					got[o.Partition] = o.At
				}
			})
			return got
		}
		last = err
		if time.Now().After(deadline) {
			t.Fatalf("fetch offsets of %s: %v", group, last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func requireAtLeast(t *testing.T, what string, got, want map[int32]int64) {
	t.Helper()
	for p, w := range want {
		if got[p] < w {
			t.Errorf("%s: partition %d committed offset %d, but %d was committed and confirmed before", what, p, got[p], w)
		}
	}
}

// offsetFetchAt sends OffsetFetch for every offset of group to the broker
// at addr and returns the group's error code and offsets.
func offsetFetchAt(ctx context.Context, addr, group string) (int16, map[int32]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0))
	if err != nil {
		return 0, nil, err
	}
	defer cl.Close()
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = group
	req.Topics = nil
	rg := kmsg.NewOffsetFetchRequestGroup()
	rg.Group = group
	req.Groups = append(req.Groups, rg)
	rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
	defer rcancel()
	kresp, err := cl.SeedBrokers()[0].Request(rctx, req)
	if err != nil {
		return 0, nil, err
	}
	resp := kresp.(*kmsg.OffsetFetchResponse)
	out := map[int32]int64{}
	if len(resp.Groups) > 0 {
		g := resp.Groups[0]
		for _, rt := range g.Topics {
			for _, rp := range rt.Partitions {
				out[rp.Partition] = rp.Offset
			}
		}
		return g.ErrorCode, out, nil
	}
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			out[rp.Partition] = rp.Offset
		}
	}
	return resp.ErrorCode, out, nil
}

// offsetWatch asks every running broker directly for the group's offsets,
// over and over: an answer without error must hold, for every partition,
// at least the offset the group had confirmed as committed before the
// request was sent. It catches a coordinator that answers before it has
// loaded, or that still answers after it stopped leading.
type offsetWatch struct {
	t      *testing.T
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	byCode  map[string]int
	n       int
	regress []string
}

func newOffsetWatch(t *testing.T, ctx context.Context, bs map[int32]*testenv.Broker, group string, gl *groupLedger) *offsetWatch {
	wctx, cancel := context.WithCancel(ctx)
	w := &offsetWatch{t: t, cancel: cancel, done: make(chan struct{}), byCode: map[string]int{}}
	go func() {
		defer close(w.done)
		for wctx.Err() == nil {
			for id, b := range bs {
				if !b.Running() {
					continue
				}
				floor := gl.committedSnapshot()
				code, got, err := offsetFetchAt(wctx, b.Addr(), group)
				if err != nil {
					continue // a broker being killed or restarted
				}
				w.mu.Lock()
				w.n++
				name := "NONE"
				if code != 0 {
					name = kerr.TypedErrorForCode(code).Message
				}
				w.byCode[name]++
				if code == 0 {
					for p, f := range floor {
						if got[p] < f {
							w.regress = append(w.regress, fmt.Sprintf("broker %d answered partition %d offset %d, after %d was confirmed", id, p, got[p], f))
						}
					}
				}
				w.mu.Unlock()
			}
			time.Sleep(20 * time.Millisecond) // pacing of the probe
		}
	}()
	return w
}

func (w *offsetWatch) stop() {
	w.cancel()
	<-w.done
}

func (w *offsetWatch) answers() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

func (w *offsetWatch) codes() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var parts []string
	for c, n := range w.byCode {
		parts = append(parts, fmt.Sprintf("%s:%d", c, n))
	}
	slices.Sort(parts)
	return strings.Join(parts, " ")
}

func (w *offsetWatch) check() {
	w.t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for i, r := range w.regress {
		if i == 10 {
			w.t.Errorf("... %d stale OffsetFetch answers in all", len(w.regress))
			break
		}
		w.t.Errorf("stale OffsetFetch answer: %s", r)
	}
}
