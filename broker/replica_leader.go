package broker

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

	"strata/controller"
)

// followerState is what the leader knows of one follower.
type followerState struct {
	leo                int64     // -1 until the follower fetches
	lastCaughtUp       time.Time // last time its fetch reached the leader's log end
	lastFetch          time.Time
	lastFetchLeaderLEO int64 // the leader's log end at the follower's previous fetch
	logStart           int64 // its log start offset, from its fetches (fetch_from_follower.go)
	lastSentHW         int64 // the high watermark last sent to it (fetch_from_follower.go)
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
func (p *partition) isrHW() int64 {
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

// lowWatermark is Kafka's lowWatermarkIfLeader: the lowest log start
// offset over the leader (start) and the followers of the assignment on
// live brokers, as their fetches reported it; -1 when this broker does
// not lead the partition.
func (p *partition) lowWatermark(start int64, alive func(int32) bool) int64 {
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

// isrSize is the size of the committed ISR, for min.insync.replicas.
func (p *partition) isrSize() int {
	p.rs.mu.Lock()
	defer p.rs.mu.Unlock()
	return len(p.rs.isr)
}

// applyLeader resets the follower states for a new leader epoch (or
// adopts a newer ISR for the current one). The high watermark continues.
func (p *partition) applyLeader(self int32, pm controller.Partition, now time.Time) {
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
	p.advanceHW(p.log.LogEndOffset())
}

// applyFollower records that this broker no longer leads the partition.
func (p *partition) applyFollower(self int32, pm controller.Partition) {
	r := &p.rs
	r.mu.Lock()
	r.leader, r.self, r.leaderEpoch = false, self, pm.LeaderEpoch
	r.partitionEpoch, r.replicas, r.isr, r.pending = pm.PartitionEpoch, slices.Clone(pm.Replicas), slices.Clone(pm.ISR), nil
	r.followers = nil
	r.mu.Unlock()
	p.wake() // waiting produces answer NOT_LEADER_OR_FOLLOWER
}

// recordFollowerFetch updates a follower's state from a Fetch at
// fetchOffset (its log end), applying Kafka's lastCaughtUpTime rule, and
// returns an ISR expansion to propose, if any.
func (p *partition) recordFollowerFetch(id int32, fetchOffset int64, now time.Time) (proposal []int32) {
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
	p.advanceHW(leo)
	return proposal
}

// outOfSyncProposal returns the ISR without followers that have not caught
// up within maxLag, or nil when nothing is to change (or a change is
// pending).
func (p *partition) outOfSyncProposal(now time.Time, maxLag time.Duration) []int32 {
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

// alterISR commits a proposed ISR through the controller and adopts the
// answer. It runs in its own goroutine so that no request waits on the
// controller.
func (s *Server) alterISR(p *partition, isr []int32) {
	r := &p.rs
	r.mu.Lock()
	req := controller.AlterPartitionRequest{Topic: p.topic, Partition: p.index, Leader: s.cfg.ID,
		LeaderEpoch: r.leaderEpoch, PartitionEpoch: r.partitionEpoch, ISR: isr}
	r.mu.Unlock()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
		defer cancel()
		np, err := s.ctrl.AlterPartition(ctx, req)
		r.mu.Lock()
		if slices.Equal(r.pending, isr) {
			r.pending = nil
		}
		if err == nil && r.leader && r.leaderEpoch == np.LeaderEpoch && np.PartitionEpoch >= r.partitionEpoch {
			r.partitionEpoch, r.isr = np.PartitionEpoch, slices.Clone(np.ISR)
		}
		r.mu.Unlock()
		if err != nil {
			s.log.Warn("alter partition", "topic", p.topic, "partition", p.index, "isr", isr, "err", err)
		} else {
			s.log.Info("isr changed", "topic", p.topic, "partition", p.index, "isr", np.ISR, "partition_epoch", np.PartitionEpoch)
		}
		p.advanceHW(p.log.LogEndOffset())
		p.wake()
	}()
}

// isrExpiry shrinks ISRs every replica.lag.time.max.ms / 2, as Kafka's
// isr-expiration task does.
func (s *Server) isrExpiry() {
	defer s.wg.Done()
	lag := time.Duration(s.cfg.ReplicaLagTimeMaxMs) * time.Millisecond
	t := time.NewTicker(max(lag/2, time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case now := <-t.C:
			for _, p := range s.allPartitions() {
				if isr := p.outOfSyncProposal(now, lag); isr != nil {
					s.alterISR(p, isr)
				}
			}
		}
	}
}
