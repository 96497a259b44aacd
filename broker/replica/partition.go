package replica

import (
	"sync"
	"sync/atomic"

	"strata/broker/plog"
)

// Partition is this broker's replica of one topic partition. The log owns
// its own state (one mutex inside plog.Log); the partition adds what
// replication needs: the high watermark, the leader epoch, and the
// fetches waiting for new data.
type Partition struct {
	topic   string
	index   int32
	topicID [16]byte
	log     *plog.Log

	leaderEpoch atomic.Int32
	minISR      atomic.Int32 // min.insync.replicas of the topic
	hw          atomic.Int64 // high watermark: consumers read below it
	// Restoring: this broker leads a tiered partition with an empty log,
	// and has yet to take its log end from the bucket (package
	// remotelog, restore.go).
	Restoring atomic.Bool
	// IndexMu orders the writers of this partition's remote index: its
	// share of a tier pass, its first refresh and a restore (package
	// remotelog, manager.go).
	IndexMu sync.Mutex
	// Warming: the first refresh of its remote index is under way.
	Warming atomic.Bool

	mu      sync.Mutex // guards waiters
	waiters map[chan struct{}]struct{}

	// rs is the replication state: role, ISR and followers (leader.go).
	rs replicaState
	// roleMu is held for reading by an append as leader (AppendAsLeader)
	// and for writing by a change of role (ApplyLeader, ApplyFollower),
	// as Kafka's leaderIsrUpdateLock: an append is stamped with the epoch
	// of a leadership this broker has applied and still holds.
	roleMu sync.RWMutex
}

// NewPartition is a partition of topic (with id topicID) over log l,
// with no role yet.
func NewPartition(topic string, index int32, topicID [16]byte, l *plog.Log) *Partition {
	return &Partition{topic: topic, index: index, topicID: topicID, log: l}
}

// Topic is the partition's topic name.
func (p *Partition) Topic() string { return p.topic }

// Index is the partition's number in its topic.
func (p *Partition) Index() int32 { return p.index }

// TopicID is the id of the partition's topic (KIP-516).
func (p *Partition) TopicID() [16]byte { return p.topicID }

// Log is the partition's local log.
func (p *Partition) Log() *plog.Log { return p.log }

// HW is the high watermark: consumers read below it.
func (p *Partition) HW() int64 { return p.hw.Load() }

// LastStableOffset is the last stable offset: min(first offset of the
// oldest transaction not yet finished and replicated, high watermark).
// read_committed fetches and ListOffsets with READ_COMMITTED read below
// it.
func (p *Partition) LastStableOffset() int64 { return p.log.LastStableOffset(p.HW()) }

// StoreHW sets the high watermark to hw, down as well as up, and wakes no
// one: for a partition being opened, restored or rebuilt.
func (p *Partition) StoreHW(hw int64) { p.hw.Store(hw) }

// LeaderEpoch is the leader epoch of the partition in the metadata last
// applied.
func (p *Partition) LeaderEpoch() int32 { return p.leaderEpoch.Load() }

// SetLeaderEpoch records the leader epoch of the metadata being applied.
func (p *Partition) SetLeaderEpoch(e int32) { p.leaderEpoch.Store(e) }

// MinISR is the topic's min.insync.replicas.
func (p *Partition) MinISR() int32 { return p.minISR.Load() }

// SetMinISR records the topic's min.insync.replicas.
func (p *Partition) SetMinISR(n int32) { p.minISR.Store(n) }

// AdvanceHW moves the high watermark up towards hw (never down), but never
// past what the ISR has replicated (see isrHW), and wakes waiting fetches
// and produces. With one replica it follows the log end offset.
func (p *Partition) AdvanceHW(hw int64) {
	hw = min(hw, p.isrHW())
	p.SetHW(hw)
}

// SetHW moves the high watermark up to hw (never down), tells the log
// (ended transactions whose markers it passed stop holding the last
// stable offset back; one atomic load when there are none) and wakes
// waiters.
func (p *Partition) SetHW(hw int64) {
	for {
		cur := p.hw.Load()
		if hw <= cur {
			break
		}
		if p.hw.CompareAndSwap(cur, hw) {
			p.log.OnHighWatermark(hw)
			break
		}
	}
	p.Wake()
}

// Wake wakes the fetches and produces waiting on the partition.
func (p *Partition) Wake() {
	p.mu.Lock()
	for ch := range p.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	p.mu.Unlock()
}

// AddWaiter makes Wake signal ch (without blocking).
func (p *Partition) AddWaiter(ch chan struct{}) {
	p.mu.Lock()
	if p.waiters == nil {
		p.waiters = map[chan struct{}]struct{}{}
	}
	p.waiters[ch] = struct{}{}
	p.mu.Unlock()
}

// RemoveWaiter undoes AddWaiter.
func (p *Partition) RemoveWaiter(ch chan struct{}) {
	p.mu.Lock()
	delete(p.waiters, ch)
	p.mu.Unlock()
}

// Waiters is how many fetches and produces wait on the partition.
func (p *Partition) Waiters() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.waiters)
}
