package zk

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/go-zookeeper/zk"

	"strata/controller"
)

// Mutations run on the active controller only (controller.ErrNotController
// elsewhere), one at a time, as fenced multi-ops; each returns once this
// broker's own snapshot shows its effect.

func (c *Controller) begin() (func(), error) {
	c.opMu.Lock()
	if !c.IsActive() {
		c.opMu.Unlock()
		return nil, controller.ErrNotController
	}
	return c.opMu.Unlock, nil
}

// eligible are the live brokers that may lead or join an ISR: those not
// in controlled shutdown (Kafka's liveBrokerIds without
// shuttingDownBrokerIds).
func (c *Controller) eligible(md *controller.Metadata) map[int32]bool {
	live := liveBrokers(md)
	c.mu.Lock()
	defer c.mu.Unlock()
	for id := range c.shuttingDown {
		delete(live, id)
	}
	return live
}

func liveBrokers(md *controller.Metadata) map[int32]bool {
	live := map[int32]bool{}
	for _, b := range md.Brokers {
		live[b.ID] = true
	}
	return live
}

// CreateTopic assigns replicas over the live brokers (or takes the given
// assignment) and writes the topic's config, znode and partition states.
func (c *Controller) CreateTopic(ctx context.Context, req controller.CreateTopicRequest) (*controller.Topic, error) {
	end, err := c.begin()
	if err != nil {
		return nil, err
	}
	defer end()
	md := c.Metadata()
	if _, ok := md.Topics[req.Name]; ok {
		return nil, controller.ErrTopicExists
	}
	if ok, _, err := c.conn.Exists(c.p(topicPath(req.Name))); err != nil {
		return nil, fmt.Errorf("create topic %s: %w", req.Name, err)
	} else if ok {
		return nil, controller.ErrTopicExists // exists, or is being deleted
	}
	live := c.eligible(md)
	assign := req.Assignments
	if assign != nil {
		if len(assign) == 0 {
			return nil, controller.ErrInvalidPartitions
		}
		for p, r := range assign {
			if len(r) == 0 || len(slices.Compact(slices.Sorted(slices.Values(r)))) != len(r) {
				return nil, fmt.Errorf("%w: partition %d replicas %v", controller.ErrInvalidReplication, p, r)
			}
			for _, b := range r {
				if !live[b] {
					return nil, fmt.Errorf("%w: partition %d: broker %d is not available", controller.ErrInvalidReplication, p, b)
				}
			}
		}
		assign = slices.Clone(assign)
	} else {
		n, rf := req.NumPartitions, req.ReplicationFactor
		if n == -1 {
			n = c.opts.DefaultPartitions
		}
		if rf == -1 {
			rf = c.opts.DefaultReplicationFactor
		}
		if assign, err = assignReplicas(md.Brokers, n, rf, 0); err != nil {
			return nil, err
		}
	}
	t := &controller.Topic{Name: req.Name, ID: controller.NewTopicID(), Configs: maps.Clone(req.Configs)}
	if t.Configs == nil {
		t.Configs = map[string]string{}
	}
	epoch := c.epoch.Load()
	for p, r := range assign {
		s := initialState(r, live)
		t.Partitions = append(t.Partitions, controller.Partition{Index: int32(p), Leader: s.Leader, Replicas: r, ISR: s.ISR})
	}
	if req.ValidateOnly {
		return t, nil
	}
	var ops []any
	// Like Kafka: the config first, so that no broker sees the topic
	// without its overrides.
	if ok, st, err := c.conn.Exists(c.p(topicConfigPath(t.Name))); err != nil {
		return nil, fmt.Errorf("create topic %s: %w", t.Name, err)
	} else if ok {
		ops = append(ops, &zk.SetDataRequest{Path: c.p(topicConfigPath(t.Name)), Data: encodeConfig(t.Configs), Version: st.Version})
	} else {
		ops = append(ops, &zk.CreateRequest{Path: c.p(topicConfigPath(t.Name)), Data: encodeConfig(t.Configs), Acl: c.acl(c.p(topicConfigPath(t.Name)))})
	}
	ops = append(ops,
		&zk.CreateRequest{Path: c.p(topicPath(t.Name)), Data: encodeTopic(t.ID, assign), Acl: c.acl(c.p(topicPath(t.Name)))},
		&zk.CreateRequest{Path: c.p(partitionsPath(t.Name)), Acl: c.acl(c.p(partitionsPath(t.Name)))})
	for _, p := range t.Partitions {
		s := partitionState{ControllerEpoch: epoch, Leader: p.Leader, ISR: p.ISR}
		ops = append(ops,
			&zk.CreateRequest{Path: c.p(partitionPath(t.Name, p.Index)), Acl: c.acl(c.p(partitionPath(t.Name, p.Index)))},
			&zk.CreateRequest{Path: c.p(statePath(t.Name, p.Index)), Data: encodeState(s), Acl: c.acl(c.p(statePath(t.Name, p.Index)))})
	}
	if _, err := c.fencedMulti(ops...); err != nil {
		if errors.Is(err, zk.ErrNodeExists) {
			return nil, controller.ErrTopicExists
		}
		return nil, fmt.Errorf("create topic %s: %w", t.Name, err)
	}
	c.log.Debug("created topic", "topic", t.Name, "partitions", len(assign))
	return t, c.waitFor(ctx, func(md *controller.Metadata) bool {
		got, ok := md.Topics[t.Name]
		return ok && got.ID == t.ID
	})
}

// DeleteTopic marks the topic under /admin/delete_topics and removes its
// znodes; a controller that fails half-way leaves the mark, and the next
// one finishes the deletion.
func (c *Controller) DeleteTopic(ctx context.Context, name string) error {
	end, err := c.begin()
	if err != nil {
		return err
	}
	defer end()
	if _, ok := c.Metadata().Topics[name]; !ok {
		return controller.ErrUnknownTopic
	}
	_, err = c.fencedMulti(&zk.CreateRequest{Path: c.p(deleteTopicPath(name)), Acl: c.acl(c.p(deleteTopicPath(name)))})
	if err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("delete topic %s: %w", name, err)
	}
	if err := c.deleteTopicZNodes(name); err != nil {
		return err
	}
	c.log.Debug("deleted topic", "topic", name)
	return c.waitFor(ctx, func(md *controller.Metadata) bool {
		_, ok := md.Topics[name]
		return !ok
	})
}

// deleteTopicZNodes removes a topic's znodes, then its deletion mark.
func (c *Controller) deleteTopicZNodes(name string) error {
	var ops []any
	if err := c.collectDeletes(topicPath(name), &ops); err != nil {
		return err
	}
	if err := c.collectDeletes(topicConfigPath(name), &ops); err != nil {
		return err
	}
	ops = append(ops, &zk.DeleteRequest{Path: c.p(deleteTopicPath(name)), Version: -1})
	if _, err := c.fencedMulti(ops...); err != nil && !errors.Is(err, zk.ErrNoNode) {
		return fmt.Errorf("delete znodes of topic %s: %w", name, err)
	}
	return nil
}

// collectDeletes appends deletes of path's subtree, children first.
func (c *Controller) collectDeletes(path string, ops *[]any) error {
	kids, _, err := c.conn.Children(c.p(path))
	if errors.Is(err, zk.ErrNoNode) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list %s: %w", path, err)
	}
	for _, k := range kids {
		if err := c.collectDeletes(path+"/"+k, ops); err != nil {
			return err
		}
	}
	*ops = append(*ops, &zk.DeleteRequest{Path: c.p(path), Version: -1})
	return nil
}

// CreatePartitions adds partitions, assigned over the live brokers with the
// topic's replication factor.
func (c *Controller) CreatePartitions(ctx context.Context, name string, count int32, validateOnly bool) error {
	end, err := c.begin()
	if err != nil {
		return err
	}
	defer end()
	md := c.Metadata()
	t, ok := md.Topics[name]
	if !ok {
		return controller.ErrUnknownTopic
	}
	have := int32(len(t.Partitions))
	if count <= have {
		return fmt.Errorf("%w: topic has %d partitions, asked for %d", controller.ErrInvalidPartitions, have, count)
	}
	rf := int16(len(t.Partitions[0].Replicas))
	added, err := assignReplicas(md.Brokers, count-have, rf, have)
	if err != nil {
		return err
	}
	if validateOnly {
		return nil
	}
	data, st, err := c.conn.Get(c.p(topicPath(name)))
	if err != nil {
		return fmt.Errorf("create partitions of %s: %w", name, err)
	}
	id, assign, ra, err := decodeTopicFull(data)
	if err != nil {
		return fmt.Errorf("create partitions of %s: %w", name, err)
	}
	if int32(len(assign)) != have {
		return fmt.Errorf("create partitions of %s: topic changed concurrently", name)
	}
	assign = append(assign, added...)
	live := c.eligible(md)
	ops := []any{&zk.SetDataRequest{Path: c.p(topicPath(name)), Data: encodeTopicFull(id, assign, ra), Version: st.Version}}
	for i, r := range added {
		p := have + int32(i)
		s := initialState(r, live)
		s.ControllerEpoch = c.epoch.Load()
		ops = append(ops,
			&zk.CreateRequest{Path: c.p(partitionPath(name, p)), Acl: c.acl(c.p(partitionPath(name, p)))},
			&zk.CreateRequest{Path: c.p(statePath(name, p)), Data: encodeState(s), Acl: c.acl(c.p(statePath(name, p)))})
	}
	if _, err := c.fencedMulti(ops...); err != nil {
		return fmt.Errorf("create partitions of %s: %w", name, err)
	}
	return c.waitFor(ctx, func(md *controller.Metadata) bool {
		t, ok := md.Topics[name]
		return ok && int32(len(t.Partitions)) == count
	})
}

// SetTopicConfigs replaces a topic's overrides and records a config change
// notification, as Kafka does.
func (c *Controller) SetTopicConfigs(ctx context.Context, name string, configs map[string]string) error {
	end, err := c.begin()
	if err != nil {
		return err
	}
	defer end()
	if _, ok := c.Metadata().Topics[name]; !ok {
		return controller.ErrUnknownTopic
	}
	if err := c.writeConfig(topicConfigPath(name), "topics/"+name, configs); err != nil {
		return fmt.Errorf("set configs of topic %s: %w", name, err)
	}
	return c.waitFor(ctx, func(md *controller.Metadata) bool {
		t, ok := md.Topics[name]
		return !ok || maps.Equal(t.Configs, configs)
	})
}

// SetBrokerConfigs replaces the dynamic overrides of a broker ("" for the
// cluster-wide <default>).
func (c *Controller) SetBrokerConfigs(ctx context.Context, broker string, configs map[string]string) error {
	end, err := c.begin()
	if err != nil {
		return err
	}
	defer end()
	ent := brokerEntity(broker)
	if err := c.writeConfig(brokerConfigsPath+"/"+ent, "brokers/"+ent, configs); err != nil {
		return fmt.Errorf("set configs of broker %q: %w", ent, err)
	}
	return c.waitFor(ctx, func(md *controller.Metadata) bool {
		return maps.Equal(md.BrokerConfigs[broker], configs)
	})
}

func (c *Controller) writeConfig(path, entity string, configs map[string]string) error {
	var op any
	ok, st, err := c.conn.Exists(c.p(path))
	if err != nil {
		return err
	}
	if ok {
		op = &zk.SetDataRequest{Path: c.p(path), Data: encodeConfig(configs), Version: st.Version}
	} else {
		op = &zk.CreateRequest{Path: c.p(path), Data: encodeConfig(configs), Acl: c.acl(c.p(path))}
	}
	_, err = c.fencedMulti(op, &zk.CreateRequest{
		Path: c.p(configChangesPath + "/config_change_"), Data: encodeConfigChange(entity),
		Acl: c.acl(c.p(configChangesPath + "/config_change_")), Flags: zk.FlagSequence,
	})
	return err
}

// AllocateProducerIDs reserves n producer ids by advancing
// /latest_producer_id_block with a conditional write, as Kafka's brokers
// did before KIP-730. Any broker with a session may allocate; the znode's
// version keeps blocks from overlapping.
func (c *Controller) AllocateProducerIDs(ctx context.Context, n int64) (int64, error) {
	if n < 1 {
		return 0, fmt.Errorf("allocate %d producer ids: need at least 1", n)
	}
	path := c.p(producerIDPath)
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		data, st, err := c.conn.Get(path)
		var next int64
		switch {
		case errors.Is(err, zk.ErrNoNode):
			block := encodeProducerIDBlock(c.opts.Broker.ID, 0, n-1)
			if _, err := c.conn.Create(path, block, 0, c.acl(path)); errors.Is(err, zk.ErrNodeExists) {
				continue
			} else if err != nil {
				return 0, fmt.Errorf("allocate producer ids: %w", err)
			}
			return 0, nil
		case err != nil:
			return 0, fmt.Errorf("allocate producer ids: %w", err)
		}
		_, last, err := decodeProducerIDBlock(data)
		if err != nil {
			return 0, fmt.Errorf("allocate producer ids: %w", err)
		}
		next = last + 1
		if next > (1<<63-1)-n {
			return 0, errors.New("allocate producer ids: producer id space exhausted")
		}
		_, err = c.conn.Set(path, encodeProducerIDBlock(c.opts.Broker.ID, next, next+n-1), st.Version)
		if errors.Is(err, zk.ErrBadVersion) {
			continue // another broker allocated meanwhile
		}
		if err != nil {
			return 0, fmt.Errorf("allocate producer ids: %w", err)
		}
		return next, nil
	}
}

func encodeProducerIDBlock(broker int32, start, end int64) []byte {
	return mustJSON(producerIDBlock{Version: 1, Broker: broker,
		BlockStart: strconv.FormatInt(start, 10), BlockEnd: strconv.FormatInt(end, 10)})
}
