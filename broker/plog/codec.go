package plog

// Record-batch compression codecs (attributes bits 0-2), for the paths
// that must look inside batches: produce validation (validate.go), which
// reads the records of every compressed batch as a stream, ListOffsets by
// timestamp (records.go), the key check on appends to compacted topics and
// the log cleaner, which recompresses the records it keeps with the
// batch's original codec. Decompression is bounded twice: one batch never
// inflates past maxDecompressedBatch, and at most decompressSlots
// decompressions run at once in the process, whatever their caller (a
// batch's work is CPU-bound, so more would only queue on the cores while
// holding memory). It never panics on corrupt input; it returns
// errBadRecords (wrapped) instead.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

const (
	codecNone   = 0
	codecGzip   = 1
	codecSnappy = 2
	codecLz4    = 3
	codecZstd   = 4

	// xerialBlockSize is the uncompressed size of one block of the
	// xerial-framed snappy stream Kafka's Java clients and brokers write.
	xerialBlockSize = 32 << 10
)

// maxDecompressedBatch bounds what one batch may decompress to (a
// variable only so that tests can lower it; the zstd decoders take it
// when they are made).
var maxDecompressedBatch = 256 << 20

// decompressSlots bounds the decompressions running at once across the
// process (produce validation, ListOffsets, the compacted-topic key check,
// the cleaner): one per core, at least two and at most eight (Kafka
// validates on its request handler threads, num.io.threads, eight by
// default). A decompression waits for a slot and holds it until its
// records are read. Memory is bounded with it: a decompression holds a
// 32 KiB buffer and its codec's state, which for zstd is the frame's
// window (a frame of one segment declares its whole content as window),
// at most maxDecompressedBatch.
var decompressSlots = make(chan struct{}, min(max(2, runtime.GOMAXPROCS(0)), 8))

// lookupSlots bounds the share of decompressSlots that searches by
// timestamp (ListOffsets, which clients may repeat at will) may hold:
// half, at least one, so that they never starve produce validation. A
// search takes a lookup slot first, then a decompression slot.
var lookupSlots = make(chan struct{}, max(1, cap(decompressSlots)/2))

// decompressions counts the decompressions started and decompressedBytes
// the bytes streams produced (tests check the work of a search).
var decompressions, decompressedBytes atomic.Int64

// acquire takes a slot of sem and returns its release.
func acquire(sem chan struct{}) func() {
	sem <- struct{}{}
	return func() { <-sem }
}

// xerialHeader starts Kafka's (snappy-java's) framed snappy: magic, then
// version 1 and minimum compatible version 1.
var xerialHeader = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}

var (
	zstdDecPool = sync.Pool{New: func() any {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
			zstd.WithDecoderMaxMemory(uint64(maxDecompressedBatch)))
		if err != nil {
			return nil
		}
		return d
	}}
	zstdEncPool = sync.Pool{New: func() any {
		e, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(64<<10), zstd.WithZeroFrames(true))
		if err != nil {
			return nil
		}
		return e
	}}
)

// decompressRecords returns the uncompressed records section of a batch
// whose records section is data, compressed with codec.
func decompressRecords(data []byte, codec int) (out []byte, err error) {
	if codec == codecNone {
		return data, nil
	}
	defer acquire(decompressSlots)()
	decompressions.Add(1)
	defer func() {
		// The codec libraries are not expected to panic, but the bytes
		// come from outside: never let them take the broker down.
		if r := recover(); r != nil {
			out, err = nil, fmt.Errorf("%w: codec %d: %v", errBadRecords, codec, r)
		}
	}()
	switch codec {
	case codecNone:
		return data, nil
	case codecGzip:
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("%w: gzip: %v", errBadRecords, err)
		}
		return readBounded(zr, "gzip")
	case codecSnappy:
		return decodeSnappy(data)
	case codecLz4:
		return readBounded(lz4.NewReader(bytes.NewReader(data)), "lz4")
	case codecZstd:
		d, _ := zstdDecPool.Get().(*zstd.Decoder)
		if d == nil {
			return nil, fmt.Errorf("%w: zstd decoder unavailable", errBadRecords)
		}
		defer zstdDecPool.Put(d)
		out, err := d.DecodeAll(data, nil)
		if err != nil {
			return nil, fmt.Errorf("%w: zstd: %v", errBadRecords, err)
		}
		if len(out) > maxDecompressedBatch {
			return nil, fmt.Errorf("%w: zstd: more than %d bytes", errBadRecords, maxDecompressedBatch)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: unknown codec %d", errBadRecords, codec)
}

func readBounded(r io.Reader, name string) ([]byte, error) {
	out, err := io.ReadAll(io.LimitReader(r, int64(maxDecompressedBatch)+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", errBadRecords, name, err)
	}
	if len(out) > maxDecompressedBatch {
		return nil, fmt.Errorf("%w: %s: more than %d bytes", errBadRecords, name, maxDecompressedBatch)
	}
	return out, nil
}

// decodeSnappy decodes xerial-framed snappy (what Kafka's Java code
// writes) or a plain snappy block (what some clients write).
func decodeSnappy(data []byte) ([]byte, error) {
	if !bytes.HasPrefix(data, xerialHeader[:8]) {
		return decodeSnappyBlock(nil, data)
	}
	if len(data) < len(xerialHeader) {
		return nil, fmt.Errorf("%w: snappy: short xerial header", errBadRecords)
	}
	var out []byte
	for rest := data[len(xerialHeader):]; len(rest) > 0; {
		if len(rest) < 4 {
			return nil, fmt.Errorf("%w: snappy: truncated xerial block length", errBadRecords)
		}
		n := binary.BigEndian.Uint32(rest)
		rest = rest[4:]
		if uint64(n) > uint64(len(rest)) {
			return nil, fmt.Errorf("%w: snappy: xerial block of %d bytes, %d left", errBadRecords, n, len(rest))
		}
		var err error
		if out, err = decodeSnappyBlock(out, rest[:n]); err != nil {
			return nil, err
		}
		rest = rest[n:]
	}
	return out, nil
}

// decodeSnappyBlock appends the decoding of one snappy block to dst. A
// block whose decoded length is more than snappy's largest expansion
// (about 21 times: a 3-byte copy of 64 bytes) is not snappy (s2's
// extensions expand further, and Kafka's snappy does not read them).
func decodeSnappyBlock(dst, block []byte) ([]byte, error) {
	n, err := s2.DecodedLen(block)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", errBadRecords, err)
	}
	if n < 0 || len(dst)+n > maxDecompressedBatch || n > 22*len(block)+16 {
		return nil, fmt.Errorf("%w: snappy: block of %d bytes decoding to %d", errBadRecords, len(block), n)
	}
	if cap(dst)-len(dst) < n {
		dst = append(make([]byte, 0, len(dst)+n), dst...)
	}
	got, err := s2.Decode(dst[len(dst):len(dst)+n], block)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", errBadRecords, err)
	}
	return dst[:len(dst)+len(got)], nil
}

// compressRecords compresses an uncompressed records section with codec,
// in the formats Kafka writes (snappy: xerial framing; lz4: the frame
// format).
func compressRecords(data []byte, codec int) ([]byte, error) {
	switch codec {
	case codecNone:
		return data, nil
	case codecGzip:
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(data); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		if err := zw.Close(); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return buf.Bytes(), nil
	case codecSnappy:
		out := append([]byte(nil), xerialHeader...)
		for p := 0; p < len(data) || p == 0; p += xerialBlockSize {
			block := s2.EncodeSnappy(nil, data[p:min(p+xerialBlockSize, len(data))])
			out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
			out = append(out, block...)
			if len(data) == 0 {
				break
			}
		}
		return out, nil
	case codecLz4:
		var buf bytes.Buffer
		zw := lz4.NewWriter(&buf)
		if _, err := zw.Write(data); err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		if err := zw.Close(); err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		return buf.Bytes(), nil
	case codecZstd:
		e, _ := zstdEncPool.Get().(*zstd.Encoder)
		if e == nil {
			return nil, errors.New("zstd: encoder unavailable")
		}
		defer zstdEncPool.Put(e)
		return e.EncodeAll(data, nil), nil
	}
	return nil, fmt.Errorf("unknown codec %d", codec)
}

var (
	gzipReaderPool = sync.Pool{New: func() any { return new(gzip.Reader) }}
	lz4ReaderPool  = sync.Pool{New: func() any { return lz4.NewReader(nil) }}
)

// openRecords starts decompressing data, the records section of a batch
// compressed with codec (not codecNone), as a stream, once a slot of
// decompressSlots is free: only a small window of the records is in
// memory at a time (zstd keeps the frame's window, at most
// maxDecompressedBatch; a plain snappy block is decoded whole, and is at
// most 22 times its compressed size). The reader fails with errBadRecords
// (wrapped) on corrupt input and once it has produced
// maxDecompressedBatch bytes. done releases the slot and the codec's
// state; it must be called, once.
func openRecords(data []byte, codec int) (r io.Reader, done func(), err error) {
	release := acquire(decompressSlots)
	decompressions.Add(1)
	defer func() {
		if p := recover(); p != nil {
			r, err = nil, fmt.Errorf("%w: codec %d: %v", errBadRecords, codec, p)
		}
		if err != nil {
			release()
		}
	}()
	name := codecName(codec)
	switch codec {
	case codecGzip:
		zr := gzipReaderPool.Get().(*gzip.Reader)
		if err := zr.Reset(bytes.NewReader(data)); err != nil {
			gzipReaderPool.Put(zr)
			return nil, nil, fmt.Errorf("%w: gzip: %v", errBadRecords, err)
		}
		return bound(zr, name), func() { gzipReaderPool.Put(zr); release() }, nil
	case codecSnappy:
		if bytes.HasPrefix(data, xerialHeader[:8]) {
			if len(data) < len(xerialHeader) {
				return nil, nil, fmt.Errorf("%w: snappy: short xerial header", errBadRecords)
			}
			return bound(&xerialReader{rest: data[len(xerialHeader):]}, name), release, nil
		}
		out, err := decodeSnappyBlock(nil, data)
		if err != nil {
			return nil, nil, err
		}
		return bound(bytes.NewReader(out), name), release, nil
	case codecLz4:
		zr := lz4ReaderPool.Get().(*lz4.Reader)
		zr.Reset(bytes.NewReader(data))
		return bound(zr, name), func() { zr.Reset(nil); lz4ReaderPool.Put(zr); release() }, nil
	case codecZstd:
		d, _ := zstdDecPool.Get().(*zstd.Decoder)
		if d == nil {
			return nil, nil, fmt.Errorf("%w: zstd decoder unavailable", errBadRecords)
		}
		if err := d.Reset(bytes.NewReader(data)); err != nil {
			d.Reset(nil)
			zstdDecPool.Put(d)
			return nil, nil, fmt.Errorf("%w: zstd: %v", errBadRecords, err)
		}
		return bound(d, name), func() { d.Reset(nil); zstdDecPool.Put(d); release() }, nil
	}
	return nil, nil, fmt.Errorf("%w: unknown codec %d", errBadRecords, codec)
}

func codecName(codec int) string {
	switch codec {
	case codecGzip:
		return "gzip"
	case codecSnappy:
		return "snappy"
	case codecLz4:
		return "lz4"
	case codecZstd:
		return "zstd"
	}
	return fmt.Sprintf("codec %d", codec)
}

// boundedReader passes on at most maxDecompressedBatch bytes of a
// decompressor and fails if there are more; it wraps the decompressor's
// errors in errBadRecords.
type boundedReader struct {
	r    io.Reader
	left int
	name string
}

func bound(r io.Reader, name string) *boundedReader {
	return &boundedReader{r: r, left: maxDecompressedBatch, name: name}
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if b.left == 0 {
		// Allowed bytes all read: anything more is too much.
		var one [1]byte
		n, err := b.r.Read(one[:])
		if n > 0 {
			return 0, fmt.Errorf("%w: %s: more than %d bytes", errBadRecords, b.name, maxDecompressedBatch)
		}
		return 0, b.wrap(err)
	}
	if len(p) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= n
	decompressedBytes.Add(int64(n))
	return n, b.wrap(err)
}

func (b *boundedReader) wrap(err error) error {
	if err == nil || err == io.EOF || errors.Is(err, errBadRecords) {
		return err
	}
	return fmt.Errorf("%w: %s: %v", errBadRecords, b.name, err)
}

// xerialReader decodes xerial-framed snappy block by block.
type xerialReader struct {
	rest []byte // blocks not decoded yet
	out  []byte // decoded, not yet read
	buf  []byte
}

func (x *xerialReader) Read(p []byte) (int, error) {
	for len(x.out) == 0 {
		if len(x.rest) == 0 {
			return 0, io.EOF
		}
		if len(x.rest) < 4 {
			return 0, errors.New("truncated xerial block length")
		}
		n := binary.BigEndian.Uint32(x.rest)
		x.rest = x.rest[4:]
		if uint64(n) > uint64(len(x.rest)) {
			return 0, fmt.Errorf("xerial block of %d bytes, %d left", n, len(x.rest))
		}
		var err error
		if x.buf, err = decodeSnappyBlock(x.buf[:0], x.rest[:n]); err != nil {
			return 0, err
		}
		x.rest, x.out = x.rest[n:], x.buf
	}
	n := copy(p, x.out)
	x.out = x.out[n:]
	return n, nil
}
