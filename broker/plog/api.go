package plog

// This file is the contract between the partition log and its users (the
// broker's handlers, later replication and the tier uploader). Keep the
// exported names stable; add, do not rename.

import (
	"errors"
	"log/slog"
	"time"

	"strata/internal/vfs"
)

// TimestampType is message.timestamp.type.
type TimestampType int8

const (
	CreateTime    TimestampType = 0
	LogAppendTime TimestampType = 1
)

// Config holds the topic-level settings the log obeys. Zero values are not
// defaults: the broker always fills every field (see DefaultConfig).
type Config struct {
	SegmentBytes       int64         // segment.bytes
	SegmentMs          int64         // segment.ms
	RetentionBytes     int64         // retention.bytes; -1 = unlimited
	RetentionMs        int64         // retention.ms; -1 = unlimited
	MaxMessageBytes    int32         // max.message.bytes (size of one record batch)
	TimestampType      TimestampType // message.timestamp.type
	IndexIntervalBytes int32         // index.interval.bytes
	SegmentIndexBytes  int32         // segment.index.bytes (max size of .index/.timeindex)
	FlushMessages      int64         // flush.messages; fsync after this many messages (math.MaxInt64 = leave to the OS)
	FlushMs            int64         // flush.ms; fsync when the oldest unflushed message is this old (math.MaxInt64 = never)
	FileDeleteDelayMs  int64         // file.delete.delay.ms; deleted segments' files are closed/removed after this delay
	// MessageTimestampBeforeMaxMs / AfterMaxMs: message.timestamp.before.max.ms,
	// message.timestamp.after.max.ms (KIP-937); only checked for CreateTime.
	MessageTimestampBeforeMaxMs int64
	MessageTimestampAfterMaxMs  int64

	// cleanup.policy: Delete lets EnforceRetention apply retention.ms and
	// retention.bytes; Compact enables the log cleaner (Clean) and refuses
	// appends of records without a key. Both may be set.
	Compact bool
	Delete  bool
	// DeleteRetentionMs is delete.retention.ms: how long tombstones stay
	// after the cleaner first saw them (their batch's delete horizon).
	DeleteRetentionMs int64
	// MinCompactionLagMs / MaxCompactionLagMs are min.compaction.lag.ms
	// and max.compaction.lag.ms.
	MinCompactionLagMs int64
	MaxCompactionLagMs int64
	// MinCleanableDirtyRatio is min.cleanable.dirty.ratio.
	MinCleanableDirtyRatio float64
}

// DefaultConfig returns Kafka's defaults.
func DefaultConfig() Config {
	return Config{
		SegmentBytes:                1 << 30,
		SegmentMs:                   7 * 24 * 3600 * 1000,
		RetentionBytes:              -1,
		RetentionMs:                 7 * 24 * 3600 * 1000,
		MaxMessageBytes:             1048588,
		TimestampType:               CreateTime,
		IndexIntervalBytes:          4096,
		SegmentIndexBytes:           10 << 20,
		FlushMessages:               1<<63 - 1,
		FlushMs:                     1<<63 - 1,
		FileDeleteDelayMs:           60000,
		MessageTimestampBeforeMaxMs: 1<<63 - 1,
		MessageTimestampAfterMaxMs:  1<<63 - 1,
		Delete:                      true,
		DeleteRetentionMs:           86400000,
		MinCompactionLagMs:          0,
		MaxCompactionLagMs:          1<<63 - 1,
		MinCleanableDirtyRatio:      0.5,
	}
}

// Options open a Log.
type Options struct {
	FS     vfs.FS
	Dir    string // the partition directory, e.g. <data-dir>/<topic>-<partition>
	Config Config
	// Now is the clock; nil means time.Now. Tests pass a fake clock.
	Now    func() time.Time
	Logger *slog.Logger
}

// AppendInfo describes a successful leader append.
type AppendInfo struct {
	FirstOffset    int64 // offset of the first record appended (or of the original, for a duplicate)
	LastOffset     int64 // offset of the last record appended
	LogAppendTime  int64 // ms; -1 unless message.timestamp.type=LogAppendTime
	LogStartOffset int64
	NumRecords     int64
	// Duplicate is true when an idempotent producer retried a batch that is
	// already in the log: nothing was written and the offsets are the
	// original ones.
	Duplicate bool
}

// FileSlice is a byte range of one segment's .log file holding whole record
// batches. File stays readable for at least FileDeleteDelayMs after its
// segment is deleted, so a slice can be sent after the log lock is dropped.
// Len == 0 means there was nothing to read.
type FileSlice struct {
	File vfs.File
	Pos  int64
	Len  int64
	// LastOffset is the offset of the last record in the slice (-1 if empty,
	// or if ReadForFetch cut it in a partial batch).
	LastOffset int64
}

// Errors. Append and Read return errors that wrap these (errors.Is), or
// errors that wrap the kerr sentinels of github.com/twmb/franz-go/pkg/kerr
// for per-request validation failures:
//
//	kerr.CorruptMessage           CRC mismatch, bad lengths, bad magic, batch not well formed
//	kerr.MessageTooLarge          batch larger than max.message.bytes
//	kerr.InvalidRecord            records inside a batch that do not parse
//	kerr.UnsupportedCompressionType unknown codec in attributes
//	kerr.InvalidTimestamp         CreateTime outside message.timestamp.{before,after}.max.ms
//	kerr.OutOfOrderSequenceNumber idempotent sequence gap
//	kerr.InvalidProducerEpoch     stale producer epoch
//	kerr.UnsupportedForMessageFormat magic < 2
var (
	ErrOffsetOutOfRange = errors.New("offset out of range")
	ErrClosed           = errors.New("log closed")
)

// The Log type (in log.go) has these methods; all are safe for concurrent
// use (one mutex per log guards mutable state; reads of sealed data happen
// without it where possible):
//
//	Open(Options) (*Log, error)                  // recovers: CRC-checks the tail after the recovery point, truncates torn/corrupt batches, rebuilds bad indexes, loads producer state
//	(*Log).Append(records []byte, leaderEpoch int32) (AppendInfo, error)
//	        // leader append: validates every batch in records (a Produce partition's Records), assigns offsets,
//	        // stamps partitionLeaderEpoch, applies LogAppendTime (recomputing the CRC), checks idempotent
//	        // sequences, writes to the active segment (one write(2)), rolls first if needed.
//	(*Log).AppendReplicated(records []byte) (lastOffset int64, err error)
//	        // follower append: batches keep their offsets and epochs (issue: replication)
//	(*Log).Read(offset, maxOffset int64, maxBytes int, minOne bool) (FileSlice, error)
//	        // whole batches from the batch containing offset, ending before maxOffset (exclusive, e.g. the
//	        // high watermark), at most maxBytes unless minOne and the first batch is larger (KIP-74).
//	        // ErrOffsetOutOfRange if offset < LogStartOffset or > LogEndOffset. One segment per call.
//	(*Log).LogStartOffset() int64
//	(*Log).LogEndOffset() int64
//	(*Log).OffsetForTimestamp(ts int64) (offset, timestamp int64, leaderEpoch int32, ok bool)
//	        // first batch-record offset whose timestamp >= ts (ListOffsets); ok=false if none
//	(*Log).MaxTimestamp() (offset, timestamp int64, leaderEpoch int32) // KIP-734; offset -1 if empty
//	(*Log).EndOffsetForEpoch(epoch int32) (leaderEpoch int32, endOffset int64) // OffsetForLeaderEpoch semantics
//	(*Log).LatestEpoch() int32  // -1 if none
//	(*Log).DeleteRecordsBefore(offset int64) (logStartOffset int64, err error) // DeleteRecords; persisted
//	(*Log).Truncate(offset int64) error          // drop everything >= offset (followers)
//	(*Log).EnforceRetention() (deletedSegments int, err error)  // retention.ms / retention.bytes (cleanup.policy delete); never deletes the active segment
//	(*Log).EnforceTieredRetention(TieredRetention) (int, error) // local.retention.* of a tiered partition; only segments wholly uploaded
//	(*Log).OpenSealedSegment(base int64) (*SealedSegment, error) // a sealed, flushed segment's files for the tier uploader (remote.go)
//	(*Log).Clean() (CleanStats, error)            // one log-cleaner pass when cleanup.policy has compact and the dirty ratio / lag rules ask for it
//	(*Log).CleanBelow(maxOffset int64) (CleanStats, error) // Clean, never cleaning at or above maxOffset (the high watermark)
//	(*Log).MaybeRoll() error                      // roll by segment.ms even without appends
//	(*Log).SetConfig(Config)
//	(*Log).Size() int64                           // bytes of all segments
//	(*Log).Segments() []SegmentInfo               // for DescribeLogDirs and the tier uploader
//	(*Log).Flush() error
//	(*Log).Close() error                          // flushes, writes producer snapshot, clean shutdown
//	(*Log).Delete() error                         // closes and removes the directory
//	(*Log).ProducerState(producerID int64) (epoch int16, lastSeq int32, ok bool)
//	(*Log).AppendControl(producerID int64, epoch int16, m EndTxnMarker, leaderEpoch int32, transactionVersion int16) (AppendInfo, error)
//	        // a transaction marker from the coordinator (WriteTxnMarkers); fences stale epochs (txn.go)
//	(*Log).LastStableOffset(hw int64) int64       // min(first unstable offset, hw); read_committed reads below it
//	(*Log).OnHighWatermark(hw int64)              // the high watermark moved: ended transactions below it stop holding the LSO
//	(*Log).FirstUnstableOffset() int64            // first offset of the oldest unfinished transaction, -1 if none
//	(*Log).AbortedTransactions(fetchOffset, upperBound int64) []AbortedTxn // for read_committed fetches
//	(*Log).OpenTransaction(producerID int64) (firstOffset int64, ok bool)
//	(*Log).Producers() []ProducerInfo            // DescribeProducers: epoch, last sequence, open transaction
//	(*Log).ExpireProducers(maxAgeMs int64)        // producer.id.expiration.ms; keeps producers in a transaction

// SegmentInfo describes one segment.
type SegmentInfo struct {
	BaseOffset   int64
	NextOffset   int64 // one past the last offset in the segment
	Size         int64
	MaxTimestamp int64
	Sealed       bool
}

// CleanStats describes one Clean call.
type CleanStats struct {
	// Cleaned is true when a pass ran (the log was eligible).
	Cleaned bool
	// Aborted is true when the log changed under the pass (truncation,
	// retention) and its result was thrown away; a later pass retries.
	Aborted bool
	// DirtyRatio is the cleanable (dirty) bytes over clean + cleanable
	// bytes, as the pass found them.
	DirtyRatio float64
	// FirstDirtyOffset and EndOffset bound the dirty section whose keys
	// were collected; after the pass the log is clean below EndOffset.
	// When no pass ran, FirstDirtyOffset is still the cleaner checkpoint
	// the log was measured from (the log is clean below it).
	FirstDirtyOffset int64
	EndOffset        int64
	SegmentsCleaned  int // old segments replaced
	SegmentsWritten  int // cleaned segments swapped in
	BytesRead        int64
	BytesWritten     int64
	RecordsRead      int64
	RecordsKept      int64
	// BatchesSkipped counts the batches kept as they were because they
	// could not be read within the bounds on memory (clean_stream.go).
	BatchesSkipped int64
}
