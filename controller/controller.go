// Package controller owns cluster metadata: brokers, topics, partitions,
// leaders and ISR. The Controller interface is what brokers use; Embedded
// is the single-node implementation used without ZooKeeper, and the
// ZooKeeper-elected controller implements the same interface.
package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
)

// Broker is a registered broker.
type Broker struct {
	ID int32
	// Host and Port are the broker's first advertised endpoint (Kafka's
	// registration host and port); Endpoints are all of them.
	Host string
	Port int32
	Rack *string
	// Endpoints are the broker's advertised listeners, as registered in
	// /brokers/ids/<id> and sent in UpdateMetadata. Empty (a registration
	// or snapshot from before listeners): one listener at Host:Port that
	// stands for any listener name.
	Endpoints []Endpoint `json:",omitempty"`
}

// Endpoint is one advertised listener of a broker.
type Endpoint struct {
	Listener string // listener name, e.g. PLAINTEXT, INTERNAL
	Host     string
	Port     int32
	// SecurityProtocol is Kafka's id: 0 PLAINTEXT, 1 SSL,
	// 2 SASL_PLAINTEXT, 3 SASL_SSL.
	SecurityProtocol int16
}

// Endpoint returns the broker's endpoint on listener. A broker without
// that listener has none (Kafka leaves it out of the answers on that
// listener); a broker with no endpoints recorded answers Host:Port.
func (b Broker) Endpoint(listener string) (host string, port int32, ok bool) {
	if len(b.Endpoints) == 0 {
		return b.Host, b.Port, b.Host != "" || b.Port != 0
	}
	for _, e := range b.Endpoints {
		if e.Listener == listener {
			return e.Host, e.Port, true
		}
	}
	return "", 0, false
}

// Partition is one partition's placement and leadership.
type Partition struct {
	Index       int32
	Leader      int32
	LeaderEpoch int32
	Replicas    []int32
	ISR         []int32
	// PartitionEpoch grows with every change of the partition's leader or
	// ISR (Kafka's partition epoch, the ZooKeeper state's zkVersion). The
	// leader names it in AlterPartition so that stale changes are refused.
	PartitionEpoch int32 `json:",omitempty"`
	// AddingReplicas and RemovingReplicas are set while the partition is
	// being reassigned (reassign.go): Replicas holds both the original
	// and the target replicas until the reassignment completes.
	AddingReplicas   []int32 `json:",omitempty"`
	RemovingReplicas []int32 `json:",omitempty"`
}

// Topic is a topic's metadata. Configs holds only topic-level overrides.
type Topic struct {
	Name       string
	ID         [16]byte
	Partitions []Partition
	Configs    map[string]string
	// Partial: this broker knows the topic only from requests that name
	// the partitions it hosts (LeaderAndIsr), not yet from one that
	// describes the whole topic (UpdateMetadata), so Partitions may lack
	// some. The broker acts on them, but clients are not told of the
	// topic until it is whole: a Kafka broker answers them from its
	// metadata cache, which only UpdateMetadata fills.
	Partial bool
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
	// ScramUsers are the SCRAM credentials by user and mechanism
	// (scram.go); kept out of JSON, so out of the bucket's snapshot.
	ScramUsers map[string]map[string]ScramCredential `json:"-"`
}

// Broker returns the registered broker id, if it is registered.
func (m *Metadata) Broker(id int32) (Broker, bool) {
	for _, b := range m.Brokers {
		if b.ID == id {
			return b, true
		}
	}
	return Broker{}, false
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
	ErrStaleBrokerEpoch   = errors.New("stale broker epoch") // STALE_BROKER_EPOCH
	// AlterPartition refusals (Kafka's error names).
	ErrFencedLeaderEpoch    = errors.New("fenced leader epoch")             // FENCED_LEADER_EPOCH
	ErrInvalidUpdateVersion = errors.New("invalid partition epoch")         // INVALID_UPDATE_VERSION
	ErrInvalidISR           = errors.New("invalid in-sync replica set")     // INELIGIBLE_REPLICA / INVALID_REQUEST
	ErrNotLeader            = errors.New("not the leader of the partition") // NOT_LEADER_OR_FOLLOWER
)

// AlterPartitionRequest is a leader's proposal of a new ISR (Kafka's
// AlterPartition, KIP-497).
type AlterPartitionRequest struct {
	Topic     string
	Partition int32
	// Leader is the broker asking; it must be the partition's leader.
	Leader int32
	// LeaderEpoch and PartitionEpoch are the leader's view; a change made
	// on a stale view is refused.
	LeaderEpoch    int32
	PartitionEpoch int32
	// ISR is the proposed in-sync replica set; it must include the leader
	// and only replicas of the partition.
	ISR []int32
}

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
	// SetUserScram replaces a user's SCRAM credentials (scram.go).
	ScramStore
	// AllocateProducerIDs reserves n producer ids, unique in the cluster
	// forever, and returns the first.
	AllocateProducerIDs(ctx context.Context, n int64) (int64, error)
	// AlterPartition commits a new ISR proposed by the partition's leader,
	// with Kafka's AlterPartition semantics: the request is refused with
	// ErrNotLeader if the asker does not lead the partition,
	// ErrFencedLeaderEpoch if LeaderEpoch is not the current one,
	// ErrInvalidUpdateVersion if PartitionEpoch is not the current one, and
	// ErrInvalidISR if the ISR lacks the leader or names a non-replica (or
	// a dead broker when it grows). On success the partition epoch is
	// bumped, the change is published in Metadata, and the new partition
	// state is returned. Proposing the current ISR is a no-op that returns
	// the current state.
	AlterPartition(ctx context.Context, req AlterPartitionRequest) (Partition, error)
	// ControlledShutdown moves leadership away from broker brokerID, which
	// is shutting down (Kafka's ControlledShutdown, see ShutdownMove), and
	// returns the partitions it still leads. brokerEpoch, when >= 0, must be
	// the broker's current epoch (ErrStaleBrokerEpoch otherwise). Only the
	// active controller serves it (ErrNotController).
	ControlledShutdown(ctx context.Context, brokerID int32, brokerEpoch int64) ([]TopicPartition, error)
	// ElectLeaders runs an election of type typ on parts (all partitions
	// when nil), see ElectMove, and returns each partition's outcome: nil
	// when its leader changed, ErrElectionNotNeeded,
	// ErrPreferredLeaderNotAvailable, ErrEligibleLeadersNotAvailable or
	// ErrUnknownTopic. Only the active controller serves it
	// (ErrNotController).
	ElectLeaders(ctx context.Context, typ ElectionType, parts []TopicPartition) (map[TopicPartition]error, error)
	// AlterPartitionReassignments starts, replaces or (a nil target)
	// cancels the reassignment of each partition named (Kafka's
	// AlterPartitionReassignments, see reassign.go) and returns each
	// outcome: nil once started, ErrUnknownTopic,
	// ErrInvalidReplicaAssignment or ErrNoReassignmentInProgress. The
	// reassignments in progress show in Metadata as the partitions'
	// AddingReplicas and RemovingReplicas, on the active controller. Only
	// the active controller serves it (ErrNotController).
	AlterPartitionReassignments(ctx context.Context, reqs map[TopicPartition][]int32) (map[TopicPartition]error, error)
	Close() error
}

// CheckAlterPartition validates an AlterPartition request against the
// current partition state, as every Controller must. alive tells whether a
// broker may join the ISR (nil: all may).
func CheckAlterPartition(cur Partition, req AlterPartitionRequest, alive func(int32) bool) error {
	switch {
	case cur.Leader != req.Leader:
		return fmt.Errorf("%w: broker %d asked, leader is %d", ErrNotLeader, req.Leader, cur.Leader)
	case req.LeaderEpoch != cur.LeaderEpoch:
		return fmt.Errorf("%w: %d, current %d", ErrFencedLeaderEpoch, req.LeaderEpoch, cur.LeaderEpoch)
	case req.PartitionEpoch != cur.PartitionEpoch:
		return fmt.Errorf("%w: %d, current %d", ErrInvalidUpdateVersion, req.PartitionEpoch, cur.PartitionEpoch)
	case !slices.Contains(req.ISR, req.Leader):
		return fmt.Errorf("%w: %v lacks the leader %d", ErrInvalidISR, req.ISR, req.Leader)
	}
	seen := map[int32]bool{}
	for _, id := range req.ISR {
		if seen[id] || !slices.Contains(cur.Replicas, id) {
			return fmt.Errorf("%w: %v (replicas %v)", ErrInvalidISR, req.ISR, cur.Replicas)
		}
		seen[id] = true
		if alive != nil && !slices.Contains(cur.ISR, id) && !alive(id) {
			return fmt.Errorf("%w: broker %d is not alive", ErrInvalidISR, id)
		}
	}
	return nil
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
