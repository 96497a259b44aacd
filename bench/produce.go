package bench

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// payloadPool is random bytes from which record values are sliced at
// varying offsets, so that compression sees realistic (incompressible)
// data without generating bytes per record.
const payloadPool = 1 << 20

// sendTimeHeader is the record header holding the record's intended send
// time (unix nanoseconds, 8 bytes big endian), from which consumers
// compute end-to-end latency. Its own clock is the only one involved: the
// harness produces and consumes in one process.
const sendTimeHeader = "strata-bench-t"

// counters are live figures read by the monitor.
type counters struct {
	records atomic.Int64
	bytes   atomic.Int64
	errors  atomic.Int64
}

// window is the measured part of the run: records whose intended send
// time is at or after start count in the figures.
type window struct {
	start time.Time
}

// measured compares wall-clock nanoseconds, not the monotonic clock: the
// consumer knows a record's intended time only from the nanoseconds in
// its header, and both sides must classify every record alike.
func (w window) measured(intended time.Time) bool { return intended.UnixNano() >= w.start.UnixNano() }

// producers are the producer clients of one target run, each bound to one
// topic.
type producers struct {
	cfg     Config
	payload []byte
	clients []*producer
	hist    *latencyHist // produce-ack latency of measured records
	all     *counters    // every acknowledged record, for throughput and lag

	sent         atomic.Int64 // every record handed to a client
	measuredSent atomic.Int64
	measured     counters     // acknowledged measured records
	lastAck      atomic.Int64 // unix nanoseconds of the latest measured acknowledgement

	errMu    sync.Mutex
	firstErr error

	// stopEarly, when closed, ends run before its end time.
	stopEarly chan struct{}
	// acks, when set, logs every acknowledgement by partition (faults).
	acks *ackLog
	// txns, for transactional producers (txn.go), counts their commits.
	txns *txnCounts
}

type producer struct {
	cl    *kgo.Client
	topic string
	keys  *keyGen
	idx   int // over all producers
	seq   int64
	txn   *txnState // transactional producers only
}

// newProducers creates Producers clients per topic; each sends one record
// synchronously (connection, metadata, producer id) that is not measured.
func newProducers(ctx context.Context, cfg Config, br brokers, topics []string, hist *latencyHist, all *counters) (*producers, error) {
	pool := make([]byte, max(payloadPool, 2*cfg.RecordSize))
	rng := rand.NewChaCha8([32]byte{'s', 't', 'r', 'a', 't', 'a'})
	_, _ = rng.Read(pool)
	ps := &producers{cfg: cfg, payload: pool, hist: hist, all: all}
	if cfg.TxnRecords > 0 {
		ps.txns = &txnCounts{ackedEnd: map[tp]int64{}}
	}
	for _, topic := range topics {
		for range cfg.Producers {
			idx := len(ps.clients)
			opts := producerOpts(cfg, br, topic)
			if cfg.TxnRecords > 0 {
				opts = append(opts, txnOpts(topic, idx)...)
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				ps.close()
				return nil, fmt.Errorf("producer client: %w", err)
			}
			p := &producer{cl: cl, topic: topic, keys: newKeyGen(cfg.Workload, uint64(idx)+1), idx: idx}
			ps.clients = append(ps.clients, p)
			if cfg.TxnRecords > 0 {
				// A transaction of one record: the producer id, the
				// coordinator, the partitions and a commit.
				p.txn = &txnState{}
				if !ps.txnSend(ctx, p, time.Now(), false) || !ps.commit(ctx, p) {
					ps.close()
					return nil, fmt.Errorf("warm-up transaction to %s: %w", topic, ps.err())
				}
				continue
			}
			rec := ps.record(p, time.Now())
			if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
				ps.close()
				return nil, fmt.Errorf("warm-up produce to %s: %w", topic, err)
			}
			ps.sent.Add(1)
			all.records.Add(1)
			all.bytes.Add(int64(len(rec.Value)))
		}
	}
	return ps, nil
}

func (ps *producers) close() {
	for _, p := range ps.clients {
		p.cl.Close()
	}
}

// record builds the next record of p, stamped with its intended send time.
func (ps *producers) record(p *producer, intended time.Time) *kgo.Record {
	n := int64(p.idx)<<40 | p.seq
	p.seq++
	size := ps.cfg.RecordSize
	off := int((uint64(n) * 7919) % uint64(len(ps.payload)-size+1))
	ts := make([]byte, 8)
	binary.BigEndian.PutUint64(ts, uint64(intended.UnixNano()))
	return &kgo.Record{
		Key:     p.keys.key(),
		Value:   ps.payload[off : off+size],
		Headers: []kgo.RecordHeader{{Key: sendTimeHeader, Value: ts}},
	}
}

// send hands one record to p's client; the promise records the outcome.
func (ps *producers) send(ctx context.Context, p *producer, intended time.Time, measured bool) {
	ps.sent.Add(1)
	ps.produce(ctx, p, ps.record(p, intended), intended, measured)
}

func (ps *producers) produce(ctx context.Context, p *producer, rec *kgo.Record, intended time.Time, measured bool) {
	p.cl.Produce(ctx, rec, func(r *kgo.Record, err error) {
		now := time.Now()
		if err != nil {
			ps.all.errors.Add(1)
			ps.errMu.Lock()
			if ps.firstErr == nil {
				ps.firstErr = fmt.Errorf("produce to %s: %w", r.Topic, err)
			}
			ps.errMu.Unlock()
			return
		}
		if p.txn != nil { // acknowledged when the transaction commits
			p.txn.add(txnRec{tp: tp{r.Topic, r.Partition}, offset: r.Offset, bytes: len(r.Value), intended: intended, measured: measured})
			return
		}
		ps.all.records.Add(1)
		ps.all.bytes.Add(int64(len(r.Value)))
		if ps.acks != nil {
			ps.acks.add(tp{r.Topic, r.Partition}, now)
		}
		if !measured {
			return
		}
		ps.hist.record(now.Sub(intended))
		ps.measured.records.Add(1)
		ps.measured.bytes.Add(int64(len(r.Value)))
		ps.noteAck(now)
	})
}

// noteAck moves lastAck up to now.
func (ps *producers) noteAck(now time.Time) {
	for n := now.UnixNano(); ; {
		last := ps.lastAck.Load()
		if n <= last || ps.lastAck.CompareAndSwap(last, n) {
			return
		}
	}
}

// backlog produces n records as fast as the clients take them, unmeasured,
// and waits for every acknowledgement.
func (ps *producers) backlog(ctx context.Context, n int64) error {
	var wg sync.WaitGroup
	for i, p := range ps.clients {
		quota := n / int64(len(ps.clients))
		if int64(i) < n%int64(len(ps.clients)) {
			quota++
		}
		wg.Go(func() {
			for range quota {
				if ctx.Err() != nil {
					return
				}
				ps.send(ctx, p, time.Now(), false)
			}
		})
	}
	wg.Wait()
	return ps.flush(ctx)
}

// run produces from start until end (intended send times) or until
// Records measured records were sent, then waits for every
// acknowledgement. With a Rate the producers are open loop: the k-th
// record of a producer is due at start + k/rate and its latency counts
// from then however late it is actually sent (no coordinated omission);
// without, latency counts from the Produce call.
func (ps *producers) run(ctx context.Context, start, end time.Time, win window) error {
	var wg sync.WaitGroup
	for _, p := range ps.clients {
		wg.Go(func() { ps.loop(ctx, p, start, end, win) })
	}
	wg.Wait()
	return ps.flush(ctx)
}

func (ps *producers) loop(ctx context.Context, p *producer, start, end time.Time, win window) {
	n := len(ps.clients)
	perRate := ps.cfg.Rate / float64(n)
	limit := ps.cfg.Records
	var offset time.Duration // staggers producers so that they do not send in lock step
	if perRate > 0 {
		offset = time.Duration(float64(p.idx) / float64(n) / perRate * float64(time.Second))
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	if p.txn != nil {
		defer ps.commit(ctx, p) // the last transaction, however short
	}
	for k := int64(0); ; k++ {
		var intended time.Time
		if perRate > 0 {
			intended = start.Add(offset + time.Duration(float64(k)/perRate*float64(time.Second)))
			if d := time.Until(intended); d > 0 && intended.Before(end) {
				timer.Reset(d)
				select {
				case <-ctx.Done():
					return
				case <-ps.stopEarly:
					return
				case <-timer.C:
				}
			}
		} else {
			intended = time.Now()
			select {
			case <-ps.stopEarly:
				return
			default:
			}
		}
		if !intended.Before(end) || ctx.Err() != nil {
			return
		}
		measured := win.measured(intended)
		if measured {
			if n := ps.measuredSent.Add(1); limit > 0 && n > limit {
				ps.measuredSent.Add(-1)
				return
			}
		}
		if p.txn != nil {
			if !ps.txnSend(ctx, p, intended, measured) {
				return
			}
			continue
		}
		ps.send(ctx, p, intended, measured)
	}
}

func (ps *producers) flush(ctx context.Context) error {
	for _, p := range ps.clients {
		if err := p.cl.Flush(ctx); err != nil {
			return fmt.Errorf("flush producer: %w", err)
		}
	}
	return nil
}

// err returns the first failed produce, if any.
func (ps *producers) err() error {
	ps.errMu.Lock()
	defer ps.errMu.Unlock()
	return ps.firstErr
}

// sendTime returns the intended send time stamped on r.
func sendTime(r *kgo.Record) (time.Time, bool) {
	for _, h := range r.Headers {
		if h.Key == sendTimeHeader && len(h.Value) == 8 {
			return time.Unix(0, int64(binary.BigEndian.Uint64(h.Value))), true
		}
	}
	return time.Time{}, false
}
