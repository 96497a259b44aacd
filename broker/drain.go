package broker

// Draining for scale to zero (strata admin cluster drain), and the idle
// segment roll that keeps the bucket close behind the brokers' disks.
//
// strata admin cluster drain sets the cluster-wide dynamic config
// strata.drain.requested.ms to the time it asks (a time in the future is
// refused with INVALID_CONFIG, and ignored if found stored; see
// config.CheckStrataConfigs). A broker started before that time is
// draining: it refuses produce requests with
// NOT_ENOUGH_REPLICAS (retriable, so producers wait rather than fail) and
// at every tier pass rolls the active segment of each tiered partition it
// leads as soon as everything in it is committed, so that the pass uploads
// it with its producer snapshot and leader-epoch checkpoint. Once every
// tiered partition's last tiered offset is its log end (ListOffsets -5
// against -1), nothing exists only on a broker's disk and the brokers may
// stop. strata admin cluster resume removes the config; a broker started
// after the drain was asked ignores it, so restarted brokers accept
// writes at once.
//
// Transactions go on ending while a broker drains: only produce requests
// are refused, so a producer's EndTxn, the coordinator's writes to
// __transaction_state (its own appends) and the markers (WriteTxnMarkers)
// are written, and the coordinator keeps aborting timed-out
// transactions. A partition with an open transaction uploads only up to
// its last stable offset; strata admin cluster drain waits until no
// transaction is open and the markers are uploaded, then for the
// transaction state in the bucket (txn_snapshot.go).
//
// remote.log.manager.segment.idle.roll.ms does the same roll for a
// tiered partition whose active segment has had no append for that long,
// so that a quiet partition's last records reach the bucket too.
//
// Followers roll too, at the same point: a replica rolls only when it
// holds everything committed (log end = high watermark) and nothing was
// appended for the interval, so leader and followers roll at the same
// offset, as their size-based rolls do. A follower that comes to lead
// must not hold a segment that starts where an uploaded one starts and
// ends later: the remote index keys segments by base offset, and that
// segment could not be uploaded.

import (
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/config"
	"strata/controller"
)

// DrainConfig is the cluster-wide dynamic config strata admin cluster
// drain sets (milliseconds since the epoch; -1: none).
const DrainConfig = config.DrainRequested

// updateDraining recomputes whether this broker drains, from md. Called by
// reconcile.
func (s *Server) updateDraining(md *controller.Metadata) {
	v, _, _ := s.resolver(md).Lookup(DrainConfig)
	at, err := strconv.ParseInt(v, 10, 64)
	draining := err == nil && config.DrainInForce(at, s.startedMs, time.Now())
	if err == nil && at > time.Now().Add(config.DrainClockSkew).UnixMilli() && s.futureDrainWarned.Swap(at) != at {
		s.log.Warn("ignoring a drain marker set in the future", "config", DrainConfig, "requested_ms", at)
	}
	if s.draining.Swap(draining) != draining {
		if draining {
			s.log.Info("draining for scale to zero: writes refused, active segments of tiered partitions rolled and uploaded", "requested_ms", at)
			if s.tier != nil {
				s.kickTier()
			}
		} else {
			s.log.Info("draining ended: writes accepted")
		}
	}
}

// drainProduce answers a produce to a draining broker; true if it did.
func (s *Server) drainProduce(sp *kmsg.ProduceResponseTopicPartition, setErr func(*kmsg.ProduceResponseTopicPartition, int16, string)) bool {
	if !s.draining.Load() {
		return false
	}
	setErr(sp, kerr.NotEnoughReplicas.Code, "the cluster is drained for scale to zero (strata admin cluster resume accepts writes)")
	return true
}

// rollForUpload rolls the active segment of a tiered partition when this
// broker is draining, or when the segment has been idle for
// remote.log.manager.segment.idle.roll.ms, provided all of it is
// committed (below the high watermark), so that the leader's pass uploads
// it. Called by the tier pass, for leaders and followers.
func (s *Server) rollForUpload(p *partition) {
	idle := s.cfg.RemoteLogManagerSegmentIdleRollMs
	if s.draining.Load() {
		idle = 0
	} else if idle < 0 {
		return
	}
	if p.Log().LogEndOffset() != p.HW() {
		return // records above the high watermark could not be uploaded yet
	}
	rolled, err := p.Log().RollIdle(idle)
	switch {
	case err != nil:
		s.log.Warn("roll the active segment for upload", "topic", p.Topic(), "partition", p.Index(), "err", err)
	case rolled:
		s.log.Debug("rolled the active segment for upload", "topic", p.Topic(), "partition", p.Index(),
			"draining", s.draining.Load(), "idle", time.Duration(idle)*time.Millisecond)
	}
}
