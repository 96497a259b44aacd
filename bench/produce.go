package bench

import (
	"context"
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

// counters are the live figures of a phase, read by the monitor.
type counters struct {
	records atomic.Int64
	bytes   atomic.Int64
	errors  atomic.Int64
}

// produceResult is what the produce phase measured.
type produceResult struct {
	sent, acked, bytes, errors int64
	firstErr                   error
	elapsed                    time.Duration // start to last acknowledgement
}

// produceState is shared by the producers of one phase.
type produceState struct {
	cfg     Config
	payload []byte
	hist    *latencyHist
	ctr     *counters
	start   time.Time
	sent    atomic.Int64
	lastAck atomic.Int64 // unix nanoseconds of the latest acknowledgement

	errMu    sync.Mutex
	firstErr error
}

func (st *produceState) value(i int64) []byte {
	off := int((uint64(i) * 7919) % uint64(len(st.payload)-st.cfg.RecordSize+1))
	return st.payload[off : off+st.cfg.RecordSize]
}

// ack is the promise of every benchmark record.
func (st *produceState) ack(r *kgo.Record, err error, intended time.Time) {
	now := time.Now()
	if err != nil {
		st.ctr.errors.Add(1)
		st.errMu.Lock()
		if st.firstErr == nil {
			st.firstErr = err
		}
		st.errMu.Unlock()
		return
	}
	st.hist.record(now.Sub(intended))
	st.ctr.records.Add(1)
	st.ctr.bytes.Add(int64(len(r.Value)))
	for n := now.UnixNano(); ; {
		last := st.lastAck.Load()
		if n <= last || st.lastAck.CompareAndSwap(last, n) {
			break
		}
	}
}

// produce runs the produce phase: cfg.Producers clients share cfg.Records
// and cfg.Rate. Each client first sends one warm-up record synchronously
// (connection, metadata, producer id), which is not measured.
func produce(ctx context.Context, cfg Config, seeds []string, topic string, hist *latencyHist, ctr *counters) (produceResult, error) {
	pool := make([]byte, max(payloadPool, 2*cfg.RecordSize))
	rng := rand.NewChaCha8([32]byte{'s', 't', 'r', 'a', 't', 'a'})
	_, _ = rng.Read(pool)
	st := &produceState{cfg: cfg, payload: pool, hist: hist, ctr: ctr}

	clients := make([]*kgo.Client, cfg.Producers)
	defer func() {
		for _, cl := range clients {
			if cl != nil {
				cl.Close()
			}
		}
	}()
	for i := range clients {
		cl, err := kgo.NewClient(producerOpts(cfg, seeds, topic)...)
		if err != nil {
			return produceResult{}, fmt.Errorf("producer client: %w", err)
		}
		clients[i] = cl
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: st.value(int64(i))}).FirstErr(); err != nil {
			return produceResult{}, fmt.Errorf("warm-up produce: %w", err)
		}
	}

	st.start = time.Now()
	var deadline time.Time
	if cfg.Rate == 0 && cfg.Duration > 0 {
		deadline = st.start.Add(cfg.Duration)
	}
	var wg sync.WaitGroup
	for i, cl := range clients {
		quota := cfg.Records / int64(cfg.Producers)
		if int64(i) < cfg.Records%int64(cfg.Producers) {
			quota++
		}
		wg.Go(func() { st.run(ctx, cl, i, quota, deadline) })
	}
	wg.Wait()
	for _, cl := range clients {
		if err := cl.Flush(ctx); err != nil {
			return produceResult{}, fmt.Errorf("flush producer: %w", err)
		}
	}
	res := produceResult{
		sent:   st.sent.Load(),
		acked:  ctr.records.Load(),
		bytes:  ctr.bytes.Load(),
		errors: ctr.errors.Load(),
	}
	st.errMu.Lock()
	res.firstErr = st.firstErr
	st.errMu.Unlock()
	if last := st.lastAck.Load(); last > 0 {
		res.elapsed = time.Unix(0, last).Sub(st.start)
	}
	return res, nil
}

// run is one producer's loop. With a rate, record i of this producer is
// due at start + i/rate and its latency counts from then, however late it
// is actually sent; without, it counts from the Produce call.
func (st *produceState) run(ctx context.Context, cl *kgo.Client, idx int, quota int64, deadline time.Time) {
	perRate := st.cfg.Rate / float64(st.cfg.Producers)
	// Stagger producers so that they do not send in lock step.
	offset := time.Duration(0)
	if perRate > 0 {
		offset = time.Duration(float64(idx) / float64(st.cfg.Producers) / perRate * float64(time.Second))
	}
	var timer *time.Timer
	for i := range quota {
		var intended time.Time
		if perRate > 0 {
			intended = st.start.Add(offset + time.Duration(float64(i)/perRate*float64(time.Second)))
			if d := time.Until(intended); d > 0 {
				if timer == nil {
					timer = time.NewTimer(d)
				} else {
					timer.Reset(d)
				}
				select {
				case <-ctx.Done():
					return
				case <-timer.C:
				}
			}
		} else {
			intended = time.Now()
			if !deadline.IsZero() && intended.After(deadline) {
				return
			}
		}
		if ctx.Err() != nil {
			return
		}
		st.sent.Add(1)
		rec := &kgo.Record{Value: st.value(int64(idx)<<40 | i)}
		cl.Produce(ctx, rec, func(r *kgo.Record, err error) { st.ack(r, err, intended) })
	}
}
