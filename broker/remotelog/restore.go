package remotelog

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
// as a follower does from the leader's tail (follower.go). The snapshot
// holds the transactions open at the segment's end (uploads stop at the
// last stable offset, so each had ended by the time of the upload, but
// its marker may lie beyond): they are open on the restored leader, from
// their first offset in the bucket, until their markers come again. A
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

// MarkRestore marks p, which this broker is about to lead, as restoring
// when it is tiered and its local log is empty. Called by the broker's
// applyRole.
func (rm *Manager) MarkRestore(p Partition) {
	if rm == nil || p.Log().LogEndOffset() != 0 {
		p.Restoring().Store(false)
		return
	}
	tt, ok := rm.Settings(p)
	if !ok || !tt.remote {
		if !ok {
			// The broker sets a partition's settings before its role;
			// say so if that ever fails to hold, as an empty leader of a
			// tiered topic that does not restore serves an empty log.
			rm.log.Warn("restore leader from remote storage: the partition's tier settings are not known; not restoring",
				"topic", p.Topic(), "partition", p.Index())
		}
		p.Restoring().Store(false)
		return
	}
	if !p.Restoring().Swap(true) {
		rm.wg.Add(1) // callers run inside the broker's wait group (Start, watchMetadata) or in a connection's handler, which the broker's Close waits for before it
		go rm.restoreLoop(p)
	}
}

// restoreLoop restores p until it is done, p is no longer led (the
// broker's applyRole clears restoring), or the broker stops.
func (rm *Manager) restoreLoop(p Partition) {
	defer rm.wg.Done()
	for p.Restoring().Load() && rm.ctx.Err() == nil {
		if rm.b.Partition(p.Topic(), p.Index()) != p {
			p.Restoring().Store(false) // closed or deleted meanwhile
			return
		}
		p.IndexMu().Lock()
		ctx, cancel := context.WithTimeout(rm.ctx, BuildAuxTimeout)
		_, err := tier.RefreshPartition(ctx, rm.store, rm.idx, tierPartition(p))
		cancel()
		if err == nil {
			rm.markFresh(p)
			rm.restoreLeader(p)
		}
		p.IndexMu().Unlock()
		if err != nil && rm.ctx.Err() == nil {
			rm.warnings.Warn(rm.log, "restore leader from remote storage: refresh the index from the bucket; retrying", "topic", p.Topic(), "partition", p.Index(), "err", err)
		}
		if !p.Restoring().Load() {
			return
		}
		select {
		case <-rm.ctx.Done():
		case <-time.After(RebuildBackoff):
		}
	}
}

// restoreLeader takes p's log end from the bucket (see the file comment),
// once the partition's index is refreshed.
func (rm *Manager) restoreLeader(p Partition) {
	tp := tierPartition(p)
	end, ok, err := rm.idx.LogEnd(tp)
	if err != nil {
		rm.log.Warn("restore leader from remote storage: remote index; retrying next pass", "topic", p.Topic(), "partition", p.Index(), "err", err)
		return
	}
	if !ok || p.Log().LogEndOffset() > end {
		// Nothing uploaded, or the local log already past the bucket's
		// end: the log goes on from here. Said once, as a leader that
		// should have restored and did not serves an empty log.
		rm.log.Info("restore leader from remote storage: nothing to take from the bucket", "topic", p.Topic(), "partition", p.Index(),
			"remote_segments", ok, "remote_log_end", end, "log_end", p.Log().LogEndOffset())
		rm.concludeRestore(p)
		return
	}
	ctx, cancel := context.WithTimeout(rm.ctx, BuildAuxTimeout)
	defer cancel()
	m, err := rm.idx.SegmentForOffset(tp, end)
	if err == nil {
		var r plog.Reset
		r.Offset = m.EndOffset + 1
		if r.EpochCheckpoint, err = rm.auxObject(ctx, &m, index.ObjectLeaderEpochCheckpoint); err == nil {
			if r.ProducerSnapshot, err = rm.auxObject(ctx, &m, index.ObjectProducerSnapshot); err == nil {
				err = p.Log().ResetTo(r)
			}
		}
	}
	if err != nil {
		rm.log.Warn("restore leader from remote storage; retrying", "topic", p.Topic(), "partition", p.Index(), "err", err)
		return
	}
	p.StoreHW(p.Log().LogEndOffset())
	rm.concludeRestore(p)
	p.AdvanceHW(p.Log().LogEndOffset())
	rm.log.Info("restored leader log end from remote storage", "topic", p.Topic(), "partition", p.Index(),
		"log_end", p.Log().LogEndOffset(), "latest_epoch", p.Log().LatestEpoch(), "segment", m.SegmentID.String())
	if open := openTransactions(p.Log()); len(open) > 0 {
		// Their markers were not uploaded (a drain waits for every
		// transaction to end; a lost disk does not): they stay open, and
		// hold the last stable offset, until their coordinator writes
		// their markers or an operator aborts them.
		rm.log.Warn("restored leader from remote storage with transactions open at its log start; read_committed consumers and uploads wait until they end",
			"topic", p.Topic(), "partition", p.Index(), "open_transactions", open)
	}
}

// concludeRestore ends p's restore and records the leader epoch it
// concluded at (CheckRestore).
func (rm *Manager) concludeRestore(p Partition) {
	rm.mu.Lock()
	rm.restored[p] = p.LeaderEpoch()
	rm.mu.Unlock()
	p.Restoring().Store(false)
}

// CheckRestore is a safety net under MarkRestore, called by the broker
// every second for each partition it leads, with the partition set
// locked (so no role change runs meanwhile): a leader of a tiered
// partition whose log is still empty, that is not restoring and whose
// restore has not concluded at its current leader epoch, would serve an
// empty log over the bucket's history. It is marked restoring, and the
// miss is said at WARN, as it means a role change went by without
// MarkRestore.
func (rm *Manager) CheckRestore(p Partition) {
	if rm == nil || p.Restoring().Load() || p.Log().LogEndOffset() != 0 {
		return
	}
	tt, ok := rm.Settings(p)
	if !ok || !tt.remote {
		return
	}
	rm.mu.Lock()
	e, done := rm.restored[p]
	rm.mu.Unlock()
	if done && e == p.LeaderEpoch() {
		return
	}
	rm.log.Warn("restore leader from remote storage: a leader with an empty log had not restored; restoring now",
		"topic", p.Topic(), "partition", p.Index(), "leader_epoch", p.LeaderEpoch(), "restored_at_epoch", e, "restored_before", done)
	rm.MarkRestore(p)
}
