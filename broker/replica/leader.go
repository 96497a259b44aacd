package replica

// Leader side of ISR replication (Kafka's Partition): the leader learns each
// follower's log end offset from its Fetch requests, keeps the time it last
// caught up with the leader's log end, moves the high watermark to the
// minimum log end offset over the ISR, and proposes ISR changes to the
// controller (AlterPartition). Until a change is committed the high
// watermark is computed over the union of the committed and the proposed
// ISR (KIP-497's maximal ISR), so a shrink never advances it early.

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"strata/broker/plog"
	"strata/controller"
)

// followerState is what the leader knows of one follower.
type followerState struct {
	leo                int64     // -1 until the follower fetches
	lastCaughtUp       time.Time // last time its fetch reached the leader's log end
	lastFetch          time.Time
	lastFetchLeaderLEO int64 // the leader's log end at the follower's previous fetch
	logStart           int64 // its log start offset, from its fetches (select.go)
	lastSentHW         int64 // the high watermark last sent to it (select.go)
}

// replicaState is a partition's role and ISR bookkeeping, guarded by mu.
type replicaState struct {
	mu             sync.Mutex
	self           int32
	leader         bool
	leaderEpoch    int32 // epoch of the role below
	partitionEpoch int32
	replicas       []int32
	isr            []int32 // committed ISR
	pending        []int32 // proposed ISR awaiting the controller; nil if none
	epochStart     int64   // log end when this broker became leader
	followers      map[int32]*followerState
}

// maximalISRLocked is the committed ISR together with a pending proposal.
func (r *replicaState) maximalISRLocked() []int32 {
	out := slices.Clone(r.isr)
	for _, id := range r.pending {
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out
}

// isrHW is the highest high watermark the ISR allows: the minimum log end
// offset over the maximal ISR (the leader's own log end for itself). A
// partition that does not lead (or has no replication state yet, as with a
// single replica) is bounded by its log end.
func (p *Partition) isrHW() int64 {
	leo := p.log.LogEndOffset()
	r := &p.rs
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.leader {
		return leo
	}
	hw := leo
	for _, id := range r.maximalISRLocked() {
		if id == r.self {
			continue
		}
		f := r.followers[id]
		if f == nil || f.leo < 0 {
			return min(hw, p.hw.Load()) // unknown: hold the high watermark
		}
		hw = min(hw, f.leo)
	}
	return hw
}

// LowWatermark is Kafka's lowWatermarkIfLeader: the lowest log start
// offset over the leader (start) and the followers of the assignment on
// live brokers, as their fetches reported it; -1 when this broker does
// not lead the partition.
func (p *Partition) LowWatermark(start int64, alive func(int32) bool) int64 {
	r := &p.rs
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.leader {
		return -1
	}
	low := start
	for id, f := range r.followers {
		if id != r.self && slices.Contains(r.replicas, id) && alive(id) {
			low = min(low, f.logStart)
		}
	}
	return low
}

// ISRSize is the size of the committed ISR, for min.insync.replicas.
func (p *Partition) ISRSize() int {
	p.rs.mu.Lock()
	defer p.rs.mu.Unlock()
	return len(p.rs.isr)
}

// AppendAsLeader appends records (a producer's, or a coordinator's)
// stamped with the leader epoch of the leadership this broker has applied,
// and refuses them with NOT_LEADER_OR_FOLLOWER when it has not applied
// one: the controller's metadata may name this broker leader before its
// reconcile applied the new epoch, and an append stamped with the old
// epoch would leave the new epoch out of the log's epoch cache, so a
// returning replica's divergent tail would not be found (KIP-101). The
// role cannot change during the append.
func (p *Partition) AppendAsLeader(records []byte) (plog.AppendInfo, error) {
	return p.appendAsLeader(func(epoch int32) (plog.AppendInfo, error) { return p.log.Append(records, epoch) })
}

// appendAsLeader runs appendAt with the leader epoch this broker has
// applied, under the role lock (see AppendAsLeader).
func (p *Partition) appendAsLeader(appendAt func(epoch int32) (plog.AppendInfo, error)) (plog.AppendInfo, error) {
	p.roleMu.RLock()
	defer p.roleMu.RUnlock()
	p.rs.mu.Lock()
	leader, epoch := p.rs.leader, p.rs.leaderEpoch
	p.rs.mu.Unlock()
	if !leader {
		return plog.AppendInfo{}, kerr.NotLeaderForPartition
	}
	return appendAt(epoch)
}

// AppendVerifiedAsLeader is AppendAsLeader for a transactional batch of
// producerID at producerEpoch, checked against the verification guard the
// leader took before asking the transaction coordinator
// (plog.Log.AppendVerified, KIP-890).
func (p *Partition) AppendVerifiedAsLeader(records []byte, producerID int64, producerEpoch int16, guard uint64) (plog.AppendInfo, error) {
	return p.appendAsLeader(func(epoch int32) (plog.AppendInfo, error) {
		return p.log.AppendVerified(records, epoch, producerID, producerEpoch, guard)
	})
}

// AppendControlAsLeader appends a transaction marker (WriteTxnMarkers)
// for producerID, stamped with the leader epoch of the leadership this
// broker has applied, under the same role lock as AppendAsLeader: it is
// refused with NOT_LEADER_OR_FOLLOWER when no leadership is applied, and
// the role cannot change during the append.
func (p *Partition) AppendControlAsLeader(producerID int64, producerEpoch int16, m plog.EndTxnMarker, transactionVersion int16) (plog.AppendInfo, error) {
	return p.appendAsLeader(func(epoch int32) (plog.AppendInfo, error) {
		return p.log.AppendControl(producerID, producerEpoch, m, epoch, transactionVersion)
	})
}

// ApplyLeader resets the follower states for a new leader epoch (or
// adopts a newer ISR for the current one). The high watermark continues.
func (p *Partition) ApplyLeader(self int32, pm controller.Partition, now time.Time) {
	p.roleMu.Lock()
	defer p.roleMu.Unlock()
	r := &p.rs
	r.mu.Lock()
	if !r.leader || r.leaderEpoch != pm.LeaderEpoch {
		r.leader, r.self, r.leaderEpoch = true, self, pm.LeaderEpoch
		r.partitionEpoch, r.replicas, r.isr, r.pending = pm.PartitionEpoch, slices.Clone(pm.Replicas), slices.Clone(pm.ISR), nil
		r.epochStart = p.log.LogEndOffset()
		r.followers = map[int32]*followerState{}
		for _, id := range pm.Replicas {
			if id == self {
				continue
			}
			f := &followerState{leo: -1, lastFetchLeaderLEO: -1}
			if slices.Contains(pm.ISR, id) {
				f.lastCaughtUp = now // Kafka: ISR members start caught up
			}
			r.followers[id] = f
		}
	} else if pm.PartitionEpoch > r.partitionEpoch ||
		pm.PartitionEpoch == r.partitionEpoch && !slices.Equal(pm.Replicas, r.replicas) {
		// A newer ISR, or the replica set changed without it: the
		// controller writes the replicas (topic znode) and the state apart,
		// so a view may show the new leader epoch before the new replicas.
		r.partitionEpoch, r.replicas, r.isr, r.pending = pm.PartitionEpoch, slices.Clone(pm.Replicas), slices.Clone(pm.ISR), nil
		for _, id := range pm.Replicas {
			if _, ok := r.followers[id]; !ok && id != self {
				r.followers[id] = &followerState{leo: -1, lastFetchLeaderLEO: -1}
			}
		}
		for id := range r.followers {
			if !slices.Contains(pm.Replicas, id) {
				delete(r.followers, id)
			}
		}
	}
	r.mu.Unlock()
	p.AdvanceHW(p.log.LogEndOffset())
}

// ApplyFollower records that this broker no longer leads the partition.
func (p *Partition) ApplyFollower(self int32, pm controller.Partition) {
	p.roleMu.Lock()
	defer p.roleMu.Unlock()
	r := &p.rs
	r.mu.Lock()
	r.leader, r.self, r.leaderEpoch = false, self, pm.LeaderEpoch
	r.partitionEpoch, r.replicas, r.isr, r.pending = pm.PartitionEpoch, slices.Clone(pm.Replicas), slices.Clone(pm.ISR), nil
	r.followers = nil
	r.mu.Unlock()
	p.Wake() // waiting produces answer NOT_LEADER_OR_FOLLOWER
}

// RecordFollowerFetch updates a follower's state from a Fetch at
// fetchOffset (its log end), applying Kafka's lastCaughtUpTime rule, and
// returns an ISR expansion to propose, if any.
func (p *Partition) RecordFollowerFetch(id int32, fetchOffset int64, now time.Time) (proposal []int32) {
	leo := p.log.LogEndOffset()
	r := &p.rs
	r.mu.Lock()
	f := r.followers[id]
	if !r.leader || f == nil || fetchOffset > leo { // beyond the log end: answered OFFSET_OUT_OF_RANGE

		r.mu.Unlock()
		return nil
	}
	switch {
	case fetchOffset >= leo:
		f.lastCaughtUp = now
	case f.lastFetchLeaderLEO >= 0 && fetchOffset >= f.lastFetchLeaderLEO:
		f.lastCaughtUp = f.lastFetch
	}
	f.leo = min(fetchOffset, leo)
	f.lastFetch, f.lastFetchLeaderLEO = now, leo
	hw := p.hw.Load()
	if r.pending == nil && !slices.Contains(r.isr, id) && slices.Contains(r.replicas, id) &&
		f.leo >= hw && f.leo >= r.epochStart {
		proposal = append(slices.Clone(r.isr), id)
		r.pending = proposal
	}
	r.mu.Unlock()
	p.AdvanceHW(leo)
	return proposal
}

// OutOfSyncProposal returns the ISR without followers that have not caught
// up within maxLag, or nil when nothing is to change (or a change is
// pending).
func (p *Partition) OutOfSyncProposal(now time.Time, maxLag time.Duration) []int32 {
	r := &p.rs
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.leader || r.pending != nil {
		return nil
	}
	var keep []int32
	for _, id := range r.isr {
		if f := r.followers[id]; id != r.self && f != nil && now.Sub(f.lastCaughtUp) > maxLag {
			continue
		}
		keep = append(keep, id)
	}
	if len(keep) == len(r.isr) {
		return nil
	}
	r.pending = keep
	return keep
}

// AlterISR commits a proposed ISR through the controller and adopts the
// answer. It runs in its own goroutine so that no request waits on the
// controller.
func (m *Manager) AlterISR(p *Partition, isr []int32) {
	r := &p.rs
	r.mu.Lock()
	req := controller.AlterPartitionRequest{Topic: p.topic, Partition: p.index, Leader: m.cfg.ID,
		LeaderEpoch: r.leaderEpoch, PartitionEpoch: r.partitionEpoch, ISR: isr}
	r.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		ctx, cancel := context.WithTimeout(m.ctx, 10*time.Second)
		defer cancel()
		np, err := m.ctrl().AlterPartition(ctx, req)
		r.mu.Lock()
		if slices.Equal(r.pending, isr) {
			r.pending = nil
		}
		before := len(r.isr)
		if err == nil && r.leader && r.leaderEpoch == np.LeaderEpoch && np.PartitionEpoch >= r.partitionEpoch {
			r.partitionEpoch, r.isr = np.PartitionEpoch, slices.Clone(np.ISR)
		}
		r.mu.Unlock()
		if err != nil {
			m.log.Warn("alter partition", "topic", p.topic, "partition", p.index, "isr", isr, "err", err)
		} else {
			// Kafka's IsrShrinksPerSec and IsrExpandsPerSec; the
			// controller logs the cluster's changes at info.
			switch {
			case len(np.ISR) < before:
				m.ISRShrinks.Add(1)
			case len(np.ISR) > before:
				m.ISRExpands.Add(1)
			}
			m.log.Debug("isr changed", "topic", p.topic, "partition", p.index, "isr", np.ISR, "partition_epoch", np.PartitionEpoch)
		}
		p.AdvanceHW(p.log.LogEndOffset())
		p.Wake()
	}()
}

// RecordFollowerFetch records a follower's Fetch at fetchOffset on p (see
// Partition.RecordFollowerFetch) and proposes the ISR expansion it
// allows, if any.
func (m *Manager) RecordFollowerFetch(p *Partition, id int32, fetchOffset int64, now time.Time) {
	if isr := p.RecordFollowerFetch(id, fetchOffset, now); isr != nil {
		m.AlterISR(p, isr)
	}
}

// RunISRExpiry shrinks ISRs every replica.lag.time.max.ms / 2, as Kafka's
// isr-expiration task does, until the broker stops. The caller has added
// it to the WaitGroup of Options.
func (m *Manager) RunISRExpiry() {
	defer m.wg.Done()
	lag := time.Duration(m.cfg.ReplicaLagTimeMaxMs) * time.Millisecond
	t := time.NewTicker(max(lag/2, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			return
		case now := <-t.C:
			m.ExpireISRs(now)
		}
	}
}

// ExpireISRs is one pass of the isr-expiration task at now: every leader
// proposes its ISR without the followers that have not caught up within
// replica.lag.time.max.ms.
func (m *Manager) ExpireISRs(now time.Time) {
	lag := time.Duration(m.cfg.ReplicaLagTimeMaxMs) * time.Millisecond
	for _, p := range m.All() {
		if isr := p.OutOfSyncProposal(now, lag); isr != nil {
			m.AlterISR(p, isr)
		}
	}
}

// LeaderTerm is the leader epoch of p's role, the log end offset at which
// this broker became its leader, and whether it leads it.
func (p *Partition) LeaderTerm() (epoch int32, epochStart int64, leader bool) {
	p.rs.mu.Lock()
	defer p.rs.mu.Unlock()
	return p.rs.leaderEpoch, p.rs.epochStart, p.rs.leader
}
