package broker

import (
	"sync"
	"sync/atomic"

	"strata/broker/plog"
)

// partition is this broker's replica of one topic partition. The log owns
// its own state (one mutex inside plog.Log); the partition adds what
// replication will need: the high watermark, the leader epoch, and the
// fetches waiting for new data.
type partition struct {
	topic   string
	index   int32
	topicID [16]byte
	log     *plog.Log

	leaderEpoch atomic.Int32
	minISR      atomic.Int32 // min.insync.replicas of the topic
	hw          atomic.Int64 // high watermark: consumers read below it
	// restoring: this broker leads a tiered partition with an empty log,
	// and has yet to take its log end from the bucket (tier_restore.go).
	restoring atomic.Bool
	// indexMu orders the writers of this partition's remote index: its
	// share of a tier pass, its first refresh and a restore (tier.go).
	indexMu sync.Mutex
	// warming: the first refresh of its remote index is under way.
	warming atomic.Bool

	mu      sync.Mutex // guards waiters
	waiters map[chan struct{}]struct{}

	// rs is the replication state: role, ISR and followers (replica_leader.go).
	rs replicaState
}

// advanceHW moves the high watermark up towards hw (never down), but never
// past what the ISR has replicated (see isrHW), and wakes waiting fetches
// and produces. With one replica it follows the log end offset.
func (p *partition) advanceHW(hw int64) {
	hw = min(hw, p.isrHW())
	p.setHW(hw)
}

// setHW moves the high watermark up to hw (never down) and wakes waiters.
func (p *partition) setHW(hw int64) {
	for {
		cur := p.hw.Load()
		if hw <= cur {
			break
		}
		if p.hw.CompareAndSwap(cur, hw) {
			break
		}
	}
	p.wake()
}

func (p *partition) wake() {
	p.mu.Lock()
	for ch := range p.waiters {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	p.mu.Unlock()
}

func (p *partition) addWaiter(ch chan struct{}) {
	p.mu.Lock()
	if p.waiters == nil {
		p.waiters = map[chan struct{}]struct{}{}
	}
	p.waiters[ch] = struct{}{}
	p.mu.Unlock()
}

func (p *partition) removeWaiter(ch chan struct{}) {
	p.mu.Lock()
	delete(p.waiters, ch)
	p.mu.Unlock()
}
