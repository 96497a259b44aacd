package broker

// A leader of a tiered partition whose local log is empty: a broker on an
// empty disk (scaled to zero and back, or a lost disk) elected leader of
// a partition whose history is in the bucket. Appending at offset 0 would
// write over that history, so until the leader has taken its log end from
// the bucket it answers produce, fetch and ListOffsets with
// LEADER_NOT_AVAILABLE (clients retry). A goroutine of its own (not the
// tier pass, which may be busy with long uploads) refreshes the
// partition's index from the bucket (one listing of its manifests: the
// index alone cannot tell a new partition from one this broker never
// saw uploads of), and when remote segments exist resets the empty log
// to start after the last one, with that segment's leader-epoch
// checkpoint and producer snapshot (so idempotent producers carry on),
// and that end as its high watermark (everything uploaded was committed),
// as a follower does from the leader's tail (tier_follower.go). A
// partition the bucket holds no segment of (a new one) starts at 0. The
// partition waits for nothing else, not for other partitions' indexes.
// While restoring, the tier pass leaves the partition alone.

import (
	"context"
	"time"

	"strata/broker/plog"
	"strata/index"
	"strata/tier"
)

// markRestore marks p, which this broker is about to lead, as restoring
// when it is tiered and its local log is empty. Called by applyRole.
func (s *Server) markRestore(p *partition) {
	if s.tier == nil || p.Log().LogEndOffset() != 0 {
		p.Restoring.Store(false)
		return
	}
	tt, ok := s.tierSettings(p)
	if !ok || !tt.remote {
		p.Restoring.Store(false)
		return
	}
	if !p.Restoring.Swap(true) {
		s.wg.Add(1) // callers run inside s.wg (Start, watchMetadata, handlers)
		go s.restoreLoop(p)
	}
}

// restoreLoop restores p until it is done, p is no longer led (applyRole
// clears restoring), or the broker stops.
func (s *Server) restoreLoop(p *partition) {
	defer s.wg.Done()
	ts := s.tier
	for p.Restoring.Load() && s.ctx.Err() == nil {
		if s.partition(p.Topic(), p.Index()) != p {
			p.Restoring.Store(false) // closed or deleted meanwhile
			return
		}
		p.IndexMu.Lock()
		ctx, cancel := context.WithTimeout(s.ctx, buildAuxTimeout)
		_, err := tier.RefreshPartition(ctx, ts.store, ts.idx, tierPartition(p))
		cancel()
		if err == nil {
			s.markFresh(p)
			s.restoreLeader(p)
		}
		p.IndexMu.Unlock()
		if err != nil && s.ctx.Err() == nil {
			ts.warnings.warn(s.log, "restore leader from remote storage: refresh the index from the bucket; retrying", "topic", p.Topic(), "partition", p.Index(), "err", err)
		}
		if !p.Restoring.Load() {
			return
		}
		select {
		case <-s.ctx.Done():
		case <-time.After(tierRebuildBackoff):
		}
	}
}

// restoreLeader takes p's log end from the bucket (see the file comment),
// once the partition's index is refreshed.
func (s *Server) restoreLeader(p *partition) {
	ts := s.tier
	tp := tierPartition(p)
	end, ok, err := ts.idx.LogEnd(tp)
	if err != nil {
		s.log.Warn("restore leader from remote storage: remote index; retrying next pass", "topic", p.Topic(), "partition", p.Index(), "err", err)
		return
	}
	if !ok || p.Log().LogEndOffset() > end {
		p.Restoring.Store(false) // nothing uploaded: the log starts here
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
				err = p.Log().ResetTo(r)
			}
		}
	}
	if err != nil {
		s.log.Warn("restore leader from remote storage; retrying", "topic", p.Topic(), "partition", p.Index(), "err", err)
		return
	}
	p.StoreHW(p.Log().LogEndOffset())
	p.Restoring.Store(false)
	p.AdvanceHW(p.Log().LogEndOffset())
	s.log.Info("restored leader log end from remote storage", "topic", p.Topic(), "partition", p.Index(),
		"log_end", p.Log().LogEndOffset(), "latest_epoch", p.Log().LatestEpoch(), "segment", m.SegmentID.String())
}
