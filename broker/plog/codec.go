package plog

// Record-batch compression codecs (attributes bits 0-2), for the paths
// that must look inside batches: the key check on appends to compacted
// topics and the log cleaner, which recompresses the records it keeps with
// the batch's original codec. Decompression is bounded and never panics on
// corrupt input; it returns errBadRecords (wrapped) instead.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

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

// decodeSnappyBlock appends the decoding of one snappy block to dst.
func decodeSnappyBlock(dst, block []byte) ([]byte, error) {
	n, err := s2.DecodedLen(block)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", errBadRecords, err)
	}
	if n < 0 || len(dst)+n > maxDecompressedBatch {
		return nil, fmt.Errorf("%w: snappy: block of %d bytes", errBadRecords, n)
	}
	buf := make([]byte, n)
	got, err := s2.Decode(buf, block)
	if err != nil {
		return nil, fmt.Errorf("%w: snappy: %v", errBadRecords, err)
	}
	return append(dst, got...), nil
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
