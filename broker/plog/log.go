package plog

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"strata/internal/vfs"
)

// Log is one partition's log. Lock order: cleanMu, flushMu, mu. cleanMu
// serialises cleaner passes (clean.go). mu guards
// every mutable field (segments, offsets, producer state, epoch cache) and
// is held for in-memory work and the one write(2) of an append; file reads
// of Read/OffsetForTimestamp run without it. flushMu serialises fsyncs,
// index file writes, segment deletion and truncation, so that an fsync
// never holds up appends.
type Log struct {
	fs     vfs.FS
	dir    string
	now    func() time.Time
	logger *slog.Logger
	cfg    atomic.Pointer[Config]

	cleanMu sync.Mutex
	flushMu sync.Mutex
	bg      sync.WaitGroup // asynchronous flushes started by rolls

	mu            sync.Mutex
	segs          []*segment // by base offset; the last is active
	logStart      int64
	recoveryPoint int64 // everything below is fsynced
	lastFlushMs   int64
	lastWriteMs   int64 // when records were last written (RollIdle)
	producers     *ProducerState
	epochs        *EpochCache
	closed        bool
	filesClosed   bool
	failed        error // an I/O error the log cannot recover from (failure.go)
	onFailure     func(error)
	reported      bool // onFailure was called
	// staleCheckpoint: the log-checkpoint on disk may name a recovery
	// point above the log end (a truncation could not rewrite it, the
	// disk being full); appends wait until it is rewritten.
	staleCheckpoint bool
	pending         map[*segment]*time.Timer
	// cleanerOffset is the cleaner's first dirty offset (-1: unknown);
	// truncGen counts truncations, so that a cleaner pass notices one.
	cleanerOffset int64
	truncGen      uint64
	// unreplicatedTxns mirrors how many ended transactions wait for the
	// high watermark to pass their marker (producerstate_txn.go), so
	// that OnHighWatermark takes no lock when there are none.
	unreplicatedTxns atomic.Int32
	// unstableTxns mirrors how many transactions are open or wait for
	// the high watermark (ongoing + unreplicated), so that
	// LastStableOffset takes no lock when there are none: a partition
	// without transactions pays one atomic load per fetch for its LSO.
	// abortedTxns is set once a segment of the log holds an aborted
	// transaction (.txnindex entry) and stays set: until then
	// AbortedTransactions answers none without the lock.
	unstableTxns atomic.Int32
	abortedTxns  atomic.Bool

	// txnGuards are the verification guards of producers whose
	// transactional write is being verified (txn.go); guardSeq numbers
	// them. Leader only, in memory, under mu.
	txnGuards map[int64]uint64
	guardSeq  uint64
}

func (l *Log) active() *segment { return l.segs[len(l.segs)-1] }

func (l *Log) leo() int64 { return l.active().next }

func (l *Log) nowMs() int64 { return l.now().UnixMilli() }

func (l *Log) usableLocked() error {
	if l.closed {
		return ErrClosed
	}
	if l.failed != nil {
		l.reportLocked()
		return l.failedErrLocked()
	}
	return nil
}

// writableLocked is usableLocked for appends: a checkpoint a truncation
// could not rewrite is rewritten first.
func (l *Log) writableLocked() error {
	if err := l.usableLocked(); err != nil {
		return err
	}
	if !l.staleCheckpoint {
		return nil
	}
	if err := l.writeCheckpoint(l.checkpointLocked(false)); err != nil {
		if isNoSpace(err) {
			return noSpace(err)
		}
		return l.failLocked(err)
	}
	l.staleCheckpoint = false
	return nil
}

// Append is the leader append; see api.go. records is modified in place
// (offsets, leader epoch, LogAppendTime) and written with one write call;
// the bytes are in the operating system when Append returns.
func (l *Log) Append(records []byte, leaderEpoch int32) (AppendInfo, error) {
	return l.append(records, leaderEpoch, nil)
}

// append is Append; check, when not nil, runs under the lock before
// anything is written and refuses the append with its error.
func (l *Log) append(records []byte, leaderEpoch int32, check func() error) (AppendInfo, error) {
	cfg := l.cfg.Load()
	nowMs := l.nowMs()
	var (
		nb, nrec int64
		maxTs    int64 = -1
		idem     bool
	)
	for p := int64(0); p < int64(len(records)); {
		h, err := validateBatch(records[p:], cfg.MaxMessageBytes, cfg.Compact)
		if err != nil {
			return AppendInfo{}, fmt.Errorf("batch %d: %w", nb, err)
		}
		if cfg.TimestampType == CreateTime {
			if err := checkTimestamps(&h, nowMs, cfg); err != nil {
				return AppendInfo{}, fmt.Errorf("batch %d: %w", nb, err)
			}
		}
		nb++
		nrec += int64(h.RecordCount)
		maxTs = max(maxTs, h.MaxTimestamp)
		idem = idem || h.ProducerID >= 0
		p += h.size()
	}
	if nb == 0 {
		return AppendInfo{}, fmt.Errorf("%w: no record batch", kerr.InvalidRecord)
	}
	if cfg.TimestampType == LogAppendTime {
		maxTs = nowMs
	}

	l.mu.Lock()
	if err := l.writableLocked(); err != nil {
		l.mu.Unlock()
		return AppendInfo{}, err
	}
	if check != nil {
		if err := check(); err != nil {
			l.mu.Unlock()
			return AppendInfo{}, err
		}
	}
	if idem {
		for p := int64(0); p < int64(len(records)); {
			h := parseHeader(records[p:])
			p += h.size()
			if h.ProducerID < 0 {
				continue
			}
			dup, err := l.producers.Check(h.meta())
			if err != nil {
				l.mu.Unlock()
				return AppendInfo{}, fmt.Errorf("producer %d: %w", h.ProducerID, err)
			}
			if dup != nil {
				info := AppendInfo{FirstOffset: dup.FirstOffset, LastOffset: dup.LastOffset, LogAppendTime: -1,
					LogStartOffset: l.logStart, NumRecords: dup.LastOffset - dup.FirstOffset + 1, Duplicate: true}
				// The original may not be flushed yet (its own flush
				// failed): a retry is acknowledged as durably as it.
				flush := dup.LastOffset >= l.recoveryPoint && l.needFlushLocked(cfg, nowMs)
				l.mu.Unlock()
				if flush {
					if err := l.Flush(); err != nil {
						return AppendInfo{}, err
					}
				}
				return info, nil
			}
		}
	}
	if err := l.maybeRollLocked(cfg, int64(len(records)), nb, nrec, maxTs, nowMs, l.leo()); err != nil {
		l.mu.Unlock()
		return AppendInfo{}, err
	}
	first := l.leo()
	off := first
	for p := int64(0); p < int64(len(records)); {
		h := parseHeader(records[p:])
		stampBatch(records[p:], off, leaderEpoch, cfg.TimestampType, nowMs)
		off += int64(h.LastOffsetDelta) + 1
		p += h.size()
	}
	if leaderEpoch >= 0 {
		if latest, ok := l.epochs.Latest(); !ok || leaderEpoch > latest.Epoch {
			if err := l.assignEpochLocked(leaderEpoch, first); err != nil {
				l.mu.Unlock()
				return AppendInfo{}, err
			}
		}
	}
	if err := l.writeLocked(cfg, records); err != nil {
		l.mu.Unlock()
		return AppendInfo{}, err
	}
	info := AppendInfo{FirstOffset: first, LastOffset: off - 1, LogAppendTime: -1, LogStartOffset: l.logStart, NumRecords: nrec}
	if cfg.TimestampType == LogAppendTime {
		info.LogAppendTime = nowMs
	}
	flush := l.needFlushLocked(cfg, nowMs)
	l.mu.Unlock()
	if flush {
		if err := l.Flush(); err != nil {
			return info, err
		}
	}
	return info, nil
}

// AppendReplicated is the follower append: batches keep their offsets and
// leader epochs. Their frames and CRCs are checked; offsets must increase
// from the log end.
func (l *Log) AppendReplicated(records []byte) (int64, error) {
	cfg := l.cfg.Load()
	nowMs := l.nowMs()
	var (
		nb, nrec int64
		maxTs    int64 = -1
		first    int64 = -1
		last     int64 = -1
	)
	for p := int64(0); p < int64(len(records)); {
		h, err := checkFrame(records[p:])
		if err != nil {
			return -1, fmt.Errorf("replicated batch %d: %w", nb, err)
		}
		if h.codec() > 4 {
			return -1, fmt.Errorf("replicated batch %d: %w: codec %d", nb, kerr.UnsupportedCompressionType, h.codec())
		}
		if h.LastOffsetDelta < 0 || h.BaseOffset <= last {
			return -1, fmt.Errorf("replicated batch %d: %w: offsets %d..%d out of order", nb, kerr.CorruptMessage, h.BaseOffset, h.lastOffset())
		}
		if first < 0 {
			first = h.BaseOffset
		}
		last = h.lastOffset()
		nb++
		nrec += int64(h.RecordCount)
		maxTs = max(maxTs, h.MaxTimestamp)
		p += h.size()
	}
	if nb == 0 {
		return -1, fmt.Errorf("%w: no record batch", kerr.InvalidRecord)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.writableLocked(); err != nil {
		return -1, err
	}
	if first < l.leo() {
		return -1, fmt.Errorf("%w: replicated offset %d below log end %d", kerr.CorruptMessage, first, l.leo())
	}
	if err := l.maybeRollLocked(cfg, int64(len(records)), nb, last-l.leo()+1, maxTs, nowMs, first); err != nil {
		return -1, err
	}
	for p := int64(0); p < int64(len(records)); {
		h := parseHeader(records[p:])
		p += h.size()
		if h.LeaderEpoch < 0 {
			continue
		}
		if latest, ok := l.epochs.Latest(); !ok || h.LeaderEpoch > latest.Epoch {
			if err := l.assignEpochLocked(h.LeaderEpoch, h.BaseOffset); err != nil {
				return -1, err
			}
		}
	}
	if err := l.writeLocked(cfg, records); err != nil {
		return -1, err
	}
	if l.needFlushLocked(cfg, nowMs) {
		l.mu.Unlock()
		err := l.Flush()
		l.mu.Lock()
		if err != nil {
			return last, err
		}
	}
	return last, nil
}

// writeLocked writes stamped batches to the active segment with one write
// and accounts them. A failed write is undone by truncation: on a full
// disk the append is refused and the log stays usable; any other write
// error, or a failed undo, fails the log.
func (l *Log) writeLocked(cfg *Config, records []byte) error {
	s := l.active()
	if _, err := s.log.Write(records); err != nil {
		werr := fmt.Errorf("write segment %d: %w", s.base, err)
		if terr := s.log.Truncate(s.size); terr != nil {
			return l.failLocked(fmt.Errorf("%w; undo: %w", werr, terr))
		}
		if isNoSpace(err) {
			return noSpace(werr)
		}
		return l.failLocked(werr)
	}
	pos := s.size
	txnData := false
	for p := int64(0); p < int64(len(records)); {
		h := parseHeader(records[p:])
		s.track(&h, pos+p, cfg)
		switch {
		case h.isControl():
			l.applyControlLocked(s, &h, records[p:p+h.size()])
		case h.ProducerID >= 0:
			l.producers.Update(h.meta())
			txnData = txnData || h.isTransactional()
		}
		p += h.size()
	}
	if txnData {
		l.noteTxnsLocked() // before the batch can be read: LastStableOffset's fast path
	}
	s.size += int64(len(records))
	l.lastWriteMs = l.nowMs()
	return nil
}

func (l *Log) needFlushLocked(cfg *Config, nowMs int64) bool {
	unflushed := l.leo() - l.recoveryPoint
	if unflushed <= 0 {
		return false
	}
	return unflushed >= max(cfg.FlushMessages, 1) ||
		(cfg.FlushMs < math.MaxInt64 && nowMs-l.lastFlushMs >= cfg.FlushMs)
}

// assignEpochLocked records that epoch starts at offset in the epoch
// cache, which persists it before the batch is written. On a full disk
// the append is refused (the cache is left as it was); any other error
// fails the log.
func (l *Log) assignEpochLocked(epoch int32, offset int64) error {
	if err := l.epochs.Assign(epoch, offset); err != nil {
		err = fmt.Errorf("assign leader epoch %d at %d: %w", epoch, offset, err)
		if isNoSpace(err) {
			return noSpace(err)
		}
		return l.failLocked(err)
	}
	return nil
}

// maybeRollLocked rolls before an append of size bytes in nb batches with
// nrec offsets and max timestamp maxTs, when the active segment is not
// empty and segment.bytes, segment.ms, the index size or the relative
// offset range would be exceeded. newBase is the new segment's base.
func (l *Log) maybeRollLocked(cfg *Config, size, nb, nrec, maxTs, nowMs, newBase int64) error {
	s := l.active()
	if s.empty() {
		return nil
	}
	roll := s.size+size > cfg.SegmentBytes ||
		s.indexFull(int(nb), cfg) ||
		l.leo()+nrec-1-s.base > math.MaxInt32 ||
		s.size+size > math.MaxInt32
	if !roll {
		var waited int64
		if s.rollBaseMs >= 0 {
			waited = maxTs - s.rollBaseMs
		} else {
			waited = nowMs - s.createdMs
		}
		roll = waited >= cfg.SegmentMs
	}
	if !roll {
		return nil
	}
	return l.rollLocked(newBase, nowMs)
}

// rollLocked seals the active segment, opens a new one at base, writes a
// producer snapshot there and flushes the sealed segment asynchronously
// (fsync of .log, index files written and synced, directory synced, then
// the recovery point advances to base).
func (l *Log) rollLocked(base, nowMs int64) error {
	old := l.active()
	ns, err := openSegmentFiles(l.fs, l.dir, base, true)
	if err != nil {
		if isNoSpace(err) {
			return noSpace(fmt.Errorf("roll to %d: %w", base, err))
		}
		return fmt.Errorf("roll to %d: %w", base, err)
	}
	ns.createdMs = nowMs
	old.seal()
	l.segs = append(l.segs, ns)
	if err := l.producers.WriteSnapshot(l.fs, l.dir, base); err != nil {
		// Missing, it only costs recovery work (the producer state is
		// rebuilt from an older snapshot); on a full disk the log goes
		// on, on any other error it fails (failure.go), as Kafka's roll
		// takes the directory offline.
		if !isNoSpace(err) {
			return l.failLocked(fmt.Errorf("roll to %d: %w", base, err))
		}
		l.logger.Warn("producer snapshot at roll: disk full or no file descriptor left", "dir", l.dir, "offset", base, "err", err)
	}
	l.logger.Debug("rolled segment", "dir", l.dir, "base", base, "sealed", old.base, "size", old.size)
	l.bg.Add(1)
	go func() {
		defer l.bg.Done()
		if err := l.flush(base, false); err != nil && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrFailed) {
			l.logger.Warn("flush after roll", "dir", l.dir, "offset", base, "err", err)
		}
	}()
	return nil
}

// MaybeRoll rolls the active segment when segment.ms has passed since its
// first batch, even without appends. The broker calls it periodically.
func (l *Log) MaybeRoll() error {
	cfg := l.cfg.Load()
	nowMs := l.nowMs()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed != nil {
		return nil // a failed log does no background work
	}
	if err := l.usableLocked(); err != nil {
		return err
	}
	s := l.active()
	if s.empty() {
		return nil
	}
	base := s.rollBaseMs
	if base < 0 {
		base = s.createdMs
	}
	if nowMs-base < cfg.SegmentMs {
		return nil
	}
	return l.rollLocked(l.leo(), nowMs)
}

// RollIdle rolls the active segment when it holds records and none was
// written for idleMs or longer (or idleMs is 0: at once), so that a
// tiered partition that went quiet gets its last records uploaded. It
// reports whether it rolled.
func (l *Log) RollIdle(idleMs int64) (bool, error) {
	nowMs := l.nowMs()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed != nil {
		return false, nil // a failed log does no background work
	}
	if err := l.usableLocked(); err != nil {
		return false, err
	}
	if l.active().empty() || nowMs-max(l.lastWriteMs, l.active().createdMs) < idleMs {
		return false, nil
	}
	return true, l.rollLocked(l.leo(), nowMs)
}

// MaybeFlush flushes when flush.ms has passed since the last flush and
// there is unflushed data. The broker calls it periodically.
func (l *Log) MaybeFlush() error {
	cfg := l.cfg.Load()
	l.mu.Lock()
	need := !l.closed && l.failed == nil && cfg.FlushMs < math.MaxInt64 && l.needFlushLocked(cfg, l.nowMs())
	l.mu.Unlock()
	if !need {
		return nil
	}
	return l.Flush()
}

// Flush fsyncs everything appended so far and advances the recovery point.
func (l *Log) Flush() error {
	l.mu.Lock()
	leo := l.leo()
	l.mu.Unlock()
	return l.flush(leo, false)
}

func (l *Log) flush(upTo int64, force bool) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	return l.flushLocked(upTo, force)
}

type flushJob struct {
	s           *segment
	idx, tidx   []byte
	nIdx, nTidx int
	sealed      bool
	// The .txnindex: truncate to txnTrunc (-1: no), then append txn,
	// making nTxn entries.
	txnTrunc int64
	txn      []byte
	nTxn     int
}

// flushLocked runs under flushMu: it syncs every segment holding offsets
// in [recoveryPoint, upTo) (and sealed segments not yet flushed), writing
// their pending index entries, then syncs the directory and advances the
// recovery point. The checkpoint file is rewritten when a sealed segment
// became durable (or force), not on every flush: a stale recovery point
// only costs recovery work.
//
// A failed fsync fails the log (failure.go): the recovery point never
// moves over bytes whose writeback failed. Index entries that do not fit
// on a full disk are undone and stay pending (the flush fails, the
// recovery point stays); a checkpoint that does not fit is left stale.
func (l *Log) flushLocked(upTo int64, force bool) error {
	l.mu.Lock()
	if l.filesClosed {
		l.mu.Unlock()
		return ErrClosed
	}
	if l.failed != nil {
		err := l.failedErrLocked()
		l.mu.Unlock()
		return err
	}
	upTo = min(upTo, l.leo())
	var jobs []flushJob
	for _, s := range l.segs {
		if s.flushed || s.base >= upTo && !(force && s.base == upTo) {
			continue
		}
		if s.next <= l.recoveryPoint && !s.sealed && !force {
			continue
		}
		j := flushJob{s: s, sealed: s.sealed}
		j.idx, j.nIdx = s.idx.pending()
		j.tidx, j.nTidx = s.tidx.pending()
		j.txnTrunc, j.txn, j.nTxn = s.txn.pending()
		jobs = append(jobs, j)
	}
	if len(jobs) == 0 && upTo <= l.recoveryPoint {
		l.mu.Unlock()
		return nil
	}
	l.mu.Unlock()

	for _, j := range jobs {
		err := j.s.syncFiles(j.idx, j.tidx)
		if err != nil && isNoSpace(err) {
			return noSpace(err)
		}
		if err != nil {
			return l.fail(err)
		}
		err = writeTxnIndexFile(l.fs, l.dir, j.s.base, j.txnTrunc, j.txn)
		if err != nil && isNoSpace(err) {
			return noSpace(err)
		}
		if err != nil {
			return l.fail(err)
		}
		l.mu.Lock()
		j.s.idx.onDisk = max(j.s.idx.onDisk, j.nIdx)
		j.s.tidx.onDisk = max(j.s.tidx.onDisk, j.nTidx)
		if j.txnTrunc >= 0 || j.txn != nil {
			// Truncations of the entries take the flush lock: none
			// happened meanwhile.
			j.s.txn.onDisk, j.s.txn.dirty = j.nTxn, false
		}
		l.mu.Unlock()
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail(syncErr(fmt.Errorf("sync partition dir: %w", err)))
	}

	l.mu.Lock()
	if l.failed != nil {
		// Failed meanwhile (Fail): the recovery point stays.
		err := l.failedErrLocked()
		l.mu.Unlock()
		return err
	}
	sealedDone := force
	for _, j := range jobs {
		if j.sealed && j.s.idx.onDisk == j.s.idx.n && j.s.tidx.onDisk == j.s.tidx.n && !j.s.txn.needsWrite() {
			// Sealed and on disk: look entries up in the files from now on.
			j.s.flushed = true
			j.s.idx.mem, j.s.tidx.mem = nil, nil
			sealedDone = true
		}
	}
	if upTo > l.recoveryPoint {
		l.recoveryPoint = upTo
	}
	l.lastFlushMs = l.nowMs()
	cp := l.checkpointLocked(false)
	l.mu.Unlock()
	if !sealedDone {
		return nil
	}
	if err := l.writeCheckpoint(cp); err != nil {
		if isNoSpace(err) {
			l.logger.Warn("log checkpoint not rewritten: disk full or no file descriptor left", "dir", l.dir, "err", err)
			return nil
		}
		return l.fail(err)
	}
	return nil
}

// LogStartOffset returns the first offset readable.
func (l *Log) LogStartOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.logStart
}

// LogEndOffset returns the offset the next record will get.
func (l *Log) LogEndOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.leo()
}

// RecoveryPoint returns the offset below which everything is fsynced.
func (l *Log) RecoveryPoint() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.recoveryPoint
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch.
func (l *Log) EndOffsetForEpoch(epoch int32) (int32, int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.epochs.EndOffsetFor(epoch, l.leo())
}

// LatestEpoch returns the newest leader epoch in the log, -1 if none.
func (l *Log) LatestEpoch() int32 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.epochs.Latest(); ok {
		return e.Epoch
	}
	return -1
}

// ProducerState returns an idempotent producer's epoch and last sequence.
func (l *Log) ProducerState(producerID int64) (int16, int32, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.producers.Producer(producerID)
}

// SetConfig changes the topic configuration; it applies from the next
// operation.
func (l *Log) SetConfig(c Config) {
	l.cfg.Store(&c)
}

// Config returns the current configuration.
func (l *Log) Config() Config { return *l.cfg.Load() }

// Size returns the bytes of all segments.
func (l *Log) Size() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	var n int64
	for _, s := range l.segs {
		n += s.size
	}
	return n
}

// Segments describes the segments, oldest first.
func (l *Log) Segments() []SegmentInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]SegmentInfo, len(l.segs))
	for i, s := range l.segs {
		out[i] = s.info()
	}
	return out
}

// segmentFor returns the index of the segment holding offset: the last
// with base <= offset.
func (l *Log) segmentFor(offset int64) int {
	i := sort.Search(len(l.segs), func(i int) bool { return l.segs[i].base > offset })
	return max(i-1, 0)
}

// Close flushes everything, writes a producer snapshot at the log end and
// the checkpoint with the clean-shutdown flag, and closes the files.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	l.mu.Unlock()
	l.bg.Wait()

	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	failed := l.failed
	a := l.active()
	if a.maxTs >= 0 {
		// Persist the active segment's max timestamp, as Kafka does on close.
		a.tidx.maybeAppend(a.maxTs, int32(a.maxTsOffset-a.base))
	}
	leo := l.leo()
	l.mu.Unlock()

	var errs []error
	if failed == nil {
		if err := l.flushLocked(leo, true); err != nil {
			errs = append(errs, err)
		}
		if err := l.producers.WriteSnapshot(l.fs, l.dir, leo); err != nil {
			// Not a clean shutdown then: the next open recovers from
			// the recovery point instead of trusting a snapshot at the
			// log end.
			errs = append(errs, fmt.Errorf("producer snapshot at close: %w", err))
		}
	}
	l.mu.Lock()
	clean := len(errs) == 0 && failed == nil
	cp := l.checkpointLocked(clean)
	l.mu.Unlock()
	if clean {
		if err := l.writeCheckpoint(cp); err != nil {
			errs = append(errs, err)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.filesClosed = true
	for _, s := range l.segs {
		if err := s.close(); err != nil {
			errs = append(errs, fmt.Errorf("close segment %d: %w", s.base, err))
		}
	}
	for s, t := range l.pending {
		t.Stop()
		l.finishDelete(s)
	}
	clear(l.pending)
	return errors.Join(errs...)
}

// Delete closes the log and removes its directory.
func (l *Log) Delete() error {
	cerr := l.Close()
	if err := l.fs.RemoveAll(l.dir); err != nil {
		return fmt.Errorf("delete partition dir: %w", err)
	}
	if err := l.fs.SyncDir(parentDir(l.dir)); err != nil {
		l.logger.Warn("sync data dir after delete", "dir", l.dir, "err", err)
	}
	if cerr != nil && !errors.Is(cerr, ErrClosed) {
		l.logger.Warn("close before delete", "dir", l.dir, "err", cerr)
	}
	return nil
}

// abandon stops the log as a killed process would: no flush, no snapshot,
// no checkpoint; background flushes finish first. Tests use it to model a
// process crash before reopening the same directory.
func (l *Log) abandon() {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	l.bg.Wait()
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.filesClosed = true
	for _, s := range l.segs {
		s.close()
	}
	for s, t := range l.pending {
		t.Stop()
		s.close()
	}
	clear(l.pending)
}
