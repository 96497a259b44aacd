package broker

// Remote reads of tiered storage: a consumer's fetch at an offset below
// the local log start of a partition whose topic has
// remote.storage.enable=true, and which the remote index holds (a
// COPY_SEGMENT_FINISHED segment), is served from the bucket
// (tier.ReadRemote) after the partition's local evaluation, outside any
// partition lock, within remoteReadTimeout. The bytes go into the
// response's records field as they are (no sendfile). A fetch with a
// remote partition answers at once, without long polling. A missing or
// corrupt object, or a failing bucket, gives that partition
// KAFKA_STORAGE_ERROR (Kafka's answer to a failed remote read); the other
// partitions of the fetch are unaffected. Followers (replica fetches)
// get OFFSET_MOVED_TO_TIERED_STORAGE below the local log start instead,
// and rebuild from the local tail (tier_follower.go).

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"strata/index"
	"strata/tier"
)

// remoteReadTimeout bounds the remote read of one partition of a fetch.
const remoteReadTimeout = 10 * time.Second

// remoteReadable reports whether the partition's topic is tiered
// (remote.storage.enable=true) on a broker with tiered storage on.
func (s *Server) remoteReadable(p *partition) bool {
	if s.tier == nil {
		return false
	}
	s.tier.mu.Lock()
	tt, ok := s.tier.settings[p]
	s.tier.mu.Unlock()
	return ok && tt.remote
}

// remoteNotReady reports whether the partition is tiered while the index
// is still to be rebuilt from the bucket (a new or wiped data directory,
// until the first tier pass ends): its remote log is unknown, so what
// depends on it (the earliest offset, reads below the local log start)
// is answered REPLICA_NOT_AVAILABLE, which clients retry, as Kafka does
// while its remote log metadata cache is not initialised.
func (s *Server) remoteNotReady(p *partition) bool {
	if !s.remoteReadable(p) {
		return false
	}
	s.tier.mu.Lock()
	defer s.tier.mu.Unlock()
	return !s.tier.ready
}

// remoteLogStart is the partition's remote log start, if it has one, or
// the log start offset DeleteRecords set when that is higher.
func (s *Server) remoteLogStart(p *partition) (int64, bool) {
	if !s.remoteReadable(p) {
		return 0, false
	}
	tp := tierPartition(p)
	start, ok, err := s.tier.idx.LogStart(tp)
	if err != nil {
		s.log.Warn("remote index: log start", "topic", p.topic, "partition", p.index, "err", err)
		return 0, false
	}
	// DeleteRecords below the local log start: nothing below it is read.
	if ok {
		if ls, have, err := s.tier.idx.LogStartOffset(tp); err == nil && have && ls > start {
			start = ls
		}
	}
	return start, ok
}

// readRemote serves a fetch at offset from the bucket: the records, or
// ok=false when the remote log does not hold offset, or an error code.
func (s *Server) readRemote(p *partition, offset int64, maxBytes int) (recs []byte, ok bool, code int16) {
	ctx, cancel := context.WithTimeout(s.ctx, remoteReadTimeout)
	defer cancel()
	tp := tierPartition(p)
	for range 64 { // segments emptied by compaction hold no batch at offset: try the next
		m, err := s.tier.idx.SegmentForOffset(tp, offset)
		if errors.Is(err, index.ErrNotFound) {
			return nil, false, 0
		}
		if err != nil {
			s.log.Warn("remote index: segment for offset", "topic", p.topic, "partition", p.index, "offset", offset, "err", err)
			return nil, true, kerr.KafkaStorageError.Code
		}
		b, err := tier.ReadRemote(ctx, s.tier.store, &m, offset, maxBytes)
		if err != nil {
			s.log.Warn("remote read failed", "topic", p.topic, "partition", p.index, "offset", offset,
				"segment", m.SegmentID.String(), "err", err)
			return nil, true, kerr.KafkaStorageError.Code
		}
		if len(b) > 0 {
			return b, true, 0
		}
		offset = m.EndOffset + 1
	}
	return nil, true, kerr.KafkaStorageError.Code
}

// fetchRemote does the remote reads a fetch's evaluation left, one
// goroutine per partition.
func (s *Server) fetchRemote(results []fetchResult) {
	var wg sync.WaitGroup
	for i := range results {
		r := &results[i]
		if !r.remote {
			continue
		}
		p := s.partition(r.t.key.topic, r.t.key.part)
		if p == nil {
			r.code = kerr.NotLeaderForPartition.Code
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			recs, ok, code := s.readRemote(p, r.t.fetchOffset, r.remoteLimit)
			switch {
			case code != 0:
				r.code = code
			case !ok: // deleted from the bucket meanwhile
				r.code = kerr.OffsetOutOfRange.Code
			default:
				r.records = recs
			}
		}()
	}
	wg.Wait()
}

// remoteLogEnd is the last offset of the partition's uploaded segments
// and its leader epoch, if it has any (ListOffsets LATEST_TIERED).
func (s *Server) remoteLogEnd(p *partition) (end int64, epoch int32, ok bool) {
	if !s.remoteReadable(p) {
		return 0, -1, false
	}
	tp := tierPartition(p)
	end, ok, err := s.tier.idx.LogEnd(tp)
	if err == nil && ok {
		epoch = -1
		if m, err := s.tier.idx.SegmentForOffset(tp, end); err == nil && len(m.LeaderEpochs) > 0 {
			epoch = m.LeaderEpochs[len(m.LeaderEpochs)-1].Epoch
		}
		return end, epoch, true
	}
	if err != nil {
		s.log.Warn("remote index: log end", "topic", p.topic, "partition", p.index, "err", err)
	}
	return 0, -1, false
}
