package tier

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"strata/index"
)

// ErrCorruptSegment marks a remote segment whose objects do not hold what
// its metadata says: a batch header out of bounds, an index past the log.
var ErrCorruptSegment = errors.New("corrupt remote segment")

// MaxIndexObject bounds the .index object a read loads whole.
const MaxIndexObject = 16 << 20

// readChunk is the least a ranged GET of the .log object asks for, so that
// skipping the few batches between an index entry and the wanted offset
// takes one request.
const readChunk = 64 << 10

// batchHeader is the part of a record batch header a read parses: base
// offset, length, partition leader epoch, magic, crc, attributes, last
// offset delta.
const batchHeader = 27

// ReadRemote reads whole record batches of a remote segment for a fetch at
// offset: from the first batch whose last offset reaches offset, as many
// as fit in maxBytes, and always that first batch whole (KIP-74). The
// position to start at comes from the segment's .index object (Kafka's
// offset index: 8-byte entries of relative offset and position), or 0
// without one; the .log object is then read with ranged GETs of what is
// needed. An empty result means the segment holds no batch at or past
// offset (compaction); a missing object is ErrNotFound, inconsistent
// bytes ErrCorruptSegment.
func ReadRemote(ctx context.Context, s ObjectStore, m *index.SegmentMetadata, offset int64, maxBytes int) ([]byte, error) {
	if offset < m.StartOffset || offset > m.EndOffset {
		return nil, fmt.Errorf("%w: offset %d outside segment [%d, %d]", ErrInvalidRange, offset, m.StartOffset, m.EndOffset)
	}
	size := m.SegmentSize
	pos, err := indexPosition(ctx, s, m, offset)
	if err != nil {
		return nil, err
	}
	if pos > size {
		return nil, fmt.Errorf("%w: %s: index position %d past the log's %d bytes", ErrCorruptSegment, ObjectKey(m, index.ObjectLog), pos, size)
	}
	key := ObjectKey(m, index.ObjectLog)
	rr := &rangeReader{ctx: ctx, s: s, key: key, size: size, start: pos}
	chunk := int64(max(maxBytes, readChunk))
	cur, out := pos, int64(-1)
	for cur < size {
		h, err := rr.bytes(cur, batchHeader, chunk)
		if err != nil {
			return nil, err
		}
		base := int64(binary.BigEndian.Uint64(h[0:]))
		length := int64(int32(binary.BigEndian.Uint32(h[8:])))
		magic := h[16]
		last := base
		if magic >= 2 {
			last = base + int64(int32(binary.BigEndian.Uint32(h[23:])))
		}
		end := cur + 12 + length
		if length < batchHeader-12 || end > size || last < base {
			return nil, fmt.Errorf("%w: %s: batch at position %d (length %d, magic %d) out of bounds", ErrCorruptSegment, key, cur, length, magic)
		}
		if last < offset {
			cur = end
			rr.drop(cur)
			continue
		}
		if out < 0 {
			out = cur
		} else if end-out > int64(maxBytes) {
			break
		}
		if _, err := rr.bytes(cur, end-cur, chunk); err != nil {
			return nil, err
		}
		cur = end
		if cur-out >= int64(maxBytes) {
			break
		}
	}
	if out < 0 {
		return nil, nil
	}
	return rr.slice(out, cur), nil
}

// indexPosition is the .log position of the greatest offset index entry
// at or below offset; 0 when the segment has no index object.
func indexPosition(ctx context.Context, s ObjectStore, m *index.SegmentMetadata, offset int64) (int64, error) {
	e, ok := m.Object(index.ObjectOffsetIndex)
	if !ok || e.Size == 0 {
		return 0, nil
	}
	key := ObjectKey(m, index.ObjectOffsetIndex)
	if e.Size > MaxIndexObject || e.Size%8 != 0 {
		return 0, fmt.Errorf("%w: %s: %d bytes", ErrCorruptSegment, key, e.Size)
	}
	b, err := ReadAll(ctx, s, key)
	if err != nil {
		return 0, err
	}
	if int64(len(b)) != e.Size {
		return 0, fmt.Errorf("%w: %s: %d bytes, manifest says %d", ErrCorruptSegment, key, len(b), e.Size)
	}
	rel := offset - m.StartOffset
	pos := int64(0)
	lo, hi := 0, len(b)/8 // entries ascending; find the last with relative offset <= rel
	for lo < hi {
		mid := (lo + hi) / 2
		if int64(binary.BigEndian.Uint32(b[mid*8:])) <= rel {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	if lo > 0 {
		pos = int64(binary.BigEndian.Uint32(b[(lo-1)*8+4:]))
	}
	return pos, nil
}

// rangeReader holds the bytes [start, start+len(buf)) of an object, and
// extends them with ranged GETs.
type rangeReader struct {
	ctx   context.Context
	s     ObjectStore
	key   string
	size  int64
	start int64
	buf   []byte
}

// bytes returns the object's bytes [at, at+n), reading at least chunk
// bytes per GET.
func (r *rangeReader) bytes(at, n, chunk int64) ([]byte, error) {
	if at < r.start || at+n > r.size {
		return nil, fmt.Errorf("%w: %s: bytes [%d, %d) of %d", ErrCorruptSegment, r.key, at, at+n, r.size)
	}
	for have := r.start + int64(len(r.buf)); have < at+n; have = r.start + int64(len(r.buf)) {
		want := min(max(at+n-have, chunk), r.size-have)
		body, err := r.s.Get(r.ctx, r.key, have, want)
		if err != nil {
			return nil, err
		}
		got := int64(len(r.buf))
		r.buf = append(r.buf, make([]byte, want)...)
		_, err = io.ReadFull(body, r.buf[got:])
		body.Close()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: read %d bytes at %d: %v", ErrCorruptSegment, r.key, want, have, err)
		}
	}
	return r.buf[at-r.start : at-r.start+n], nil
}

// drop forgets the bytes before at.
func (r *rangeReader) drop(at int64) {
	if at <= r.start {
		return
	}
	if at >= r.start+int64(len(r.buf)) {
		r.buf, r.start = r.buf[:0], at
		return
	}
	r.buf = append(r.buf[:0], r.buf[at-r.start:]...)
	r.start = at
}

func (r *rangeReader) slice(from, to int64) []byte { return r.buf[from-r.start : to-r.start] }
