package plog

// The cleaner's view of a batch's records, read as a stream: from the
// batch bytes, or for a compressed batch from a bounded decompression
// stream (codec.go), one record at a time, so that the cleaner never holds
// a batch decompressed (a record of hundreds of MiB passes through its
// 32 KiB read buffer). A key is never held either: the cleaner keeps its
// MD5, hashed as it streams by. A rebuilt batch's records are written as
// they are read into the codec's streaming compressor, whose output is
// bounded (clean_write.go).
//
// What a stream holds (its codec's window and buffers, streamMemory) is
// charged to the caller's Memory, the broker's queued.max.request.bytes,
// before anything is decompressed. A batch the cleaner cannot read within
// its bounds (it decompresses past maxDecompressedBatch, declares a window
// larger than allowed, or its charge is refused) is kept as it is, with
// a WARN: never a record lost, only that batch left uncompacted.

import (
	"context"
	"crypto/md5"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
)

// Memory charges what reading a stored compressed batch holds to a memory
// budget (the broker's queued.max.request.bytes): it reserves n bytes,
// waiting while they are taken, and returns their release. An error means
// they cannot be had (more than the whole budget, or the wait ended), and
// the batch is not decompressed. A nil Memory charges nothing.
type Memory func(n int64) (release func(), err error)

// MemoryError is a charge that Memory refused.
type MemoryError struct {
	Bytes int64
	Err   error
}

func (e *MemoryError) Error() string {
	return fmt.Sprintf("reading the batch needs %d bytes of memory: %v", e.Bytes, e.Err)
}
func (e *MemoryError) Unwrap() error { return e.Err }

func (m Memory) charge(n int64) (func(), error) {
	if m == nil || n <= 0 {
		return func() {}, nil
	}
	release, err := m(n)
	if err != nil {
		return nil, &MemoryError{Bytes: n, Err: err}
	}
	if release == nil {
		release = func() {}
	}
	return release, nil
}

// beyondBounds reports whether err means a batch could not be read within
// the bounds on memory (too large to decompress, or its charge refused),
// rather than that it is corrupt.
func beyondBounds(err error) bool {
	var tl *tooLargeError
	var me *MemoryError
	return errors.As(err, &tl) || errors.As(err, &me)
}

// streamRecord is what the cleaner reads of one record.
type streamRecord struct {
	offset    int64
	ts        int64
	attrs     byte
	keyNull   bool
	digest    [16]byte // MD5 of the key
	valueNull bool
	length    int64 // the record's size after its length varint
	tsLen     int   // encoded size of its timestamp delta
	offLen    int   // and of its offset delta
}

// recordStream reads the records of one batch in order.
type recordStream struct {
	h    *batchHeader
	r    recReader
	done func()
	md   hash.Hash
}

// maxStreamRecords is the most records a batch whose records section is
// data (codec codec) can hold: every record takes minRecordSize bytes.
func maxStreamRecords(data []byte, codec int) int64 {
	room := int64(len(data))
	if codec != codecNone {
		room = int64(maxDecompressedBatch)
	}
	return room / minRecordSize
}

// openRecordStream starts reading the records of batch b (header h). A
// compressed batch's stream is charged to mem (streamMemory plus extra)
// before it is opened. close must be called.
func openRecordStream(b []byte, h *batchHeader, mem Memory, extra int64) (*recordStream, error) {
	if h.RecordCount < 0 || h.size() > int64(len(b)) || h.size() < batchHeaderSize {
		return nil, fmt.Errorf("%w: record count %d", errBadRecords, h.RecordCount)
	}
	data := b[batchHeaderSize:h.size()]
	if int64(h.RecordCount) > maxStreamRecords(data, h.codec()) {
		return nil, fmt.Errorf("%w: %d records cannot fit in the batch", errBadRecords, h.RecordCount)
	}
	s := &recordStream{h: h, r: recReader{buf: data}, done: func() {}, md: md5.New()}
	if h.codec() == codecNone {
		return s, nil
	}
	release, err := mem.charge(streamMemory(data, h.codec()) + extra)
	if err != nil {
		return nil, err
	}
	src, done, err := openRecords(data, h.codec(), maxDecompressedBatch)
	if err != nil {
		release()
		return nil, err
	}
	back := recBufPool.Get().(*[]byte)
	s.r = recReader{src: src, back: back, buf: (*back)[:0]}
	s.done = func() {
		done()
		recBufPool.Put(back)
		release()
	}
	return s, nil
}

func (s *recordStream) close() {
	s.done()
	s.done = func() {}
}

// fault is the error of a record that cannot be read: the stream's
// (decompression) error if any, else errBadRecords.
func (s *recordStream) fault(i int32, what string) error {
	if s.r.err != nil {
		return s.r.err
	}
	return fmt.Errorf("%w: record %d of batch at offset %d: %s", errBadRecords, i, s.h.BaseOffset, what)
}

// varint reads a varint, copying its bytes to w when set; it returns the
// value and its encoded size.
func (s *recordStream) varint(w io.Writer) (int64, int, bool) {
	s.r.fill(binary.MaxVarintLen64)
	v, n := binary.Varint(s.r.buf)
	if n <= 0 {
		return 0, 0, false
	}
	if w != nil {
		w.Write(s.r.buf[:n])
	}
	s.r.buf = s.r.buf[n:]
	return v, n, true
}

// copyN passes n bytes of the stream to h and w (each when set).
func (s *recordStream) copyN(h hash.Hash, w io.Writer, n int64) bool {
	for n > 0 {
		if len(s.r.buf) == 0 {
			s.r.fill(1)
			if len(s.r.buf) == 0 {
				return false
			}
		}
		k := min(n, int64(len(s.r.buf)))
		if h != nil {
			h.Write(s.r.buf[:k])
		}
		if w != nil {
			w.Write(s.r.buf[:k])
		}
		s.r.buf = s.r.buf[k:]
		n -= k
	}
	return true
}

// head reads record i's length, attributes and timestamp and offset
// deltas.
func (s *recordStream) head(i int32, rec *streamRecord) error {
	length, n, ok := s.varint(nil)
	if !ok || length < 1 || length > math.MaxInt32 || n > 5 {
		return s.fault(i, "bad record length")
	}
	rec.length = length
	s.r.fill(1)
	if len(s.r.buf) == 0 {
		return s.fault(i, "the records end inside it")
	}
	rec.attrs = s.r.buf[0]
	s.r.buf = s.r.buf[1:]
	tsDelta, tsLen, ok := s.varint(nil)
	if !ok {
		return s.fault(i, "bad timestamp delta")
	}
	offDelta, offLen, ok := s.varint(nil)
	if !ok || offDelta < 0 || offDelta > int64(s.h.LastOffsetDelta) {
		return s.fault(i, "bad offset delta")
	}
	rec.ts, rec.offset = s.h.BaseTimestamp+tsDelta, s.h.BaseOffset+offDelta
	rec.tsLen, rec.offLen = tsLen, offLen
	return nil
}

// body reads the rest of record i (rec's head read): its key (hashed into
// rec.digest), value and headers, copying their bytes verbatim to w when
// set.
func (s *recordStream) body(i int32, rec *streamRecord, w io.Writer) error {
	left := rec.length - 1 - int64(rec.tsLen) - int64(rec.offLen)
	keyLen, n, ok := s.varint(w)
	left -= int64(n)
	if !ok || left < 0 || keyLen < -1 || keyLen > left {
		return s.fault(i, "bad key length")
	}
	rec.keyNull = keyLen < 0
	s.md.Reset()
	if keyLen >= 0 {
		if !s.copyN(s.md, w, keyLen) {
			return s.fault(i, "the records end inside its key")
		}
		left -= keyLen
		s.md.Sum(rec.digest[:0])
	}
	valLen, n, ok := s.varint(w)
	left -= int64(n)
	if !ok || left < 0 || valLen < -1 || valLen > left {
		return s.fault(i, "bad value length")
	}
	rec.valueNull = valLen < 0
	if !s.copyN(nil, w, left) { // the value and the headers
		return s.fault(i, "the records end inside it")
	}
	return nil
}

// next reads record i whole, copying nothing.
func (s *recordStream) next(i int32, rec *streamRecord) error {
	if err := s.head(i, rec); err != nil {
		return err
	}
	return s.body(i, rec, nil)
}

// end checks that nothing follows the last record.
func (s *recordStream) end() error {
	if !s.r.atEnd() {
		return fmt.Errorf("%w: bytes after the last record of batch at offset %d", errBadRecords, s.h.BaseOffset)
	}
	return s.r.err
}

// bitset marks the records a rebuilt batch keeps.
type bitset []uint64

func newBitset(n int32) bitset    { return make(bitset, (int64(n)+63)/64) }
func (b bitset) set(i int32)      { b[i/64] |= 1 << (i % 64) }
func (b bitset) has(i int32) bool { return b[i/64]&(1<<(i%64)) != 0 }

type memoryKey struct{}

// ContextWithMemory returns ctx carrying mem, for the searches that reach
// plog through layers that pass only a context (remote segments).
func ContextWithMemory(ctx context.Context, mem Memory) context.Context {
	return context.WithValue(ctx, memoryKey{}, mem)
}

// MemoryFromContext returns the Memory ctx carries, or nil.
func MemoryFromContext(ctx context.Context) Memory {
	m, _ := ctx.Value(memoryKey{}).(Memory)
	return m
}
