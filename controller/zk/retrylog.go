package zk

import (
	"errors"
	"log/slog"
	"time"

	"github.com/go-zookeeper/zk"

	"strata/controller"
)

// failureRepeat is how often a failure that persists is logged again.
const failureRepeat = 10 * time.Second

// failureGrace is how long an ordinary failure (a broker not yet
// listening, a znode that changed while read) may last before it is
// warned of.
const failureGrace = time.Second

// retryLog logs the failures of a step that is retried until it succeeds
// (a rebuild from ZooKeeper, a write, a send to a broker), so that one
// that keeps failing is never silent: at WARN with its error (which names
// the znode or broker), then again at most every failureRepeat with the
// count, and at INFO when it succeeds again. ZooKeeper refusing a request
// (NoAuth, a bad ACL or path) is warned of at once; an ordinary failure
// once it has lasted failureGrace; passing session trouble (a lost
// connection, a moved controller), expected while ZooKeeper fails over,
// once it has lasted failureRepeat. Before that, failures are logged at
// debug. Owned by one goroutine.
type retryLog struct {
	msg    string
	since  time.Time // first failure of the current run; zero: none
	last   time.Time // last WARN
	n      int
	warned bool
}

// warnAfter is how long a run of failures ending in err may last before
// it is warned of.
func warnAfter(err error) time.Duration {
	switch {
	case errors.Is(err, zk.ErrNoAuth), errors.Is(err, zk.ErrInvalidACL), errors.Is(err, zk.ErrAuthFailed),
		errors.Is(err, zk.ErrBadArguments), errors.Is(err, zk.ErrInvalidPath), errors.Is(err, zk.ErrAPIError):
		return 0
	case errors.Is(err, zk.ErrConnectionClosed), errors.Is(err, zk.ErrNoServer),
		errors.Is(err, zk.ErrSessionExpired), errors.Is(err, zk.ErrSessionMoved),
		errors.Is(err, zk.ErrClosing), errors.Is(err, controller.ErrNotController):
		return failureRepeat
	}
	return failureGrace
}

func (r *retryLog) failed(log *slog.Logger, now time.Time, err error, attrs ...any) {
	if r.since.IsZero() {
		r.since = now
	}
	r.n++
	attrs = append(attrs, "err", err, "failures", r.n, "failing_for", now.Sub(r.since).Round(time.Millisecond))
	if now.Sub(r.since) < warnAfter(err) {
		log.Debug(r.msg+"; retrying", attrs...)
		return
	}
	if r.warned && now.Sub(r.last) < failureRepeat {
		log.Debug(r.msg+"; retrying", attrs...)
		return
	}
	r.warned, r.last = true, now
	log.Warn(r.msg+"; retrying", attrs...)
}

func (r *retryLog) succeeded(log *slog.Logger, now time.Time, attrs ...any) {
	if r.warned {
		log.Info(r.msg+": recovered", append(attrs, "failures", r.n, "failed_for", now.Sub(r.since).Round(time.Millisecond))...)
	}
	*r = retryLog{msg: r.msg}
}
