package zk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/go-zookeeper/zk"

	"strata/controller"
)

// Partition reassignment (controller/reassign.go has the states). The
// state lives in ZooKeeper as Kafka's ZooKeeper mode kept it, so that a
// controller taking over in the middle carries on: the topic znode's
// partitions hold the whole replica set, and its adding_replicas and
// removing_replicas the partitions being reassigned. Each step is one
// fenced multi-op writing the topic znode and the changed partition
// states, conditional on the versions read, so a step races neither a
// leader's ISR change nor another step.
//
// Reassignments start through AlterPartitionReassignments or through
// /admin/reassign_partitions (Kafka's legacy path, still written by old
// tools and operators' scripts):
//
//	/admin/reassign_partitions  {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}
//
// The active controller starts the reassignments the znode lists, drops
// each entry once its partition has the replicas asked for (or a later
// request through the API replaced it), and deletes the znode when it is
// empty. Every change of the cluster (an ISR change above all) makes the
// active controller complete the reassignments whose target replicas have
// all joined the ISR.

const reassignPartitionsPath = "/admin/reassign_partitions"

// reassignZNode is /admin/reassign_partitions, version 1.
type reassignZNode struct {
	Version    int             `json:"version"`
	Partitions []reassignEntry `json:"partitions"`
}

type reassignEntry struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	Replicas  []int32  `json:"replicas"`
	LogDirs   []string `json:"log_dirs,omitempty"`
}

// partEdit changes one partition: it returns the new state, whether it
// changed, or why it cannot.
type partEdit func(cur controller.Partition) (controller.Partition, bool, error)

// editPartitions applies edit to the named partitions of a topic, read
// fresh from ZooKeeper, and writes every change in one fenced multi-op.
// A partition the topic lacks gets ErrUnknownTopic. ErrBadVersion means a
// concurrent change; the caller reads again.
func (c *Controller) editPartitions(name string, parts []int32, edit partEdit) (map[int32]error, error) {
	out := make(map[int32]error, len(parts))
	data, tst, err := c.conn.Get(c.p(topicPath(name)))
	if errors.Is(err, zk.ErrNoNode) {
		for _, p := range parts {
			out[p] = controller.ErrUnknownTopic
		}
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read topic %s: %w", name, err)
	}
	id, assign, ra, err := decodeTopicFull(data)
	if err != nil {
		return nil, err
	}
	epoch := c.epoch.Load()
	var ops []any
	var steps []controller.Partition // for the log, once written
	for _, p := range parts {
		if p < 0 || int(p) >= len(assign) {
			out[p] = controller.ErrUnknownTopic
			continue
		}
		sdata, sst, err := c.conn.Get(c.p(statePath(name, p)))
		if err != nil {
			return nil, fmt.Errorf("read state of %s-%d: %w", name, p, err)
		}
		s, err := decodeState(sdata)
		if err != nil {
			return nil, err
		}
		cur := controller.Partition{Index: p, Leader: s.Leader, LeaderEpoch: s.LeaderEpoch, ISR: s.ISR,
			Replicas: assign[p], AddingReplicas: ra.adding[p], RemovingReplicas: ra.removing[p], PartitionEpoch: sst.Version}
		np, changed, err := edit(cur)
		out[p] = err
		if err != nil || !changed {
			continue
		}
		assign[p] = np.Replicas
		setOrDelete(ra.adding, p, np.AddingReplicas)
		setOrDelete(ra.removing, p, np.RemovingReplicas)
		ns := partitionState{ControllerEpoch: epoch, Leader: np.Leader, LeaderEpoch: np.LeaderEpoch, ISR: np.ISR}
		ops = append(ops, &zk.SetDataRequest{Path: c.p(statePath(name, p)), Data: encodeState(ns), Version: sst.Version})
		steps = append(steps, np)
	}
	if len(ops) == 0 {
		return out, nil
	}
	ops = append([]any{&zk.SetDataRequest{Path: c.p(topicPath(name)), Data: encodeTopicFull(id, assign, ra), Version: tst.Version}}, ops...)
	if _, err := c.fencedMulti(ops...); err != nil {
		return nil, err
	}
	for _, np := range steps {
		// Counted in the controller's next summary line (elect.go).
		c.reassignSteps.Add(1)
		if len(np.AddingReplicas) == 0 && len(np.RemovingReplicas) == 0 {
			c.reassignDone.Add(1)
		}
		c.log.Debug("partition reassignment step", "topic", name, "partition", np.Index, "replicas", np.Replicas,
			"adding", np.AddingReplicas, "removing", np.RemovingReplicas, "leader", np.Leader,
			"leader_epoch", np.LeaderEpoch, "isr", np.ISR)
	}
	return out, nil
}

func setOrDelete(m map[int32][]int32, p int32, v []int32) {
	if len(v) == 0 {
		delete(m, p)
		return
	}
	m[p] = v
}

// startEdit starts (target) or cancels (nil) a reassignment, and
// completes it at once when the target replicas are already in the ISR.
func (c *Controller) startEdit(target []int32, registered, alive func(int32) bool) partEdit {
	return func(cur controller.Partition) (controller.Partition, bool, error) {
		var np controller.Partition
		changed := false
		if target == nil {
			var err error
			if np, err = controller.ReassignCancel(cur, alive); err != nil {
				return cur, false, err
			}
			changed = true
		} else {
			if err := controller.CheckTarget(target, registered); err != nil {
				return cur, false, err
			}
			np, changed = controller.ReassignStart(cur, target)
		}
		if done, ok := controller.ReassignProgress(np, alive); ok {
			np, changed = done, true
		}
		return np, changed, nil
	}
}

// AlterPartitionReassignments starts or cancels reassignments (see the
// file comment). It answers once this broker's snapshot shows them.
func (c *Controller) AlterPartitionReassignments(ctx context.Context, reqs map[controller.TopicPartition][]int32) (map[controller.TopicPartition]error, error) {
	end, err := c.begin()
	if err != nil {
		return nil, err
	}
	defer end()
	md := c.Metadata()
	registered := liveBrokers(md)
	live := c.eligible(md)
	isReg := func(id int32) bool { return registered[id] }
	alive := func(id int32) bool { return live[id] }
	byTopic := map[string][]int32{}
	for tp := range reqs {
		byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
	}
	out := make(map[controller.TopicPartition]error, len(reqs))
	for name, parts := range byTopic {
		slices.Sort(parts)
		var res map[int32]error
		for attempt := 0; ; attempt++ {
			res, err = c.editPartitions(name, parts, func(cur controller.Partition) (controller.Partition, bool, error) {
				return c.startEdit(reqs[controller.TopicPartition{Topic: name, Partition: cur.Index}], isReg, alive)(cur)
			})
			if !errors.Is(err, zk.ErrBadVersion) || attempt >= 20 {
				break
			}
		}
		if err != nil {
			return nil, fmt.Errorf("reassign partitions of %s: %w", name, err)
		}
		for p, e := range res {
			out[controller.TopicPartition{Topic: name, Partition: p}] = e
		}
	}
	if err := c.dropReassignEntries(reqs); err != nil {
		c.log.Warn("update "+reassignPartitionsPath, "err", err)
	}
	// Wait until the snapshot shows each started reassignment (or its
	// completion).
	return out, c.waitFor(ctx, func(md *controller.Metadata) bool {
		for tp, target := range reqs {
			if out[tp] != nil {
				continue
			}
			t, ok := md.Topics[tp.Topic]
			if !ok || int(tp.Partition) >= len(t.Partitions) {
				continue
			}
			p := t.Partitions[tp.Partition]
			if target == nil {
				if p.Reassigning() {
					return false
				}
			} else if !slices.Equal(p.TargetReplicas(), target) {
				return false
			}
		}
		return true
	})
}

// dropReassignEntries removes from /admin/reassign_partitions the
// partitions a request through the API took over.
func (c *Controller) dropReassignEntries(reqs map[controller.TopicPartition][]int32) error {
	data, st, err := c.conn.Get(c.p(reassignPartitionsPath))
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return err
	}
	var z reassignZNode
	if json.Unmarshal(data, &z) != nil {
		return nil // reconcile reports and removes a bad znode
	}
	keep := slices.DeleteFunc(slices.Clone(z.Partitions), func(e reassignEntry) bool {
		_, ok := reqs[controller.TopicPartition{Topic: e.Topic, Partition: e.Partition}]
		return ok
	})
	return c.writeReassignZNode(z, keep, st.Version)
}

// writeReassignZNode rewrites /admin/reassign_partitions with keep, or
// deletes it when keep is empty; nothing when nothing was dropped.
func (c *Controller) writeReassignZNode(z reassignZNode, keep []reassignEntry, version int32) error {
	if len(keep) == len(z.Partitions) {
		return nil
	}
	var op any
	if len(keep) == 0 {
		op = &zk.DeleteRequest{Path: c.p(reassignPartitionsPath), Version: version}
	} else {
		z.Partitions = keep
		op = &zk.SetDataRequest{Path: c.p(reassignPartitionsPath), Data: mustJSON(z), Version: version}
	}
	_, err := c.fencedMulti(op)
	if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode) {
		return nil // changed meanwhile; its watch brings us back
	}
	return err
}

// reconcileReassignments is the active controller's reassignment work
// after every change: start what /admin/reassign_partitions asks, and
// complete the reassignments whose target replicas are all in the ISR.
func (c *Controller) reconcileReassignments(v *view) error {
	if err := c.reconcileReassignZNode(v); err != nil {
		return err
	}
	live := c.eligible(v.md)
	alive := func(id int32) bool { return live[id] }
	for _, name := range slices.Sorted(maps.Keys(v.md.Topics)) {
		t := v.md.Topics[name]
		var ready []int32
		for _, p := range t.Partitions {
			if _, ok := controller.ReassignProgress(p, alive); ok {
				ready = append(ready, p.Index)
			}
		}
		if len(ready) == 0 {
			continue
		}
		_, err := c.editPartitions(name, ready, func(cur controller.Partition) (controller.Partition, bool, error) {
			np, ok := controller.ReassignProgress(cur, alive)
			return np, ok, nil
		})
		if err != nil && !errors.Is(err, zk.ErrBadVersion) {
			return fmt.Errorf("complete reassignments of %s: %w", name, err)
		}
	}
	return nil
}

// reconcileReassignZNode starts the reassignments /admin/reassign_partitions
// lists and drops the entries that are done.
func (c *Controller) reconcileReassignZNode(v *view) error {
	e, err := c.get(reassignPartitionsPath)
	if err != nil || !e.exists {
		return err
	}
	var z reassignZNode
	if err := json.Unmarshal(e.data, &z); err != nil {
		c.log.Warn("deleting unreadable "+reassignPartitionsPath, "err", err)
		_, err := c.fencedMulti(&zk.DeleteRequest{Path: c.p(reassignPartitionsPath), Version: e.stat.Version})
		if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode) {
			return nil
		}
		return err
	}
	registered := liveBrokers(v.md)
	live := c.eligible(v.md)
	isReg := func(id int32) bool { return registered[id] }
	alive := func(id int32) bool { return live[id] }
	var keep []reassignEntry
	start := map[string][]int32{}
	targets := map[controller.TopicPartition][]int32{}
	for _, ent := range z.Partitions {
		t, ok := v.md.Topics[ent.Topic]
		if !ok || ent.Partition < 0 || int(ent.Partition) >= len(t.Partitions) {
			c.log.Warn("dropping reassignment of an unknown partition", "path", reassignPartitionsPath, "topic", ent.Topic, "partition", ent.Partition)
			continue
		}
		p := t.Partitions[ent.Partition]
		switch {
		case !p.Reassigning() && slices.Equal(p.Replicas, ent.Replicas):
			continue // done
		case p.Reassigning() && slices.Equal(p.TargetReplicas(), ent.Replicas):
			keep = append(keep, ent) // under way
		default:
			if err := controller.CheckTarget(ent.Replicas, isReg); err != nil {
				c.log.Warn("dropping reassignment", "path", reassignPartitionsPath, "topic", ent.Topic, "partition", ent.Partition, "err", err)
				continue
			}
			keep = append(keep, ent)
			tp := controller.TopicPartition{Topic: ent.Topic, Partition: ent.Partition}
			if _, dup := targets[tp]; !dup {
				start[ent.Topic] = append(start[ent.Topic], ent.Partition)
			}
			targets[tp] = ent.Replicas
		}
	}
	for _, name := range slices.Sorted(maps.Keys(start)) {
		_, err := c.editPartitions(name, start[name], func(cur controller.Partition) (controller.Partition, bool, error) {
			return c.startEdit(targets[controller.TopicPartition{Topic: name, Partition: cur.Index}], isReg, alive)(cur)
		})
		if err != nil && !errors.Is(err, zk.ErrBadVersion) {
			return fmt.Errorf("start reassignments of %s from %s: %w", name, reassignPartitionsPath, err)
		}
	}
	return c.writeReassignZNode(z, keep, e.stat.Version)
}
