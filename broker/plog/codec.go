package plog

// Record-batch compression codecs (attributes bits 0-2), for the paths
// that must look inside batches: produce validation (validate.go), which
// reads the records of every compressed batch as a stream, ListOffsets by
// timestamp (records.go), and the log cleaner, which recompresses the
// records it keeps with the batch's original codec (the key check on
// appends to compacted topics is part of the validation stream).
// Decompression is bounded three times: one batch never inflates past
// maxDecompressedBatch, nor a produced batch past decompressLimit of its
// topic's max.message.bytes (MESSAGE_TOO_LARGE), whose zstd window is
// bounded too and checked before it is allocated; what a stream holds
// is counted in queued.max.request.bytes (codec_memory.go); and at most decompressSlots
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
	"github.com/twmb/franz-go/pkg/kerr"
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
// when they are made). A produced batch has the lower bound of
// decompressLimit.
var maxDecompressedBatch = 256 << 20

// Bounds on a produced batch's decompression, from its topic's
// max.message.bytes (which bounds the compressed batch): it may
// decompress to decompressRatio times max.message.bytes, at least
// minDecompressLimit and at most maxDecompressedBatch; a zstd frame in it
// may declare a window (the history the decoder allocates, the whole
// content for a single-segment frame) of at most that bound or
// zstdWindowFloor, whichever is larger (8 MiB is zstd's level-19 window,
// what the Java client at compression.zstd.level up to 19 writes).
// Beyond them the batch is refused with MESSAGE_TOO_LARGE, before the
// window is allocated.
const (
	decompressRatio    = 32
	minDecompressLimit = 1 << 20
	zstdWindowFloor    = 8 << 20
	// zstdPoolWindow: a decoder that decoded a frame with a larger
	// window is closed rather than pooled, so that idle pooled decoders
	// keep little history.
	zstdPoolWindow = 8 << 20
)

// decompressLimit is what a batch of a topic with max.message.bytes m may
// decompress to.
func decompressLimit(m int32) int {
	return min(max(int(m)*decompressRatio, minDecompressLimit), maxDecompressedBatch)
}

// zstdWindowLimit is the largest zstd window a batch that may decompress
// to limit bytes may declare.
func zstdWindowLimit(limit int) int {
	return min(max(limit, zstdWindowFloor), maxDecompressedBatch)
}

// tooLargeError is a batch that decompresses, or declares that it
// decompresses, past its bound: MESSAGE_TOO_LARGE to a producer (Kafka's
// RecordBatchTooLargeException), errBadRecords to readers.
type tooLargeError struct{ msg string }

func (e *tooLargeError) Error() string   { return e.msg }
func (e *tooLargeError) Unwrap() []error { return []error{kerr.MessageTooLarge, errBadRecords} }

func tooLarge(format string, args ...any) error {
	return &tooLargeError{msg: fmt.Sprintf(format, args...)}
}

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

var (
	gzipReaderPool = sync.Pool{New: func() any { return new(gzip.Reader) }}
	lz4ReaderPool  = sync.Pool{New: func() any { return lz4.NewReader(nil) }}
)

// openRecords starts decompressing data, the records section of a batch
// compressed with codec (not codecNone), as a stream, once a slot of
// decompressSlots is free: only a small window of the records is in
// memory at a time (zstd keeps the frame's window, at most
// zstdWindowLimit(limit); a plain snappy block is decoded whole, and is
// at most 22 times its compressed size). The reader fails with
// errBadRecords (wrapped) on corrupt input, and with a tooLargeError
// once it has produced limit bytes (or at once, for a zstd frame that
// declares more content or a larger window than allowed). done releases
// the slot and the codec's state; it must be called, once.
func openRecords(data []byte, codec, limit int) (r io.Reader, done func(), err error) {
	limit = min(limit, maxDecompressedBatch)
	if codec == codecZstd {
		// Refuse a frame declaring too much before waiting for a slot.
		if err := checkZstdHeader(data, limit); err != nil {
			return nil, nil, err
		}
	}
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
		return bound(zr, name, limit), func() { gzipReaderPool.Put(zr); release() }, nil
	case codecSnappy:
		if bytes.HasPrefix(data, xerialHeader[:8]) {
			if len(data) < len(xerialHeader) {
				return nil, nil, fmt.Errorf("%w: snappy: short xerial header", errBadRecords)
			}
			return bound(&xerialReader{rest: data[len(xerialHeader):]}, name, limit), release, nil
		}
		if n, err := s2.DecodedLen(data); err == nil && n > limit {
			return nil, nil, tooLarge("snappy: batch decompresses to %d bytes, more than the %d allowed", n, limit)
		}
		out, err := decodeSnappyBlock(nil, data)
		if err != nil {
			return nil, nil, err
		}
		return bound(bytes.NewReader(out), name, limit), release, nil
	case codecLz4:
		zr := lz4ReaderPool.Get().(*lz4.Reader)
		zr.Reset(bytes.NewReader(data))
		return bound(zr, name, limit), func() { zr.Reset(nil); lz4ReaderPool.Put(zr); release() }, nil
	case codecZstd:
		d, _ := zstdDecPool.Get().(*zstd.Decoder)
		if d == nil {
			return nil, nil, fmt.Errorf("%w: zstd decoder unavailable", errBadRecords)
		}
		// In a stream, the decoder's memory bound is the largest window
		// a frame may declare: every frame of the batch is held to the
		// first one's (at least 64 KiB), which DecompressMemory charges.
		window := uint64(zstdMinWindow)
		var hdr zstd.Header
		if hdr.Decode(data) == nil {
			window = zstdDecoderWindow(&hdr, limit)
		}
		if err := d.ResetWithOptions(bytes.NewReader(data), zstd.WithDecoderMaxMemory(window)); err != nil {
			d.Reset(nil)
			zstdDecPool.Put(d)
			return nil, nil, fmt.Errorf("%w: zstd: %v", errBadRecords, err)
		}
		pool := window <= zstdPoolWindow
		return bound(zstdReader{d}, name, limit), func() {
			d.Reset(nil)
			if pool {
				zstdDecPool.Put(d)
			} else {
				d.Close() // its history may be large: let it go
			}
			release()
		}, nil
	}
	return nil, nil, fmt.Errorf("%w: unknown codec %d", errBadRecords, codec)
}

// zstdReader names the decoder's refusals of a too-large frame as such.
type zstdReader struct{ d *zstd.Decoder }

func (z zstdReader) Read(p []byte) (int, error) {
	n, err := z.d.Read(p)
	if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) {
		return n, tooLarge("zstd: a frame declares a window larger than allowed: %v", err)
	}
	return n, err
}

// zstdFrameWindow is the history a decoder keeps for the frame h: its
// window, or for a single-segment frame its content size.
func zstdFrameWindow(h *zstd.Header) uint64 {
	if h.WindowSize == 0 && h.SingleSegment {
		return h.FrameContentSize
	}
	return h.WindowSize
}

// checkZstdHeader refuses a records section whose first zstd frame
// declares more content than limit or a window larger than
// zstdWindowLimit(limit) (later frames are held to the window by the
// decoder, and to limit by the stream's bound). Anything it cannot read
// is left to the decoder to refuse.
func checkZstdHeader(data []byte, limit int) error {
	var h zstd.Header
	if h.Decode(data) != nil || h.Skippable {
		return nil
	}
	if h.HasFCS && h.FrameContentSize > uint64(limit) {
		return tooLarge("zstd: batch declares %d bytes of records, more than the %d allowed", h.FrameContentSize, limit)
	}
	if w := zstdFrameWindow(&h); w > uint64(zstdWindowLimit(limit)) {
		return tooLarge("zstd: batch declares a window of %d bytes, more than the %d allowed", w, zstdWindowLimit(limit))
	}
	return nil
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

// boundedReader passes on at most limit bytes of a decompressor and
// fails if there are more (a tooLargeError); it wraps the decompressor's
// other errors in errBadRecords.
type boundedReader struct {
	r     io.Reader
	left  int
	limit int
	name  string
}

func bound(r io.Reader, name string, limit int) *boundedReader {
	return &boundedReader{r: r, left: limit, limit: limit, name: name}
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
			return 0, tooLarge("%s: batch decompresses to more than the %d bytes allowed", b.name, b.limit)
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
