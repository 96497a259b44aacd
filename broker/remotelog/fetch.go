package remotelog

// Remote reads of tiered storage: a consumer's fetch at an offset below
// the local log start of a partition whose topic has
// remote.storage.enable=true, and which the remote index holds (a
// COPY_SEGMENT_FINISHED segment), is served from the bucket through the
// broker's one tier.Reader (a cache of .log chunks bounded by
// remote.log.reader.cache.size.bytes, of index objects bounded by
// remote.log.index.file.cache.total.size.bytes, and
// remote.log.reader.readahead.chunks chunks of read-ahead) after the
// partition's local evaluation, outside any partition lock, within
// remoteReadTimeout. The bytes stay in the Reader's chunks (pinned) and
// are written from there to the connection, in place of their marker in
// the encoded response as local slices are (network/sendfile.go), so they are
// not copied in the broker; the chunks are released once the response is
// written. A fetch with a remote partition answers at
// once, without long polling. A missing or corrupt object, or a failing
// bucket, gives that partition KAFKA_STORAGE_ERROR (Kafka's answer to a
// failed remote read); the other partitions of the fetch are unaffected.
// Followers (replica fetches) get OFFSET_MOVED_TO_TIERED_STORAGE below
// the local log start instead, and rebuild from the local tail
// (follower.go).
//
// ListOffsets by timestamp searches the remote log first, as Kafka does
// (remote segments hold the older records): the first readable segment
// at or after the log start whose max timestamp reaches the timestamp
// (index.Index.SegmentForTimestamp), then the Reader's search in it
// (tier.Reader.OffsetForTimestamp), the next such segment when it holds
// no record at or after the log start; once the candidate segment starts
// at or above the local log start the local log answers (it holds the
// same records).
//
// Metrics: kafka_server_brokertopicmetrics_remotefetchbytes_total,
// _remotefetchrequests_total (partition reads) and
// _remotefetcherrors_total (Kafka's RemoteFetch*); the histogram
// kafka_log_remote_remotelogmanager_remotelogreaderfetchrateandtimems of
// the time a partition's remote read takes, in milliseconds as Kafka's
// RemoteLogReaderFetchRateAndTimeMs; strata_remote_log_reader_cache_hits_total
// and _misses_total (chunk and index lookups found in the cache, or
// waiting for a GET), and the gauges
// strata_remote_log_reader_cache_size_bytes and
// strata_remote_log_reader_index_cache_size_bytes.

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"

	"strata/broker/plog"
	"strata/index"
	"strata/tier"
)

// remoteReadTimeout bounds the remote read of one partition of a fetch.
const remoteReadTimeout = 10 * time.Second

// tierRead is the broker's remote reader and its metrics.
type tierRead struct {
	reader                           *tier.Reader
	fetchBytes, fetchReqs, fetchErrs prometheus.Counter
	latency                          prometheus.Histogram // ms
}

func (rm *Manager) newTierRead(store tier.ObjectStore, reg prometheus.Registerer) *tierRead {
	r := tier.NewReader(tier.ReaderConfig{
		Store:           store,
		CacheBytes:      rm.cfg.RemoteLogReaderCacheSizeBytes,
		IndexCacheBytes: rm.cfg.RemoteLogIndexFileCacheTotalSizeBytes,
		ReadAhead:       rm.cfg.RemoteLogReaderReadaheadChunks,
		Next: func(m *index.SegmentMetadata) (index.SegmentMetadata, bool) {
			next, err := rm.idx.SegmentForOffset(m.Partition, m.EndOffset+1)
			return next, err == nil
		},
	})
	tr := &tierRead{
		reader:     r,
		fetchBytes: mRemotefetchbytesTotal.NewCounter(),
		fetchReqs:  mRemotefetchrequestsTotal.NewCounter(),
		fetchErrs:  mRemotefetcherrorsTotal.NewCounter(),
		latency:    mRemotelogreaderfetchrateandtimems.NewHistogram(),
	}
	stat := func(f func(tier.ReaderStats) int64) func() float64 {
		return func() float64 { return float64(f(r.Stats())) }
	}
	reg.MustRegister(tr.fetchBytes, tr.fetchReqs, tr.fetchErrs, tr.latency,
		mReaderCacheHitsTotal.NewCounterFunc(stat(func(st tier.ReaderStats) int64 { return st.Hits })),
		mReaderCacheMissesTotal.NewCounterFunc(stat(func(st tier.ReaderStats) int64 { return st.Misses })),
		mReaderCacheSizeBytes.NewGaugeFunc(stat(func(st tier.ReaderStats) int64 { return st.CacheBytes }), nil),
		mReaderIndexCacheSizeBytes.NewGaugeFunc(stat(func(st tier.ReaderStats) int64 { return st.IndexBytes }), nil),
	)
	return tr
}

// RemoteReadable reports whether the partition's topic is tiered
// (remote.storage.enable=true) on a broker with tiered storage on.
func (rm *Manager) RemoteReadable(p Partition) bool {
	if rm == nil {
		return false
	}
	rm.mu.Lock()
	tt, ok := rm.settings[p]
	rm.mu.Unlock()
	return ok && tt.remote
}

// RemoteNotReady reports whether the partition is tiered while its index
// is still to be refreshed from the bucket (its first refresh since this
// broker opened it: manager.go): its remote log is unknown, so what
// depends on it (the earliest offset, reads below the local log start)
// is answered REPLICA_NOT_AVAILABLE, which clients retry, as Kafka does
// while its remote log metadata cache is not initialised.
func (rm *Manager) RemoteNotReady(p Partition) bool {
	if !rm.RemoteReadable(p) {
		return false
	}
	rm.mu.Lock()
	defer rm.mu.Unlock()
	return !rm.fresh[p]
}

// RemoteLogStart is the partition's remote log start, if it has one, or
// the log start offset DeleteRecords set when that is higher.
func (rm *Manager) RemoteLogStart(p Partition) (int64, bool) {
	if !rm.RemoteReadable(p) {
		return 0, false
	}
	tp := tierPartition(p)
	start, ok, err := rm.idx.LogStart(tp)
	if err != nil {
		rm.log.Warn("remote index: log start", "topic", p.Topic(), "partition", p.Index(), "err", err)
		return 0, false
	}
	// DeleteRecords below the local log start: nothing below it is read.
	if ok {
		if ls, have, err := rm.idx.LogStartOffset(tp); err == nil && have && ls > start {
			start = ls
		}
	}
	return start, ok
}

// GlobalLogStart is the partition's log start offset as Kafka's leader
// tells its followers: the local log start, or for a tiered partition the
// lower remote log start (raised by DeleteRecords); -1, which followers
// ignore, while a tiered partition's remote index is still being rebuilt.
func (rm *Manager) GlobalLogStart(p Partition) int64 {
	if !rm.RemoteReadable(p) {
		return p.Log().LogStartOffset() // the common case: no index lookup
	}
	if rm.RemoteNotReady(p) {
		return -1
	}
	return rm.LogStart(p)
}

// logStart is the partition's log start offset: the local log start, or
// the remote log start when that is lower (a tiered partition).
func (rm *Manager) LogStart(p Partition) int64 {
	start := p.Log().LogStartOffset()
	if rs, ok := rm.RemoteLogStart(p); ok && rs < start {
		return rs
	}
	return start
}

// ReadRemote serves a fetch at offset from the bucket: the records, pinned
// until released, or ok=false when the remote log does not hold offset,
// or an error code.
func (rm *Manager) ReadRemote(p Partition, offset int64, maxBytes int) (recs tier.Pinned, ok bool, code int16) {
	ctx, cancel := context.WithTimeout(rm.ctx, remoteReadTimeout)
	defer cancel()
	tr := rm.read
	start := time.Now()
	defer func() {
		tr.fetchReqs.Inc()
		tr.latency.Observe(float64(time.Since(start)) / float64(time.Millisecond))
		tr.fetchBytes.Add(float64(recs.Len))
		if code != 0 {
			tr.fetchErrs.Inc()
		}
	}()
	tp := tierPartition(p)
	for range 64 { // segments emptied by compaction hold no batch at offset: try the next
		m, err := rm.idx.SegmentForOffset(tp, offset)
		if errors.Is(err, index.ErrNotFound) {
			return tier.Pinned{}, false, 0
		}
		if err != nil {
			rm.log.Warn("remote index: segment for offset", "topic", p.Topic(), "partition", p.Index(), "offset", offset, "err", err)
			return tier.Pinned{}, true, kerr.KafkaStorageError.Code
		}
		b, err := tr.reader.ReadPinned(ctx, &m, offset, maxBytes)
		if err != nil && rm.segmentMissing(ctx, p, &m, err) {
			continue // resolved again without it
		}
		if err != nil {
			rm.warnings.Warn(rm.log, "remote read failed", "topic", p.Topic(), "partition", p.Index(), "offset", offset,
				"segment", m.SegmentID.String(), "err", err)
			return tier.Pinned{}, true, kerr.KafkaStorageError.Code
		}
		if b.Len > 0 {
			return b, true, 0
		}
		offset = m.EndOffset + 1
	}
	return tier.Pinned{}, true, kerr.KafkaStorageError.Code
}

// RemoteLogEnd is the last offset of the partition's uploaded segments
// and its leader epoch, if it has any (ListOffsets LATEST_TIERED).
func (rm *Manager) RemoteLogEnd(p Partition) (end int64, epoch int32, ok bool) {
	if !rm.RemoteReadable(p) {
		return 0, -1, false
	}
	tp := tierPartition(p)
	end, ok, err := rm.idx.LogEnd(tp)
	if err == nil && ok {
		epoch = -1
		if m, err := rm.idx.SegmentForOffset(tp, end); err == nil && len(m.LeaderEpochs) > 0 {
			epoch = m.LeaderEpochs[len(m.LeaderEpochs)-1].Epoch
		}
		return end, epoch, true
	}
	if err != nil {
		rm.log.Warn("remote index: log end", "topic", p.Topic(), "partition", p.Index(), "err", err)
	}
	return 0, -1, false
}

// RemoteOffsetForTimestamp is the remote part of ListOffsets by timestamp
// (see the top of this file): the first record at or after the log start
// whose timestamp is >= ts, with its timestamp and leader epoch; found is
// false when the remote log has none below the local log start (the
// local log answers then); a failed read is an error code.
func (rm *Manager) RemoteOffsetForTimestamp(p Partition, ts int64) (off, rts int64, epoch int32, found bool, code int16) {
	return rm.RemoteOffsetForTimestampCharged(p, ts, nil)
}

// RemoteOffsetForTimestampCharged is RemoteOffsetForTimestamp charging
// what decompressing the batch that holds the answer takes to mem
// (plog/records.go).
func (rm *Manager) RemoteOffsetForTimestampCharged(p Partition, ts int64, mem plog.Memory) (off, rts int64, epoch int32, found bool, code int16) {
	from, ok := rm.RemoteLogStart(p)
	if !ok {
		return -1, -1, -1, false, 0
	}
	localStart := p.Log().LogStartOffset()
	ctx, cancel := context.WithTimeout(plog.ContextWithMemory(rm.ctx, mem), remoteReadTimeout)
	defer cancel()
	tp := tierPartition(p)
	for range 64 { // segments whose records at or after from are all older: try the next
		m, err := rm.idx.SegmentForTimestamp(tp, ts, from)
		if errors.Is(err, index.ErrNotFound) {
			return -1, -1, -1, false, 0
		}
		if err != nil {
			rm.log.Warn("remote index: segment for timestamp", "topic", p.Topic(), "partition", p.Index(), "timestamp", ts, "err", err)
			return -1, -1, -1, false, kerr.KafkaStorageError.Code
		}
		if m.StartOffset >= localStart {
			return -1, -1, -1, false, 0
		}
		off, rts, epoch, ok, err := rm.read.reader.OffsetForTimestamp(ctx, &m, ts, from)
		if err != nil && rm.segmentMissing(ctx, p, &m, err) {
			continue
		}
		if err != nil {
			rm.warnings.Warn(rm.log, "remote read by timestamp failed", "topic", p.Topic(), "partition", p.Index(), "timestamp", ts,
				"segment", m.SegmentID.String(), "err", err)
			return -1, -1, -1, false, kerr.KafkaStorageError.Code
		}
		if ok {
			return off, rts, epoch, true, 0
		}
		from = m.EndOffset + 1
	}
	return -1, -1, -1, false, kerr.KafkaStorageError.Code
}

// segmentMissing handles a remote read that found an object of a
// finished segment missing. When the bucket confirms it and other
// segments cover its offsets (a frozen former leader's upload beside the
// new leader's: tier.CheckMissing), the segment is marked missing in the
// index, which from then on resolves its offsets through them, and the
// leader's next copy pass deletes it (tier.Uploader.RepairMissing); the
// broker that marks it reports it once, at WARN. When nothing else holds
// its records, reads of them answer KAFKA_STORAGE_ERROR (and serve again
// should the object come back), reported at most once a minute. It
// reports whether the read should be resolved again.
func (rm *Manager) segmentMissing(ctx context.Context, p Partition, m *index.SegmentMetadata, err error) bool {
	if !errors.Is(err, tier.ErrNotFound) {
		return false
	}
	if !rm.missingChecks.due(m.SegmentID) {
		return false // checked a moment ago: a storage error, without the bucket round trips
	}
	gone, marked, first, cerr := tier.CheckMissing(ctx, rm.store, rm.idx, m)
	args := []any{"topic", p.Topic(), "partition", p.Index(), "segment", m.SegmentID.String(), "start", m.StartOffset, "end", m.EndOffset,
		"upload_epoch", m.UploadEpoch, "uploaded_by", m.BrokerID, "err", err}
	switch {
	case cerr != nil:
		rm.log.Debug("check a remote segment's objects", "topic", p.Topic(), "partition", p.Index(), "segment", m.SegmentID.String(), "err", cerr)
	case first:
		rm.log.Warn("remote segment's objects are missing from the bucket; its offsets are read from the other segments that hold them", args...)
	case gone && !marked:
		rm.warnings.Warn(rm.log, "remote segment's objects are missing from the bucket, and no other segment holds its records", args...)
	}
	return marked
}

// missingChecks spaces the checks of one segment whose objects a read
// found missing (a manifest GET, HEADs and a scan of the partition's
// index each) to one per missingCheckEvery, since consumers retry a
// failed fetch about every 100 ms.
type missingChecks struct {
	mu   sync.Mutex
	last map[index.UUID]time.Time
}

const missingCheckEvery = 30 * time.Second

// due reports whether a check of id may run now, and if so records it.
func (c *missingChecks) due(id index.UUID) bool {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.last == nil || len(c.last) > 10000 {
		c.last = map[index.UUID]time.Time{}
	}
	if t, ok := c.last[id]; ok && now.Sub(t) < missingCheckEvery {
		return false
	}
	c.last[id] = now
	return true
}
