package plog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"strata/internal/vfs"
)

// errBadBatch marks bytes in a segment that are not a well-formed batch:
// a torn or corrupt tail that recovery truncates.
var errBadBatch = errors.New("bad batch in segment")

const (
	headerChunk = 8 << 10   // read size when only headers are needed
	verifyChunk = 256 << 10 // read size when whole batches are checked
)

// scanner walks the batches of a segment file between two positions with
// few, large reads. With verify it reads whole batches and checks their
// CRC; otherwise it reads headers only.
type scanner struct {
	f      vfs.File
	pos    int64 // position of the next batch
	end    int64
	verify bool

	buf    []byte
	bufPos int64

	// Set by next: the current batch.
	h     batchHeader
	at    int64  // its position
	batch []byte // whole batch bytes when verify (valid until the next call)
	err   error  // errBadBatch (wrapped) for a torn/corrupt batch, else an I/O error
}

func newScanner(f vfs.File, pos, end int64, verify bool) *scanner {
	return &scanner{f: f, pos: pos, end: end, verify: verify, bufPos: -1}
}

func (s *scanner) ensure(n int64) ([]byte, error) {
	if s.bufPos >= 0 && s.pos >= s.bufPos && s.pos+n <= s.bufPos+int64(len(s.buf)) {
		off := s.pos - s.bufPos
		return s.buf[off : off+n], nil
	}
	chunk := int64(headerChunk)
	if s.verify {
		chunk = verifyChunk
	}
	want := min(max(n, chunk), s.end-s.pos)
	if int64(cap(s.buf)) < want {
		s.buf = make([]byte, want)
	}
	s.buf = s.buf[:want]
	got, err := s.f.ReadAt(s.buf, s.pos)
	if int64(got) < n {
		s.bufPos = -1
		if err == nil || errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%w: file ends at %d, before %d", errBadBatch, s.pos+int64(got), s.pos+n)
		}
		return nil, fmt.Errorf("read at %d: %w", s.pos, err)
	}
	s.buf = s.buf[:got]
	s.bufPos = s.pos
	return s.buf[:n], nil
}

// next advances to the next batch; false at the end or on error (s.err).
func (s *scanner) next() bool {
	if s.pos >= s.end || s.err != nil {
		return false
	}
	if s.end-s.pos < batchHeaderSize {
		s.err = fmt.Errorf("%w: %d stray bytes at %d", errBadBatch, s.end-s.pos, s.pos)
		return false
	}
	hb, err := s.ensure(batchHeaderSize)
	if err != nil {
		s.err = err
		return false
	}
	length := int64(int32(binary.BigEndian.Uint32(hb[offBatchLength:])))
	if hb[offMagic] != 2 || length < batchHeaderSize-logOverhead || logOverhead+length > s.end-s.pos {
		s.err = fmt.Errorf("%w: bad header at %d (magic %d, length %d)", errBadBatch, s.pos, int8(hb[offMagic]), length)
		return false
	}
	s.h = parseHeader(hb)
	if s.verify {
		b, err := s.ensure(s.h.size())
		if err != nil {
			s.err = err
			return false
		}
		if got := batchCRC(b); got != s.h.CRC {
			s.err = fmt.Errorf("%w: crc mismatch at %d", errBadBatch, s.pos)
			return false
		}
		s.batch = b
	}
	s.at = s.pos
	s.pos += s.h.size()
	return true
}

// readBatch reads the whole batch at pos.
func readBatch(f vfs.File, pos int64) ([]byte, error) {
	var hb [logOverhead]byte
	if _, err := f.ReadAt(hb[:], pos); err != nil {
		return nil, fmt.Errorf("read batch at %d: %w", pos, err)
	}
	length := int64(int32(binary.BigEndian.Uint32(hb[offBatchLength:])))
	if length < batchHeaderSize-logOverhead || length > 1<<30 {
		return nil, fmt.Errorf("%w: length %d at %d", errBadBatch, length, pos)
	}
	b := make([]byte, logOverhead+length)
	if _, err := f.ReadAt(b, pos); err != nil {
		return nil, fmt.Errorf("read batch at %d: %w", pos, err)
	}
	return b, nil
}
