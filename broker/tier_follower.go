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

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/plog"
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
	epoch := p.leaderEpoch.Load()
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
			s.tier.warnings.warn(s.log, "refresh remote index from the bucket; retrying next pass", "topic", p.topic, "partition", p.index, "leader", leader, "err", err)
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
		s.log.Debug("refreshed remote index", "topic", p.topic, "partition", p.index, "segments", st.Segments, "read", st.Read)
	}
	if !leader {
		ts.mu.Lock()
		delete(ts.follow.refreshed, p)
		ts.mu.Unlock()
		// Uploads this broker left unfinished when it led (a crash, or
		// leadership lost with the bucket down) go now, so that the
		// leader need not wait out the settle grace for them.
		if n, err := ts.uploader.SettleOwn(ctx, tierPartition(p)); err != nil {
			s.tier.warnings.warn(s.log, "delete own unfinished uploads; retrying next pass", "topic", p.topic, "partition", p.index, "err", err)
		} else if n > 0 {
			s.log.Info("deleted own unfinished uploads", "topic", p.topic, "partition", p.index, "uploads", n)
		}
		return false
	}
	if !s.isLeader(p) || p.leaderEpoch.Load() != epoch {
		return false // leadership moved meanwhile: the next pass decides
	}
	ts.mu.Lock()
	ts.follow.refreshed[p] = epoch
	ts.mu.Unlock()
	if st.Changed {
		s.log.Debug("refreshed remote index before uploading as leader", "topic", p.topic, "partition", p.index,
			"leader_epoch", epoch, "segments", st.Segments)
	}
	return true
}

// movedToTier reports whether a replica's fetch at offset below the
// local log start of p is to be answered OFFSET_MOVED_TO_TIERED_STORAGE:
// the partition is tiered and its remote log holds offset.
func (s *Server) movedToTier(p *partition, offset int64) bool {
	if offset < 0 || offset >= p.log.LogStartOffset() {
		return false
	}
	start, ok := s.remoteLogStart(p)
	return ok && offset >= start
}

// tierRebuildBackoff is how long a partition whose rebuild failed waits
// before the next attempt (its fetches wait with it; the fetcher's other
// partitions do not).
const tierRebuildBackoff = time.Second

// retryLater postpones the rebuild of k.
func (f *fetcher) retryLater(k tp, want followPart) {
	f.mu.Lock()
	if fp := f.current(k, want); fp != nil {
		fp.tierRetry = time.Now().Add(tierRebuildBackoff)
	}
	f.mu.Unlock()
}

// markEmptyTiered marks the followed partitions of tiered topics whose
// local log is empty (a replica new to the partition, or whose disk was
// wiped) to start at the leader's last tiered offset, when
// follower.fetch.last.tiered.offset.enable is on: they copy from the
// leader only what the bucket does not hold yet (KIP-1023), not the
// leader's whole local log. parts is updated too.
func (f *fetcher) markEmptyTiered(parts map[tp]followPart) {
	s := f.s
	if s.tier == nil || !s.cfg.FollowerFetchLastTieredOffsetEnable {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, want := range parts {
		if want.tailChecked || want.fromTier || !want.truncated {
			continue
		}
		fp := f.current(k, want)
		if fp == nil {
			continue
		}
		p := fp.p
		if _, known := s.tierSettings(p); !known {
			continue // the topic's settings are not applied yet: next round
		}
		fp.tailChecked = true
		if _, tiered := s.tieredLocal(p); !tiered || p.log.LogEndOffset() != 0 {
			continue
		}
		fp.fromTier, fp.lastTiered = true, true
		parts[k] = *fp
	}
}

// buildFromTier rebuilds the state of followed partitions whose leader
// answered OFFSET_MOVED_TO_TIERED_STORAGE (see the file comment). A
// partition it could not rebuild stays marked and is retried after
// tierRebuildBackoff; an error means the connection is unusable.
func (f *fetcher) buildFromTier(ctx context.Context, rc *replicaConn, parts map[tp]followPart, keys []tp) error {
	s := f.s
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 9
	req.ReplicaID = s.cfg.ID
	topics := map[string]int{}
	for _, k := range keys {
		i, ok := topics[k.topic]
		if !ok {
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = k.topic
			req.Topics = append(req.Topics, rt)
			i = len(req.Topics) - 1
			topics[k.topic] = i
		}
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition = k.part
		rp.CurrentLeaderEpoch = parts[k].epoch
		rp.Timestamp = -4 // EARLIEST_LOCAL (KIP-1005)
		if parts[k].lastTiered {
			rp.Timestamp = -5 // LATEST_TIERED
		}
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	kresp, err := rc.roundTrip(req, 10*time.Second)
	if err != nil {
		return err
	}
	resp := kresp.(*kmsg.ListOffsetsResponse)
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			k := tp{rt.Topic, rp.Partition}
			want, ok := parts[k]
			if !ok {
				continue
			}
			start := rp.Offset
			if want.lastTiered && rp.ErrorCode == 0 {
				if start < 0 {
					f.fetchFromStart(k, want) // nothing tiered yet: copy it all
					continue
				}
				start++ // the first offset not in the bucket
			}
			if rp.ErrorCode != 0 || start < 0 {
				s.log.Debug("earliest local offset from leader", "topic", k.topic, "partition", k.part, "leader", f.leader,
					"last_tiered", want.lastTiered, "err", kerr.ErrorForCode(rp.ErrorCode))
				f.retryLater(k, want)
				continue
			}
			if err := f.buildOne(ctx, k, want, start); err != nil {
				if s.tier != nil {
					s.tier.follow.buildFailures.Inc()
				}
				s.log.Warn("rebuild follower log from remote storage; retrying", "topic", k.topic, "partition", k.part,
					"leader", f.leader, "leader_local_start", rp.Offset, "err", err)
				f.retryLater(k, want)
			}
		}
	}
	return nil
}

// fetchFromStart gives up the start at the last tiered offset: the
// partition is fetched from its log end as any other.
func (f *fetcher) fetchFromStart(k tp, want followPart) {
	f.mu.Lock()
	if fp := f.current(k, want); fp != nil {
		fp.fromTier, fp.lastTiered = false, false
	}
	f.mu.Unlock()
}

// buildOne rebuilds one partition from the remote segment that ends just
// below leaderLocalStart: the leader's local log start, or its last
// tiered offset + 1.
func (f *fetcher) buildOne(ctx context.Context, k tp, want followPart, leaderLocalStart int64) error {
	s := f.s
	p := want.p
	done := func() {
		f.mu.Lock()
		if fp := f.current(k, want); fp != nil {
			fp.fromTier, fp.lastTiered = false, false
		}
		f.mu.Unlock()
	}
	if leaderLocalStart <= p.log.LogEndOffset() {
		done() // the leader has what comes next locally: fetch on
		return nil
	}
	if s.tier == nil {
		return errors.New("the leader tiers this partition but tiered storage is off on this broker")
	}
	s.tier.follow.buildRequests.Inc()
	ctx, cancel := context.WithTimeout(ctx, buildAuxTimeout)
	defer cancel()
	m, err := s.remoteSegmentAt(ctx, p, leaderLocalStart-1)
	if err != nil {
		return err
	}
	r := plog.Reset{Offset: m.EndOffset + 1}
	if r.EpochCheckpoint, err = s.auxObject(ctx, &m, index.ObjectLeaderEpochCheckpoint); err != nil {
		return err
	}
	if r.ProducerSnapshot, err = s.auxObject(ctx, &m, index.ObjectProducerSnapshot); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if s.replPaused.Load() {
		return nil // paused meanwhile: nothing is applied; retried on resume
	}
	fp := f.current(k, want)
	if fp == nil {
		return nil // no longer followed in this epoch
	}
	if r.Offset <= p.log.LogEndOffset() {
		fp.fromTier, fp.lastTiered = false, false
		return nil
	}
	from := p.log.LogEndOffset()
	if err := p.log.ResetTo(r); err != nil {
		return fmt.Errorf("reset local log to %d: %w", r.Offset, err)
	}
	// Everything below the remote segment's end was below the leader's
	// high watermark when it was uploaded.
	p.hw.Store(r.Offset)
	p.wake()
	fp.fromTier, fp.lastTiered, fp.truncated = false, false, true
	s.log.Info("rebuilt follower log from remote storage", "topic", k.topic, "partition", k.part, "leader", f.leader,
		"from", from, "to", r.Offset, "leader_local_start", leaderLocalStart, "segment", m.SegmentID.String(),
		"latest_epoch", p.log.LatestEpoch())
	return nil
}

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
