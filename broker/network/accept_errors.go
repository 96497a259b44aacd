package network

// Failed accepts. When the process has no file descriptor left (EMFILE,
// ENFILE: too many connections or files for ulimit -n), accept fails
// until one is closed, and the connection waits in the listen backlog.
// The accept loop then backs off, from 5 ms doubling to a second, instead
// of spinning, and logs once per episode (not per attempt): a warning
// when accepts start failing and a line when they work again; when they
// keep failing and working in turn, one warning a minute.
// Connections already open are served meanwhile, and nothing else of the
// broker changes: storage treats the same shortage as transient
// (plog.ErrNoDescriptors), never as a failed disk.

import (
	"errors"
	"syscall"
	"time"
)

const (
	acceptBackoffMin = 5 * time.Millisecond
	acceptBackoffMax = time.Second
)

// acceptBackoff is the accept loop's state across failed accepts.
type acceptBackoff struct {
	delay    time.Duration
	failures int // failed accepts in a row
	since    time.Time

	warned     time.Time // when the last warning was logged
	suppressed int       // failed accepts not logged since
	recovered  bool      // the end of the warned episode was logged
}

// acceptWarnEvery bounds the warnings: when accepts keep failing and
// working in turn (descriptors freed and taken again), one warning a
// minute, counting the failures between.
const acceptWarnEvery = time.Minute

// acceptFailed logs the first failure of an episode (at most one a
// minute) and waits before the next accept (or until the server closes).
func (s *Server) acceptFailed(b *acceptBackoff, err error) {
	if b.failures == 0 {
		b.since = time.Now()
	}
	b.failures++
	if b.warned.IsZero() || time.Since(b.warned) >= acceptWarnEvery {
		if errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) {
			s.log.Warn("accept failed: no file descriptor left; backing off until one is free (open connections are still served; "+
				"lower max.connections or raise ulimit -n)", "err", err, "failed_accepts_since_last_warning", b.suppressed)
		} else {
			s.log.Error("accept failed; backing off", "err", err, "failed_accepts_since_last_warning", b.suppressed)
		}
		b.warned, b.suppressed, b.recovered = time.Now(), 0, false
	} else {
		b.suppressed++
	}
	b.delay = min(max(2*b.delay, acceptBackoffMin), acceptBackoffMax)
	t := time.NewTimer(b.delay)
	defer t.Stop()
	select {
	case <-s.ctx.Done():
	case <-t.C:
	}
}

// acceptWorked ends an episode of failed accepts: the backoff starts
// again from the shortest delay, and the first end after a warning is
// logged.
func (s *Server) acceptWorked(b *acceptBackoff) {
	if b.failures == 0 {
		return
	}
	if !b.recovered {
		s.log.Info("accepting connections again", "failed_accepts", b.failures, "after", time.Since(b.since).Round(time.Millisecond))
		b.recovered = true
	}
	b.delay, b.failures = 0, 0
}
