package tier

import (
	"context"
	"io"
	"sync"
	"time"
)

// Throttle caps the bytes per second read through its readers, together
// (remote.log.manager.copy.max.bytes.per.second). It allows a burst of one
// second's worth after idleness. Safe for concurrent use.
type Throttle struct {
	rate float64 // bytes per second

	mu   sync.Mutex
	next time.Time // when the bytes read so far are paid for
}

// NewThrottle returns a throttle of bytesPerSecond; nil (no limit) when it
// is <= 0 or the maximum int64 (Kafka's default).
func NewThrottle(bytesPerSecond int64) *Throttle {
	if bytesPerSecond <= 0 || bytesPerSecond == 1<<63-1 {
		return nil
	}
	return &Throttle{rate: float64(bytesPerSecond)}
}

// wait accounts n bytes and blocks until they fit the rate.
func (t *Throttle) wait(ctx context.Context, n int) error {
	if t == nil || n <= 0 {
		return nil
	}
	t.mu.Lock()
	now := time.Now()
	if t.next.Before(now.Add(-time.Second)) {
		t.next = now.Add(-time.Second) // at most a second of credit
	}
	t.next = t.next.Add(time.Duration(float64(n) / t.rate * float64(time.Second)))
	d := t.next.Sub(now)
	t.mu.Unlock()
	if d <= 0 {
		return nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}

// Reader returns r read through the throttle (r itself when t is nil).
func (t *Throttle) Reader(ctx context.Context, r io.Reader) io.Reader {
	if t == nil {
		return r
	}
	return &throttledReader{ctx: ctx, r: r, t: t}
}

type throttledReader struct {
	ctx context.Context
	r   io.Reader
	t   *Throttle
}

func (tr *throttledReader) Read(p []byte) (int, error) {
	if len(p) > 64<<10 {
		p = p[:64<<10] // pay in small steps, so that the pace is even
	}
	n, err := tr.r.Read(p)
	if werr := tr.t.wait(tr.ctx, n); werr != nil && err == nil {
		err = werr
	}
	return n, err
}
