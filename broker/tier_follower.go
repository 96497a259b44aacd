package broker

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
// the partition, only once it is in the ISR: tier.go), and of every one
// it leads, once per leader epoch before the first upload of that epoch;
// no upload happens for an epoch until that refresh succeeded. A
// follower's refresh lists only the manifests from its index's last
// finished segment on (tier.RefreshNewer), so that a pass costs what
// was uploaded since the last one, not the partition's history; every
// followerFullRefresh-th is whole, which is when it learns of segments
// deleted below that. Every
// writer of a partition's index (its share of a pass, its first refresh,
// a restore) holds partition.indexMu, so a refresh never races an
// upload.
//
// Rebuilding a follower from the leader's local tail. The leader answers
// a replica fetch below its local log start with
// OFFSET_MOVED_TO_TIERED_STORAGE when its remote log holds the offset
// (01_fetch.go). The follower then does what Kafka's
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
// The fetcher's side of the rebuild is replica/fetcher_tier.go; it
// reaches what is here through replica.Tiering (replicas.go).

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"strata/index"
	"strata/tier"
)

// buildAuxTimeout bounds one rebuild of a follower's log state from the
// bucket (a listing and two small objects).
const buildAuxTimeout = 30 * time.Second

// maxAuxObject bounds the leader-epoch checkpoint and producer snapshot
// downloaded for a rebuild.
const maxAuxObject = 16 << 20

// tierFollow is the part of tierState this file owns.
type tierFollow struct {
	// refreshed maps a partition this broker leads to the leader epoch
	// its index was last refreshed for (guarded by tierState.mu).
	refreshed map[*partition]int32
	// sinceFull counts a partition's refreshes since its last whole one
	// by the tier pass (guarded by tierState.mu).
	sinceFull map[*partition]int

	buildRequests, buildFailures prometheus.Counter
}

func (tf *tierFollow) init(reg prometheus.Registerer) {
	tf.refreshed = map[*partition]int32{}
	tf.sinceFull = map[*partition]int{}
	tf.buildRequests = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kafka_server_brokertopicmetrics_buildremotelogauxstaterequests_total",
		Help: "Followers' rebuilds of a partition's log state (epochs, producers) from remote storage.",
	})
	tf.buildFailures = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "kafka_server_brokertopicmetrics_failedbuildremotelogauxstaterequests_total",
		Help: "Followers' rebuilds of a partition's log state from remote storage that failed (retried).",
	})
	reg.MustRegister(tf.buildRequests, tf.buildFailures)
}

// tierSettings returns the partition's tier settings, if tiering is on
// and its topic is known.
func (s *Server) tierSettings(p *partition) (tierTopic, bool) {
	if s.tier == nil {
		return tierTopic{}, false
	}
	s.tier.mu.Lock()
	defer s.tier.mu.Unlock()
	tt, ok := s.tier.settings[p]
	return tt, ok
}

// tieredLocal returns the settings of a partition whose local retention
// follows local.retention.*: its topic is tiered and copying, whichever
// replica this broker is (the leader uploads; followers learn the uploads
// by refreshing).
func (s *Server) tieredLocal(p *partition) (tierTopic, bool) {
	tt, ok := s.tierSettings(p)
	return tt, ok && tt.remote && !tt.copyDisable
}

// followerFullRefresh: every how many tier passes a follower refreshes a
// partition's index whole rather than only its newest part.
const followerFullRefresh = 10

// tierRefresh refreshes the partition's index from the bucket when it
// must (see the file comment) and reports whether this broker may upload
// for it now: it leads, and its index was refreshed in this leader epoch.
// Called by the tier pass only.
func (s *Server) tierRefresh(p *partition) bool {
	ts := s.tier
	tt, ok := s.tierSettings(p)
	if !ok || !tt.remote {
		return false
	}
	leader := s.isLeader(p)
	epoch := p.LeaderEpoch()
	ts.mu.Lock()
	fresh := ts.fresh[p]
	sinceFull, everFull := ts.follow.sinceFull[p]
	ts.mu.Unlock()
	if !leader && !fresh && s.catchingUp(p) {
		return false // catching up: its first refresh waits for the ISR (tier.go)
	}
	if leader {
		ts.mu.Lock()
		done, have := ts.follow.refreshed[p]
		ts.mu.Unlock()
		if have && done == epoch {
			return true
		}
	}
	ctx, cancel := context.WithTimeout(s.ctx, buildAuxTimeout)
	defer cancel()
	// A follower's refresh lists only what is new (tier.RefreshNewer), and
	// the whole partition every followerFullRefresh passes, which is when
	// it learns of deletions; a leader's, before its uploads, is whole.
	full := leader || !fresh || !everFull || sinceFull+1 >= followerFullRefresh
	refresh := tier.RefreshNewer
	if full {
		refresh = tier.RefreshPartition
	}
	st, err := refresh(ctx, ts.store, ts.idx, tierPartition(p))
	if err != nil {
		if s.ctx.Err() == nil {
			s.tier.warnings.warn(s.log, "refresh remote index from the bucket; retrying next pass", "topic", p.Topic(), "partition", p.Index(), "leader", leader, "err", err)
		}
		return false
	}
	ts.mu.Lock()
	if _, hosted := ts.settings[p]; hosted {
		if full {
			ts.follow.sinceFull[p] = 0
		} else {
			ts.follow.sinceFull[p] = sinceFull + 1
		}
	}
	ts.mu.Unlock()
	s.markFresh(p)
	if st.Changed {
		s.log.Debug("refreshed remote index", "topic", p.Topic(), "partition", p.Index(), "segments", st.Segments, "read", st.Read)
	}
	if !leader {
		ts.mu.Lock()
		delete(ts.follow.refreshed, p)
		ts.mu.Unlock()
		// Uploads this broker left unfinished when it led (a crash, or
		// leadership lost with the bucket down) go now, so that the
		// leader need not wait out the settle grace for them.
		if n, err := ts.uploader.SettleOwn(ctx, tierPartition(p)); err != nil {
			s.tier.warnings.warn(s.log, "delete own unfinished uploads; retrying next pass", "topic", p.Topic(), "partition", p.Index(), "err", err)
		} else if n > 0 {
			s.log.Info("deleted own unfinished uploads", "topic", p.Topic(), "partition", p.Index(), "uploads", n)
		}
		return false
	}
	if !s.isLeader(p) || p.LeaderEpoch() != epoch {
		return false // leadership moved meanwhile: the next pass decides
	}
	ts.mu.Lock()
	ts.follow.refreshed[p] = epoch
	ts.mu.Unlock()
	if st.Changed {
		s.log.Debug("refreshed remote index before uploading as leader", "topic", p.Topic(), "partition", p.Index(),
			"leader_epoch", epoch, "segments", st.Segments)
	}
	return true
}

// movedToTier reports whether a replica's fetch at offset below the
// local log start of p is to be answered OFFSET_MOVED_TO_TIERED_STORAGE:
// the partition is tiered and its remote log holds offset.
func (s *Server) movedToTier(p *partition, offset int64) bool {
	if offset < 0 || offset >= p.Log().LogStartOffset() {
		return false
	}
	start, ok := s.remoteLogStart(p)
	return ok && offset >= start
}

// tierRebuildBackoff is how long a partition whose rebuild failed waits
// before the next attempt (its fetches wait with it; the fetcher's other
// partitions do not). The follower fetchers keep their own copy
// (replica/fetcher_tier.go).
const tierRebuildBackoff = time.Second

// remoteSegmentAt finds the finished remote segment holding offset: in
// the index, else in the bucket (the index may not have been refreshed
// yet, or be rebuilding after a wiped data directory).
func (s *Server) remoteSegmentAt(ctx context.Context, p *partition, offset int64) (index.SegmentMetadata, error) {
	tp := tierPartition(p)
	m, err := s.tier.idx.SegmentForOffset(tp, offset)
	if err == nil {
		return m, nil
	}
	if !errors.Is(err, index.ErrNotFound) {
		return m, fmt.Errorf("remote index: %w", err)
	}
	return tier.FindSegment(ctx, s.tier.store, tp, offset)
}

// auxObject downloads one small object of a remote segment; nil when the
// segment has none of that kind.
func (s *Server) auxObject(ctx context.Context, m *index.SegmentMetadata, kind index.ObjectKind) ([]byte, error) {
	b, err := tier.GetObject(ctx, s.tier.store, m, kind, maxAuxObject)
	if err != nil {
		return nil, fmt.Errorf("%s of remote segment %s: %w", kind.Suffix(), m.SegmentID, err)
	}
	return b, nil
}
