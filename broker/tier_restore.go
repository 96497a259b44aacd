package broker

// A leader of a tiered partition whose local log is empty: a broker on an
// empty disk (scaled to zero and back, or a lost disk) elected leader of
// a partition whose history is in the bucket. Appending at offset 0 would
// write over that history, so until the leader has taken its log end from
// the bucket it answers produce, fetch and ListOffsets with
// LEADER_NOT_AVAILABLE (clients retry), and the tier pass, woken at once,
// does for it what a follower does from the leader's tail
// (tier_follower.go): it refreshes the partition's index from the bucket,
// and when remote segments exist resets the empty log to start after the
// last one, with that segment's leader-epoch checkpoint and producer
// snapshot (so idempotent producers carry on), and that end as its high
// watermark (everything uploaded was committed). A partition with nothing
// in the bucket (a new one) starts at 0 as before, a pass later.

import (
	"context"
	"time"

	"strata/broker/plog"
	"strata/index"
)

// markRestore marks p, which this broker is about to lead, as restoring
// when it is tiered and its local log is empty. Called by applyRole.
func (s *Server) markRestore(p *partition) {
	if s.tier == nil || p.log.LogEndOffset() != 0 {
		p.restoring.Store(false)
		return
	}
	tt, ok := s.tierSettings(p)
	if !ok || !tt.remote {
		p.restoring.Store(false)
		return
	}
	if !p.restoring.Swap(true) {
		s.kickTier()
	}
}

// restoreLeader takes p's log end from the bucket (see the file comment).
// Called by the tier pass once the partition's index is refreshed in this
// leader epoch.
func (s *Server) restoreLeader(p *partition) {
	ts := s.tier
	tp := tierPartition(p)
	end, ok, err := ts.idx.LogEnd(tp)
	if err != nil {
		s.log.Warn("restore leader from remote storage: remote index; retrying next pass", "topic", p.topic, "partition", p.index, "err", err)
		return
	}
	if !ok || p.log.LogEndOffset() > end {
		p.restoring.Store(false) // nothing uploaded: the log starts here
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, buildAuxTimeout)
	defer cancel()
	m, err := ts.idx.SegmentForOffset(tp, end)
	if err == nil {
		var r plog.Reset
		r.Offset = m.EndOffset + 1
		if r.EpochCheckpoint, err = s.auxObject(ctx, &m, index.ObjectLeaderEpochCheckpoint); err == nil {
			if r.ProducerSnapshot, err = s.auxObject(ctx, &m, index.ObjectProducerSnapshot); err == nil {
				err = p.log.ResetTo(r)
			}
		}
	}
	if err != nil {
		s.log.Warn("restore leader from remote storage; retrying", "topic", p.topic, "partition", p.index, "err", err)
		s.kickTierLater()
		return
	}
	p.hw.Store(p.log.LogEndOffset())
	p.restoring.Store(false)
	p.advanceHW(p.log.LogEndOffset())
	s.log.Info("restored leader log end from remote storage", "topic", p.topic, "partition", p.index,
		"log_end", p.log.LogEndOffset(), "latest_epoch", p.log.LatestEpoch(), "segment", m.SegmentID.String())
}

// kickTierLater starts a tier pass after tierRebuildBackoff.
func (s *Server) kickTierLater() {
	time.AfterFunc(tierRebuildBackoff, s.kickTier)
}
