package replica

// The fetcher's part in rebuilding a follower from the leader's local tail
// (Kafka's ReplicaFetcherTierStateMachine, buildRemoteLogAuxState). The
// leader answers a replica fetch below its local log start with
// OFFSET_MOVED_TO_TIERED_STORAGE when its remote log holds the offset.
// The follower then asks the leader for its earliest local offset
// (ListOffsets -4 with its replica id), and has the broker's tiered
// storage (Tiering.BuildAuxState) find the remote segment holding the
// offset just below it and download that segment's leader-epoch
// checkpoint and producer snapshot; it resets its log to start empty at
// the segment's end + 1 with those epochs and producers (plog.ResetTo,
// crash-safe), and fetches on from there. Offsets below stay in the
// bucket, read by this broker's consumers through its remote index.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// BuildAuxTimeout bounds one rebuild of a follower's log state from the
// bucket (a listing and two small objects); package remotelog bounds its
// own reads of the bucket with it too.
const BuildAuxTimeout = 30 * time.Second

// RebuildBackoff is how long a partition whose rebuild failed waits
// before the next attempt (its fetches wait with it; the fetcher's other
// partitions do not); package remotelog paces its retries of a first
// index refresh and of a restore with it too.
const RebuildBackoff = time.Second

// retryLater postpones the rebuild of k.
func (f *fetcher) retryLater(k tp, want followPart) {
	f.mu.Lock()
	if fp := f.current(k, want); fp != nil {
		fp.tierRetry = time.Now().Add(RebuildBackoff)
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
	m := f.m
	if !m.tier.Enabled() || !m.cfg.FollowerFetchLastTieredOffsetEnable {
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
		if !m.tier.SettingsKnown(p) {
			continue // the topic's settings are not applied yet: next round
		}
		fp.tailChecked = true
		if !m.tier.TieredLocal(p) || p.log.LogEndOffset() != 0 {
			continue
		}
		fp.fromTier, fp.lastTiered = true, true
		parts[k] = *fp
	}
}

// buildFromTier rebuilds the state of followed partitions whose leader
// answered OFFSET_MOVED_TO_TIERED_STORAGE (see the file comment). A
// partition it could not rebuild stays marked and is retried after
// RebuildBackoff; an error means the connection is unusable.
func (f *fetcher) buildFromTier(ctx context.Context, rc *Conn, parts map[tp]followPart, keys []tp) error {
	m := f.m
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 9
	req.ReplicaID = m.cfg.ID
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
	kresp, err := rc.RoundTrip(req, 10*time.Second)
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
				m.log.Debug("earliest local offset from leader", "topic", k.topic, "partition", k.part, "leader", f.leader,
					"last_tiered", want.lastTiered, "err", kerr.ErrorForCode(rp.ErrorCode))
				f.retryLater(k, want)
				continue
			}
			if err := f.buildOne(ctx, k, want, start); err != nil {
				m.tier.BuildFailed()
				m.log.Warn("rebuild follower log from remote storage; retrying", "topic", k.topic, "partition", k.part,
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
	m := f.m
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
	if !m.tier.Enabled() {
		return errors.New("the leader tiers this partition but tiered storage is off on this broker")
	}
	ctx, cancel := context.WithTimeout(ctx, BuildAuxTimeout)
	defer cancel()
	r, segment, err := m.tier.BuildAuxState(ctx, p, leaderLocalStart-1)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if m.replPaused.Load() {
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
	p.Wake()
	fp.fromTier, fp.lastTiered, fp.truncated = false, false, true
	m.log.Info("rebuilt follower log from remote storage", "topic", k.topic, "partition", k.part, "leader", f.leader,
		"from", from, "to", r.Offset, "leader_local_start", leaderLocalStart, "segment", segment,
		"latest_epoch", p.log.LatestEpoch())
	return nil
}
