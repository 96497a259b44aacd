package network

// queued.max.request.bytes: the memory of requests read and not yet
// handled, and what decoding a request may take (the broker estimates it:
// Options.DecodeCharge; see conn_limits.go for the other limits on
// clients).

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// requestMemory is queued.max.request.bytes: the bytes of requests read
// and not yet handled. A connection reserves the bytes of a request's
// body as they arrive (so that a client announcing a large request and
// sending little holds little), then what decoding it may take
// (Options.DecodeCharge), and gives all back when the handler returns (Kafka
// releases a request's buffer then too; responses are not counted). A
// reader that finds the memory taken stops reading its socket until some
// is given back, which pushes back on the client.
//
// Partly read requests hold memory while they wait for more, so readers
// could all wait on one another; when every holder is waiting, the one
// that reserved first may exceed the bound, so it completes and is
// handled. Used memory thus stays under max plus one request's charge,
// and no request's charge exceeds max (ReserveDecode refuses it).
type requestMemory struct {
	max int64 // <= 0: no bound

	mu      sync.Mutex
	used    int64
	active  int // reservations holding memory and not waiting for more
	seq     uint64
	waiters map[*memReservation]struct{}
	changed chan struct{} // closed (and replaced) when a waiter may proceed
}

// memReservation is the memory one request holds.
type memReservation struct {
	m       *requestMemory
	n       int64
	seq     uint64 // order of the first reservation
	waiting bool
}

func newRequestMemory(max int64) *requestMemory {
	return &requestMemory{max: max, waiters: map[*memReservation]struct{}{}, changed: make(chan struct{})}
}

// requestMemory returns the broker's queued.max.request.bytes pool.
func (s *Server) requestMemory() *requestMemory {
	s.limits.memOnce.Do(func() { s.limits.mem = newRequestMemory(s.cfg.QueuedMaxRequestBytes) })
	return s.limits.mem
}

// errMemoryWait is a reservation that waited past its deadline.
var errMemoryWait = errors.New("waited too long for queued.max.request.bytes")

// setState changes r's bytes and state with m.mu held, keeping used and
// active right, and wakes the waiters when one of them may now proceed.
func (m *requestMemory) setState(r *memReservation, n int64, waiting bool) {
	was := r.n > 0 && !r.waiting
	freed := n < r.n
	m.used += n - r.n
	r.n, r.waiting = n, waiting
	now := r.n > 0 && !r.waiting
	switch {
	case was && !now:
		m.active--
	case !was && now:
		m.active++
	}
	if waiting {
		m.waiters[r] = struct{}{}
	} else {
		delete(m.waiters, r)
	}
	if freed || m.active == 0 && len(m.waiters) > 0 {
		m.wake()
	}
}

func (m *requestMemory) wake() {
	close(m.changed)
	m.changed = make(chan struct{})
}

// first reports whether r is the waiting holder that reserved first.
func (m *requestMemory) first(r *memReservation) bool {
	if r.n == 0 {
		return false
	}
	for w := range m.waiters {
		if w.n > 0 && w.seq < r.seq {
			return false
		}
	}
	return true
}

// grow adds delta bytes to r, waiting while the pool is full until
// deadline (zero: none) or until done is closed.
func (m *requestMemory) grow(r *memReservation, delta int64, deadline time.Time, done <-chan struct{}) error {
	if m.max <= 0 {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	r.m = m
	if r.seq == 0 {
		m.seq++
		r.seq = m.seq
	}
	m.setState(r, r.n, true) // a waiter while it looks
	for {
		if m.used+delta <= m.max || m.active == 0 && m.first(r) {
			m.setState(r, r.n+delta, false)
			return nil
		}
		ch := m.changed
		m.mu.Unlock()
		var timeout <-chan time.Time
		var t *time.Timer
		if !deadline.IsZero() {
			t = time.NewTimer(time.Until(deadline))
			timeout = t.C
		}
		var err error
		select {
		case <-ch:
		case <-timeout:
			err = errMemoryWait
		case <-done:
			err = net.ErrClosed
		}
		if t != nil {
			t.Stop()
		}
		m.mu.Lock()
		if err != nil {
			m.setState(r, r.n, false)
			return err
		}
	}
}

// release gives back everything r holds.
func (r *memReservation) release() {
	m := r.m
	if m == nil || r.n == 0 && !r.waiting {
		return
	}
	m.mu.Lock()
	m.setState(r, 0, false)
	r.seq = 0 // the next request queues anew
	m.mu.Unlock()
}

// inUse returns the bytes reserved (tests, metrics).
func (m *requestMemory) inUse() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.used
}

// errOverBudget is a charge larger than the whole of
// queued.max.request.bytes.
var errOverBudget = errors.New("more than queued.max.request.bytes")

// Reserve charges n more bytes to the connection's request, for memory a
// handler holds beyond what decoding took (a ListOffsets search
// decompressing a stored batch), waiting while the pool is full, as a
// request's reservation does. The bytes go back with release, or when the
// handler returns. A charge larger than the whole bound is refused.
func (cc *Conn) Reserve(n int64) (release func(), err error) {
	mem := cc.s.requestMemory()
	if mem.max <= 0 || n <= 0 {
		return func() {}, nil
	}
	if n > mem.max {
		return nil, fmt.Errorf("%d bytes: %w=%d", n, errOverBudget, mem.max)
	}
	var deadline time.Time
	if idle := cc.s.idleTimeout(); idle > 0 {
		deadline = time.Now().Add(idle)
	}
	if err := mem.grow(&cc.mem, n, deadline, cc.s.ctx.Done()); err != nil {
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(func() { mem.shrink(&cc.mem, n) }) }, nil
}

// ReserveMemory charges n bytes to queued.max.request.bytes for work done
// outside any request (the log cleaner reading compressed batches),
// waiting while the pool is full until done is closed. A charge larger
// than the whole bound is refused.
func (s *Server) ReserveMemory(n int64, done <-chan struct{}) (release func(), err error) {
	mem := s.requestMemory()
	if mem.max <= 0 || n <= 0 {
		return func() {}, nil
	}
	if n > mem.max {
		return nil, fmt.Errorf("%d bytes: %w=%d", n, errOverBudget, mem.max)
	}
	r := new(memReservation)
	if err := mem.grow(r, n, time.Time{}, done); err != nil {
		return nil, err
	}
	var once sync.Once
	return func() { once.Do(r.release) }, nil
}

// shrink gives back n of the bytes r holds (what a Reserve added; less if
// the request has already released them).
func (m *requestMemory) shrink(r *memReservation, n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if r.m != m || r.n == 0 {
		return
	}
	m.setState(r, max(r.n-n, 0), r.waiting)
}
