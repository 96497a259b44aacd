package remotelog

// Replicas of tiered partitions that do not upload: followers, and
// leaders before their first upload.
//
// Index refresh. Only a partition's leader writes its remote segments,
// but every replica needs to know them: a follower's local retention
// deletes only what the bucket holds, a follower serving KIP-392 reads
// (or a leader-to-be) reads old offsets from the bucket, and a new leader
// must not upload again what its predecessor uploaded. So the tier pass
// (tierPass, every remote.log.manager.task.interval.ms) refreshes from
// the bucket (tier.RefreshPartition: a listing of the partition's
// manifests, reading only those not known finished) the index of every
// tiered partition this broker follows, at every pass (a follower new to
// the partition, only once it is in the ISR: manager.go), and of every one
// it leads, once per leader epoch before the first upload of that epoch;
// no upload happens for an epoch until that refresh succeeded. A
// follower's refresh lists only the manifests from its index's last
// finished segment on (tier.RefreshNewer), so that a pass costs what
// was uploaded since the last one, not the partition's history; every
// followerFullRefresh-th is whole, which is when it learns of segments
// deleted below that. Every
// writer of a partition's index (its share of a pass, its first refresh,
// a restore) holds the partition's IndexMu, so a refresh never races an
// upload.
//
// Rebuilding a follower from the leader's local tail. The leader answers
// a replica fetch below its local log start with
// OFFSET_MOVED_TO_TIERED_STORAGE when its remote log holds the offset
// (the broker's 01_fetch.go). The follower then does what Kafka's
// ReplicaFetcherTierStateMachine does (buildRemoteLogAuxState): it asks
// the leader for its earliest local offset (ListOffsets -4 with its
// replica id), finds the remote segment holding the offset just below
// it (in its index, else in the bucket directly, tier.FindSegment),
// downloads that segment's leader-epoch checkpoint and producer
// snapshot, resets its log to start empty at the segment's end + 1 with
// those epochs and producers (plog.ResetTo, crash-safe), and fetches on
// from there. Offsets below stay in the bucket, read by this broker's
// consumers through its index. Kafka's BrokerTopicMetrics
// buildremotelogauxstaterequests_total and
// failedbuildremotelogauxstaterequests_total count the attempts.

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"strata/broker/plog"
	"strata/broker/replica"
	"strata/index"
	"strata/tier"
)

// BuildAuxTimeout bounds one rebuild of a follower's log state from the
// bucket (a listing and two small objects): the replica fetcher's bound.
const BuildAuxTimeout = replica.BuildAuxTimeout

// maxAuxObject bounds the leader-epoch checkpoint and producer snapshot
// downloaded for a rebuild.
const maxAuxObject = 16 << 20

// tierFollow is the part of Manager this file owns.
type tierFollow struct {
	// refreshed maps a partition this broker leads to the leader epoch
	// its index was last refreshed for (guarded by Manager.mu).
	refreshed map[Partition]int32
	// sinceFull counts a partition's refreshes since its last whole one
	// by the tier pass (guarded by Manager.mu).
	sinceFull map[Partition]int

	buildRequests, buildFailures prometheus.Counter
}

func (tf *tierFollow) init(reg prometheus.Registerer) {
	tf.refreshed = map[Partition]int32{}
	tf.sinceFull = map[Partition]int{}
	tf.buildRequests = mBuildremotelogauxstaterequestsTotal.NewCounter()
	tf.buildFailures = mFailedbuildremotelogauxstaterequestsTotal.NewCounter()
	reg.MustRegister(tf.buildRequests, tf.buildFailures)
}

// Settings returns the partition's tier settings, if tiering is on
// and its topic is known.
func (rm *Manager) Settings(p Partition) (Tiering, bool) {
	if rm == nil {
		return Tiering{}, false
	}
	rm.mu.Lock()
	defer rm.mu.Unlock()
	tt, ok := rm.settings[p]
	return tt, ok
}

// TieredLocal returns the settings of a partition whose local retention
// follows local.retention.*: its topic is tiered and copying, whichever
// replica this broker is (the leader uploads; followers learn the uploads
// by refreshing).
func (rm *Manager) TieredLocal(p Partition) (Tiering, bool) {
	tt, ok := rm.Settings(p)
	return tt, ok && tt.remote && !tt.copyDisable
}

// followerFullRefresh: every how many tier passes a follower refreshes a
// partition's index whole rather than only its newest part.
const followerFullRefresh = 10

// tierRefresh refreshes the partition's index from the bucket when it
// must (see the file comment) and reports whether this broker may upload
// for it now: it leads, and its index was refreshed in this leader epoch.
// Called by the tier pass only.
func (rm *Manager) tierRefresh(p Partition) bool {
	tt, ok := rm.Settings(p)
	if !ok || !tt.remote {
		return false
	}
	leader := rm.b.IsLeader(p)
	epoch := p.LeaderEpoch()
	rm.mu.Lock()
	fresh := rm.fresh[p]
	sinceFull, everFull := rm.follow.sinceFull[p]
	rm.mu.Unlock()
	if !leader && !fresh && rm.b.CatchingUp(p) {
		return false // catching up: its first refresh waits for the ISR (manager.go)
	}
	if leader {
		rm.mu.Lock()
		done, have := rm.follow.refreshed[p]
		rm.mu.Unlock()
		if have && done == epoch {
			return true
		}
	}
	ctx, cancel := context.WithTimeout(rm.ctx, BuildAuxTimeout)
	defer cancel()
	// A follower's refresh lists only what is new (tier.RefreshNewer), and
	// the whole partition every followerFullRefresh passes, which is when
	// it learns of deletions; a leader's, before its uploads, is whole.
	full := leader || !fresh || !everFull || sinceFull+1 >= followerFullRefresh
	refresh := tier.RefreshNewer
	if full {
		refresh = tier.RefreshPartition
	}
	st, err := refresh(ctx, rm.store, rm.idx, tierPartition(p))
	if err != nil {
		if rm.ctx.Err() == nil {
			rm.warnings.Warn(rm.log, "refresh remote index from the bucket; retrying next pass", "topic", p.Topic(), "partition", p.Index(), "leader", leader, "err", err)
		}
		return false
	}
	rm.mu.Lock()
	if _, hosted := rm.settings[p]; hosted {
		if full {
			rm.follow.sinceFull[p] = 0
		} else {
			rm.follow.sinceFull[p] = sinceFull + 1
		}
	}
	rm.mu.Unlock()
	rm.markFresh(p)
	if st.Changed {
		rm.log.Debug("refreshed remote index", "topic", p.Topic(), "partition", p.Index(), "segments", st.Segments, "read", st.Read)
	}
	if !leader {
		rm.mu.Lock()
		delete(rm.follow.refreshed, p)
		rm.mu.Unlock()
		// Uploads this broker left unfinished when it led (a crash, or
		// leadership lost with the bucket down) go now, so that the
		// leader need not wait out the settle grace for them.
		if n, err := rm.uploader.SettleOwn(ctx, tierPartition(p)); err != nil {
			rm.warnings.Warn(rm.log, "delete own unfinished uploads; retrying next pass", "topic", p.Topic(), "partition", p.Index(), "err", err)
		} else if n > 0 {
			rm.log.Info("deleted own unfinished uploads", "topic", p.Topic(), "partition", p.Index(), "uploads", n)
		}
		return false
	}
	if !rm.b.IsLeader(p) || p.LeaderEpoch() != epoch {
		return false // leadership moved meanwhile: the next pass decides
	}
	rm.mu.Lock()
	rm.follow.refreshed[p] = epoch
	rm.mu.Unlock()
	if st.Changed {
		rm.log.Debug("refreshed remote index before uploading as leader", "topic", p.Topic(), "partition", p.Index(),
			"leader_epoch", epoch, "segments", st.Segments)
	}
	return true
}

// MovedToTier reports whether a replica's fetch at offset below the
// local log start of p is to be answered OFFSET_MOVED_TO_TIERED_STORAGE:
// the partition is tiered and its remote log holds offset.
func (rm *Manager) MovedToTier(p Partition, offset int64) bool {
	if offset < 0 || offset >= p.Log().LogStartOffset() {
		return false
	}
	start, ok := rm.RemoteLogStart(p)
	return ok && offset >= start
}

// RebuildBackoff paces the retries of a first index refresh and of a
// restore: the replica fetcher's wait after a failed rebuild.
const RebuildBackoff = replica.RebuildBackoff

// BuildAuxState is the bucket's part of rebuilding a follower from the
// leader's local tail (see the file comment; the broker's replica fetcher
// does the rest): the reset to the end of the remote segment holding
// offset, the offset just below the leader's local log start, with that
// segment's leader-epoch checkpoint and producer snapshot. It counts the
// attempt in buildremotelogauxstaterequests_total.
func (rm *Manager) BuildAuxState(ctx context.Context, p Partition, offset int64) (plog.Reset, index.SegmentMetadata, error) {
	rm.follow.buildRequests.Inc()
	ctx, cancel := context.WithTimeout(ctx, BuildAuxTimeout)
	defer cancel()
	m, err := rm.remoteSegmentAt(ctx, p, offset)
	if err != nil {
		return plog.Reset{}, m, err
	}
	r := plog.Reset{Offset: m.EndOffset + 1}
	if r.EpochCheckpoint, err = rm.auxObject(ctx, &m, index.ObjectLeaderEpochCheckpoint); err != nil {
		return plog.Reset{}, m, err
	}
	if r.ProducerSnapshot, err = rm.auxObject(ctx, &m, index.ObjectProducerSnapshot); err != nil {
		return plog.Reset{}, m, err
	}
	return r, m, nil
}

// BuildFailed counts a failed rebuild of a follower
// (failedbuildremotelogauxstaterequests_total).
func (rm *Manager) BuildFailed() { rm.follow.buildFailures.Inc() }

// remoteSegmentAt finds the finished remote segment holding offset: in
// the index, else in the bucket (the index may not have been refreshed
// yet, or be rebuilding after a wiped data directory).
func (rm *Manager) remoteSegmentAt(ctx context.Context, p Partition, offset int64) (index.SegmentMetadata, error) {
	tp := tierPartition(p)
	m, err := rm.idx.SegmentForOffset(tp, offset)
	if err == nil {
		return m, nil
	}
	if !errors.Is(err, index.ErrNotFound) {
		return m, fmt.Errorf("remote index: %w", err)
	}
	return tier.FindSegment(ctx, rm.store, tp, offset)
}

// auxObject downloads one small object of a remote segment; nil when the
// segment has none of that kind.
func (rm *Manager) auxObject(ctx context.Context, m *index.SegmentMetadata, kind index.ObjectKind) ([]byte, error) {
	b, err := tier.GetObject(ctx, rm.store, m, kind, maxAuxObject)
	if err != nil {
		return nil, fmt.Errorf("%s of remote segment %s: %w", kind.Suffix(), m.SegmentID, err)
	}
	return b, nil
}
