package plog

// Writing a cleaned segment and swapping it in, crash-safely, with
// Kafka's file protocol (LocalLog.replaceSegments, LogLoader):
//
//  1. The group's kept batches go to <base>.log.cleaned with
//     <base>.index.cleaned, <base>.timeindex.cleaned and, when it keeps
//     ABORT markers of transactions with records left, their entries in
//     <base>.txnindex.cleaned (base: the group's first segment); all are
//     fsynced.
//  2. Under the flush lock, and only if the group is still in the log and
//     no truncation happened: the index files, then the log, are renamed
//     from .cleaned to .swap, and the directory is fsynced. From here the
//     new segment is committed: recovery completes the swap.
//  3. Under the log lock: the old segments' files are renamed to
//     *.deleted (closed and removed after file.delete.delay.ms, so that
//     readers holding them finish), the .swap files are renamed into place
//     (indexes, then the log) and the segment list is updated; then the
//     directory is fsynced. If an old segment's files cannot be renamed,
//     the log fails with the .swap files left in place, for recovery to
//     complete the swap.
//
// Recovery (completeSwaps, at Open, before leftovers are deleted): a
// <base>.log.swap followed by a later segment in the directory is
// completed: its index .swap files and then the log are renamed into
// place, the old segments whose bases lie inside the swapped segment's
// offsets are deleted, and the segment is recovered (CRC-checked, indexes
// rebuilt). Other .swap files and every .cleaned file are leftovers of an
// operation that never committed and are deleted.

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"strata/internal/vfs"
)

const (
	cleanedSuffix = ".cleaned"
	swapSuffix    = ".swap"
)

// segmentSuffixes are a segment's files, indexes first, log last. A
// cleaned segment has a .txnindex only when it keeps ABORT markers of
// transactions with records left (their entries, as they were).
var segmentSuffixes = []string{indexSuffix, timeIndexSuffix, txnIndexSuffix, logSuffix}

// optionalSwapFile tells whether a missing file of a swap is fine.
func optionalSwapFile(suf string, err error) bool {
	return suf == txnIndexSuffix && errors.Is(err, fs.ErrNotExist)
}

// openCleanedSegment creates the empty .cleaned files of a new segment.
func openCleanedSegment(fsys vfs.FS, dir string, base int64) (*segment, error) {
	s := &segment{base: base, next: base, maxTs: -1, maxTsOffset: -1, rollBaseMs: -1,
		idx: offsetIndex{mem: []offsetEntry{}}, tidx: timeIndex{mem: []timeEntry{}}}
	flag := os.O_RDWR | os.O_APPEND | os.O_CREATE | os.O_TRUNC
	var err error
	if s.log, err = fsys.OpenFile(segmentPath(dir, base, logSuffix)+cleanedSuffix, flag, 0o644); err != nil {
		return nil, fmt.Errorf("create cleaned segment %d: %w", base, err)
	}
	if s.idx.f, err = fsys.OpenFile(segmentPath(dir, base, indexSuffix)+cleanedSuffix, flag, 0o644); err != nil {
		s.log.Close()
		return nil, fmt.Errorf("create cleaned index %d: %w", base, err)
	}
	if s.tidx.f, err = fsys.OpenFile(segmentPath(dir, base, timeIndexSuffix)+cleanedSuffix, flag, 0o644); err != nil {
		s.log.Close()
		s.idx.f.Close()
		return nil, fmt.Errorf("create cleaned time index %d: %w", base, err)
	}
	return s, nil
}

// cleanGroup rewrites the plan's segments g into one cleaned segment and
// swaps it in. aborted reports that the log changed under the pass.
func (c *cleaner) cleanGroup(p cleanPlan, g []int) (aborted bool, err error) {
	l := c.l
	first, last := p.views[g[0]], g[len(g)-1]
	c.lastRecords = l.producerLastRecords()
	c.txns.takeKept()
	cs, err := openCleanedSegment(l.fs, l.dir, first.base)
	if err != nil {
		return false, err
	}
	discard := func() {
		cs.close()
		for _, suf := range segmentSuffixes {
			p := segmentPath(l.dir, first.base, suf)
			for _, q := range []string{p + cleanedSuffix, p + swapSuffix} {
				if err := l.fs.Remove(q); err != nil && !errors.Is(err, fs.ErrNotExist) {
					l.logger.Warn("remove cleaner leftover", "file", q, "err", err)
				}
			}
		}
	}
	if err := c.writeCleaned(cs, p, g); err != nil {
		discard()
		if l.planStale(p) {
			return true, nil
		}
		return false, err
	}
	if err := c.writeCleanedTxnIndex(cs); err != nil {
		discard()
		return false, err
	}
	cs.next = p.next[last]
	cs.seal()
	idx, nIdx := cs.idx.pending()
	tidx, nTidx := cs.tidx.pending()
	if err := cs.syncFiles(idx, tidx); err != nil {
		discard()
		return false, err
	}
	cs.idx.onDisk, cs.tidx.onDisk = nIdx, nTidx
	cs.idx.mem, cs.tidx.mem = nil, nil
	cs.flushed = true

	old := make([]*segment, len(g))
	for i, j := range g {
		old[i] = p.segs[j]
	}
	aborted, err = l.swapCleaned(cs, old, p.gen, discard)
	if err == nil && !aborted {
		c.stats.SegmentsCleaned += len(g)
		c.stats.SegmentsWritten++
		c.stats.BytesWritten += cs.size
	}
	return aborted, err
}

// writeCleanedTxnIndex gives cs the aborted transactions whose ABORT
// marker it kept because records of theirs remain (Kafka's cleaned
// transaction index), in <base>.txnindex.cleaned (fsynced) when there
// are any.
func (c *cleaner) writeCleanedTxnIndex(cs *segment) error {
	l := c.l
	entries := c.txns.takeKept()
	cs.txn = txnIndex{entries: entries, onDisk: len(entries)}
	if len(entries) == 0 {
		return nil
	}
	l.abortedTxns.Store(true) // set already: the entries are the log's
	name := segmentPath(l.dir, cs.base, txnIndexSuffix) + cleanedSuffix
	f, err := l.fs.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("create cleaned transaction index %d: %w", cs.base, err)
	}
	if _, err := f.Write(EncodeTxnIndex(entries)); err != nil {
		f.Close()
		return fmt.Errorf("write cleaned transaction index %d: %w", cs.base, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return syncErr(fmt.Errorf("sync cleaned transaction index %d: %w", cs.base, err))
	}
	return f.Close()
}

// writeCleaned filters the group's batches into cs.
func (c *cleaner) writeCleaned(cs *segment, p cleanPlan, g []int) error {
	var buf bytes.Buffer
	flush := func() error {
		if buf.Len() == 0 {
			return nil
		}
		if _, err := cs.log.Write(buf.Bytes()); err != nil {
			return fmt.Errorf("write cleaned segment %d: %w", cs.base, err)
		}
		buf.Reset()
		return nil
	}
	for _, j := range g {
		v := p.views[j]
		sc := newScanner(v.f, 0, v.size, true)
		for sc.next() {
			out, err := c.filterBatch(sc.batch)
			if err != nil {
				return fmt.Errorf("segment %d at %d: %w", v.base, sc.at, err)
			}
			if out == nil {
				continue
			}
			h := parseHeader(out)
			if h.lastOffset()-cs.base > int64(^uint32(0)>>1) {
				return fmt.Errorf("segment %d: offset %d does not fit cleaned segment %d", v.base, h.lastOffset(), cs.base)
			}
			cs.track(&h, cs.size, c.cfg)
			cs.size += int64(len(out))
			buf.Write(out)
			if buf.Len() >= cleanWriteChunk {
				if err := flush(); err != nil {
					return err
				}
			}
		}
		if sc.err != nil {
			return fmt.Errorf("segment %d: %w", v.base, sc.err)
		}
	}
	return flush()
}

// groupIndexLocked returns where the segments old are in the log, or
// false when the log changed (truncation, deletion, close).
func (l *Log) groupIndexLocked(old []*segment, gen uint64) (int, bool) {
	if l.closed || l.failed != nil || l.truncGen != gen {
		return 0, false
	}
	for i, s := range l.segs {
		if s != old[0] {
			continue
		}
		if i+len(old) >= len(l.segs) { // the active segment is never replaced
			return 0, false
		}
		for k := range old {
			if l.segs[i+k] != old[k] {
				return 0, false
			}
		}
		return i, true
	}
	return 0, false
}

// swapCleaned replaces the segments old with the cleaned segment cs.
func (l *Log) swapCleaned(cs *segment, old []*segment, gen uint64, discard func()) (bool, error) {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	_, ok := l.groupIndexLocked(old, gen)
	l.mu.Unlock()
	if !ok {
		discard()
		return true, nil
	}
	base := cs.base
	for _, suf := range segmentSuffixes {
		p := segmentPath(l.dir, base, suf)
		if err := l.fs.Rename(p+cleanedSuffix, p+swapSuffix); err != nil && !optionalSwapFile(suf, err) {
			discard()
			return false, fmt.Errorf("swap in cleaned segment %d: %w", base, err)
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		// Not known to be committed: take it back, or a later crash
		// would complete a swap the log has moved past.
		discard()
		return false, fmt.Errorf("swap in cleaned segment %d: sync dir: %w", base, err)
	}

	l.mu.Lock()
	i, ok := l.groupIndexLocked(old, gen)
	if !ok {
		// Cannot happen while flushMu is held; the swap is committed on
		// disk, so refuse further work until a reopen completes it.
		l.failed = fmt.Errorf("cleaned segment %d: log changed during swap", base)
		l.mu.Unlock()
		return false, l.failed
	}
	var errs []error
	for _, s := range old {
		if err := l.scheduleDeleteLocked(s); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		// An old segment's files may still be in place: the .swap files
		// stay, so that reopening completes the swap and deletes what
		// the swapped-in segment replaces (Kafka's replaceSegments stops
		// here too). Renamed into place they would leave an old segment
		// inside the new one's offsets, which recovery would take for a
		// torn log.
		err := l.failLocked(fmt.Errorf("swap in cleaned segment %d: %w", base, errors.Join(errs...)))
		l.mu.Unlock()
		return false, err
	}
	for _, suf := range segmentSuffixes {
		p := segmentPath(l.dir, base, suf)
		if err := l.fs.Rename(p+swapSuffix, p); err != nil && !optionalSwapFile(suf, err) {
			errs = append(errs, fmt.Errorf("rename %s: %w", filepath.Base(p+swapSuffix), err))
		}
	}
	segs := make([]*segment, 0, len(l.segs)-len(old)+1)
	segs = append(segs, l.segs[:i]...)
	segs = append(segs, cs)
	segs = append(segs, l.segs[i+len(old):]...)
	l.segs = segs
	if len(errs) > 0 {
		// The directory is half swapped; reopening completes it.
		l.failed = fmt.Errorf("swap in cleaned segment %d: %w", base, errors.Join(errs...))
		l.logger.Error("partition log failed", "dir", l.dir, "err", l.failed)
		l.mu.Unlock()
		return false, l.failed
	}
	l.mu.Unlock()
	if err := l.fs.SyncDir(l.dir); err != nil {
		return false, fmt.Errorf("swap in cleaned segment %d: sync dir: %w", base, err)
	}
	return false, nil
}

// completeSwaps finishes the swaps a crash interrupted (see the file
// comment) and returns the bases of the swapped-in segments, which must be
// recovered.
func (l *Log) completeSwaps(names []string) (map[int64]bool, error) {
	var logs []int64
	var swaps []int64
	for _, n := range names {
		if b, ok := parseBase(n, logSuffix); ok {
			logs = append(logs, b)
		}
		if s, ok := strings.CutSuffix(n, swapSuffix); ok {
			if b, ok := parseBase(s, logSuffix); ok {
				swaps = append(swaps, b)
			}
		}
	}
	forced := map[int64]bool{}
	for _, b := range swaps {
		later := false
		for _, x := range logs {
			later = later || x > b
		}
		if !later {
			continue // not inside the log: a leftover, deleted with the others
		}
		logPath := segmentPath(l.dir, b, logSuffix)
		next, err := swapNextOffset(l.fs, logPath+swapSuffix, b)
		if err != nil {
			return nil, err
		}
		for _, suf := range segmentSuffixes {
			p := segmentPath(l.dir, b, suf)
			if err := l.fs.Rename(p+swapSuffix, p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("complete swap of segment %d: %w", b, err)
			}
		}
		kept := logs[:0]
		for _, x := range logs {
			if x > b && x < next {
				if err := removeSegmentFiles(l.fs, l.dir, x, ""); err != nil {
					return nil, fmt.Errorf("complete swap of segment %d: remove replaced segment %d: %w", b, x, err)
				}
				continue
			}
			kept = append(kept, x)
		}
		logs = kept
		forced[b] = true
		l.logger.Warn("completed interrupted segment swap", "dir", l.dir, "segment", b, "next", next)
	}
	if len(forced) > 0 {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return nil, fmt.Errorf("sync dir: %w", err)
		}
	}
	return forced, nil
}

// swapNextOffset returns one past the last offset of the whole batches of
// a .swap log file (base when it holds none).
func swapNextOffset(fsys vfs.FS, path string, base int64) (int64, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", filepath.Base(path), err)
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return 0, fmt.Errorf("size of %s: %w", filepath.Base(path), err)
	}
	next := base
	sc := newScanner(f, 0, size, false)
	for sc.next() {
		next = max(next, sc.h.lastOffset()+1)
	}
	if sc.err != nil && !errors.Is(sc.err, errBadBatch) {
		return 0, fmt.Errorf("scan %s: %w", filepath.Base(path), sc.err)
	}
	return next, nil
}
