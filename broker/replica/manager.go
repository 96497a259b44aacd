package replica

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"

	"strata/broker/config"
	"strata/controller"
	"strata/internal/vfs"
)

// tp names one partition.
type tp struct {
	topic string
	part  int32
}

// Controller is what replication needs of the controller: the metadata
// (roles, ISRs, broker addresses) and AlterPartition.
type Controller interface {
	Metadata() *controller.Metadata
	AlterPartition(ctx context.Context, req controller.AlterPartitionRequest) (controller.Partition, error)
}

// brokerEpocher is a controller that knows brokers' epochs (ZooKeeper).
type brokerEpocher interface{ BrokerEpoch(id int32) int64 }

// ownBrokerEpoch is this broker's epoch, which its fetches carry
// (KIP-903); -1 on a controller without broker epochs.
func (m *Manager) ownBrokerEpoch() int64 {
	if be, ok := m.ctrl().(brokerEpocher); ok {
		return be.BrokerEpoch(m.cfg.ID)
	}
	return -1
}

// Options wire a Manager to its broker.
type Options struct {
	Config *config.Broker
	Logger *slog.Logger
	// FS is the filesystem of the log directory (the checkpoint).
	FS vfs.FS
	// Controller returns the broker's controller; the broker may make it
	// after the Manager, as it starts.
	Controller func() Controller
	// Context ends when the broker stops; WG counts the goroutines the
	// Manager starts (fetchers, AlterPartition calls, loops), which the
	// broker waits for as it closes.
	Context context.Context
	WG      *sync.WaitGroup
	// Tiering is tiered storage, for followers of tiered partitions; nil
	// means none.
	Tiering Tiering
	// ReplicationBytesIn counts bytes a follower appended from its leaders.
	ReplicationBytesIn func(n int)
	// LogDirErr tells whether the log directory is offline (then the
	// checkpoint is not rewritten); LogDirWriteFailed takes the log
	// directory offline after a failed write of a file in it and reports
	// whether it did (false: a full disk before any fsync).
	LogDirErr         func() error
	LogDirWriteFailed func(error) bool
	// BrokerAddr is a leader's HOST:PORT on the inter-broker listener, and
	// Dial connects to it (TLS on an SSL listener); nil: the leader's
	// first endpoint, plain TCP.
	BrokerAddr func(controller.Broker) string
	Dial       func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Manager is this broker's replication (Kafka's ReplicaManager): the
// partitions it hosts, its follower fetchers, its throttles and its
// high-watermark checkpoint.
type Manager struct {
	cfg  *config.Broker
	log  *slog.Logger
	fs   vfs.FS
	ctrl func() Controller
	ctx  context.Context
	wg   *sync.WaitGroup
	tier Tiering

	replicationBytesIn func(n int)
	logDirErr          func() error
	logDirWriteFailed  func(error) bool
	brokerAddr         func(controller.Broker) string
	dial               func(ctx context.Context, network, addr string) (net.Conn, error)

	pmu        sync.RWMutex
	partitions map[tp]*Partition

	// Replication throttles (throttle.go).
	leaderThrottle, followerThrottle replThrottle

	fmu        sync.Mutex         // guards fetchers
	fetchers   map[int32]*fetcher // replica fetchers by leader id (fetcher.go)
	replPaused atomic.Bool        // tests: replication paused
	// ISRShrinks and ISRExpands count the ISR changes this broker made
	// as leader (Kafka's ReplicaManager IsrShrinksPerSec and
	// IsrExpandsPerSec).
	ISRShrinks, ISRExpands atomic.Int64
	// awaiting counts the acks=-1 produces waiting in AwaitReplication.
	awaiting atomic.Int64

	hwck hwCheckpoints // replication-offset-checkpoint (hw_checkpoint.go)
}

// NewManager makes a Manager with no partitions.
func NewManager(o Options) *Manager {
	m := &Manager{
		cfg: o.Config, log: o.Logger, fs: o.FS, ctrl: o.Controller, ctx: o.Context, wg: o.WG, tier: o.Tiering,
		replicationBytesIn: o.ReplicationBytesIn, logDirErr: o.LogDirErr, logDirWriteFailed: o.LogDirWriteFailed,
		brokerAddr: o.BrokerAddr, dial: o.Dial,
		partitions: map[tp]*Partition{},
		fetchers:   map[int32]*fetcher{},
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	if m.fs == nil {
		m.fs = vfs.OS
	}
	if m.ctx == nil {
		m.ctx = context.Background()
	}
	if m.wg == nil {
		m.wg = &sync.WaitGroup{}
	}
	if m.tier == nil {
		m.tier = noTiering{}
	}
	if m.replicationBytesIn == nil {
		m.replicationBytesIn = func(int) {}
	}
	if m.logDirErr == nil {
		m.logDirErr = func() error { return nil }
	}
	if m.logDirWriteFailed == nil {
		m.logDirWriteFailed = func(error) bool { return true }
	}
	return m
}

// All returns the partitions this broker hosts.
func (m *Manager) All() []*Partition {
	m.pmu.RLock()
	defer m.pmu.RUnlock()
	out := make([]*Partition, 0, len(m.partitions))
	for _, p := range m.partitions {
		out = append(out, p)
	}
	return out
}

// Partition returns the hosted partition of topic, or nil.
func (m *Manager) Partition(topic string, part int32) *Partition {
	m.pmu.RLock()
	defer m.pmu.RUnlock()
	return m.partitions[tp{topic, part}]
}

// Editor changes the set of hosted partitions; it holds the set's lock
// until Done, so that changes (the broker's reconcile) are serialised.
type Editor struct{ m *Manager }

// Edit locks the set of partitions for changes.
func (m *Manager) Edit() *Editor {
	m.pmu.Lock()
	return &Editor{m}
}

// Done unlocks the set.
func (e *Editor) Done() { e.m.pmu.Unlock() }

// Get returns the hosted partition of topic, or nil.
func (e *Editor) Get(topic string, part int32) *Partition { return e.m.partitions[tp{topic, part}] }

// Put hosts p, in place of any partition of the same name.
func (e *Editor) Put(p *Partition) { e.m.partitions[tp{p.topic, p.index}] = p }

// Remove stops hosting the partition of topic.
func (e *Editor) Remove(topic string, part int32) { delete(e.m.partitions, tp{topic, part}) }

// All returns the hosted partitions.
func (e *Editor) All() []*Partition {
	out := make([]*Partition, 0, len(e.m.partitions))
	for _, p := range e.m.partitions {
		out = append(out, p)
	}
	return out
}

// metadata is the controller's current metadata.
func (m *Manager) metadata() *controller.Metadata { return m.ctrl().Metadata() }

// PartitionState is p's state in the current metadata, if the metadata
// holds p's topic (by id).
func (m *Manager) PartitionState(p *Partition) (controller.Partition, bool) {
	t := m.metadata().Topics[p.topic]
	if t == nil || t.ID != p.topicID || int(p.index) >= len(t.Partitions) {
		return controller.Partition{}, false
	}
	return t.Partitions[p.index], true
}

// IsLeader tells whether this broker leads p in the current metadata.
func (m *Manager) IsLeader(p *Partition) bool {
	pm, ok := m.PartitionState(p)
	return ok && pm.Leader == m.cfg.ID
}

// CatchingUp reports whether this broker follows p from outside its ISR,
// as the metadata says.
func (m *Manager) CatchingUp(p *Partition) bool {
	pm, ok := m.PartitionState(p)
	return !ok || pm.Leader != m.cfg.ID && !slices.Contains(pm.ISR, m.cfg.ID)
}
