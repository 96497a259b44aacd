package zk

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"strata/internal/obs"
)

// The controller's metrics (Kafka's ControllerStats), declared in the
// catalog of internal/obs.
var (
	mLeaderElections = obs.Histogram("kafka_controller_controllerstats_leaderelectionrateandtimems",
		"Leader elections the active controller made for partitions whose leader or ISR member was gone (a new leader, or the same leader with a smaller ISR, or none: offline), and the time each took to write, in milliseconds (Kafka's ControllerStats LeaderElectionRateAndTimeMs).",
		obs.MillisBuckets)
	mUncleanElections = obs.Counter("kafka_controller_controllerstats_uncleanleaderelections_total",
		"Leaders elected from outside the ISR (unclean.leader.election.enable), which may lose committed records.")
)

// ctrlMetrics are one controller's collectors.
type ctrlMetrics struct {
	elections prometheus.Histogram
	unclean   prometheus.Counter
}

func newCtrlMetrics() ctrlMetrics {
	return ctrlMetrics{elections: mLeaderElections.NewHistogram(), unclean: mUncleanElections.NewCounter()}
}

// Collectors are the controller's metrics, for the broker's registry.
func (c *Controller) Collectors() []prometheus.Collector {
	return []prometheus.Collector{c.metrics.elections, c.metrics.unclean}
}

// reconcileSummary counts what one reconcile did, for one info line:
// per-partition detail is at debug.
type reconcileSummary struct {
	gone, back       []int32 // brokers whose registration vanished / came
	elected          int     // partitions given a new leader
	shrunk           int     // partitions whose leader stayed and ISR shrank
	offline          int     // partitions left without a leader
	unclean          int     // of elected, from outside the ISR
	created          int     // partitions given their first state
	writeTime        time.Duration
	reassignments    int // reassignment steps (reassign.go)
	reassignFinished int
}

func (r *reconcileSummary) empty() bool {
	return len(r.gone) == 0 && len(r.back) == 0 && r.elected == 0 && r.shrunk == 0 && r.offline == 0 &&
		r.created == 0 && r.reassignments == 0
}

// brokerChanges returns the brokers of prev missing from now, and those
// of now missing from prev, sorted.
func brokerChanges(prev, now map[int32]bool) (gone, back []int32) {
	for id := range prev {
		if !now[id] {
			gone = append(gone, id)
		}
	}
	for id := range now {
		if !prev[id] {
			back = append(back, id)
		}
	}
	slices.Sort(gone)
	slices.Sort(back)
	return gone, back
}

// message is the summary in words, e.g. "broker 2 lost its session;
// elected new leaders for 14 partitions, shrank ISR of 30".
func (r *reconcileSummary) message() string {
	var head []string
	ids := func(l []int32) string {
		s := make([]string, len(l))
		for i, id := range l {
			s[i] = fmt.Sprint(id)
		}
		return strings.Join(s, ", ")
	}
	switch len(r.gone) {
	case 0:
	case 1:
		head = append(head, fmt.Sprintf("broker %s lost its session", ids(r.gone)))
	default:
		head = append(head, fmt.Sprintf("brokers %s lost their sessions", ids(r.gone)))
	}
	switch len(r.back) {
	case 0:
	case 1:
		head = append(head, fmt.Sprintf("broker %s registered", ids(r.back)))
	default:
		head = append(head, fmt.Sprintf("brokers %s registered", ids(r.back)))
	}
	var acts []string
	plural := func(n int) string {
		if n == 1 {
			return "1 partition"
		}
		return fmt.Sprintf("%d partitions", n)
	}
	if r.elected > 0 {
		acts = append(acts, "elected new leaders for "+plural(r.elected))
	}
	if r.unclean > 0 {
		acts = append(acts, fmt.Sprintf("%d of them unclean", r.unclean))
	}
	if r.shrunk > 0 {
		acts = append(acts, "shrank ISR of "+plural(r.shrunk))
	}
	if r.offline > 0 {
		acts = append(acts, plural(r.offline)+" offline (no live ISR member)")
	}
	if r.created > 0 {
		acts = append(acts, "gave "+plural(r.created)+" their first state")
	}
	if r.reassignments > 0 {
		acts = append(acts, fmt.Sprintf("took %d reassignment steps (%d completed)", r.reassignments, r.reassignFinished))
	}
	msg := strings.Join(head, ", ")
	if len(acts) > 0 {
		if msg != "" {
			msg += "; "
		}
		msg += strings.Join(acts, ", ")
	}
	return msg
}

// attrs are the summary's fields, for the log line.
func (r *reconcileSummary) attrs() []any {
	a := []any{"leaders_elected", r.elected, "isr_shrunk", r.shrunk, "offline", r.offline}
	if len(r.gone) > 0 {
		a = append(a, "brokers_lost", r.gone)
	}
	if len(r.back) > 0 {
		a = append(a, "brokers_registered", r.back)
	}
	if r.unclean > 0 {
		a = append(a, "unclean", r.unclean)
	}
	if r.created > 0 {
		a = append(a, "partitions_created", r.created)
	}
	if r.reassignments > 0 {
		a = append(a, "reassignment_steps", r.reassignments, "reassignments_completed", r.reassignFinished)
	}
	if r.writeTime > 0 {
		a = append(a, "took", r.writeTime.Round(time.Millisecond))
	}
	return a
}
