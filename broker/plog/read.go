package plog

import (
	"errors"
	"fmt"
	"sort"
	"syscall"

	"strata/internal/vfs"
)

// watchedFile is the file of a FileSlice handed out by the log: a read
// of it that fails with an I/O error fails the log (failure.go), so that
// a disk that fails under a fetch response takes its directory offline
// as one that fails under an append does. It keeps the file's descriptor
// for sendfile (watchedFdFile); an error of sendfile itself cannot be told
// from one of the socket and is not watched.
type watchedFile struct {
	vfs.File
	l *Log
}

func (f *watchedFile) Read(p []byte) (int, error) {
	n, err := f.File.Read(p)
	if isReadFailure(err) {
		f.l.readFailed(err)
	}
	return n, err
}

func (f *watchedFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	if isReadFailure(err) {
		f.l.readFailed(err)
	}
	return n, err
}

// watchedFdFile is a watchedFile whose file has a descriptor.
type watchedFdFile struct {
	*watchedFile
	fd vfs.FdFile
}

func (f watchedFdFile) SyscallConn() (syscall.RawConn, error) { return f.fd.SyscallConn() }

// watchedLocked returns s's file wrapped for FileSlices, the same
// wrapper every time. l.mu held.
func (l *Log) watchedLocked(s *segment) vfs.File {
	if s.watched != nil {
		return s.watched
	}
	w := &watchedFile{File: s.log, l: l}
	s.watched = w
	if fd, ok := s.log.(vfs.FdFile); ok {
		s.watched = watchedFdFile{watchedFile: w, fd: fd}
	}
	return s.watched
}

// viewLocked is s.snapshot for a read whose FileSlice is handed out:
// out is the watched file. l.mu held.
func (l *Log) viewLocked(s *segment) segView {
	v := s.snapshot()
	v.out = l.watchedLocked(s)
	return v
}

// segView is what a reader needs of a segment, taken under the log mutex
// and used without it: the file, its readable size and an index snapshot.
type segView struct {
	f    vfs.File
	base int64
	size int64
	next int64
	idx  offsetView
	tidx timeView
	// sealed: next is the following segment's base, which lies past the
	// last batch when the cleaner removed the segment's tail.
	sealed bool
	// out is the file FileSlices name (viewLocked): f, watched.
	out vfs.File
}

func (s *segment) snapshot() segView {
	return segView{f: s.log, base: s.base, size: s.size, next: s.next, idx: s.idx.view(s.base), tidx: s.tidx.view(s.base), sealed: s.sealed}
}

// findBatch returns the header and position of the first batch at or after
// position from whose last offset is >= target. found is false when the
// segment ends first. A bad index position falls back to a scan from 0.
func (v *segView) findBatch(from, target int64) (h batchHeader, pos int64, found bool, err error) {
	for {
		sc := newScanner(v.f, from, v.size, false)
		for sc.next() {
			if sc.h.lastOffset() >= target {
				return sc.h, sc.at, true, nil
			}
		}
		if sc.err == nil {
			return batchHeader{}, 0, false, nil
		}
		if errors.Is(sc.err, errBadBatch) && from != 0 {
			from = 0
			continue
		}
		return batchHeader{}, 0, false, fmt.Errorf("segment %d: %w", v.base, sc.err)
	}
}

// Read returns whole batches from the batch holding offset, all of whose
// offsets are below maxOffset, at most maxBytes long unless minOne and the
// first batch alone is longer (KIP-74). One segment per call. The slice's
// file stays open for file.delete.delay.ms after its segment is deleted.
func (l *Log) Read(offset, maxOffset int64, maxBytes int, minOne bool) (FileSlice, error) {
	return l.read(offset, maxOffset, maxBytes, minOne, false, nil)
}

// ReadForFetch is Read for Fetch responses, which may end in a partial
// batch (clients and followers drop it, as they do with Kafka's): a slice
// longer than maxBytes is cut at maxBytes without reading batch headers to
// find the last whole batch, and LastOffset is then -1. The first batch is
// still returned whole when minOne (KIP-74).
func (l *Log) ReadForFetch(offset, maxOffset int64, maxBytes int, minOne bool) (FileSlice, error) {
	return l.read(offset, maxOffset, maxBytes, minOne, true, nil)
}

// read is Read and ReadForFetch; with upper non-nil it sets *upper for a
// non-empty slice (ReadCommittedForFetch, read_committed.go).
func (l *Log) read(offset, maxOffset int64, maxBytes int, minOne, partial bool, upper *int64) (FileSlice, error) {
	empty := FileSlice{LastOffset: -1}
	l.mu.Lock()
	if err := l.usableLocked(); err != nil {
		l.mu.Unlock()
		return empty, err
	}
	leo := l.leo()
	if offset < l.logStart || offset > leo {
		ls := l.logStart
		l.mu.Unlock()
		return empty, fmt.Errorf("%w: offset %d, log %d..%d", ErrOffsetOutOfRange, offset, ls, leo)
	}
	maxOffset = min(maxOffset, leo)
	if offset >= maxOffset {
		l.mu.Unlock()
		return empty, nil
	}
	i := l.segmentFor(offset)
	for i+1 < len(l.segs) && offset >= l.segs[i].next {
		i++
	}
	v := l.viewLocked(l.segs[i])
	l.mu.Unlock()

	var (
		first batchHeader
		start int64
	)
	for {
		h, pos, found, err := v.findBatch(v.idx.lookup(offset), offset)
		if err != nil {
			return empty, l.readFailed(err)
		}
		if found {
			first, start = h, pos
			break
		}
		// The rest of the segment was compacted away: go on with the
		// next segment.
		l.mu.Lock()
		j := sort.Search(len(l.segs), func(j int) bool { return l.segs[j].base > v.base })
		if l.closed || j >= len(l.segs) || l.segs[j].base >= maxOffset {
			l.mu.Unlock()
			return empty, nil
		}
		v = l.viewLocked(l.segs[j])
		l.mu.Unlock()
	}
	if first.lastOffset() >= maxOffset {
		return empty, nil
	}
	// End: before the first batch reaching maxOffset, or the segment end.
	end, lastOff := v.size, v.next-1
	if limit := start + int64(max(maxBytes, 0)); partial && maxOffset >= v.next && end > limit {
		// A partial batch may end the slice: no header needs reading.
		if limit < start+first.size() {
			if !minOne {
				return empty, nil
			}
			limit = start + first.size()
		}
		if upper != nil {
			*upper = v.upperBoundAt(limit)
		}
		return FileSlice{File: v.out, Pos: start, Len: limit - start, LastOffset: -1}, nil
	}
	if maxOffset >= v.next && v.sealed {
		// The last batch's offset: scan from the last index entry.
		sc := newScanner(v.f, max(start, v.idx.lookup(v.next-1)), v.size, false)
		for sc.next() {
			lastOff = sc.h.lastOffset()
		}
		if sc.err != nil && !errors.Is(sc.err, errBadBatch) {
			return empty, l.readFailed(fmt.Errorf("segment %d: %w", v.base, sc.err))
		}
	}
	if maxOffset < v.next {
		from := max(start, v.idx.lookup(maxOffset-1))
		sc := newScanner(v.f, from, v.size, false)
		lastOff = first.lastOffset()
		end = start + first.size()
		for sc.next() {
			if sc.h.lastOffset() >= maxOffset {
				break
			}
			end, lastOff = sc.pos, sc.h.lastOffset()
		}
		if sc.err != nil && !errors.Is(sc.err, errBadBatch) {
			return empty, l.readFailed(fmt.Errorf("segment %d: %w", v.base, sc.err))
		}
	}
	if limit := start + int64(max(maxBytes, 0)); end > limit {
		// Cut at whole batches: scan from an indexed batch that ends
		// at or before the limit.
		from := max(start, v.idx.lookupPos(v.idx.lookupPos(limit)-1))
		cut, cutLast := start, int64(-1)
		sc := newScanner(v.f, from, end, false)
		for sc.next() && sc.pos <= limit {
			cut, cutLast = sc.pos, sc.h.lastOffset()
		}
		if sc.err != nil && !errors.Is(sc.err, errBadBatch) {
			return empty, l.readFailed(fmt.Errorf("segment %d: %w", v.base, sc.err))
		}
		if cut == start {
			if !minOne {
				return empty, nil
			}
			cut, cutLast = start+first.size(), first.lastOffset()
		}
		end, lastOff = cut, cutLast
	}
	if upper != nil {
		*upper = lastOff + 1
	}
	return FileSlice{File: v.out, Pos: start, Len: end - start, LastOffset: lastOff}, nil
}

// OffsetForTimestamp returns the first record at or after the log start
// whose timestamp is >= ts, with its timestamp and its batch's leader
// epoch (ListOffsets by timestamp).
func (l *Log) OffsetForTimestamp(ts int64) (int64, int64, int32, bool) {
	return l.OffsetForTimestampCharged(ts, nil)
}

// OffsetForTimestampCharged is OffsetForTimestamp charging what
// decompressing the batch that holds the answer takes to mem (records.go).
func (l *Log) OffsetForTimestampCharged(ts int64, mem Memory) (int64, int64, int32, bool) {
	for i := 0; ; i++ {
		l.mu.Lock()
		if l.closed {
			l.mu.Unlock()
			return -1, -1, -1, false
		}
		for i < len(l.segs) && l.segs[i].maxTs < ts {
			i++
		}
		if i >= len(l.segs) {
			l.mu.Unlock()
			return -1, -1, -1, false
		}
		v := l.segs[i].snapshot()
		logStart := l.logStart
		l.mu.Unlock()
		off, rts, epoch, ok, err := v.offsetForTimestamp(ts, logStart, mem)
		if err != nil {
			// A failed read fails the log (the next request on the
			// partition answers KAFKA_STORAGE_ERROR); this one finds
			// nothing rather than answering past the unread batches.
			l.readFailed(err)
			return -1, -1, -1, false
		}
		if ok {
			return off, rts, epoch, true
		}
	}
}

// offsetForTimestamp searches the segment; err is a failed read.
func (v *segView) offsetForTimestamp(ts, logStart int64, mem Memory) (int64, int64, int32, bool, error) {
	from := v.idx.lookup(logStart)
	if o, ok := v.tidx.lookupBefore(ts); ok {
		from = max(from, v.idx.lookup(o))
	}
	for {
		sc := newScanner(v.f, from, v.size, false)
		for sc.next() {
			h := sc.h
			if !mayHoldTimestamp(&h, ts, logStart) {
				continue
			}
			b, err := readBatch(v.f, sc.at)
			if err != nil {
				return -1, -1, -1, false, fmt.Errorf("segment %d: %w", v.base, err)
			}
			off, rts := recordForTimestamp(b, &h, ts, logStart, mem)
			return off, rts, h.LeaderEpoch, true, nil
		}
		if errors.Is(sc.err, errBadBatch) && from != 0 {
			from = 0
			continue
		}
		if sc.err != nil && !errors.Is(sc.err, errBadBatch) {
			return -1, -1, -1, false, fmt.Errorf("segment %d: %w", v.base, sc.err)
		}
		return -1, -1, -1, false, nil
	}
}

// mayHoldTimestamp reports whether the batch may hold the answer to a
// search for the first record at or after from with a timestamp >= ts:
// its max timestamp reaches ts, it ends at or after from, and it holds a
// record (an empty batch, kept by the cleaner, holds none).
func mayHoldTimestamp(h *batchHeader, ts, from int64) bool {
	return h.MaxTimestamp >= ts && h.lastOffset() >= from && h.RecordCount > 0
}

// recordForTimestamp returns the offset and timestamp of the first record
// of the batch b (whole batch bytes, header h, mayHoldTimestamp true) at or
// after from with a timestamp >= ts; unreadable records answer with the
// batch (its base offset, at least from, and max timestamp).
func recordForTimestamp(b []byte, h *batchHeader, ts, from int64, mem Memory) (int64, int64) {
	var rOff, rTs int64 = -1, -1
	if err := walkRecords(b, from, mem, func(o, t int64) bool {
		if o >= from && t >= ts {
			rOff, rTs = o, t
			return false
		}
		return true
	}); err != nil || rOff < 0 {
		rOff, rTs = max(h.BaseOffset, from), h.MaxTimestamp
	}
	return rOff, rTs
}

// MaxTimestamp returns the offset and timestamp of the record with the
// largest timestamp, and its batch's leader epoch (KIP-734); offset -1 when
// the log holds no timestamps.
func (l *Log) MaxTimestamp() (int64, int64, int32) {
	return l.MaxTimestampCharged(nil)
}

// MaxTimestampCharged is MaxTimestamp charging what decompressing the
// batch of the largest timestamp takes to mem (records.go).
func (l *Log) MaxTimestampCharged(mem Memory) (int64, int64, int32) {
	l.mu.Lock()
	best := -1
	for i, s := range l.segs {
		if s.maxTs >= 0 && (best < 0 || s.maxTs > l.segs[best].maxTs) && s.next > l.logStart {
			best = i
		}
	}
	if best < 0 || l.closed {
		l.mu.Unlock()
		return -1, -1, -1
	}
	s := l.segs[best]
	v, maxTs, at := s.snapshot(), s.maxTs, max(s.maxTsOffset, l.logStart)
	l.mu.Unlock()

	h, pos, found, err := v.findBatch(v.idx.lookup(at), at)
	if err != nil || !found {
		l.readFailed(err) // an I/O error fails the log; nil or a torn batch does nothing
		return at, maxTs, -1
	}
	b, err := readBatch(v.f, pos)
	if err != nil {
		l.readFailed(err)
		return at, maxTs, h.LeaderEpoch
	}
	off := int64(-1)
	_ = walkRecords(b, -1, mem, func(o, t int64) bool {
		if o > at {
			return false
		}
		if t == maxTs {
			off = o
			return false
		}
		return true
	})
	if off < 0 {
		off = at
	}
	return off, maxTs, h.LeaderEpoch
}
