// Package plog is a partition's local log: record batches in segments with
// sparse offset and time indexes, in Kafka's on-disk layout, plus recovery,
// roll, retention, flush policy, producer state and the leader-epoch cache.
//
// # Files in a partition directory
//
//	<base>.log            record batches (magic v2) stored verbatim, offsets assigned
//	<base>.index          sparse offset index
//	<base>.timeindex      sparse time index
//	<base>.txnindex       aborted transactions whose ABORT marker is in the segment (txnindex.go); only when there is one
//	<offset>.snapshot     producer state (idempotence, open transactions) as of offset (producerstate_snapshot.go)
//	leader-epoch-checkpoint  leader epochs and their start offsets (epochcache.go)
//	log-checkpoint        recovery point, log start offset, clean-shutdown flag (checkpoint.go)
//	cleaner-offset-checkpoint  the log cleaner's first dirty offset: lines "0" (version) and the offset (clean.go)
//	log-reset             a committed ResetTo not yet finished: the new start offset, epochs and producer snapshot (reset.go)
//	<base>.*.cleaned, <base>.*.swap  a cleaned segment being written / swapped in (clean_swap.go)
//
// <base> and <offset> are 20-digit zero-padded decimal offsets; a segment's
// base is the offset of its first batch (or the log end when it was rolled).
// Kafka's tools (kafka-dump-log.sh) read .log, .index, .timeindex,
// .txnindex and .snapshot as is.
//
// A record batch (all integers big-endian):
//
//	int64 baseOffset, int32 batchLength (bytes after this field),
//	int32 partitionLeaderEpoch, int8 magic (2), uint32 crc (CRC-32C of
//	everything from attributes to the end), int16 attributes (bits 0-2
//	codec, 3 timestamp type, 4 transactional, 5 control), int32
//	lastOffsetDelta, int64 baseTimestamp, int64 maxTimestamp, int64
//	producerId, int16 producerEpoch, int32 baseSequence, int32 recordCount,
//	records.
//
// .index holds 8-byte entries (int32 offset relative to the base, int32
// byte position in .log); .timeindex holds 12-byte entries (int64
// timestamp, int32 relative offset). As in Kafka, when more than
// index.interval.bytes were appended since the last entry, the next batch
// is indexed: the offset index maps the batch's last offset to its
// position, and the time index gets (max timestamp so far, last offset of
// the batch holding it) if that timestamp is newer than its last entry.
// On seal and close the time index gets a final entry with the segment's
// max timestamp. Nothing is preallocated: index files are always exactly N
// entries long. The active segment keeps its entries in memory and writes
// them when flushed; sealed, flushed segments are looked up in the files.
// An index may rightly be empty: a segment whose batches all start within
// its first index.interval.bytes (one large batch) has no entry. Entries
// read from disk are trusted only where a lookup lands: the entry it uses
// must point at a sane batch header whose last offset is the entry's, else
// the lookup starts from the segment's first batch (a corrupt entry costs a
// scan, never a wrong answer).
//
// log-checkpoint is text: four lines "0" (version), recovery point, log
// start offset, and 1 or 0 for a clean shutdown. It is replaced crash-safely
// (temp file, fsync, rename, fsync directory) at Open, after a roll's flush,
// on DeleteRecords, retention and truncation, and by Close with clean=1.
//
// # Appends
//
// Append validates every batch as Kafka's LogValidator does (batch.go,
// validate.go): framing, magic, CRC-32C, codec, max.message.bytes, a
// record count equal to lastOffsetDelta+1, a base sequence for an
// idempotent batch, then every record, read once: exactly the counted
// records, offset deltas 0..count-1, every varint length inside its
// record, no bytes after the last record (INVALID_RECORD otherwise), and
// each record timestamp within message.timestamp.{before,after}.max.ms
// for CreateTime (INVALID_TIMESTAMP, with RecordErrors). A compressed
// batch is read as a decompression stream that fails past 256 MiB, and
// one decompression per core, between two and eight, runs at once in the
// process (codec.go). The batch's maxTimestamp is set to its records'
// largest, as Kafka does (the CRC recomputed if that changes it). Append
// then checks idempotent sequences, assigns offsets and the leader epoch
// in place (outside the CRC; LogAppendTime also sets the attribute bit
// and maxTimestamp and recomputes the CRC), and writes the whole produce
// with one write(2). A write that fails is
// truncated away; on a full disk (ENOSPC, EDQUOT) the append is refused
// with an error wrapping ErrNoSpace and KAFKA_STORAGE_ERROR and the log
// stays usable, so that appends resume when space returns (see Storage
// failures). Control batches from producers are refused.
// A segment rolls before an append that would
// take it past segment.bytes, past the index size, beyond 2^31 relative
// offsets, or when segment.ms has passed since its first batch's max
// timestamp (Kafka's rule; MaybeRoll applies it without appends). A roll
// writes a producer snapshot at the new base synchronously and flushes the
// sealed segment asynchronously, after which the recovery point moves to
// the new base.
//
// # Transactions
//
// A producer's first transactional batch opens its transaction in the
// partition at that batch's first offset; while it is open, a
// non-transactional batch of the producer is INVALID_TXN_STATE. The
// coordinator's transaction marker, a control batch (control.go) appended
// with AppendControl (or replicated), ends it: a marker with an older
// producer epoch is INVALID_PRODUCER_EPOCH, with an older coordinator
// epoch TRANSACTION_COORDINATOR_FENCED. An ABORT of a non-empty
// transaction adds an entry to the .txnindex of the segment it lands in
// (producer id, first offset, marker offset, and the last stable offset
// at that point), which AbortedTransactions searches as Kafka's
// collectAbortedTransactions does; a read_committed fetch reads with
// ReadCommittedForFetch, which also gives the offset that bounds that
// search for its slice (read_committed.go). LastStableOffset(hw) is min(first
// offset of the oldest transaction open or ended with its marker not yet
// below hw, hw). Open transactions are in the producer snapshots (Kafka's
// currentTxnFirstOffset and coordinatorEpoch fields); producer expiry
// never drops a producer with an open transaction (producerstate_txn.go).
//
// # Durability
//
// A process crash (kill -9) loses nothing that Append acknowledged: the
// bytes were handed to the operating system before Append returned, and
// recovery keeps every whole, CRC-valid batch it finds. An operating-system
// crash or power loss keeps only what was fsynced: everything below the
// recovery point. Data is fsynced when flush.messages records are unflushed
// (in the appending call), when flush.ms has passed since the last flush
// (on the next append, or MaybeFlush, which the broker calls periodically),
// when a segment is rolled (asynchronously), by Flush, and by Close. With
// Kafka's defaults (both unlimited) an OS crash may lose the active
// segment's unflushed tail; replication is what protects it, as in Kafka.
// With flush.messages=1 an append returns only once fsynced, and its
// error (the flush failed) means it was not acknowledged; a retried
// duplicate of an idempotent batch is flushed the same way before it is
// acknowledged. Truncate returns once the truncation is durable (the cut
// segment and the directory fsynced, the recovery point lowered in the
// checkpoint), so a power loss never brings a truncated tail back.
//
// # Storage failures
//
// A failed fsync (of a segment, an index, the directory) or any other I/O
// error that changes the log's files and is not a full disk fails the
// log: the kernel may have dropped the dirty pages of a failed fsync and
// will not report it again, so no later fsync can be trusted to cover
// them. A failed log never fsyncs, appends, reads, truncates or moves its
// recovery point again; its operations return errors wrapping ErrFailed
// and KAFKA_STORAGE_ERROR, Close leaves the checkpoint unclean, and the
// handler set with OnFailure is told once (the broker takes the log
// directory offline, as Kafka's LogDirFailureChannel does). Reopening
// recovers from the last good recovery point. A full disk is not a
// failure: a refused append is undone (above), index entries that do not
// fit are undone and stay pending (the flush fails, the recovery point
// stays), a checkpoint that does not fit is left stale (safe: it only
// costs recovery work), except after a truncation, when appends wait until
// the lowered recovery point is written (failure.go).
//
// # Recovery
//
// Open first completes a cleaner swap that committed (a <base>.log.swap
// with a later segment beside it: its files are renamed into place, the
// segments it replaced deleted and it is recovered), then deletes
// leftovers of interrupted operations (*.deleted, *.cleaned, other *.swap,
// *.tmp, index files without a .log). Unless the checkpoint says the
// last shutdown was clean, every segment holding offsets at or after the
// recovery point is read batch by batch: frame, magic 2, CRC-32C and
// increasing offsets are checked and both indexes are rebuilt; the first
// bad or torn batch and everything after it, later segments included, is
// truncated and never served; such truncations are fsynced. An unflushed
// segment that ends before the next segment's base lost its tail (the
// next segment's directory entry became durable first): the segments
// after it go too, so that the log stays a prefix of what was written,
// except in a compacted topic or a log the cleaner ever cleaned, whose
// segments may end early on purpose. Other segments get a sanity check of
// their index files (entry-size multiples, the last entry inside the
// segment and landing on the batch it names, an empty index only where it
// may rightly be empty; the active segment's entries fully: increasing
// offsets and positions) and are recovered the same way when it fails.
// Readers check the entries they use (above).
//
// A log-reset file (a committed ResetTo) is completed before anything
// else: every segment, snapshot and cleaner file goes and the empty log at
// its offset is written. Then the leader-epoch cache is made to match the
// batches: its entries from the first segment recovery read on are
// replaced by the epochs of the batches found there (Kafka's segment
// recovery assigns the epochs of the batches it reads; Strata also drops
// the entries they contradict, such as a new epoch filed over a divergent
// tail that a power loss brought back), and a cache file that does not
// parse is rebuilt from every batch. The cache is then truncated to the
// log end (an empty log keeps the entry at its start) and the log start,
// producer state is loaded from the newest snapshot at or below the log end
// and the batches after it are replayed. The .txnindex of every segment
// recovery read, or whose .txnindex does not decode (whole 34-byte entries
// of version 0, markers increasing and inside the segment), is rebuilt:
// producer state is then loaded from the newest snapshot at or below the
// first such segment's base instead, and replaying the markers from there
// writes the entries again. Every file operation is ordered so
// that a crash between any two of them leaves a directory that reopens.
//
// # Reset
//
// ResetTo truncates the log fully and starts it again, empty, at an
// offset, with a given leader-epoch checkpoint and producer snapshot (a
// follower of a tiered partition restarting at its leader's local log
// start; Kafka's truncateFullyAndStartAt). The whole new state is first
// written to log-reset (temp, fsync, rename, fsync directory): before that
// rename a crash recovers the old log, after it Open finishes the reset
// (reset.go).
//
// # Compaction
//
// With cleanup.policy=compact, Append refuses batches holding a record
// without a key (INVALID_RECORD; checked in the one streamed pass that
// validates the records, so a compressed batch is never held whole), and
// Clean (clean.go) rewrites sealed
// segments keeping the latest record of each key, with Kafka's rules for
// the dirty ratio, min/max.compaction.lag.ms, tombstones and their delete
// horizon (delete.retention.ms, KIP-534), and empty batches kept for
// idempotent producers. Kept batches keep their base offset, last offset
// delta, sequence and codec; a cleaned segment may therefore have gaps,
// and a sealed segment's next offset is the following segment's base.
// Transactions follow Kafka's cleaner (clean_txn.go): nothing at or past
// the last stable offset is cleaned (the first uncleanable offset is the
// base of the segment holding it); records of aborted transactions are
// removed and never enter the key map, so an aborted newest record never
// shadows an older committed one; committed transactional records are
// compacted like others; a transaction marker stays while a batch of its
// transaction is in the log, then gets a delete horizon and goes after
// delete.retention.ms; a producer's last data batch, or its last marker
// once its batches are gone, stays header-only for its sequence and
// epoch. A cleaned segment's .txnindex holds the aborted transactions
// whose ABORT marker it keeps with records of theirs left; replaying a
// marker emptied by the cleaner sets its producer's epoch and ends a
// transaction a snapshot holds open. EnforceRetention applies
// retention.ms/bytes only when cleanup.policy has delete.
//
// # Concurrency
//
// A Log has three locks, taken in this order: cleanMu (one cleaner pass at
// a time), flushMu (fsyncs, index file writes, segment deletion,
// truncation, the cleaner's swap) and mu (all in-memory state and the
// append's write). Reads take mu only to snapshot the segment, its readable
// size and its index, and do file I/O without it. Deleted segments are
// renamed to *.deleted and closed and removed after file.delete.delay.ms,
// so FileSlices handed out before stay readable.
//
// # Versioning
//
// .log/.index/.timeindex/.txnindex and .snapshot follow Kafka's formats
// and change only with them (snapshots written before transactions hold
// -1 in the transaction fields and read as producers without one).
// log-checkpoint starts with a version line; a reader that finds another
// version ignores the file and recovers the whole log, which is always
// safe (it costs time, and loses a DeleteRecords log start offset that lies
// inside the first segment). New fields go in a new version.
package plog
