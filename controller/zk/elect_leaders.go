package zk

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"strata/controller"
)

// ElectLeaders runs preferred or unclean leader elections (Kafka's
// ElectLeaders, see controller.ElectMove). Each change is a fenced write
// conditional on the state znode's version, made on the state read fresh
// from ZooKeeper; a partition whose state changed meanwhile is answered
// with ErrPreferredLeaderNotAvailable or ErrEligibleLeadersNotAvailable,
// and the caller may ask again. It answers once this broker's snapshot
// shows the changes.
func (c *Controller) ElectLeaders(ctx context.Context, typ controller.ElectionType, parts []controller.TopicPartition) (map[controller.TopicPartition]error, error) {
	end, err := c.begin()
	if err != nil {
		return nil, err
	}
	defer end()
	md := c.Metadata()
	if parts == nil {
		parts = controller.AllPartitions(md)
	}
	live := c.eligible(md)
	alive := func(id int32) bool { return live[id] }
	epoch := c.epoch.Load()
	out := make(map[controller.TopicPartition]error, len(parts))
	done := map[controller.TopicPartition]int32{}
	for _, tp := range parts {
		t, ok := md.Topics[tp.Topic]
		if !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
			out[tp] = controller.ErrUnknownTopic
			continue
		}
		path := statePath(tp.Topic, tp.Partition)
		data, st, err := c.conn.Get(c.p(path))
		if err != nil {
			return nil, fmt.Errorf("elect leader of %s-%d: read state: %w", tp.Topic, tp.Partition, err)
		}
		s, err := decodeState(data)
		if err != nil {
			return nil, fmt.Errorf("elect leader of %s-%d: %w", tp.Topic, tp.Partition, err)
		}
		cur := t.Partitions[tp.Partition]
		cur.Leader, cur.LeaderEpoch, cur.ISR, cur.PartitionEpoch = s.Leader, s.LeaderEpoch, s.ISR, st.Version
		np, err := controller.ElectMove(cur, typ, alive)
		if err != nil {
			out[tp] = err
			continue
		}
		s.Leader, s.LeaderEpoch, s.ISR, s.ControllerEpoch = np.Leader, np.LeaderEpoch, np.ISR, epoch
		res, err := c.fencedMulti(&zk.SetDataRequest{Path: c.p(path), Data: encodeState(s), Version: st.Version})
		switch {
		case errors.Is(err, zk.ErrBadVersion):
			out[tp] = controller.ErrPreferredLeaderNotAvailable
			if typ == controller.ElectUnclean {
				out[tp] = controller.ErrEligibleLeadersNotAvailable
			}
			continue
		case err != nil:
			return nil, fmt.Errorf("elect leader of %s-%d: %w", tp.Topic, tp.Partition, err)
		}
		c.log.Debug("leader elected", "type", typ, "topic", tp.Topic, "partition", tp.Partition,
			"leader", s.Leader, "leader_epoch", s.LeaderEpoch, "isr", s.ISR, "old_leader", cur.Leader)
		out[tp] = nil
		done[tp] = res[0].Stat.Version
	}
	err = c.waitFor(ctx, func(md *controller.Metadata) bool {
		for tp, v := range done {
			t, ok := md.Topics[tp.Topic]
			if ok && int(tp.Partition) < len(t.Partitions) && t.Partitions[tp.Partition].PartitionEpoch < v {
				return false
			}
		}
		return true
	})
	return out, err
}

// rebalanceLoop is auto.leader.rebalance.enable: every
// leader.imbalance.check.interval.seconds, the active controller runs
// preferred elections for the brokers whose share of preferred partitions
// they do not lead exceeds leader.imbalance.per.broker.percentage.
func (c *Controller) rebalanceLoop() {
	defer c.wg.Done()
	tick := time.NewTicker(c.opts.LeaderImbalanceCheckInterval)
	defer tick.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-tick.C:
		}
		if !c.IsActive() {
			continue
		}
		parts := controller.Imbalanced(c.Metadata(), c.opts.LeaderImbalancePerBrokerPercentage)
		if len(parts) == 0 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), c.opts.LeaderImbalanceCheckInterval+5*time.Second)
		res, err := c.ElectLeaders(ctx, controller.ElectPreferred, parts)
		cancel()
		if err != nil {
			c.log.Debug("automatic preferred leader election failed", "err", err)
			continue
		}
		moved := 0
		for _, e := range res {
			if e == nil {
				moved++
			}
		}
		if moved > 0 {
			c.log.Info("automatic preferred leader election", "partitions", len(parts), "moved", moved)
		}
	}
}
