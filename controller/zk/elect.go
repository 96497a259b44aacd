package zk

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-zookeeper/zk"

	"strata/controller"
)

// tryElect races for /controller.
func (c *Controller) tryElect() error {
	_, err := c.conn.Create(c.p(controllerPath), encodeController(c.opts.Broker.ID), zk.FlagEphemeral, c.acl(c.p(controllerPath)))
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("create %s: %w", controllerPath, err)
	}
	return nil
}

// takeOver bumps /controller_epoch (conditionally on its version) after
// this session won /controller, and from then on acts as controller. Every
// controller write checks the epoch znode's version, so a controller that
// a later one has replaced fails to write.
func (c *Controller) takeOver(sid int64) error {
	path := c.p(controllerEpochPth)
	var epoch, version int32
	data, st, err := c.conn.Get(path)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		if _, err := c.conn.Create(path, []byte("1"), 0, c.acl(path)); err != nil {
			return fmt.Errorf("create %s: %w", controllerEpochPth, err)
		}
		epoch, version = 1, 0
	case err != nil:
		return fmt.Errorf("read %s: %w", controllerEpochPth, err)
	default:
		old, err := strconv.ParseInt(strings.TrimSpace(string(data)), 10, 32)
		if err != nil {
			return fmt.Errorf("parse %s %q: %w", controllerEpochPth, data, err)
		}
		epoch = int32(old) + 1
		nst, err := c.conn.Set(path, []byte(strconv.Itoa(int(epoch))), st.Version)
		if err != nil {
			return fmt.Errorf("bump %s: %w", controllerEpochPth, err)
		}
		version = nst.Version
	}
	c.epoch.Store(epoch)
	c.active.Store(int64(version))
	// The session may have dropped meanwhile; onEvent cannot have seen the
	// store above, so check again.
	if c.conn.State() != zk.StateHasSession || c.conn.SessionID() != sid {
		c.active.Store(-1)
		return errors.New("session lost while taking over")
	}
	c.log.Info("became controller", "controller_epoch", epoch)
	return nil
}

// fencedMulti runs ops atomically, provided this broker is still the
// controller of the epoch it took over with. The returned error is the
// failing op's (ErrNotController when the epoch check failed).
func (c *Controller) fencedMulti(ops ...any) ([]zk.MultiResponse, error) {
	ver := c.active.Load()
	if ver == -1 {
		return nil, controller.ErrNotController
	}
	all := append([]any{&zk.CheckVersionRequest{Path: c.p(controllerEpochPth), Version: int32(ver)}}, ops...)
	res, err := c.conn.Multi(all...)
	if err == nil {
		return res[1:], nil
	}
	for i, r := range res {
		if r.Error == nil {
			continue
		}
		if i == 0 {
			if c.active.CompareAndSwap(ver, -1) {
				c.log.Warn("controller epoch moved on; no longer acting as controller")
			}
			return nil, fmt.Errorf("%w: controller epoch changed", controller.ErrNotController)
		}
		return nil, fmt.Errorf("%s: %w", opPath(all[i]), r.Error)
	}
	return nil, err
}

// opPath names a multi op and its znode, for errors.
func opPath(op any) string {
	switch o := op.(type) {
	case *zk.CreateRequest:
		return "create " + o.Path
	case *zk.SetDataRequest:
		return "set " + o.Path
	case *zk.DeleteRequest:
		return "delete " + o.Path
	case *zk.CheckVersionRequest:
		return "check " + o.Path
	}
	return fmt.Sprintf("%T", op)
}

// reconcile is the active controller's work after every change: finish
// interrupted deletions, give partitions without state their first state,
// and elect leaders where a leader or ISR member is gone.
//
// It logs what it did in one info line with counts (reconcileSummary):
// the partitions' detail is at debug.
func (c *Controller) reconcile(v *view, sum *reconcileSummary) (err error) {
	defer func() {
		sum.reassignments += int(c.reassignSteps.Swap(0))
		sum.reassignFinished += int(c.reassignDone.Swap(0))
		if !sum.empty() {
			c.log.Info(sum.message(), sum.attrs()...)
		}
	}()
	for _, name := range v.deleting {
		if err := c.deleteTopicZNodes(name); err != nil {
			return err
		}
	}
	// live are the brokers that may lead or join an ISR; registered ones
	// in controlled shutdown are not gone: ControlledShutdown moves their
	// partitions (and leaves those that cannot move led by them).
	registered := liveBrokers(v.md)
	live := c.eligible(v.md)
	epoch := c.epoch.Load()
	for name, t := range v.md.Topics {
		unclean := c.uncleanEnabled(v.md, t)
		for i, p := range t.Partitions {
			si := v.states[name][i]
			var ops []any
			var next *partitionState // the changed state, for the log
			if !si.exists {
				s := initialState(p.Replicas, live)
				s.ControllerEpoch = epoch
				ops = append(c.createIfMissingOps(partitionsPath(name), partitionPath(name, p.Index)),
					&zk.CreateRequest{Path: c.p(statePath(name, p.Index)), Data: encodeState(s), Acl: c.acl(c.p(statePath(name, p.Index)))})
			} else {
				gone := si.s.Leader < 0 || !registered[si.s.Leader] ||
					slices.ContainsFunc(si.s.ISR, func(r int32) bool { return !registered[r] })
				if !gone {
					continue
				}
				s, changed := electLeader(p.Replicas, si.s, live, unclean)
				if !changed {
					continue
				}
				s.ControllerEpoch = epoch
				next = &s
				ops = []any{&zk.SetDataRequest{Path: c.p(statePath(name, p.Index)), Data: encodeState(s), Version: si.version}}
			}
			began := time.Now()
			_, err := c.fencedMulti(ops...)
			switch {
			case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNodeExists):
				// Changed under us; its watch brings the new state.
			case err != nil:
				return fmt.Errorf("update state of %s-%d: %w", name, p.Index, err)
			case next != nil:
				took := time.Since(began)
				sum.writeTime += took
				c.metrics.elections.Observe(float64(took.Microseconds()) / 1000)
				switch {
				case next.Leader < 0:
					sum.offline++
				case next.Leader != si.s.Leader:
					sum.elected++
					if !slices.Contains(si.s.ISR, next.Leader) {
						sum.unclean++
						c.metrics.unclean.Inc()
					}
				default:
					sum.shrunk++
				}
				c.log.Debug("partition state changed", "topic", name, "partition", p.Index,
					"leader", next.Leader, "leader_epoch", next.LeaderEpoch, "isr", next.ISR, "old_leader", si.s.Leader)
			default:
				sum.created++
			}
		}
	}
	return c.reconcileReassignments(v)
}

// createIfMissingOps returns create ops for those paths that do not exist.
func (c *Controller) createIfMissingOps(paths ...string) []any {
	var ops []any
	for _, path := range paths {
		if ok, _, err := c.conn.Exists(c.p(path)); err == nil && !ok {
			ops = append(ops, &zk.CreateRequest{Path: c.p(path), Acl: c.acl(c.p(path))})
		}
	}
	return ops
}

// uncleanEnabled resolves unclean.leader.election.enable for a topic:
// topic override, dynamic config of this broker, cluster default, static.
func (c *Controller) uncleanEnabled(md *controller.Metadata, t *controller.Topic) bool {
	const key = "unclean.leader.election.enable"
	for _, cfg := range []map[string]string{t.Configs, md.BrokerConfigs[strconv.Itoa(int(c.opts.Broker.ID))], md.BrokerConfigs[""]} {
		if v, ok := cfg[key]; ok {
			return strings.EqualFold(v, "true")
		}
	}
	return c.opts.UncleanLeaderElection
}

// initialState is a new partition's state: the first live replica leads,
// the live replicas are the ISR.
func initialState(replicas []int32, live map[int32]bool) partitionState {
	s := partitionState{Leader: -1, ISR: []int32{}}
	for _, r := range replicas {
		if live[r] {
			if s.Leader == -1 {
				s.Leader = r
			}
			s.ISR = append(s.ISR, r)
		}
	}
	return s
}

// electLeader returns the state after the brokers not in live are gone,
// and whether it differs from s. A live leader keeps leading and dead
// members leave the ISR; otherwise the first live ISR member in replica
// order leads (clean election), or with unclean election any live
// replica; failing both the partition is offline (leader -1) and keeps its
// last ISR so that a returning member can lead it cleanly. Every change
// bumps the leader epoch.
func electLeader(replicas []int32, s partitionState, live map[int32]bool, unclean bool) (partitionState, bool) {
	isr := slices.DeleteFunc(slices.Clone(s.ISR), func(r int32) bool { return !live[r] })
	ns := s
	ns.ISR = isr
	ns.LeaderEpoch = s.LeaderEpoch + 1
	if s.Leader >= 0 && live[s.Leader] {
		if len(isr) == len(s.ISR) {
			return s, false
		}
		return ns, true
	}
	for _, r := range replicas {
		if slices.Contains(isr, r) {
			ns.Leader = r
			return ns, true
		}
	}
	if unclean {
		for _, r := range replicas {
			if live[r] {
				ns.Leader, ns.ISR = r, []int32{r}
				return ns, true
			}
		}
	}
	if s.Leader == -1 {
		return s, false
	}
	ns.Leader, ns.ISR = -1, slices.Clone(s.ISR)
	return ns, true
}
