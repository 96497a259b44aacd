package broker

// The replica fetcher's side of a follower of a tiered partition: its
// start at the leader's last tiered offset (KIP-1023) and its rebuild
// from the leader's local tail on OFFSET_MOVED_TO_TIERED_STORAGE (Kafka's
// ReplicaFetcherTierStateMachine). The bucket's part, the remote segment
// and its leader-epoch checkpoint and producer snapshot, is
// remotelog.Manager.BuildAuxState; the file comment of
// remotelog/follower.go describes the whole.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/remotelog"
)

// tierRebuildBackoff is how long a partition whose rebuild failed waits
// before the next attempt (its fetches wait with it; the fetcher's other
// partitions do not).
const tierRebuildBackoff = remotelog.RebuildBackoff

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
					s.tier.BuildFailed()
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
	r, m, err := s.tier.BuildAuxState(ctx, tierPart{p}, leaderLocalStart-1)
	if err != nil {
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
