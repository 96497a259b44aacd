// Package controller owns cluster metadata: brokers, topics, partitions,
// leaders and ISR. The Controller interface is what brokers use; Embedded
// is the single-node implementation used without ZooKeeper, and the
// ZooKeeper-elected controller implements the same interface.
package controller

import (
	"context"
	"errors"
)

// Broker is a registered broker.
type Broker struct {
	ID   int32
	Host string
	Port int32
	Rack *string
}

// Partition is one partition's placement and leadership.
type Partition struct {
	Index       int32
	Leader      int32
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
}

// Topic is a topic's metadata. Configs holds only topic-level overrides.
type Topic struct {
	Name       string
	ID         [16]byte
	Partitions []Partition
	Configs    map[string]string
}

// Metadata is an immutable snapshot of the cluster. Callers must not modify
// it; every change produces a new snapshot.
type Metadata struct {
	ClusterID    string
	ControllerID int32
	Brokers      []Broker
	Topics       map[string]*Topic
	TopicIDs     map[[16]byte]string
	// BrokerConfigs are dynamic broker-level overrides ("" key = cluster default).
	BrokerConfigs map[string]map[string]string
	// Version grows with every change.
	Version int64
	// NextProducerID is the first producer id not yet handed out.
	NextProducerID int64
}

// CreateTopicRequest asks for a new topic.
type CreateTopicRequest struct {
	Name              string
	NumPartitions     int32 // -1 = num.partitions
	ReplicationFactor int16 // -1 = default.replication.factor
	// Assignments, if set, give the replicas of each partition explicitly.
	Assignments  [][]int32
	Configs      map[string]string
	ValidateOnly bool
}

// Errors that handlers map to Kafka error codes.
var (
	ErrTopicExists        = errors.New("topic already exists")
	ErrUnknownTopic       = errors.New("unknown topic")
	ErrInvalidPartitions  = errors.New("invalid number of partitions")
	ErrInvalidReplication = errors.New("invalid replication factor")
	ErrNotController      = errors.New("not the controller")
)

// Controller is the metadata authority brokers talk to.
type Controller interface {
	// Metadata returns the current snapshot.
	Metadata() *Metadata
	// Changes returns a channel closed at the next change (then call again).
	Changes() <-chan struct{}
	CreateTopic(ctx context.Context, req CreateTopicRequest) (*Topic, error)
	DeleteTopic(ctx context.Context, name string) error
	// CreatePartitions grows a topic to count partitions.
	CreatePartitions(ctx context.Context, name string, count int32, validateOnly bool) error
	// SetTopicConfigs replaces a topic's overrides with configs.
	SetTopicConfigs(ctx context.Context, name string, configs map[string]string) error
	// SetBrokerConfigs replaces the dynamic overrides of broker (""
	// for the cluster-wide default).
	SetBrokerConfigs(ctx context.Context, broker string, configs map[string]string) error
	// AllocateProducerIDs reserves n producer ids, unique in the cluster
	// forever, and returns the first.
	AllocateProducerIDs(ctx context.Context, n int64) (int64, error)
	Close() error
}
