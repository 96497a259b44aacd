package plog

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"

	"strata/internal/vfs"
)

const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	deletedSuffix   = ".deleted"
)

func segmentPath(dir string, base int64, suffix string) string {
	return filepath.Join(dir, fmt.Sprintf("%020d%s", base, suffix))
}

// segment is one .log file with its two indexes. Its fields are guarded by
// the log's mutex; file writes to .log happen under it too, index file
// writes under the log's flush mutex.
type segment struct {
	base int64
	log  vfs.File
	idx  offsetIndex
	tidx timeIndex
	txn  txnIndex // aborted transactions whose marker is here (txnindex.go)

	size int64 // bytes of whole batches written (the readable size)
	next int64 // one past the last offset

	maxTs       int64 // largest batch max timestamp, -1 if none
	maxTsOffset int64 // last offset of the batch that holds it
	rollBaseMs  int64 // segment.ms counts from this (first batch's max timestamp); -1 until set
	createdMs   int64

	bytesSinceIndex int64
	sealed          bool
	// flushed: sealed and its index files written and synced; lookups go to
	// the files.
	flushed bool

	// watched is log wrapped for the FileSlices of reads (read.go), made
	// once so that every slice of the segment names the same file.
	watched vfs.File
}

func openSegmentFiles(fsys vfs.FS, dir string, base int64, create bool) (*segment, error) {
	flag := os.O_RDWR | os.O_APPEND
	if create {
		flag |= os.O_CREATE | os.O_TRUNC
	}
	s := &segment{base: base, next: base, maxTs: -1, maxTsOffset: -1, rollBaseMs: -1}
	var err error
	if s.log, err = fsys.OpenFile(segmentPath(dir, base, logSuffix), flag, 0o644); err != nil {
		return nil, fmt.Errorf("open segment %d: %w", base, err)
	}
	idxFlag := os.O_RDWR | os.O_APPEND | os.O_CREATE
	if create {
		idxFlag |= os.O_TRUNC
	}
	if s.idx.f, err = fsys.OpenFile(segmentPath(dir, base, indexSuffix), idxFlag, 0o644); err != nil {
		s.log.Close()
		return nil, fmt.Errorf("open index %d: %w", base, err)
	}
	if s.tidx.f, err = fsys.OpenFile(segmentPath(dir, base, timeIndexSuffix), idxFlag, 0o644); err != nil {
		s.log.Close()
		s.idx.f.Close()
		return nil, fmt.Errorf("open time index %d: %w", base, err)
	}
	return s, nil
}

func (s *segment) close() error {
	return errors.Join(s.log.Close(), s.idx.f.Close(), s.tidx.f.Close())
}

func (s *segment) empty() bool { return s.size == 0 }

func (s *segment) info() SegmentInfo {
	return SegmentInfo{BaseOffset: s.base, NextOffset: s.next, Size: s.size, MaxTimestamp: s.maxTs, Sealed: s.sealed}
}

// indexLimits are the entry counts segment.index.bytes allows.
func indexLimits(cfg *Config) (maxIdx, maxTidx int) {
	return max(int(cfg.SegmentIndexBytes)/offsetEntrySize, 1), max(int(cfg.SegmentIndexBytes)/timeEntrySize, 1)
}

// track accounts one appended batch at pos: max timestamp, roll base and
// the sparse index entries (Kafka's rule: index a batch once more than
// index.interval.bytes were appended since the last entry).
func (s *segment) track(h *batchHeader, pos int64, cfg *Config) {
	last := h.lastOffset()
	if h.MaxTimestamp > s.maxTs {
		s.maxTs, s.maxTsOffset = h.MaxTimestamp, last
	}
	if s.rollBaseMs < 0 {
		s.rollBaseMs = h.MaxTimestamp
	}
	if s.bytesSinceIndex > int64(cfg.IndexIntervalBytes) {
		maxIdx, maxTidx := indexLimits(cfg)
		if s.idx.n < maxIdx && pos <= math.MaxInt32 {
			s.idx.append(int32(last-s.base), int32(pos))
		}
		if s.tidx.n < maxTidx && s.maxTs >= 0 {
			s.tidx.maybeAppend(s.maxTs, int32(s.maxTsOffset-s.base))
		}
		s.bytesSinceIndex = 0
	}
	s.bytesSinceIndex += h.size()
	s.next = last + 1
}

// indexFull tells whether n more batches might not get index entries.
func (s *segment) indexFull(n int, cfg *Config) bool {
	maxIdx, maxTidx := indexLimits(cfg)
	return s.idx.n+n > maxIdx || s.tidx.n+n > maxTidx
}

// seal makes the segment inactive: the time index gets a final entry with
// the segment's max timestamp (as Kafka does), so it can be reloaded.
func (s *segment) seal() {
	s.sealed = true
	if s.maxTs >= 0 {
		s.tidx.maybeAppend(s.maxTs, int32(s.maxTsOffset-s.base))
	}
}

// recover CRC-checks every batch of the segment, rebuilds its indexes in
// memory and truncates the file at the first torn or corrupt batch,
// calling each (if not nil) with every good batch. It returns whether it
// truncated.
func (s *segment) recover(cfg *Config, each func(*batchHeader)) (truncated bool, err error) {
	fileSize, err := s.log.Size()
	if err != nil {
		return false, fmt.Errorf("size of segment %d: %w", s.base, err)
	}
	s.idx = offsetIndex{f: s.idx.f, mem: []offsetEntry{}}
	s.tidx = timeIndex{f: s.tidx.f, mem: []timeEntry{}}
	s.size, s.next, s.maxTs, s.maxTsOffset, s.rollBaseMs, s.bytesSinceIndex = 0, s.base, -1, -1, -1, 0
	sc := newScanner(s.log, 0, fileSize, true)
	for sc.next() {
		h := &sc.h
		if h.BaseOffset < s.next || h.LastOffsetDelta < 0 || h.lastOffset()-s.base > math.MaxInt32 {
			sc.err = fmt.Errorf("%w: offsets %d..%d out of order at %d", errBadBatch, h.BaseOffset, h.lastOffset(), sc.at)
			break
		}
		s.track(h, sc.at, cfg)
		s.size = sc.pos
		if each != nil {
			each(h)
		}
	}
	if sc.err != nil && !errors.Is(sc.err, errBadBatch) {
		return false, fmt.Errorf("recover segment %d: %w", s.base, sc.err)
	}
	if err := s.truncateFiles(); err != nil {
		return false, err
	}
	if s.size < fileSize {
		if err := s.log.Truncate(s.size); err != nil {
			return true, fmt.Errorf("truncate segment %d to %d: %w", s.base, s.size, err)
		}
		return true, nil
	}
	return false, nil
}

// truncateFiles empties both index files (their entries are in memory).
func (s *segment) truncateFiles() error {
	if err := s.idx.f.Truncate(0); err != nil {
		return fmt.Errorf("truncate index %d: %w", s.base, err)
	}
	if err := s.tidx.f.Truncate(0); err != nil {
		return fmt.Errorf("truncate time index %d: %w", s.base, err)
	}
	s.idx.onDisk, s.tidx.onDisk = 0, 0
	return nil
}

// load reads the segment's state without checking batches (a clean
// shutdown, or a segment below the recovery point). limit is the next
// segment's base, or MaxInt64 for the last one. For the last segment the
// indexes are read into memory and the batches after the last index entry
// are scanned to find the end. It returns errCorruptIndex/errBadBatch when
// the segment must be recovered instead.
func (s *segment) load(limit int64, last bool, cfg *Config) error {
	var err error
	if s.size, err = s.log.Size(); err != nil {
		return fmt.Errorf("size of segment %d: %w", s.base, err)
	}
	idxSize, tidxSize, err := s.indexSizes()
	if err != nil {
		return err
	}
	if !last {
		// Kafka's cheap sanity check; lookups tolerate the rest.
		if idxSize%offsetEntrySize != 0 || tidxSize%timeEntrySize != 0 {
			return errCorruptIndex
		}
		s.idx.n, s.idx.onDisk = int(idxSize/offsetEntrySize), int(idxSize/offsetEntrySize)
		s.tidx.n, s.tidx.onDisk = int(tidxSize/timeEntrySize), int(tidxSize/timeEntrySize)
		s.idx.check = s.log // entries from disk: lookups verify them
		if s.size > int64(cfg.IndexIntervalBytes)*2 && s.idx.n == 0 && !indexMayBeEmpty(s.log, s.size, cfg) {
			return fmt.Errorf("%w: no entry in a segment of %d bytes", errCorruptIndex, s.size) // an index lost
		}
		v := s.idx.view(s.base)
		if s.idx.n > 0 {
			e, ok := v.entry(s.idx.n - 1)
			if !ok || e.rel < 0 || int64(e.pos) >= s.size || s.base+int64(e.rel) >= limit || !entryLands(s.log, s.base, e) {
				return fmt.Errorf("%w: last entry does not match the log", errCorruptIndex)
			}
		}
		tv := s.tidx.view(s.base)
		if s.tidx.n > 0 {
			e, ok := tv.entry(s.tidx.n - 1)
			if !ok || e.rel < 0 || s.base+int64(e.rel) >= limit {
				return errCorruptIndex
			}
			s.maxTs, s.maxTsOffset = e.ts, s.base+int64(e.rel)
		}
		s.next = limit
		s.sealed, s.flushed = true, true
		return nil
	}
	b, err := readAllFile(s.idx.f)
	if err != nil {
		return fmt.Errorf("read index %d: %w", s.base, err)
	}
	if s.idx.mem, err = parseOffsetIndex(b, s.base, limit, max(s.size, 1)); err != nil {
		return err
	}
	s.idx.n, s.idx.onDisk = len(s.idx.mem), len(s.idx.mem)
	s.idx.check = s.log
	if b, err = readAllFile(s.tidx.f); err != nil {
		return fmt.Errorf("read time index %d: %w", s.base, err)
	}
	if s.tidx.mem, err = parseTimeIndex(b, s.base, limit); err != nil {
		return err
	}
	s.tidx.n, s.tidx.onDisk = len(s.tidx.mem), len(s.tidx.mem)
	if s.tidx.n > 0 {
		e := s.tidx.mem[s.tidx.n-1]
		s.maxTs, s.maxTsOffset = e.ts, s.base+int64(e.rel)
	}
	// Scan from the last indexed batch to the end.
	start := int64(0)
	if s.idx.n > 0 {
		start = int64(s.idx.mem[s.idx.n-1].pos)
	}
	s.bytesSinceIndex = s.size - start
	sc := newScanner(s.log, start, s.size, false)
	first := true
	for sc.next() {
		h := &sc.h
		if first && s.idx.n > 0 && h.lastOffset() != s.base+int64(s.idx.mem[s.idx.n-1].rel) {
			return fmt.Errorf("%w: last index entry does not match the log", errCorruptIndex)
		}
		first = false
		if h.BaseOffset < s.next && sc.at != start {
			return fmt.Errorf("%w: offsets out of order at %d", errBadBatch, sc.at)
		}
		if h.MaxTimestamp > s.maxTs {
			s.maxTs, s.maxTsOffset = h.MaxTimestamp, h.lastOffset()
		}
		s.next = h.lastOffset() + 1
	}
	if sc.err != nil {
		return sc.err
	}
	if s.size > 0 {
		// The roll base is not stored; Kafka reloads it the same way from
		// the first batch.
		if b, err := readBatchHeader(s.log, 0); err == nil {
			s.rollBaseMs = b.MaxTimestamp
		}
	}
	return nil
}

// indexMayBeEmpty tells whether a segment of size bytes may rightly have
// no offset index entry: appends index a batch only once more than
// index.interval.bytes were appended since the last entry (track), so an
// index stays empty exactly when every batch starts within the first
// index.interval.bytes. Only the headers there are read.
func indexMayBeEmpty(log vfs.File, size int64, cfg *Config) bool {
	sc := newScanner(log, 0, size, false)
	for sc.at <= int64(cfg.IndexIntervalBytes) && sc.next() {
		if sc.at > int64(cfg.IndexIntervalBytes) {
			return false
		}
		if sc.pos == size {
			return true
		}
	}
	return false
}

func readBatchHeader(f vfs.File, pos int64) (batchHeader, error) {
	var b [batchHeaderSize]byte
	if _, err := f.ReadAt(b[:], pos); err != nil {
		return batchHeader{}, err
	}
	return parseHeader(b[:]), nil
}

// indexSizes returns the sizes of the offset and time index files.
func (s *segment) indexSizes() (idx, tidx int64, err error) {
	if idx, err = s.idx.f.Size(); err != nil {
		return 0, 0, fmt.Errorf("size of index %d: %w", s.base, err)
	}
	if tidx, err = s.tidx.f.Size(); err != nil {
		return 0, 0, fmt.Errorf("size of time index %d: %w", s.base, err)
	}
	return idx, tidx, nil
}

// syncFiles syncs the log and appends the pending index entries to the
// files and syncs them. Called under the flush mutex with the pending
// bytes taken under the log mutex. Entries whose write fails are undone
// (a partial entry would misalign the file) and stay pending; a failed
// fsync or undo is tagged as such (failure.go).
func (s *segment) syncFiles(idxBytes, tidxBytes []byte) error {
	if err := s.log.Sync(); err != nil {
		return syncErr(fmt.Errorf("sync segment %d: %w", s.base, err))
	}
	idxSize, tidxSize, err := s.indexSizes()
	if err != nil {
		return err
	}
	undo := func(werr error) error {
		terr := errors.Join(s.idx.f.Truncate(idxSize), s.tidx.f.Truncate(tidxSize))
		if terr != nil {
			return fmt.Errorf("%w: %w; undo: %w", errUndo, werr, terr)
		}
		return werr
	}
	if len(idxBytes) > 0 {
		if _, err := s.idx.f.Write(idxBytes); err != nil {
			return undo(fmt.Errorf("write index %d: %w", s.base, err))
		}
	}
	if len(tidxBytes) > 0 {
		if _, err := s.tidx.f.Write(tidxBytes); err != nil {
			return undo(fmt.Errorf("write time index %d: %w", s.base, err))
		}
	}
	if len(idxBytes) > 0 {
		if err := s.idx.f.Sync(); err != nil {
			return syncErr(fmt.Errorf("sync index %d: %w", s.base, err))
		}
	}
	if len(tidxBytes) > 0 {
		if err := s.tidx.f.Sync(); err != nil {
			return syncErr(fmt.Errorf("sync time index %d: %w", s.base, err))
		}
	}
	return nil
}

// syncAll fsyncs the segment's three files (after a truncation).
func (s *segment) syncAll() error {
	for _, f := range []vfs.File{s.log, s.idx.f, s.tidx.f} {
		if err := f.Sync(); err != nil {
			return syncErr(fmt.Errorf("sync segment %d: %w", s.base, err))
		}
	}
	return nil
}

// renameDeleted renames the segment's files to *.deleted.
func (s *segment) renameDeleted(fsys vfs.FS, dir string) error {
	var errs []error
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
		p := segmentPath(dir, s.base, suf)
		if err := fsys.Rename(p, p+deletedSuffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func removeSegmentFiles(fsys vfs.FS, dir string, base int64, suffix string) error {
	var errs []error
	for _, suf := range []string{logSuffix, indexSuffix, timeIndexSuffix, txnIndexSuffix} {
		if err := fsys.Remove(segmentPath(dir, base, suf) + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
