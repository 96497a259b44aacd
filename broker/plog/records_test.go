package plog

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestWalkRecordsBoundsDecompression: reading the records of a batch
// (ListOffsets by timestamp, also of remote segments) decompresses within
// maxDecompressedBatch: a batch that inflates past it is refused, not
// read into memory whole.
func TestWalkRecordsBoundsDecompression(t *testing.T) {
	for codec := range testCodecs {
		if codec == kgo.CodecZstd {
			continue // its decoders take the bound when made
		}
		b := kvBatchSpec{recs: []kv{{key: []byte("k"), value: make([]byte, 2<<20)}}, ts: 1000, codec: codec}.bytes(t)
		n := 0
		if err := walkRecords(b, -1, func(int64, int64) bool { n++; return true }); err != nil || n != 1 {
			t.Fatalf("codec %d: %d records, %v", codec, n, err)
		}
		old := maxDecompressedBatch
		maxDecompressedBatch = 1 << 20
		err := walkRecords(b, -1, func(int64, int64) bool { return true })
		maxDecompressedBatch = old
		if !errors.Is(err, errBadRecords) {
			t.Fatalf("codec %d: a batch inflating past the bound: %v, want errBadRecords", codec, err)
		}
	}
}
