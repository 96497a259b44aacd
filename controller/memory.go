package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
)

// Memory is an in-memory multi-broker controller for tests: several broker
// Servers in one process share it. Brokers register themselves when they
// start (RegisterBroker); a test marks a broker dead with Kill, which
// elects new leaders from the ISR (clean election) and bumps their leader
// epochs, as Kafka's controller does when a broker's session ends.
type Memory struct {
	mu      sync.Mutex
	md      *Metadata
	changed chan struct{}
	alive   map[int32]Broker
	known   map[int32]Broker
}

// NewMemory returns an empty cluster.
func NewMemory() *Memory {
	return &Memory{
		md: &Metadata{
			ClusterID:      newClusterID(),
			ControllerID:   -1,
			Topics:         map[string]*Topic{},
			TopicIDs:       map[[16]byte]string{},
			BrokerConfigs:  map[string]map[string]string{},
			NextProducerID: 1000,
		},
		changed: make(chan struct{}),
		alive:   map[int32]Broker{},
		known:   map[int32]Broker{},
	}
}

// RegisterBroker marks b alive (a broker starting or restarting) and gives
// it leadership of partitions left without a leader whose ISR names it.
func (m *Memory) RegisterBroker(ctx context.Context, b Broker) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.alive[b.ID] = b
	m.known[b.ID] = b
	m.update(func(md *Metadata) {
		m.forPartitions(md, func(p *Partition) {
			if p.Leader == -1 && slices.Contains(p.ISR, b.ID) {
				p.Leader = b.ID
				p.LeaderEpoch++
				p.PartitionEpoch++
			}
		})
	})
	return nil
}

// Kill marks a broker dead: it leaves the metadata's broker list and every
// ISR, and partitions it led get a new leader from the remaining ISR (or
// none, keeping the last ISR, when no other in-sync replica is alive).
func (m *Memory) Kill(id int32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.alive, id)
	m.update(func(md *Metadata) {
		m.forPartitions(md, func(p *Partition) {
			if !slices.Contains(p.ISR, id) && p.Leader != id {
				return
			}
			var rest []int32
			for _, r := range p.ISR {
				if r != id {
					rest = append(rest, r)
				}
			}
			if p.Leader == id {
				p.Leader = -1
				for _, r := range rest {
					if _, ok := m.alive[r]; ok {
						p.Leader = r
						break
					}
				}
				p.LeaderEpoch++
			}
			if len(rest) > 0 && p.Leader != -1 {
				p.ISR = rest
			}
			p.PartitionEpoch++
		})
	})
}

// forPartitions applies fn to a copy of every partition, replacing topics
// (published topics are never mutated).
func (m *Memory) forPartitions(md *Metadata, fn func(p *Partition)) {
	for name, t := range md.Topics {
		nt := *t
		nt.Partitions = make([]Partition, len(t.Partitions))
		for i, p := range t.Partitions {
			p.Replicas, p.ISR = slices.Clone(p.Replicas), slices.Clone(p.ISR)
			fn(&p)
			nt.Partitions[i] = p
		}
		md.Topics[name] = &nt
	}
}

// update applies fn to a copy of the metadata and publishes it. Called with
// m.mu held.
func (m *Memory) update(fn func(md *Metadata)) {
	md := m.md.clone()
	fn(md)
	md.Brokers = md.Brokers[:0:0]
	for _, id := range slices.Sorted(maps.Keys(m.alive)) {
		md.Brokers = append(md.Brokers, m.alive[id])
	}
	md.ControllerID = -1
	if len(md.Brokers) > 0 {
		md.ControllerID = md.Brokers[0].ID
	}
	md.Version++
	m.md = md
	close(m.changed)
	m.changed = make(chan struct{})
}

func (m *Memory) Metadata() *Metadata {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.md
}

func (m *Memory) Changes() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.changed
}

// Close does nothing: the controller outlives the brokers sharing it.
func (m *Memory) Close() error { return nil }

func (m *Memory) CreateTopic(ctx context.Context, req CreateTopicRequest) (*Topic, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.md.Topics[req.Name]; ok {
		return nil, ErrTopicExists
	}
	live := slices.Sorted(maps.Keys(m.alive))
	assign := req.Assignments
	if assign == nil {
		n, rf := req.NumPartitions, int(req.ReplicationFactor)
		if n == -1 {
			n = 1
		}
		if rf == -1 {
			rf = 1
		}
		if n < 1 {
			return nil, ErrInvalidPartitions
		}
		if rf < 1 || rf > len(live) {
			return nil, fmt.Errorf("%w: %d, but %d brokers are available", ErrInvalidReplication, rf, len(live))
		}
		for i := 0; i < int(n); i++ {
			var rs []int32
			for j := 0; j < rf; j++ {
				rs = append(rs, live[(i+j)%len(live)])
			}
			assign = append(assign, rs)
		}
	}
	if len(assign) == 0 {
		return nil, ErrInvalidPartitions
	}
	t := &Topic{Name: req.Name, ID: NewTopicID(), Configs: maps.Clone(req.Configs)}
	if t.Configs == nil {
		t.Configs = map[string]string{}
	}
	for i, rs := range assign {
		if len(rs) == 0 {
			return nil, ErrInvalidReplication
		}
		t.Partitions = append(t.Partitions, Partition{Index: int32(i), Leader: rs[0], Replicas: slices.Clone(rs), ISR: slices.Clone(rs)})
	}
	if req.ValidateOnly {
		return t, nil
	}
	m.update(func(md *Metadata) {
		md.Topics[t.Name] = t
		md.TopicIDs[t.ID] = t.Name
	})
	return t, nil
}

func (m *Memory) DeleteTopic(ctx context.Context, name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.md.Topics[name]
	if !ok {
		return ErrUnknownTopic
	}
	m.update(func(md *Metadata) { md.removeTopic(t) })
	return nil
}

func (m *Memory) CreatePartitions(ctx context.Context, name string, count int32, validateOnly bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.md.Topics[name]
	if !ok {
		return ErrUnknownTopic
	}
	if count <= int32(len(t.Partitions)) {
		return fmt.Errorf("%w: topic has %d partitions, asked for %d", ErrInvalidPartitions, len(t.Partitions), count)
	}
	live := slices.Sorted(maps.Keys(m.alive))
	rf := len(t.Partitions[0].Replicas)
	if rf > len(live) {
		return fmt.Errorf("%w: %d, but %d brokers are available", ErrInvalidReplication, rf, len(live))
	}
	if validateOnly {
		return nil
	}
	var extra []Partition
	for i := int32(len(t.Partitions)); i < count; i++ {
		var rs []int32
		for j := 0; j < rf; j++ {
			rs = append(rs, live[(int(i)+j)%len(live)])
		}
		extra = append(extra, Partition{Index: i, Leader: rs[0], Replicas: rs, ISR: slices.Clone(rs)})
	}
	m.update(func(md *Metadata) { md.addPartitions(t, extra) })
	return nil
}

func (m *Memory) SetTopicConfigs(ctx context.Context, name string, configs map[string]string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.md.Topics[name]
	if !ok {
		return ErrUnknownTopic
	}
	m.update(func(md *Metadata) { md.setTopicConfigs(t, configs) })
	return nil
}

func (m *Memory) SetBrokerConfigs(ctx context.Context, broker string, configs map[string]string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.update(func(md *Metadata) { md.setBrokerConfigs(broker, configs) })
	return nil
}

func (m *Memory) AllocateProducerIDs(ctx context.Context, n int64) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	first := m.md.NextProducerID
	m.update(func(md *Metadata) { md.NextProducerID += n })
	return first, nil
}

func (m *Memory) AlterPartition(ctx context.Context, req AlterPartitionRequest) (Partition, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	t, ok := m.md.Topics[req.Topic]
	if !ok || req.Partition < 0 || int(req.Partition) >= len(t.Partitions) {
		return Partition{}, ErrUnknownTopic
	}
	cur := t.Partitions[req.Partition]
	alive := func(id int32) bool { _, ok := m.alive[id]; return ok }
	if err := CheckAlterPartition(cur, req, alive); err != nil {
		return Partition{}, err
	}
	if sameSet(cur.ISR, req.ISR) {
		return cur, nil
	}
	np := cur
	np.Replicas, np.ISR = slices.Clone(cur.Replicas), slices.Clone(req.ISR)
	if done, ok := ReassignProgress(np, alive); ok {
		np = done // the last target replica joined the ISR
	}
	np.PartitionEpoch++
	m.update(func(md *Metadata) {
		nt := *t
		nt.Partitions = slices.Clone(t.Partitions)
		nt.Partitions[req.Partition] = np
		md.Topics[req.Topic] = &nt
	})
	return np, nil
}

// ControlledShutdown moves leadership away from brokerID (see ShutdownMove).
// The broker epoch is not checked: Memory has none.
func (m *Memory) ControlledShutdown(ctx context.Context, brokerID int32, brokerEpoch int64) ([]TopicPartition, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	alive := func(id int32) bool { _, ok := m.alive[id]; return ok }
	var remaining []TopicPartition
	m.update(func(md *Metadata) {
		for name, t := range md.Topics {
			var nt *Topic
			for i, p := range t.Partitions {
				np, changed, stuck := ShutdownMove(p, brokerID, alive)
				if stuck {
					remaining = append(remaining, TopicPartition{Topic: name, Partition: p.Index})
				}
				if !changed {
					continue
				}
				if nt == nil {
					c := *t
					c.Partitions = slices.Clone(t.Partitions)
					nt = &c
				}
				np.Replicas = slices.Clone(p.Replicas)
				np.PartitionEpoch++
				nt.Partitions[i] = np
			}
			if nt != nil {
				md.Topics[name] = nt
			}
		}
	})
	return remaining, nil
}

// ElectLeaders runs leader elections (see ElectMove).
func (m *Memory) ElectLeaders(ctx context.Context, typ ElectionType, parts []TopicPartition) (map[TopicPartition]error, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	alive := func(id int32) bool { _, ok := m.alive[id]; return ok }
	if parts == nil {
		parts = allPartitions(m.md)
	}
	out := make(map[TopicPartition]error, len(parts))
	m.update(func(md *Metadata) {
		for _, tp := range parts {
			t, ok := md.Topics[tp.Topic]
			if !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
				out[tp] = ErrUnknownTopic
				continue
			}
			np, err := ElectMove(t.Partitions[tp.Partition], typ, alive)
			out[tp] = err
			if err != nil {
				continue
			}
			nt := *t
			nt.Partitions = slices.Clone(t.Partitions)
			np.Replicas = slices.Clone(np.Replicas)
			np.PartitionEpoch++
			nt.Partitions[tp.Partition] = np
			md.Topics[tp.Topic] = &nt
		}
	})
	return out, nil
}

// AlterPartitionReassignments starts or cancels reassignments (see
// reassign.go); one completes when its last target replica joins the ISR
// (AlterPartition).
func (m *Memory) AlterPartitionReassignments(ctx context.Context, reqs map[TopicPartition][]int32) (map[TopicPartition]error, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	alive := func(id int32) bool { _, ok := m.alive[id]; return ok }
	registered := func(id int32) bool { _, ok := m.known[id]; return ok }
	var out map[TopicPartition]error
	m.update(func(md *Metadata) { out = reassignIn(md, reqs, registered, alive) })
	return out, nil
}
