package bench

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// tp names a partition.
type tp struct {
	topic     string
	partition int32
}

// tracker follows how far the consumers of one phase have read each
// partition, shared by all of them (a partition may move between group
// members). It counts each offset once, so redelivered records are
// duplicates, and signals when every partition has reached a target.
type tracker struct {
	all          *counters    // unique records consumed, for throughput and lag
	measured     counters     // unique measured records consumed
	lastMeasured atomic.Int64 // unix nanoseconds of the latest measured receipt
	dups         atomic.Int64
	firstAt      atomic.Int64 // unix nanoseconds of the first record

	mu        sync.Mutex
	next      map[tp]int64
	target    map[tp]int64
	left      int // partitions below target
	reached   chan struct{}
	reachedAt time.Time
	watch     *gapWatch // around a rebalance; nil otherwise
}

func newTracker(all *counters) *tracker {
	return &tracker{all: all, next: make(map[tp]int64)}
}

// setTarget replaces the target; the returned channel is closed once every
// partition in end has been read up to its offset.
func (t *tracker) setTarget(end map[tp]int64) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.target, t.left, t.reached, t.reachedAt = end, 0, make(chan struct{}), time.Time{}
	for p, e := range end {
		if t.next[p] < e {
			t.left++
		}
	}
	if t.left == 0 {
		t.reachedAt = time.Now()
		close(t.reached)
	}
	return t.reached
}

// reachedTime is when the current target was reached (zero if not yet).
func (t *tracker) reachedTime() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.reachedAt
}

// apply takes one fetched partition received at now. End-to-end latencies
// of measured records go into h (when not nil); it returns the number of
// negative ones.
func (t *tracker) apply(p kgo.FetchTopicPartition, now time.Time, win window, h *hdrhistogram.Histogram) (negative int64) {
	if len(p.Records) == 0 {
		return 0
	}
	key := tp{p.Topic, p.Partition}
	var uniq, bytes, mrecs, mbytes int64
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.watch != nil {
		t.watch.deliver(key, len(p.Records), now)
	}
	next := t.next[key]
	before := next
	for _, r := range p.Records {
		if r.Offset < next {
			t.dups.Add(1)
			continue
		}
		next = r.Offset + 1
		uniq++
		bytes += int64(len(r.Value))
		sent, ok := sendTime(r)
		if !ok || !win.measured(sent) {
			continue
		}
		mrecs++
		mbytes += int64(len(r.Value))
		if h != nil {
			negative += recordInto(h, now.Sub(sent))
		}
	}
	t.next[key] = next
	if uniq > 0 {
		t.firstAt.CompareAndSwap(0, now.UnixNano())
		t.all.records.Add(uniq)
		t.all.bytes.Add(bytes)
	}
	if mrecs > 0 {
		t.measured.records.Add(mrecs)
		t.measured.bytes.Add(mbytes)
		t.lastMeasured.Store(max(t.lastMeasured.Load(), now.UnixNano()))
	}
	if e, ok := t.target[key]; ok && t.left > 0 && before < e && next >= e {
		t.left--
		if t.left == 0 {
			t.reachedAt = now
			close(t.reached)
		}
	}
	return negative
}

// consumers are the consumer clients of one target run.
type consumers struct {
	ctx     context.Context
	cancel  context.CancelFunc
	win     window
	e2e     *latencyHist
	wg      sync.WaitGroup
	once    sync.Once
	mu      sync.Mutex
	members []*member

	errMu    sync.Mutex
	firstErr error
}

// member is one consumer client.
type member struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
	closed bool
	joined time.Time    // client created (in group mode: joining)
	first  atomic.Int64 // unix nanoseconds of its first delivered record
}

// groupName is the consumer group of topic in group mode.
func groupName(topic string) string { return "strata-bench-" + topic }

// consumerOpts are the franz-go options of consumer c of n on topic. In
// assign mode it reads partitions c, c+n, c+2n, … from offset 0; in group
// mode it joins the topic's consumer group, which starts at offset 0.
func consumerOpts(cfg Config, br brokers, topic string, c, n int) []kgo.Opt {
	opts := br.opts(kgo.FetchMaxWait(time.Second))
	if cfg.TxnRecords > 0 || cfg.ReadCommitted {
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	if cfg.ConsumeMode == ConsumeGroup {
		bal, _ := groupBalancer(cfg.Balancer) // validated
		return append(opts,
			kgo.ConsumerGroup(groupName(topic)),
			kgo.ConsumeTopics(topic),
			kgo.Balancers(bal),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		)
	}
	parts := map[int32]kgo.Offset{}
	for p := int32(c); p < cfg.Partitions; p += int32(n) {
		parts[p] = kgo.NewOffset().AtStart()
	}
	return append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}))
}

// startConsumers starts Consumers clients per topic (at most one per
// partition in assign mode). They run until stop.
func startConsumers(ctx context.Context, cfg Config, br brokers, topics []string, tr *tracker, win window, e2e *latencyHist) (*consumers, error) {
	ctx, cancel := context.WithCancel(ctx)
	cs := &consumers{ctx: ctx, cancel: cancel, win: win, e2e: e2e}
	n := cfg.Consumers
	if cfg.ConsumeMode == ConsumeAssign {
		n = min(n, int(cfg.Partitions))
	}
	for _, topic := range topics {
		for c := range n {
			if _, err := cs.add(consumerOpts(cfg, br, topic, c, n), tr); err != nil {
				cs.stop()
				return nil, err
			}
		}
	}
	return cs, nil
}

// add starts one consumer client.
func (cs *consumers) add(opts []kgo.Opt, tr *tracker) (*member, error) {
	mctx, cancel := context.WithCancel(cs.ctx)
	m := &member{cancel: cancel, done: make(chan struct{}), joined: time.Now()}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("consumer client: %w", err)
	}
	m.cl = cl
	cs.mu.Lock()
	cs.members = append(cs.members, m)
	cs.mu.Unlock()
	cs.wg.Go(func() {
		defer close(m.done)
		if err := consumeLoop(mctx, cl, tr, cs.win, cs.e2e, &m.first); err != nil {
			cs.errMu.Lock()
			if cs.firstErr == nil {
				cs.firstErr = err
			}
			cs.errMu.Unlock()
		}
	})
	return m, nil
}

// addMembers starts one more group member per topic.
func (cs *consumers) addMembers(ctx context.Context, cfg Config, br brokers, topics []string, tr *tracker) ([]*member, error) {
	var added []*member
	for _, topic := range topics {
		m, err := cs.add(consumerOpts(cfg, br, topic, 0, 1), tr)
		if err != nil {
			cs.removeMembers(added)
			return nil, err
		}
		added = append(added, m)
	}
	return added, nil
}

// removeMembers stops ms; closing a group member's client leaves the
// group.
func (cs *consumers) removeMembers(ms []*member) {
	for _, m := range ms {
		m.cancel()
		<-m.done
		cs.mu.Lock()
		closed := m.closed
		m.closed = true
		cs.mu.Unlock()
		if !closed {
			m.cl.Close()
		}
	}
}

// stop ends the consumers and returns the first error one of them hit.
func (cs *consumers) stop() error {
	cs.once.Do(func() {
		cs.cancel()
		cs.wg.Wait()
		cs.mu.Lock()
		defer cs.mu.Unlock()
		for _, m := range cs.members {
			if !m.closed {
				m.closed = true
				m.cl.Close()
			}
		}
	})
	cs.errMu.Lock()
	defer cs.errMu.Unlock()
	return cs.firstErr
}

// consumeLoop polls until ctx ends. e2e may be nil; first, when not nil,
// gets the time of the first delivered record.
func consumeLoop(ctx context.Context, cl *kgo.Client, tr *tracker, win window, e2e *latencyHist, first *atomic.Int64) error {
	var h *hdrhistogram.Histogram
	var negative int64
	if e2e != nil {
		h = newHDR()
		defer func() { e2e.merge(h, negative) }()
	}
	for {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil
		}
		for _, fe := range fs.Errors() {
			if errors.Is(fe.Err, context.Canceled) || errors.Is(fe.Err, kgo.ErrClientClosed) {
				return nil
			}
			return fmt.Errorf("consume %s/%d: %w", fe.Topic, fe.Partition, fe.Err)
		}
		now := time.Now()
		if first != nil && first.Load() == 0 && fs.NumRecords() > 0 {
			first.Store(now.UnixNano())
		}
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			negative += tr.apply(p, now, win, h)
		})
	}
}

// readBackClients is how many fresh clients share the read-back. One
// franz-go client decodes at a few hundred MB/s on this class of machine,
// which would make the read-back measure the client, not the broker.
const readBackClients = 3

// readBackPasses is how many times the read-back reads everything; its
// figures are the fastest pass's, as in the raw read-back. The first pass
// of the bench process also pays for the client's heap growing back (tens
// of thousands of page faults for 500 MB, each a hypercall in a
// paravirtualised guest), whichever broker it reads from: on the 2-CPU
// machine of bench/RESULTS.md a first pass over 500 MB took 0.6 to 1 s
// where the next took 0.2 to 0.6 s.
const readBackPasses = 3

// readBack reads every partition in end from offset 0 with fresh
// assign-mode clients (up to readBackClients, sharing the partitions)
// until all have reached end, and returns the time from creating the
// clients to the last record and to the first.
func readBack(ctx context.Context, br brokers, end map[tp]int64, tr *tracker) (total, first time.Duration, err error) {
	keys := make([]tp, 0, len(end))
	for p := range end {
		keys = append(keys, p)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].topic != keys[j].topic {
			return keys[i].topic < keys[j].topic
		}
		return keys[i].partition < keys[j].partition
	})
	n := min(readBackClients, max(len(keys), 1))
	shares := make([]map[string]map[int32]kgo.Offset, n)
	for i, p := range keys {
		sh := shares[i%n]
		if sh == nil {
			sh = map[string]map[int32]kgo.Offset{}
			shares[i%n] = sh
		}
		if sh[p.topic] == nil {
			sh[p.topic] = map[int32]kgo.Offset{}
		}
		sh[p.topic][p.partition] = kgo.NewOffset().AtStart()
	}
	done := tr.setTarget(end)
	start := time.Now()
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, n)
	running := 0
	for _, parts := range shares {
		if parts == nil {
			continue
		}
		cl, err := br.client(kgo.ConsumePartitions(parts), kgo.FetchMaxWait(time.Second))
		if err != nil {
			return 0, 0, fmt.Errorf("read-back client: %w", err)
		}
		defer cl.Close()
		running++
		go func() { errc <- consumeLoop(lctx, cl, tr, window{}, nil, nil) }()
	}
	wait := func() {
		cancel()
		for ; running > 0; running-- {
			<-errc
		}
	}
	select {
	case <-done:
		wait()
		if f := tr.firstAt.Load(); f > 0 {
			first = time.Unix(0, f).Sub(start)
		}
		return tr.reachedTime().Sub(start), first, nil
	case err := <-errc:
		running--
		wait()
		if err == nil {
			err = ctx.Err()
		}
		return 0, 0, fmt.Errorf("read back: %w", err)
	}
}

// endOffsets returns the log end offset (high watermark) of every
// partition of topics.
func endOffsets(ctx context.Context, br brokers, topics []string) (map[tp]int64, error) {
	cl, err := br.client()
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topics...)
	if err != nil {
		return nil, fmt.Errorf("list end offsets: %w", err)
	}
	out := make(map[tp]int64)
	var ferr error
	ends.Each(func(e kadm.ListedOffset) {
		if e.Err != nil {
			ferr = fmt.Errorf("end offset of %s/%d: %w", e.Topic, e.Partition, e.Err)
			return
		}
		out[tp{e.Topic, e.Partition}] = e.Offset
	})
	return out, ferr
}
