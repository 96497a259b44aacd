package controller

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// Embedded is the single-node controller used without ZooKeeper: this
// broker is the whole cluster and its controller. Metadata lives in one
// JSON file in the data directory, replaced crash-safely on every change.
type Embedded struct {
	path string
	self Broker

	mu      sync.Mutex
	md      *Metadata
	changed chan struct{}
	acls    aclSet // ACLs (acls.go), persisted with md
}

// MetadataFile is the embedded controller's file in the data directory.
const MetadataFile = "cluster-metadata.json"

type embeddedState struct {
	ClusterID      string                       `json:"cluster_id"`
	Version        int64                        `json:"version"`
	NextProducerID int64                        `json:"next_producer_id"`
	Topics         []*Topic                     `json:"topics"`
	BrokerConfigs  map[string]map[string]string `json:"broker_configs,omitempty"`
	ACLs           []storedACLs                 `json:"acls,omitempty"`
	// ScramUsers are the SCRAM credentials, by user and mechanism, in
	// Kafka's string form (ScramCredential.String).
	ScramUsers map[string]map[string]string `json:"scram_users,omitempty"`
}

// OpenEmbedded loads (or creates) the metadata in dataDir. self is this
// broker, the only one.
func OpenEmbedded(dataDir string, self Broker) (*Embedded, error) {
	e := &Embedded{path: filepath.Join(dataDir, MetadataFile), self: self, changed: make(chan struct{})}
	var st embeddedState
	b, err := os.ReadFile(e.path)
	switch {
	case os.IsNotExist(err):
		st.ClusterID = newClusterID()
		st.NextProducerID = 1000
	case err != nil:
		return nil, fmt.Errorf("read %s: %w", MetadataFile, err)
	default:
		if err := json.Unmarshal(b, &st); err != nil {
			return nil, fmt.Errorf("parse %s: %w", MetadataFile, err)
		}
	}
	md := &Metadata{
		ClusterID:      st.ClusterID,
		ControllerID:   self.ID,
		Brokers:        []Broker{self},
		Topics:         map[string]*Topic{},
		TopicIDs:       map[[16]byte]string{},
		BrokerConfigs:  st.BrokerConfigs,
		Version:        st.Version,
		NextProducerID: st.NextProducerID,
	}
	if md.BrokerConfigs == nil {
		md.BrokerConfigs = map[string]map[string]string{}
	}
	for user, creds := range st.ScramUsers {
		for mech, s := range creds {
			c, err := ParseScramCredential(s)
			if err != nil {
				return nil, fmt.Errorf("parse %s: user %s: %w", MetadataFile, user, err)
			}
			if md.ScramUsers == nil {
				md.ScramUsers = map[string]map[string]ScramCredential{}
			}
			if md.ScramUsers[user] == nil {
				md.ScramUsers[user] = map[string]ScramCredential{}
			}
			md.ScramUsers[user][mech] = c
		}
	}
	for _, t := range st.Topics {
		// A single node leads everything; the id may have changed.
		for i := range t.Partitions {
			p := &t.Partitions[i]
			p.Leader, p.Replicas, p.ISR = self.ID, []int32{self.ID}, []int32{self.ID}
		}
		md.Topics[t.Name] = t
		md.TopicIDs[t.ID] = t.Name
	}
	e.md = md
	acls := map[ACLResource][]ACLEntry{}
	for _, a := range st.ACLs {
		acls[ACLResource{Type: a.ResourceType, Pattern: a.PatternType, Name: a.Name}] = a.ACLs
	}
	e.acls.set(acls)
	if os.IsNotExist(err) {
		if err := e.persist(md); err != nil {
			return nil, err
		}
	}
	return e, nil
}

func newClusterID() string {
	var b [16]byte
	rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// NewTopicID returns a random topic id that is not the zero id.
func NewTopicID() [16]byte {
	var id [16]byte
	for id == ([16]byte{}) {
		rand.Read(id[:])
	}
	return id
}

func (e *Embedded) Metadata() *Metadata {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.md
}

func (e *Embedded) Changes() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.changed
}

func (e *Embedded) Close() error { return nil }

// update applies fn to a copy of the metadata, persists it and publishes it.
// Called with e.mu held.
func (e *Embedded) update(fn func(md *Metadata) error) error {
	md := e.md.clone()
	if err := fn(md); err != nil {
		return err
	}
	md.Version++
	if err := e.persist(md); err != nil {
		return err
	}
	e.md = md
	close(e.changed)
	e.changed = make(chan struct{})
	return nil
}

func (e *Embedded) persist(md *Metadata) error {
	acls, _ := e.acls.get()
	return e.persistWith(md, acls)
}

func (e *Embedded) persistWith(md *Metadata, acls map[ACLResource][]ACLEntry) error {
	st := embeddedState{ClusterID: md.ClusterID, Version: md.Version, NextProducerID: md.NextProducerID, BrokerConfigs: md.BrokerConfigs}
	for r, a := range acls {
		st.ACLs = append(st.ACLs, storedACLs{ResourceType: r.Type, PatternType: r.Pattern, Name: r.Name, ACLs: a})
	}
	slices.SortFunc(st.ACLs, func(a, b storedACLs) int {
		return cmp.Compare(a.ResourceType+"\x00"+a.PatternType+"\x00"+a.Name, b.ResourceType+"\x00"+b.PatternType+"\x00"+b.Name)
	})
	for user, creds := range md.ScramUsers {
		if st.ScramUsers == nil {
			st.ScramUsers = map[string]map[string]string{}
		}
		st.ScramUsers[user] = map[string]string{}
		for mech, c := range creds {
			st.ScramUsers[user][mech] = c.String()
		}
	}
	for _, t := range md.Topics {
		st.Topics = append(st.Topics, t)
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return WriteFileAtomic(e.path, b)
}

// WriteFileAtomic writes a file crash-safely: temp file, fsync, rename,
// fsync of the directory.
func WriteFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600) // owner only: it holds SCRAM keys
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (md *Metadata) clone() *Metadata {
	c := *md
	c.Topics = make(map[string]*Topic, len(md.Topics))
	c.TopicIDs = make(map[[16]byte]string, len(md.TopicIDs))
	for n, t := range md.Topics {
		c.Topics[n] = t // topics are replaced, never mutated, once published
		c.TopicIDs[t.ID] = n
	}
	c.BrokerConfigs = make(map[string]map[string]string, len(md.BrokerConfigs))
	maps.Copy(c.BrokerConfigs, md.BrokerConfigs)
	return &c
}

func (e *Embedded) CreateTopic(ctx context.Context, req CreateTopicRequest) (*Topic, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, ok := e.md.Topics[req.Name]; ok {
		return nil, ErrTopicExists
	}
	n := req.NumPartitions
	if req.Assignments != nil {
		n = int32(len(req.Assignments))
		for _, a := range req.Assignments {
			if len(a) != 1 || a[0] != e.self.ID {
				return nil, fmt.Errorf("%w: replicas must be [%d] on a single broker", ErrInvalidReplication, e.self.ID)
			}
		}
	}
	if n < 1 {
		return nil, ErrInvalidPartitions
	}
	if req.ReplicationFactor != 1 {
		return nil, fmt.Errorf("%w: %d, but only 1 broker is available", ErrInvalidReplication, req.ReplicationFactor)
	}
	t := &Topic{Name: req.Name, ID: NewTopicID(), Configs: maps.Clone(req.Configs)}
	if t.Configs == nil {
		t.Configs = map[string]string{}
	}
	for i := int32(0); i < n; i++ {
		t.Partitions = append(t.Partitions, e.newPartition(i))
	}
	if req.ValidateOnly {
		return t, nil
	}
	err := e.update(func(md *Metadata) error {
		md.Topics[t.Name] = t
		md.TopicIDs[t.ID] = t.Name
		return nil
	})
	return t, err
}

func (e *Embedded) newPartition(i int32) Partition {
	return Partition{Index: i, Leader: e.self.ID, LeaderEpoch: 0, Replicas: []int32{e.self.ID}, ISR: []int32{e.self.ID}}
}

func (e *Embedded) DeleteTopic(ctx context.Context, name string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	t, ok := e.md.Topics[name]
	if !ok {
		return ErrUnknownTopic
	}
	return e.update(func(md *Metadata) error {
		md.removeTopic(t)
		return nil
	})
}

func (e *Embedded) CreatePartitions(ctx context.Context, name string, count int32, validateOnly bool) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	t, ok := e.md.Topics[name]
	if !ok {
		return ErrUnknownTopic
	}
	if count <= int32(len(t.Partitions)) {
		return fmt.Errorf("%w: topic has %d partitions, asked for %d", ErrInvalidPartitions, len(t.Partitions), count)
	}
	if validateOnly {
		return nil
	}
	var extra []Partition
	for i := int32(len(t.Partitions)); i < count; i++ {
		extra = append(extra, e.newPartition(i))
	}
	return e.update(func(md *Metadata) error {
		md.addPartitions(t, extra)
		return nil
	})
}

func (e *Embedded) SetTopicConfigs(ctx context.Context, name string, configs map[string]string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	t, ok := e.md.Topics[name]
	if !ok {
		return ErrUnknownTopic
	}
	return e.update(func(md *Metadata) error {
		md.setTopicConfigs(t, configs)
		return nil
	})
}

func (e *Embedded) SetBrokerConfigs(ctx context.Context, broker string, configs map[string]string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.update(func(md *Metadata) error {
		md.setBrokerConfigs(broker, configs)
		return nil
	})
}

func (e *Embedded) AllocateProducerIDs(ctx context.Context, n int64) (int64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	first := e.md.NextProducerID
	err := e.update(func(md *Metadata) error {
		md.NextProducerID += n
		return nil
	})
	return first, err
}

// AlterPartition commits an ISR change. A single node is always the whole
// ISR, so only its own ISR is accepted.
func (e *Embedded) AlterPartition(ctx context.Context, req AlterPartitionRequest) (Partition, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	t, ok := e.md.Topics[req.Topic]
	if !ok || req.Partition < 0 || int(req.Partition) >= len(t.Partitions) {
		return Partition{}, ErrUnknownTopic
	}
	cur := t.Partitions[req.Partition]
	if err := CheckAlterPartition(cur, req, nil); err != nil {
		return Partition{}, err
	}
	return cur, nil // the ISR is the replica set: nothing can change
}

// ControlledShutdown has nothing to move on a single node.
func (e *Embedded) ControlledShutdown(ctx context.Context, brokerID int32, brokerEpoch int64) ([]TopicPartition, error) {
	return nil, nil
}

// ElectLeaders: on a single node the only broker always leads, so no
// election is ever needed.
func (e *Embedded) ElectLeaders(ctx context.Context, typ ElectionType, parts []TopicPartition) (map[TopicPartition]error, error) {
	md := e.Metadata()
	if parts == nil {
		parts = allPartitions(md)
	}
	out := make(map[TopicPartition]error, len(parts))
	for _, tp := range parts {
		t, ok := md.Topics[tp.Topic]
		if !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
			out[tp] = ErrUnknownTopic
			continue
		}
		out[tp] = ErrElectionNotNeeded
	}
	return out, nil
}

// AlterPartitionReassignments: on a single node the only possible target
// is the broker itself, which every partition already has.
func (e *Embedded) AlterPartitionReassignments(ctx context.Context, reqs map[TopicPartition][]int32) (map[TopicPartition]error, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	self := func(id int32) bool { return id == e.self.ID }
	var out map[TopicPartition]error
	err := e.update(func(md *Metadata) error {
		out = reassignIn(md, reqs, self, self)
		return nil
	})
	return out, err
}
