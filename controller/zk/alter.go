package zk

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/go-zookeeper/zk"

	"strata/controller"
)

// AlterPartition commits an ISR change proposed by a partition's leader.
// The partition epoch is the state znode's version (as in Kafka's
// ZooKeeper mode), and the write is conditional on it, so a proposal made
// on a stale view fails with controller.ErrInvalidUpdateVersion.
//
// As in Kafka's ZooKeeper mode before AlterPartition existed (KIP-497), a
// leader that is not the controller writes the state znode itself; it needs
// a live ZooKeeper session (and a known controller) to do so, so a broker
// cut off from ZooKeeper cannot change an ISR.
func (c *Controller) AlterPartition(ctx context.Context, req controller.AlterPartitionRequest) (controller.Partition, error) {
	c.opMu.Lock()
	defer c.opMu.Unlock()
	md := c.Metadata()
	if md.ControllerID < 0 {
		return controller.Partition{}, controller.ErrNotController
	}
	if !c.IsActive() && req.Leader != c.opts.Broker.ID {
		// Only the controller writes on another broker's behalf.
		return controller.Partition{}, fmt.Errorf("%w: broker %d proposes for leader %d", controller.ErrNotLeader, c.opts.Broker.ID, req.Leader)
	}
	t, ok := md.Topics[req.Topic]
	if !ok || req.Partition < 0 || int(req.Partition) >= len(t.Partitions) {
		return controller.Partition{}, controller.ErrUnknownTopic
	}
	// Read the state itself rather than the snapshot, which may lag.
	path := statePath(req.Topic, req.Partition)
	data, st, err := c.conn.Get(c.p(path))
	if err != nil {
		return controller.Partition{}, fmt.Errorf("alter partition %s-%d: read %s: %w", req.Topic, req.Partition, path, err)
	}
	s, err := decodeState(data)
	if err != nil {
		return controller.Partition{}, fmt.Errorf("alter partition %s-%d: %w", req.Topic, req.Partition, err)
	}
	cur := t.Partitions[req.Partition]
	cur.Leader, cur.LeaderEpoch, cur.ISR, cur.PartitionEpoch = s.Leader, s.LeaderEpoch, s.ISR, st.Version
	live := c.eligible(md)
	if err := controller.CheckAlterPartition(cur, req, func(id int32) bool { return live[id] }); err != nil {
		return controller.Partition{}, err
	}
	if sameSet(cur.ISR, req.ISR) {
		return cur, nil
	}
	s.ISR = slices.Clone(req.ISR)
	var newVersion int32
	if c.IsActive() {
		s.ControllerEpoch = c.epoch.Load()
		res, err := c.fencedMulti(&zk.SetDataRequest{Path: c.p(path), Data: encodeState(s), Version: st.Version})
		if err == nil {
			newVersion = res[0].Stat.Version
		}
		if errors.Is(err, zk.ErrBadVersion) {
			return controller.Partition{}, fmt.Errorf("%w: state of %s-%d changed", controller.ErrInvalidUpdateVersion, req.Topic, req.Partition)
		}
		if err != nil {
			return controller.Partition{}, fmt.Errorf("alter partition %s-%d: %w", req.Topic, req.Partition, err)
		}
	} else {
		// The leader's own conditional write: the version check fences
		// it against any leader change the controller made meanwhile.
		stat, err := c.conn.Set(c.p(path), encodeState(s), st.Version)
		if errors.Is(err, zk.ErrBadVersion) {
			return controller.Partition{}, fmt.Errorf("%w: state of %s-%d changed", controller.ErrInvalidUpdateVersion, req.Topic, req.Partition)
		}
		if err != nil {
			return controller.Partition{}, fmt.Errorf("alter partition %s-%d: set %s: %w", req.Topic, req.Partition, path, err)
		}
		newVersion = stat.Version
	}
	cur.ISR, cur.PartitionEpoch = s.ISR, newVersion
	if !c.IsActive() {
		c.pushLocal(req.Topic, t.ID, cur)
	}
	c.log.Debug("ISR changed", "topic", req.Topic, "partition", req.Partition, "isr", s.ISR, "partition_epoch", cur.PartitionEpoch)
	return cur, c.waitFor(ctx, func(md *controller.Metadata) bool {
		t, ok := md.Topics[req.Topic]
		return !ok || int(req.Partition) >= len(t.Partitions) || t.Partitions[req.Partition].PartitionEpoch >= cur.PartitionEpoch
	})
}

// sameSet tells whether a and b hold the same ids.
func sameSet(a, b []int32) bool {
	if len(a) != len(b) {
		return false
	}
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	return true
}
