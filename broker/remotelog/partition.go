package remotelog

import (
	"sync"
	"sync/atomic"

	"strata/broker/config"
	"strata/broker/plog"
	"strata/controller"
)

// Partition is what the manager needs of a replica the broker hosts. The
// broker implements it with a comparable value (the manager keys its maps
// by Partition): two values for the same replica must be equal.
type Partition interface {
	Log() *plog.Log
	Topic() string
	Index() int32
	TopicID() [16]byte
	// LeaderEpoch is the leader epoch this replica was last told.
	LeaderEpoch() int32
	// HW is the high watermark; StoreHW stores one as is (down as well as up, waking no one), AdvanceHW moves
	// it up as the leader does (never beyond what the ISR holds).
	HW() int64
	StoreHW(hw int64)
	AdvanceHW(hw int64)
	// Restoring is set while this broker leads the partition with an
	// empty log and has yet to take its log end from the bucket
	// (restore.go); the broker reads it too.
	Restoring() *atomic.Bool
	// IndexMu orders the writers of the partition's remote index: its
	// share of a tier pass, its first refresh and a restore.
	IndexMu() *sync.Mutex
	// Warming is set while the first refresh of its remote index is
	// under way.
	Warming() *atomic.Bool
}

// Broker is what the manager needs of the broker that holds it.
type Broker interface {
	// Partitions are the replicas the broker hosts.
	Partitions() []Partition
	// Partition is the hosted replica of topic's partition index, or nil.
	Partition(topic string, index int32) Partition
	// IsLeader tells whether this broker leads p in the current metadata.
	IsLeader(p Partition) bool
	// CatchingUp tells whether this broker follows p from outside its
	// ISR, as the metadata says.
	CatchingUp(p Partition) bool
	// Metadata is the controller's current metadata; Changes is closed
	// at its next change.
	Metadata() *controller.Metadata
	Changes() <-chan struct{}
	// Resolver resolves topic configs against md's dynamic broker configs.
	Resolver(md *controller.Metadata) config.Resolver
	// RollForUpload rolls p's active segment when the broker drains or
	// the segment is idle, so that the pass uploads it.
	RollForUpload(p Partition)
}
