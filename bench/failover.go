package bench

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Faults a failover workload injects into the leader of the most
// partitions, one after the other, while the producers run open loop.
const (
	FaultKill     = "kill"     // SIGKILL: the controller notices when the broker's ZooKeeper session expires
	FaultShutdown = "shutdown" // SIGTERM: controlled shutdown moves leadership away before the broker exits
)

// Timing of the fault measurement.
const (
	faultSettle   = 2 * time.Second // steady acks before a fault
	faultLead     = time.Second     // acks before the fault that count in its gaps
	faultLimit    = 2 * time.Minute // for leaders to move, acks to resume, the cluster to heal
	faultPoll     = 20 * time.Millisecond
	sessionConfig = "zookeeper.session.timeout.ms"
)

// FailoverStats are the figures of a run with faults.
type FailoverStats struct {
	// SessionTimeoutMs is the brokers' zookeeper.session.timeout.ms
	// (DescribeConfigs), which bounds how fast a killed broker is noticed;
	// -1 if it could not be read.
	SessionTimeoutMs int64   `json:"session_timeout_ms"`
	Faults           []Fault `json:"faults"`
}

// Fault is one injected fault.
type Fault struct {
	Kind          string  `json:"kind"` // kill or shutdown
	Broker        int32   `json:"broker"`
	WasController bool    `json:"was_controller"`
	AtS           float64 `json:"at_s"` // signal sent, on the timeline's clock
	// Partitions the broker led when signalled.
	Partitions int `json:"partitions"`
	// WindowMs is the unavailability window: over the partitions the
	// broker led, the longest time between consecutive acknowledgements
	// of records bound for one partition, from faultLead before the fault
	// until acks resumed on all of them.
	WindowMs float64 `json:"window_ms"`
	// AnyPartitionMs is the same over every partition (those it followed
	// too: acks=-1 waits for the ISR).
	AnyPartitionMs float64 `json:"any_partition_ms"`
	// LeadersMovedMs is from the fault until metadata showed every
	// partition it led with another leader.
	LeadersMovedMs float64 `json:"leaders_moved_ms"`
	// HealedMs is from restarting the broker until every partition had
	// its full ISR and, after a preferred-leader election, its preferred
	// leader again.
	HealedMs float64 `json:"healed_ms"`
}

// ackLog keeps, per partition, when each record was acknowledged.
type ackLog struct {
	mu   sync.Mutex
	acks map[tp][]int64 // unix nanoseconds, in callback order
}

func newAckLog() *ackLog { return &ackLog{acks: map[tp][]int64{}} }

func (a *ackLog) add(p tp, at time.Time) {
	a.mu.Lock()
	a.acks[p] = append(a.acks[p], at.UnixNano())
	a.mu.Unlock()
}

// since returns a copy of p's acks at or after from.
func (a *ackLog) since(p tp, from time.Time) []int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	ts := a.acks[p]
	i, _ := slices.BinarySearch(ts, from.UnixNano()) // appended in time order, near enough: sorted below
	if i > 0 {
		i-- // a slightly out-of-order neighbour
	}
	return slices.Clone(ts[i:])
}

// longestGap returns the longest time between consecutive points of
// from, the acks within [from, to] and to: the longest a partition went
// without an acknowledgement in that interval (a gap still open at to
// counts up to to).
func longestGap(acks []int64, from, to time.Time) time.Duration {
	ts := slices.Clone(acks)
	slices.Sort(ts)
	prev, end := from.UnixNano(), to.UnixNano()
	var longest int64
	for _, t := range ts {
		if t < prev {
			continue
		}
		if t > end {
			break
		}
		longest, prev = max(longest, t-prev), t
	}
	return time.Duration(max(longest, end-prev))
}

// faults injects cfg.Faults into the cluster one after the other while the
// producers run, and measures each.
func (tr *targetRun) faults(ctx context.Context, c *clusterTarget, acks *ackLog) (*FailoverStats, error) {
	cl, err := tr.br.client()
	if err != nil {
		return nil, fmt.Errorf("failover admin client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	st := &FailoverStats{SessionTimeoutMs: sessionTimeout(ctx, adm)}
	for _, kind := range tr.cfg.Faults {
		if !sleepCtx(ctx, faultSettle) {
			return st, nil
		}
		f, err := tr.fault(ctx, c, adm, acks, kind)
		if err != nil {
			return st, fmt.Errorf("%s fault: %w", kind, err)
		}
		st.Faults = append(st.Faults, f)
	}
	return st, nil
}

// sessionTimeout reads zookeeper.session.timeout.ms from the first
// broker, or -1.
func sessionTimeout(ctx context.Context, adm *kadm.Client) int64 {
	md, err := adm.BrokerMetadata(ctx)
	if err != nil || len(md.Brokers) == 0 {
		return -1
	}
	rcs, err := adm.DescribeBrokerConfigs(ctx, md.Brokers[0].NodeID)
	if err != nil {
		return -1
	}
	for _, rc := range rcs {
		for _, c := range rc.Configs {
			if c.Key == sessionConfig && c.Value != nil {
				if v, err := strconv.ParseInt(*c.Value, 10, 64); err == nil {
					return v
				}
			}
		}
	}
	return -1
}

// fault injects one fault into the leader of the most partitions of the
// run's topics and heals the cluster afterwards.
func (tr *targetRun) fault(ctx context.Context, c *clusterTarget, adm *kadm.Client, acks *ackLog, kind string) (Fault, error) {
	f := Fault{Kind: kind}
	md, err := adm.Metadata(ctx, tr.res.Topics...)
	if err != nil {
		return f, fmt.Errorf("metadata: %w", err)
	}
	led := map[int32][]tp{}
	var all []tp
	for _, topic := range tr.res.Topics {
		for _, p := range md.Topics[topic].Partitions.Sorted() {
			all = append(all, tp{topic, p.Partition})
			if p.Leader >= 0 {
				led[p.Leader] = append(led[p.Leader], tp{topic, p.Partition})
			}
		}
	}
	f.Broker = -1
	for id, ps := range led {
		if f.Broker < 0 || len(ps) > len(led[f.Broker]) || len(ps) == len(led[f.Broker]) && id < f.Broker {
			f.Broker = id
		}
	}
	if f.Broker < 0 {
		return f, errors.New("no partition has a leader")
	}
	victim := led[f.Broker]
	f.Partitions, f.WasController = len(victim), md.Controller == f.Broker
	sig := syscall.SIGKILL
	if kind == FaultShutdown {
		sig = syscall.SIGTERM
	}

	at := time.Now()
	f.AtS = at.Sub(tr.mon.origin).Seconds()
	bc, err := c.stopBroker(ctx, f.Broker, sig)
	if err != nil {
		return f, err
	}
	// Wait until metadata shows new leaders, then until every partition
	// the broker led has acknowledged a record since.
	moved, err := pollUntil(ctx, func() (bool, error) {
		md, err := adm.Metadata(ctx, tr.res.Topics...)
		if err != nil {
			return false, nil // the seed may be the stopped broker; the client moves on
		}
		for _, p := range victim {
			pd, ok := md.Topics[p.topic].Partitions[p.partition]
			if !ok || pd.Leader < 0 || pd.Leader == f.Broker {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return f, fmt.Errorf("leaders of broker %d's partitions did not move: %w", f.Broker, err)
	}
	f.LeadersMovedMs = ms(moved.Sub(at))
	resumed, err := pollUntil(ctx, func() (bool, error) {
		for _, p := range victim {
			if len(acks.since(p, moved)) == 0 {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return f, fmt.Errorf("acks did not resume on broker %d's partitions: %w", f.Broker, err)
	}
	// Every partition, not only the victim's: give the others until now.
	from := at.Add(-faultLead)
	for _, p := range all {
		g := ms(longestGap(acks.since(p, from), from, resumed))
		if slices.Contains(victim, p) {
			f.WindowMs = max(f.WindowMs, g)
		}
		f.AnyPartitionMs = max(f.AnyPartitionMs, g)
	}

	// Heal: restart the broker, wait for full ISRs, elect preferred leaders.
	restarted := time.Now()
	if err := c.restartBroker(f.Broker, bc); err != nil {
		return f, err
	}
	if _, err := pollUntil(ctx, func() (bool, error) { return fullISR(ctx, adm, tr.res.Topics, false) }); err != nil {
		return f, fmt.Errorf("ISR did not recover after restarting broker %d: %w", f.Broker, err)
	}
	if _, err := pollUntil(ctx, func() (bool, error) {
		_, _ = adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil)
		return fullISR(ctx, adm, tr.res.Topics, true)
	}); err != nil {
		return f, fmt.Errorf("preferred leaders not back after restarting broker %d: %w", f.Broker, err)
	}
	f.HealedMs = ms(time.Since(restarted))
	return f, nil
}

// fullISR reports whether every partition of topics has all its replicas
// in sync (and, with preferred, its first replica as leader).
func fullISR(ctx context.Context, adm *kadm.Client, topics []string, preferred bool) (bool, error) {
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		return false, nil
	}
	for _, topic := range topics {
		td, ok := md.Topics[topic]
		if !ok || td.Err != nil || len(td.Partitions) == 0 {
			return false, nil
		}
		for _, p := range td.Partitions {
			if p.Err != nil || p.Leader < 0 || len(p.ISR) != len(p.Replicas) {
				return false, nil
			}
			if preferred && (len(p.Replicas) == 0 || p.Leader != p.Replicas[0]) {
				return false, nil
			}
		}
	}
	return true, nil
}

// pollUntil calls cond every faultPoll until it is true (returning when),
// it fails, or faultLimit passes.
func pollUntil(ctx context.Context, cond func() (bool, error)) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, faultLimit)
	defer cancel()
	return pollEvery(ctx, faultPoll, cond)
}

// pollEvery calls cond every period until it is true (returning when),
// it fails, or ctx ends.
func pollEvery(ctx context.Context, period time.Duration, cond func() (bool, error)) (time.Time, error) {
	for {
		ok, err := cond()
		if err != nil {
			return time.Time{}, err
		}
		if ok {
			return time.Now(), nil
		}
		if !sleepCtx(ctx, period) {
			return time.Time{}, ctx.Err()
		}
	}
}
