package bench

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Group balancers (client-side assignors of the classic protocol) a group
// workload may use.
const (
	BalancerRange             = "range" // eager: every member gives up its partitions on a rebalance
	BalancerRoundRobin        = "round-robin"
	BalancerSticky            = "sticky"
	BalancerCooperativeSticky = "cooperative-sticky" // incremental: only moved partitions pause
)

// groupBalancer maps a balancer name to franz-go's.
func groupBalancer(name string) (kgo.GroupBalancer, error) {
	switch name {
	case BalancerRange:
		return kgo.RangeBalancer(), nil
	case BalancerRoundRobin:
		return kgo.RoundRobinBalancer(), nil
	case BalancerSticky:
		return kgo.StickyBalancer(), nil
	case BalancerCooperativeSticky:
		return kgo.CooperativeStickyBalancer(), nil
	}
	return nil, fmt.Errorf("unknown balancer %q (want range, round-robin, sticky or cooperative-sticky)", name)
}

// Timing of the rebalance measurement.
const (
	rebalanceSettle = time.Second            // consumption after a rebalance before the next is measured
	rebalanceLead   = 500 * time.Millisecond // watched before a member joins, and after consumption resumed
	rebalanceBucket = 10 * time.Millisecond  // resolution of Rebalance.RecordsPerSec
	maxRebalanceLog = 3000                   // buckets kept per rebalance (30 s)
	stablePoll      = 20 * time.Millisecond
	rebalanceLimit  = time.Minute // for a group to become stable or resume
)

// Spread is a figure measured several times (per member or per rebalance),
// in milliseconds.
type Spread struct {
	N        int       `json:"n"`
	P50Ms    float64   `json:"p50_ms"`
	MaxMs    float64   `json:"max_ms"`
	ValuesMs []float64 `json:"values_ms"`
}

func spread(ms []float64) Spread {
	s := Spread{N: len(ms), ValuesMs: ms}
	if len(ms) > 0 {
		sorted := slices.Clone(ms)
		s.P50Ms = median(sorted)
		s.MaxMs = slices.Max(ms)
	}
	return s
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// GroupStats are the consumer-group figures of a consume_mode "group" run.
type GroupStats struct {
	Balancer string `json:"balancer"`
	Members  int    `json:"members"` // members per group before any rebalance
	// JoinToFirstRecord is, per member (the initial ones and those that
	// joined later), the time from creating its client, which joins the
	// group, to the first record delivered to it.
	JoinToFirstRecord Spread      `json:"join_to_first_record"`
	Rebalances        []Rebalance `json:"rebalances"`
	// Over Rebalances: see Rebalance.
	Pause          Spread `json:"pause"`
	PartitionPause Spread `json:"partition_pause"`
	Resume         Spread `json:"resume"`
}

// Rebalance is one measured rebalance: a member joins each group of a
// stable run while records flow at the workload's rate.
type Rebalance struct {
	AtS float64 `json:"at_s"` // when the member joined, on the timeline's clock
	// PauseMs is the longest time no record was delivered to any member,
	// from the last delivery before the join to consumption resuming.
	PauseMs float64 `json:"pause_ms"`
	// PartitionPauseMs is the longest such gap on any one partition (it
	// includes the partition's normal spacing of records).
	PartitionPauseMs float64 `json:"partition_pause_ms"`
	// StableMs is from the join until every group was Stable with the new
	// member (DescribeGroups, polled every 20 ms).
	StableMs float64 `json:"stable_ms"`
	// ResumeMs is from the join until every group was stable and every
	// partition had delivered a record since.
	ResumeMs float64 `json:"resume_ms"`
	// RecordsPerSec is the delivery rate over all members in 10 ms
	// buckets, from 500 ms before the join to 500 ms after resuming.
	RecordsPerSec []float64 `json:"records_per_s"`
}

// gapWatch measures delivery gaps around one rebalance. The tracker feeds
// it under its lock.
type gapWatch struct {
	armed    time.Time
	join     time.Time // zero until the member joins
	lastAny  time.Time
	maxAny   time.Duration
	lastPart map[tp]time.Time
	maxPart  time.Duration
	pending  map[tp]bool // set when the group is stable: partitions not delivered since
	resumed  chan struct{}
	resumeAt time.Time
	buckets  []int64
}

func (g *gapWatch) deliver(p tp, n int, now time.Time) {
	if i := int(now.Sub(g.armed) / rebalanceBucket); i >= 0 && i < maxRebalanceLog {
		if i >= len(g.buckets) {
			g.buckets = append(g.buckets, make([]int64, i+1-len(g.buckets))...)
		}
		g.buckets[i] += int64(n)
	}
	if !g.resumeAt.IsZero() {
		return
	}
	last, ok := g.lastPart[p]
	if !ok {
		last = g.armed
	}
	if !g.join.IsZero() && now.After(g.join) {
		g.maxAny = max(g.maxAny, now.Sub(g.lastAny))
		g.maxPart = max(g.maxPart, now.Sub(last))
	}
	g.lastAny, g.lastPart[p] = now, now
	if g.pending != nil {
		delete(g.pending, p)
		if len(g.pending) == 0 {
			g.resumeAt = now
			close(g.resumed)
		}
	}
}

// armWatch starts watching deliveries; the tracker feeds the watch until
// disarmWatch.
func (t *tracker) armWatch(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.watch = &gapWatch{armed: now, lastAny: now, lastPart: map[tp]time.Time{}, resumed: make(chan struct{})}
}

func (t *tracker) watchJoin(now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.watch.join = now
}

// watchStable marks the group stable at now: the returned channel is
// closed once each of parts has delivered a record since.
func (t *tracker) watchStable(parts []tp) <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.watch
	g.pending = map[tp]bool{}
	for _, p := range parts {
		g.pending[p] = true
	}
	return g.resumed
}

func (t *tracker) disarmWatch() *gapWatch {
	t.mu.Lock()
	defer t.mu.Unlock()
	g := t.watch
	t.watch = nil
	return g
}

// rebalances measures cfg.Rebalances rebalances: each time, with the
// groups stable, one member joins every group; once consumption has
// resumed on every partition the member leaves again and the groups settle
// before the next. It stops early, without error, when ctx ends.
func (tr *targetRun) rebalances(ctx context.Context, cs *consumers, track *tracker, parts []tp) ([]Rebalance, error) {
	adm, err := tr.br.client()
	if err != nil {
		return nil, fmt.Errorf("group admin client: %w", err)
	}
	defer adm.Close()
	groups := make([]string, len(tr.res.Topics))
	for i, topic := range tr.res.Topics {
		groups[i] = groupName(topic)
	}
	stable := func(members int) (time.Time, error) {
		return waitStable(ctx, kadm.NewClient(adm), groups, members)
	}
	n := tr.cfg.Consumers
	if _, err := stable(n); err != nil {
		return nil, fmt.Errorf("initial group: %w", err)
	}
	var out []Rebalance
	for range tr.cfg.Rebalances {
		if !sleepCtx(ctx, rebalanceSettle) {
			return out, nil
		}
		track.armWatch(time.Now())
		if !sleepCtx(ctx, rebalanceLead) {
			track.disarmWatch()
			return out, nil
		}
		join := time.Now()
		track.watchJoin(join)
		added, err := cs.addMembers(ctx, tr.cfg, tr.br, tr.res.Topics, track)
		if err != nil {
			track.disarmWatch()
			return out, err
		}
		stableAt, err := stable(n + 1)
		if err != nil {
			track.disarmWatch()
			return out, fmt.Errorf("rebalance after a join: %w", err)
		}
		rctx, cancel := context.WithTimeout(ctx, rebalanceLimit)
		select {
		case <-track.watchStable(parts):
		case <-rctx.Done():
		}
		cancel()
		if ctx.Err() != nil {
			track.disarmWatch()
			return out, nil
		}
		sleepCtx(ctx, rebalanceLead)
		g := track.disarmWatch()
		if g.resumeAt.IsZero() {
			return out, fmt.Errorf("partitions not consumed within %s of a rebalance", rebalanceLimit)
		}
		rb := Rebalance{
			AtS:              join.Sub(tr.mon.origin).Seconds(),
			PauseMs:          ms(g.maxAny),
			PartitionPauseMs: ms(g.maxPart),
			StableMs:         ms(stableAt.Sub(join)),
			ResumeMs:         ms(g.resumeAt.Sub(join)),
		}
		for _, c := range g.buckets {
			rb.RecordsPerSec = append(rb.RecordsPerSec, float64(c)/rebalanceBucket.Seconds())
		}
		out = append(out, rb)
		cs.removeMembers(added)
		if _, err := stable(n); err != nil {
			return out, fmt.Errorf("rebalance after a leave: %w", err)
		}
	}
	return out, nil
}

// waitStable polls until every group is Stable with members members and
// returns when it saw that.
func waitStable(ctx context.Context, adm *kadm.Client, groups []string, members int) (time.Time, error) {
	ctx, cancel := context.WithTimeout(ctx, rebalanceLimit)
	defer cancel()
	var last string
	for {
		dg, err := adm.DescribeGroups(ctx, groups...)
		now := time.Now()
		if err == nil {
			ok := true
			for _, g := range groups {
				d := dg[g]
				if d.Err != nil || d.State != "Stable" || len(d.Members) != members {
					ok = false
					last = fmt.Sprintf("group %s: state %q, %d members, err %v", g, d.State, len(d.Members), d.Err)
					break
				}
			}
			if ok {
				return now, nil
			}
		} else {
			last = err.Error()
		}
		if !sleepCtx(ctx, stablePoll) {
			return time.Time{}, fmt.Errorf("groups not stable with %d members (last: %s): %w", members, last, ctx.Err())
		}
	}
}

// sleepCtx waits d; false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// groupStats summarises the members' joins and the rebalances.
func groupStats(cfg Config, cs *consumers, rbs []Rebalance) *GroupStats {
	gs := &GroupStats{Balancer: cfg.Balancer, Members: cfg.Consumers, Rebalances: rbs}
	var join, pause, part, resume []float64
	for _, m := range cs.members {
		if f := m.first.Load(); f > 0 {
			join = append(join, ms(time.Unix(0, f).Sub(m.joined)))
		}
	}
	for _, rb := range rbs {
		pause = append(pause, rb.PauseMs)
		part = append(part, rb.PartitionPauseMs)
		resume = append(resume, rb.ResumeMs)
	}
	gs.JoinToFirstRecord, gs.Pause, gs.PartitionPause, gs.Resume = spread(join), spread(pause), spread(part), spread(resume)
	return gs
}
