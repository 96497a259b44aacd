package zk

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-zookeeper/zk"

	"strata/controller"
)

// ControlledShutdown moves leadership away from a broker that is shutting
// down (Kafka's ControlledShutdown): every partition it leads gets another
// live ISR member as leader, and it leaves the ISR of the partitions it
// follows (controller.ShutdownMove). Each change is a fenced write
// conditional on the state znode's version; a partition whose state changed
// meanwhile, or that has no other live ISR member, is returned as remaining
// if the broker still leads it, and the broker asks again.
func (c *Controller) ControlledShutdown(ctx context.Context, brokerID int32, brokerEpoch int64) ([]controller.TopicPartition, error) {
	end, err := c.begin()
	if err != nil {
		return nil, err
	}
	defer end()
	// Only the broker itself knows its epoch (the czxid of its
	// registration): a request without it (-1, ControlledShutdown v0 and
	// v1) or with another is refused, so that no one else takes a broker
	// out of every ISR.
	if cur := c.BrokerEpoch(brokerID); brokerEpoch < 0 || cur != brokerEpoch {
		return nil, fmt.Errorf("%w: broker %d epoch %d, current %d", controller.ErrStaleBrokerEpoch, brokerID, brokerEpoch, cur)
	}
	// From now until it registers again the broker is elected leader of
	// nothing and joins no ISR (Kafka's shuttingDownBrokerIds); it stops
	// fetching itself, as Kafka's brokers do on StopReplica.
	c.mu.Lock()
	c.shuttingDown[brokerID] = c.epochs[brokerID]
	c.mu.Unlock()
	md := c.Metadata()
	live := c.eligible(md)
	alive := func(id int32) bool { return live[id] }
	epoch := c.epoch.Load()
	var remaining []controller.TopicPartition
	type moved struct {
		topic          string
		part           int32
		partitionEpoch int32
	}
	var done []moved
	for name, t := range md.Topics {
		for _, p := range t.Partitions {
			if p.Leader != brokerID && !containsID(p.ISR, brokerID) {
				continue
			}
			// Read the state itself rather than the snapshot, which may lag.
			path := statePath(name, p.Index)
			data, st, err := c.conn.Get(c.p(path))
			if err != nil {
				return nil, fmt.Errorf("controlled shutdown of broker %d: read %s-%d: %w", brokerID, name, p.Index, err)
			}
			s, err := decodeState(data)
			if err != nil {
				return nil, fmt.Errorf("controlled shutdown of broker %d: %s-%d: %w", brokerID, name, p.Index, err)
			}
			cur := p
			cur.Leader, cur.LeaderEpoch, cur.ISR, cur.PartitionEpoch = s.Leader, s.LeaderEpoch, s.ISR, st.Version
			np, changed, stuck := controller.ShutdownMove(cur, brokerID, alive)
			if !changed {
				if stuck {
					remaining = append(remaining, controller.TopicPartition{Topic: name, Partition: p.Index})
				}
				continue
			}
			s.Leader, s.LeaderEpoch, s.ISR, s.ControllerEpoch = np.Leader, np.LeaderEpoch, np.ISR, epoch
			res, err := c.fencedMulti(&zk.SetDataRequest{Path: c.p(path), Data: encodeState(s), Version: st.Version})
			switch {
			case errors.Is(err, zk.ErrBadVersion):
				if cur.Leader == brokerID {
					remaining = append(remaining, controller.TopicPartition{Topic: name, Partition: p.Index})
				}
				continue
			case err != nil:
				return nil, fmt.Errorf("controlled shutdown of broker %d: %s-%d: %w", brokerID, name, p.Index, err)
			}
			c.log.Debug("controlled shutdown moved partition", "broker", brokerID, "topic", name, "partition", p.Index,
				"leader", s.Leader, "leader_epoch", s.LeaderEpoch, "isr", s.ISR)
			done = append(done, moved{name, p.Index, res[0].Stat.Version})
		}
	}
	// Answer once this broker's snapshot shows the changes.
	err = c.waitFor(ctx, func(md *controller.Metadata) bool {
		for _, m := range done {
			t, ok := md.Topics[m.topic]
			if ok && int(m.part) < len(t.Partitions) && t.Partitions[m.part].PartitionEpoch < m.partitionEpoch {
				return false
			}
		}
		return true
	})
	if err != nil {
		return remaining, err
	}
	// And once the new leaders know it: the broker stops when we answer.
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.senders.waitSynced(wctx, c.Metadata().Version, brokerID); err != nil {
		c.log.Warn("controlled shutdown: brokers not yet told of the new leaders", "broker", brokerID, "err", err)
	}
	return remaining, nil
}

func containsID(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
