package plog

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"strata/internal/vfs"
)

// Open opens (creating if needed) the log in opts.Dir and recovers it:
//
//   - a cleaner swap that committed (a <base>.log.swap inside the log) is
//     completed (clean_swap.go);
//   - stray files of interrupted operations are deleted (*.deleted,
//     *.cleaned, other *.swap, *.tmp, index files without a .log);
//   - after an unclean shutdown, every segment holding offsets at or
//     after the recovery point is read batch by batch, CRC-checked and its
//     indexes rebuilt; the first torn or corrupt batch and everything
//     after it (including later segments) is truncated;
//   - other segments get a sanity check of their index files, and are
//     recovered the same way when that fails;
//   - the epoch cache is truncated to the log end, producer state is
//     loaded from the newest snapshot and the batches after it replayed.
func Open(opts Options) (*Log, error) {
	if opts.FS == nil {
		opts.FS = vfs.OS
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Dir == "" {
		return nil, errors.New("open log: no directory")
	}
	l := &Log{fs: opts.FS, dir: opts.Dir, now: opts.Now, logger: opts.Logger, pending: map[*segment]*time.Timer{}}
	cfg := opts.Config
	l.cfg.Store(&cfg)
	if err := l.fs.MkdirAll(l.dir, 0o755); err != nil {
		return nil, fmt.Errorf("create partition dir: %w", err)
	}
	if err := l.fs.SyncDir(parentDir(l.dir)); err != nil {
		return nil, fmt.Errorf("sync data dir: %w", err)
	}
	if err := l.load(&cfg); err != nil {
		for _, s := range l.segs {
			s.close()
		}
		return nil, fmt.Errorf("open log %s: %w", l.dir, err)
	}
	// Sealed segments recovered after a crash are fsynced now, as a roll
	// would have done, so that they count as flushed (the tier uploads
	// only flushed segments, and nothing would flush them on an idle log).
	if active := l.segs[len(l.segs)-1].base; l.recoveryPoint < active {
		if err := l.flush(active, false); err != nil {
			l.Close()
			return nil, fmt.Errorf("open log %s: flush recovered segments: %w", l.dir, err)
		}
	}
	return l, nil
}

func parseBase(name, suffix string) (int64, bool) {
	s, ok := strings.CutSuffix(name, suffix)
	if !ok || len(s) != 20 {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 0
}

func (l *Log) load(cfg *Config) error {
	if err := l.completeReset(); err != nil {
		return fmt.Errorf("complete log reset: %w", err)
	}
	names, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	forced, err := l.completeSwaps(names)
	if err != nil {
		return err
	}
	if len(forced) > 0 {
		if names, err = l.fs.ReadDir(l.dir); err != nil {
			return fmt.Errorf("list: %w", err)
		}
	}
	logs := map[int64]bool{}
	txnIndexes := map[int64]bool{} // segments with a .txnindex
	for _, n := range names {
		if b, ok := parseBase(n, logSuffix); ok {
			logs[b] = true
		}
		if b, ok := parseBase(n, txnIndexSuffix); ok {
			txnIndexes[b] = true
		}
	}
	var bases []int64
	removed := false
	for _, n := range names {
		stray := strings.HasSuffix(n, ".deleted") || strings.HasSuffix(n, ".cleaned") ||
			strings.HasSuffix(n, ".swap") || strings.HasSuffix(n, ".tmp")
		if b, ok := parseBase(n, indexSuffix); ok && !logs[b] {
			stray = true
		}
		if b, ok := parseBase(n, timeIndexSuffix); ok && !logs[b] {
			stray = true
		}
		if b, ok := parseBase(n, txnIndexSuffix); ok && !logs[b] {
			stray = true
		}
		if stray {
			if err := l.fs.Remove(filepath.Join(l.dir, n)); err != nil {
				return fmt.Errorf("remove stray %s: %w", n, err)
			}
			removed = true
			continue
		}
		if b, ok := parseBase(n, logSuffix); ok {
			bases = append(bases, b) // ReadDir is sorted and names are fixed width
		}
	}
	if removed {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return fmt.Errorf("sync dir: %w", err)
		}
	}

	cp, haveCP := l.readCheckpoint()
	if !haveCP {
		cp = checkpoint{}
	}
	for _, b := range bases {
		s, err := openSegmentFiles(l.fs, l.dir, b, false)
		if err != nil {
			return err
		}
		l.segs = append(l.segs, s)
	}
	if len(l.segs) == 0 {
		s, err := openSegmentFiles(l.fs, l.dir, cp.logStartOffset, true)
		if err != nil {
			return err
		}
		l.segs = []*segment{s}
	}
	recovered := 0
	recoveredSegs := map[int64]bool{} // their .txnindex is rebuilt
	// The epochs of the batches recovery reads from the first unflushed
	// segment on (rebuildFrom) replace the cache's entries from there.
	rebuildFrom := int64(-1)
	var epochStarts []EpochEntry
	rebuiltBatches := 0
	mayHaveGaps := cfg.Compact || l.readCleanerOffset() >= 0
	onBatch := func(h *batchHeader) {
		if rebuildFrom < 0 {
			return
		}
		rebuiltBatches++
		if h.LeaderEpoch >= 0 {
			assignEpochEntry(&epochStarts, EpochEntry{Epoch: h.LeaderEpoch, StartOffset: h.BaseOffset})
		}
	}
	for i := 0; i < len(l.segs); i++ {
		s := l.segs[i]
		last := i == len(l.segs)-1
		limit := int64(math.MaxInt64)
		if !last {
			limit = l.segs[i+1].base
		}
		unflushed := !cp.clean && (last || limit > cp.recoveryPoint)
		recover := forced[s.base] || unflushed
		if !recover {
			if err := s.load(limit, last, cfg); err != nil {
				if !errors.Is(err, errCorruptIndex) && !errors.Is(err, errBadBatch) {
					return err
				}
				l.logger.Warn("rebuilding segment indexes", "dir", l.dir, "segment", s.base, "err", err)
				recover = true
			}
		}
		if !recover {
			continue
		}
		recovered++
		recoveredSegs[s.base] = true
		if unflushed && rebuildFrom < 0 {
			rebuildFrom = s.base
		}
		truncated, err := s.recover(cfg, onBatch)
		if err != nil {
			return err
		}
		if truncated {
			l.logger.Warn("truncated torn or corrupt tail", "dir", l.dir, "segment", s.base, "size", s.size)
		}
		// An unflushed segment that ends before the next one begins lost
		// its tail in a crash (the next segment's entry became durable
		// first): what follows was appended after the lost offsets. Only
		// the cleaner leaves such gaps on purpose: not in a log that is
		// not compacted and was never cleaned.
		lostTail := unflushed && !last && !forced[s.base] && !mayHaveGaps && s.next < limit
		if lostTail {
			l.logger.Warn("segment lost its unflushed tail; dropping the segments after it", "dir", l.dir,
				"segment", s.base, "end", s.next, "next_segment", limit)
		}
		if truncated || lostTail || (!last && s.next > limit) {
			// Nothing after a bad batch can be trusted.
			for _, later := range l.segs[i+1:] {
				later.close()
				if err := removeSegmentFiles(l.fs, l.dir, later.base, ""); err != nil {
					return err
				}
			}
			if !last {
				if err := l.fs.SyncDir(l.dir); err != nil {
					return fmt.Errorf("sync dir: %w", err)
				}
			}
			l.segs = l.segs[:i+1]
			last = true
		}
		if truncated {
			// Durable before anything is appended over the cut.
			if err := s.syncAll(); err != nil {
				return err
			}
		}
		if !last {
			s.seal()
			idx, nIdx := s.idx.pending()
			tidx, nTidx := s.tidx.pending()
			if err := s.syncFiles(idx, tidx); err != nil {
				return err
			}
			s.idx.onDisk, s.tidx.onDisk = nIdx, nTidx
			s.flushed = true
			s.idx.mem, s.tidx.mem = nil, nil
			s.next = limit
		}
	}
	a := l.active()
	a.sealed, a.flushed = false, false
	a.createdMs = l.nowMs()
	leo := a.next

	l.logStart = max(cp.logStartOffset, l.segs[0].base)
	if l.logStart > leo {
		// The log start survived a crash that lost data above it: start
		// empty at the log start.
		l.logger.Warn("log start offset beyond log end, starting empty", "dir", l.dir, "logStart", l.logStart, "logEnd", leo)
		rebuiltBatches = 0 // none of them stays
		for _, s := range l.segs {
			s.close()
			if err := removeSegmentFiles(l.fs, l.dir, s.base, ""); err != nil {
				return err
			}
		}
		s, err := openSegmentFiles(l.fs, l.dir, l.logStart, true)
		if err != nil {
			return err
		}
		s.createdMs = l.nowMs()
		l.segs = []*segment{s}
		leo = l.logStart
	}
	l.recoveryPoint = min(cp.recoveryPoint, leo)
	if cp.clean {
		l.recoveryPoint = leo
	}
	l.lastFlushMs = l.nowMs()
	l.cleanerOffset = l.readCleanerOffset()

	if err := l.loadEpochs(rebuildFrom, epochStarts, rebuiltBatches); err != nil {
		return err
	}
	txnFrom, err := l.loadTxnIndexes(recoveredSegs, txnIndexes)
	if err != nil {
		return err
	}
	if err := l.reloadProducersLocked(txnFrom); err != nil {
		return err
	}
	if err := l.writeCheckpoint(l.checkpointLocked(false)); err != nil {
		return err
	}
	l.logger.Debug("opened partition log", "dir", l.dir, "segments", len(l.segs), "logStart", l.logStart,
		"logEnd", leo, "clean", cp.clean, "recoveredSegments", recovered)
	return nil
}

// loadEpochs reads the leader-epoch cache and makes it match the log.
// After a crash the cache may name epochs the recovered batches do not
// hold (a truncation, or an append whose epoch entry became durable
// before its batches, and the batches that did survive), so its entries
// from rebuildFrom (the first segment recovery read, -1: none) are
// replaced by the epochs of the batches found there, as Kafka's segment
// recovery assigns them; a cache that does not parse is rebuilt from
// every batch. Then entries at or past the log end go (an empty log keeps
// the entry at its start: a reset log starts in the epoch its leader had
// there), and the first entry is moved up to the log start.
func (l *Log) loadEpochs(rebuildFrom int64, starts []EpochEntry, batches int) error {
	var err error
	l.epochs, err = OpenEpochCache(l.fs, l.dir)
	if err != nil && errors.Is(err, errCorruptEpochCheckpoint) && l.epochs != nil {
		l.logger.Warn("rebuilding the leader epoch cache from the log", "dir", l.dir, "err", err)
		if rebuildFrom, starts, batches, err = l.scanEpochs(); err != nil {
			return fmt.Errorf("leader epoch cache: %w", err)
		}
		if err := l.epochs.persist(); err != nil { // replace the corrupt file even if nothing is assigned
			return fmt.Errorf("leader epoch cache: %w", err)
		}
	}
	if err != nil {
		return fmt.Errorf("leader epoch cache: %w", err)
	}
	leo := l.leo()
	if rebuildFrom >= 0 && batches > 0 {
		if err := l.epochs.rebuild(rebuildFrom, starts); err != nil {
			return fmt.Errorf("rebuild epoch cache from %d: %w", rebuildFrom, err)
		}
	}
	epochEnd := leo
	if leo == l.logStart {
		epochEnd = leo + 1
	}
	if err := l.epochs.TruncateFromEnd(epochEnd); err != nil {
		return fmt.Errorf("truncate epoch cache to %d: %w", leo, err)
	}
	if err := l.epochs.TruncateFromStart(l.logStart); err != nil {
		return fmt.Errorf("truncate epoch cache from %d: %w", l.logStart, err)
	}
	return nil
}

// scanEpochs reads the epochs of every batch from the log start.
func (l *Log) scanEpochs() (from int64, starts []EpochEntry, batches int, err error) {
	for _, s := range l.segs {
		sc := newScanner(s.log, 0, s.size, false)
		for sc.next() {
			if sc.h.lastOffset() < l.logStart {
				continue
			}
			batches++
			if sc.h.LeaderEpoch >= 0 {
				assignEpochEntry(&starts, EpochEntry{Epoch: sc.h.LeaderEpoch, StartOffset: max(sc.h.BaseOffset, l.logStart)})
			}
		}
		if sc.err != nil {
			return -1, nil, 0, fmt.Errorf("scan segment %d: %w", s.base, sc.err)
		}
	}
	return 0, starts, batches, nil
}

// loadTxnIndexes reads the .txnindex (where have says there is one) of
// every segment recovery did not read; those it read, and those whose
// .txnindex does not decode, are rebuilt by reloadProducersLocked from the
// base it returns (the smallest of theirs, -1: none).
func (l *Log) loadTxnIndexes(recovered, have map[int64]bool) (int64, error) {
	from := int64(-1)
	rebuild := func(s *segment) {
		s.txn = txnIndex{dirty: true} // the file is rewritten
		if from < 0 || s.base < from {
			from = s.base
		}
	}
	for _, s := range l.segs {
		if recovered[s.base] {
			rebuild(s)
			continue
		}
		if !have[s.base] {
			s.txn = txnIndex{}
			continue
		}
		entries, err := readTxnIndexFile(l.fs, l.dir, s.base)
		if errors.Is(err, errCorruptTxnIndex) {
			l.logger.Warn("rebuilding transaction index", "dir", l.dir, "segment", s.base, "err", err)
			rebuild(s)
			continue
		}
		if err != nil {
			return -1, fmt.Errorf("transaction index %d: %w", s.base, err)
		}
		s.txn = txnIndex{entries: entries, onDisk: len(entries)}
		if len(entries) > 0 {
			l.abortedTxns.Store(true)
		}
	}
	return from, nil
}

// reloadProducersLocked rebuilds producer state: the newest snapshot at or
// below the log end (or at or below txnFrom, when >= 0), then the batches
// after it. Replaying transaction markers rebuilds the .txnindex entries
// from the snapshot on: every segment's entries from there are dropped
// and found again, so a segment whose .txnindex must be rebuilt is passed
// as txnFrom. Sealed, flushed segments, and segments whose .txnindex lost
// entries (a truncation), get their .txnindex written at once (the caller
// holds flushMu or is Open); other new entries are written by the next
// flush.
func (l *Log) reloadProducersLocked(txnFrom int64) error {
	l.producers = NewProducerState()
	defer l.noteTxnsLocked()
	leo := l.leo()
	upTo := leo
	if txnFrom >= 0 {
		// Below the log start nothing is replayed (as before
		// transactions): an entry whose transaction began there is
		// rebuilt only if the snapshot knew it.
		txnFrom = max(txnFrom, l.logStart)
		upTo = min(txnFrom, leo)
	}
	from, err := l.producers.loadSnapshotUpTo(l.fs, l.dir, leo, upTo)
	if err != nil {
		l.logger.Warn("load producer snapshot; replaying the log", "dir", l.dir, "err", err)
		l.producers = NewProducerState()
		from = -1
	}
	from = max(from, l.logStart)
	if txnFrom >= 0 {
		from = min(from, txnFrom)
	}
	for _, s := range l.segs[l.segmentFor(from):] {
		s.txn.truncateFrom(from)
	}
	if from < leo {
		for _, s := range l.segs[l.segmentFor(from):] {
			if s.next <= from {
				continue
			}
			v := s.idx.view(s.base)
			sc := newScanner(s.log, v.lookup(from), s.size, false)
			for sc.next() {
				h := &sc.h
				if h.lastOffset() < from {
					continue
				}
				if h.isControl() {
					b, err := readControlBatch(s.log, sc.at, h)
					if err != nil {
						l.logger.Warn("ignoring control batch", "dir", l.dir, "offset", h.BaseOffset, "err", err)
						continue
					}
					l.applyControlLocked(s, h, b)
				} else if h.ProducerID >= 0 {
					l.producers.Update(h.meta())
				}
			}
			if sc.err != nil {
				return fmt.Errorf("replay producer state in segment %d: %w", s.base, sc.err)
			}
		}
	}
	wrote := false
	for _, s := range l.segs {
		if !s.txn.dirty && (!s.flushed || !s.txn.needsWrite()) {
			continue
		}
		truncTo, b, n := s.txn.pending()
		if err := writeTxnIndexFile(l.fs, l.dir, s.base, truncTo, b); err != nil {
			return err
		}
		s.txn.onDisk, s.txn.dirty = n, false
		wrote = true
	}
	if wrote {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return syncErr(fmt.Errorf("sync dir: %w", err))
		}
	}
	return nil
}
