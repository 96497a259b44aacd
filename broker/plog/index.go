package plog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"

	"strata/internal/vfs"
)

// The sparse offset index (<base>.index) and time index (<base>.timeindex)
// of a segment, in Kafka's layout:
//
//	.index      8-byte entries: int32 offset relative to the base, int32 byte position in .log
//	.timeindex 12-byte entries: int64 timestamp, int32 relative offset
//
// The active segment keeps its entries in memory (appended under the log's
// mutex; a truncation copies the slice, so a snapshot taken by a reader
// never changes under it) and writes those not yet on disk when it is
// flushed; a sealed, flushed segment looks entries up in the file. Nothing
// is preallocated: a file is always exactly N entries long.
//
// Entries read from disk (a segment loaded without recovery) are not
// trusted: Open checks only the last one (Kafka's sanity check), so every
// lookup checks that the entry it lands on points at a batch whose last
// offset is the entry's, and falls back to the segment start otherwise. A
// corrupt middle entry costs a scan, never a wrong answer. Entries this
// process built itself (appends, recovery) are not checked.

const (
	offsetEntrySize = 8
	timeEntrySize   = 12
)

var errCorruptIndex = errors.New("corrupt index")

type offsetEntry struct {
	rel int32 // last offset of the indexed batch, relative to the base
	pos int32 // byte position of the indexed batch
}

type timeEntry struct {
	ts  int64
	rel int32 // relative offset of the batch holding the max timestamp so far
}

// offsetIndex is a segment's offset index. Fields are guarded by the log's
// mutex; file writes happen under the log's flush mutex.
type offsetIndex struct {
	f      vfs.File
	mem    []offsetEntry // nil once file-backed
	n      int           // number of entries
	onDisk int           // entries already in the file
	// check is the segment's .log when the entries were read from disk:
	// lookups verify the entry they use against it (nil: trusted).
	check vfs.File
}

type timeIndex struct {
	f      vfs.File
	mem    []timeEntry
	n      int
	onDisk int
}

// offsetView is an immutable snapshot of an offset index for lookups
// without the log mutex.
type offsetView struct {
	base  int64
	mem   []offsetEntry
	f     vfs.File
	n     int
	check vfs.File
}

type timeView struct {
	base int64
	mem  []timeEntry
	f    vfs.File
	n    int
}

func (x *offsetIndex) view(base int64) offsetView {
	return offsetView{base: base, mem: x.mem[:len(x.mem):len(x.mem)], f: x.f, n: x.n, check: x.check}
}

func (x *timeIndex) view(base int64) timeView {
	return timeView{base: base, mem: x.mem[:len(x.mem):len(x.mem)], f: x.f, n: x.n}
}

func (v offsetView) entry(i int) (offsetEntry, bool) {
	if v.mem != nil {
		return v.mem[i], true
	}
	var b [offsetEntrySize]byte
	if _, err := v.f.ReadAt(b[:], int64(i)*offsetEntrySize); err != nil {
		return offsetEntry{}, false
	}
	return decodeOffsetEntry(b[:]), true
}

func (v timeView) entry(i int) (timeEntry, bool) {
	if v.mem != nil {
		return v.mem[i], true
	}
	var b [timeEntrySize]byte
	if _, err := v.f.ReadAt(b[:], int64(i)*timeEntrySize); err != nil {
		return timeEntry{}, false
	}
	return decodeTimeEntry(b[:]), true
}

// lookup returns the position of the last indexed batch whose last offset
// is <= target, or 0: a batch boundary at or before the batch holding
// target.
func (v offsetView) lookup(target int64) int64 {
	rel := target - v.base
	ok := true
	i := sort.Search(v.n, func(i int) bool {
		e, good := v.entry(i)
		ok = ok && good
		return int64(e.rel) > rel
	})
	if !ok || i == 0 {
		return 0
	}
	e, _ := v.entry(i - 1)
	if int64(e.rel) > rel || !v.lands(e) {
		return 0
	}
	return int64(e.pos)
}

// lookupPos returns the largest indexed position <= pos, or 0.
func (v offsetView) lookupPos(pos int64) int64 {
	ok := true
	i := sort.Search(v.n, func(i int) bool {
		e, good := v.entry(i)
		ok = ok && good
		return int64(e.pos) > pos
	})
	if !ok || i == 0 {
		return 0
	}
	e, _ := v.entry(i - 1)
	if int64(e.pos) > pos || !v.lands(e) {
		return 0
	}
	return int64(e.pos)
}

// lands tells whether entry e points at a sane batch header whose last
// offset is the entry's: then every batch before that position ends
// before it, and scanning from there is right. Trusted entries are not
// read.
func (v offsetView) lands(e offsetEntry) bool {
	if v.check == nil {
		return true
	}
	return entryLands(v.check, v.base, e)
}

func entryLands(log vfs.File, base int64, e offsetEntry) bool {
	if e.rel < 0 || e.pos < 0 {
		return false
	}
	h, err := readBatchHeader(log, int64(e.pos))
	return err == nil && h.Magic == 2 && h.Length >= batchHeaderSize-logOverhead &&
		h.LastOffsetDelta >= 0 && h.BaseOffset >= base && h.lastOffset() == base+int64(e.rel)
}

// lookupBefore returns the offset of the last entry whose timestamp is
// < ts: every batch up to that offset has timestamps below ts.
func (v timeView) lookupBefore(ts int64) (int64, bool) {
	ok := true
	i := sort.Search(v.n, func(i int) bool {
		e, good := v.entry(i)
		ok = ok && good
		return e.ts >= ts
	})
	if !ok || i == 0 {
		return 0, false
	}
	e, _ := v.entry(i - 1)
	return v.base + int64(e.rel), true
}

func decodeOffsetEntry(b []byte) offsetEntry {
	return offsetEntry{rel: int32(binary.BigEndian.Uint32(b)), pos: int32(binary.BigEndian.Uint32(b[4:]))}
}

func decodeTimeEntry(b []byte) timeEntry {
	return timeEntry{ts: int64(binary.BigEndian.Uint64(b)), rel: int32(binary.BigEndian.Uint32(b[8:]))}
}

func (x *offsetIndex) append(rel int32, pos int32) {
	x.mem = append(x.mem, offsetEntry{rel: rel, pos: pos})
	x.n++
}

// maybeAppend adds an entry if ts is newer than the last entry's.
func (x *timeIndex) maybeAppend(ts int64, rel int32) {
	if x.n > 0 && x.mem[x.n-1].ts >= ts {
		return
	}
	x.mem = append(x.mem, timeEntry{ts: ts, rel: rel})
	x.n++
}

// pending encodes the entries not yet in the file; the caller writes them
// and then calls wrote. Both run under the flush mutex; pending reads the
// in-memory slice under the log mutex.
func (x *offsetIndex) pending() ([]byte, int) {
	if x.mem == nil || x.onDisk >= x.n {
		return nil, x.n
	}
	b := make([]byte, 0, (x.n-x.onDisk)*offsetEntrySize)
	for _, e := range x.mem[x.onDisk:x.n] {
		b = binary.BigEndian.AppendUint32(b, uint32(e.rel))
		b = binary.BigEndian.AppendUint32(b, uint32(e.pos))
	}
	return b, x.n
}

func (x *timeIndex) pending() ([]byte, int) {
	if x.mem == nil || x.onDisk >= x.n {
		return nil, x.n
	}
	b := make([]byte, 0, (x.n-x.onDisk)*timeEntrySize)
	for _, e := range x.mem[x.onDisk:x.n] {
		b = binary.BigEndian.AppendUint64(b, uint64(e.ts))
		b = binary.BigEndian.AppendUint32(b, uint32(e.rel))
	}
	return b, x.n
}

// readAllFile reads a whole small file.
func readAllFile(f vfs.File) ([]byte, error) {
	size, err := f.Size()
	if err != nil {
		return nil, err
	}
	b := make([]byte, size)
	if _, err := f.ReadAt(b, 0); err != nil && !(errors.Is(err, io.EOF) && size == 0) {
		return nil, err
	}
	return b, nil
}

// parseOffsetIndex decodes and sanity-checks a whole .index file of a
// segment whose .log is logSize bytes and whose offsets are below limit
// (the next segment's base, or MaxInt64): the size is a multiple of the
// entry size, relative offsets and positions strictly increase, and
// positions lie inside the log.
func parseOffsetIndex(b []byte, base, limit, logSize int64) ([]offsetEntry, error) {
	if len(b)%offsetEntrySize != 0 {
		return nil, fmt.Errorf("%w: size %d is not a multiple of %d", errCorruptIndex, len(b), offsetEntrySize)
	}
	out := make([]offsetEntry, 0, len(b)/offsetEntrySize)
	for i := 0; i < len(b); i += offsetEntrySize {
		e := decodeOffsetEntry(b[i:])
		if e.rel < 0 || e.pos < 0 || int64(e.pos) >= logSize || base+int64(e.rel) >= limit {
			return nil, fmt.Errorf("%w: entry %d (%d, %d) out of range", errCorruptIndex, i/offsetEntrySize, e.rel, e.pos)
		}
		if n := len(out); n > 0 && (e.rel <= out[n-1].rel || e.pos <= out[n-1].pos) {
			return nil, fmt.Errorf("%w: entry %d not increasing", errCorruptIndex, i/offsetEntrySize)
		}
		out = append(out, e)
	}
	return out, nil
}

// parseTimeIndex is parseOffsetIndex for a .timeindex: timestamps and
// offsets never decrease.
func parseTimeIndex(b []byte, base, limit int64) ([]timeEntry, error) {
	if len(b)%timeEntrySize != 0 {
		return nil, fmt.Errorf("%w: time index size %d is not a multiple of %d", errCorruptIndex, len(b), timeEntrySize)
	}
	out := make([]timeEntry, 0, len(b)/timeEntrySize)
	for i := 0; i < len(b); i += timeEntrySize {
		e := decodeTimeEntry(b[i:])
		if e.rel < 0 || base+int64(e.rel) >= limit {
			return nil, fmt.Errorf("%w: time entry %d out of range", errCorruptIndex, i/timeEntrySize)
		}
		if n := len(out); n > 0 && (e.ts < out[n-1].ts || e.rel < out[n-1].rel) {
			return nil, fmt.Errorf("%w: time entry %d decreasing", errCorruptIndex, i/timeEntrySize)
		}
		out = append(out, e)
	}
	return out, nil
}
