package plog

// Streaming compression of the records a rebuilt batch keeps, in the
// formats Kafka writes (snappy: xerial framing of 32 KiB blocks; lz4: the
// frame format, 64 KiB blocks as Kafka's producer writes them), into an
// output of bounded size: a rebuilt batch whose records compress past the
// bound is not written (the cleaner keeps the original batch).

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// Memory a streaming compressor holds, beside its output.
const (
	gzipWriteMemory   = 1 << 20
	snappyWriteMemory = 128 << 10
	lz4WriteMemory    = 512 << 10
	zstdWriteMemory   = 1 << 20
)

func writeMemory(codec int) int64 {
	switch codec {
	case codecGzip:
		return gzipWriteMemory
	case codecSnappy:
		return snappyWriteMemory
	case codecLz4:
		return lz4WriteMemory
	case codecZstd:
		return zstdWriteMemory
	}
	return 0
}

// errOutputFull is a compressed output past its bound.
var errOutputFull = errors.New("compressed records past their bound")

// boundedBuffer holds at most cap(b) bytes; a write past it fails.
type boundedBuffer struct{ b []byte }

func (w *boundedBuffer) Write(p []byte) (int, error) {
	if len(w.b)+len(p) > cap(w.b) {
		return 0, errOutputFull
	}
	w.b = append(w.b, p...)
	return len(p), nil
}

// recordsWriter compresses records as they are written.
type recordsWriter struct {
	out   *boundedBuffer
	w     io.Writer // the codec's writer (out itself for codecNone)
	close func() error
	err   error // the first write error: sticky
}

// newRecordsWriter starts compressing with codec into an output of at most
// limit bytes.
func newRecordsWriter(codec int, limit int) (*recordsWriter, error) {
	out := &boundedBuffer{b: make([]byte, 0, limit)}
	rw := &recordsWriter{out: out, w: out, close: func() error { return nil }}
	switch codec {
	case codecNone:
	case codecGzip:
		zw := gzip.NewWriter(out)
		rw.w, rw.close = zw, zw.Close
	case codecSnappy:
		xw := &xerialWriter{out: out, block: make([]byte, 0, xerialBlockSize)}
		if _, err := out.Write(xerialHeader); err != nil {
			return nil, err
		}
		rw.w, rw.close = xw, xw.flush
	case codecLz4:
		zw := lz4.NewWriter(out)
		if err := zw.Apply(lz4.BlockSizeOption(lz4.Block64Kb)); err != nil {
			return nil, fmt.Errorf("lz4: %w", err)
		}
		rw.w, rw.close = zw, zw.Close
	case codecZstd:
		e, _ := zstdEncPool.Get().(*zstd.Encoder)
		if e == nil {
			return nil, errors.New("zstd: encoder unavailable")
		}
		e.Reset(out)
		rw.w = e
		rw.close = func() error {
			err := e.Close()
			e.Reset(nil)
			zstdEncPool.Put(e)
			return err
		}
	default:
		return nil, fmt.Errorf("unknown codec %d", codec)
	}
	return rw, nil
}

func (rw *recordsWriter) Write(p []byte) (int, error) {
	if rw.err != nil {
		return 0, rw.err
	}
	n, err := rw.w.Write(p)
	if err != nil {
		rw.err = err
	}
	return n, err
}

// finish ends the stream and returns the compressed records.
func (rw *recordsWriter) finish() ([]byte, error) {
	err := rw.close()
	if rw.err != nil {
		return nil, rw.err
	}
	if err != nil {
		return nil, err
	}
	return rw.out.b, nil
}

// xerialWriter writes snappy in xerial blocks of xerialBlockSize.
type xerialWriter struct {
	out   io.Writer
	block []byte
	enc   []byte
	wrote bool
}

func (x *xerialWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), cap(x.block)-len(x.block))
		x.block = append(x.block, p[:k]...)
		p = p[k:]
		if len(x.block) == cap(x.block) {
			if err := x.flush(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

// flush writes the pending block (one empty block for empty input, as
// compressRecords writes).
func (x *xerialWriter) flush() error {
	if len(x.block) == 0 && x.wrote {
		return nil
	}
	x.enc = s2.EncodeSnappy(x.enc[:cap(x.enc)], x.block)
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(x.enc)))
	if _, err := x.out.Write(n[:]); err != nil {
		return err
	}
	if _, err := x.out.Write(x.enc); err != nil {
		return err
	}
	x.block, x.wrote = x.block[:0], true
	return nil
}

// compressRecords compresses an uncompressed records section with codec,
// whole (tests).
func compressRecords(data []byte, codec int) ([]byte, error) {
	rw, err := newRecordsWriter(codec, 2*len(data)+1<<10)
	if err != nil {
		return nil, err
	}
	if _, err := rw.Write(data); err != nil {
		return nil, err
	}
	out, err := rw.finish()
	return bytes.Clone(out), err
}
