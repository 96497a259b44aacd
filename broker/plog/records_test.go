package plog

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestWalkRecordsBoundsDecompression: reading the records of a batch
// (ListOffsets by timestamp, also of remote segments) decompresses within
// maxDecompressedBatch: a batch that inflates past it is refused, not
// read into memory whole (zstd too: the stream stops at the bound,
// whatever bound its pooled decoders were made with).
func TestWalkRecordsBoundsDecompression(t *testing.T) {
	for codec := range testCodecs {
		b := kvBatchSpec{recs: []kv{{key: []byte("k"), value: make([]byte, 2<<20)}}, ts: 1000, codec: codec}.bytes(t)
		n := 0
		if err := walkRecords(b, -1, nil, func(int64, int64) bool { n++; return true }); err != nil || n != 1 {
			t.Fatalf("codec %d: %d records, %v", codec, n, err)
		}
		old := maxDecompressedBatch
		maxDecompressedBatch = 1 << 20
		err := walkRecords(b, -1, nil, func(int64, int64) bool { return true })
		maxDecompressedBatch = old
		if !errors.Is(err, errBadRecords) {
			t.Fatalf("codec %d: a batch inflating past the bound: %v, want errBadRecords", codec, err)
		}
	}
}

// Searches by timestamp take a lookup slot before a decompression slot,
// so that however many clients repeat them they hold at most half the
// decompression slots: with every lookup slot taken a search waits, and a
// compressed produce still goes through.
func TestLookupsHoldHalfTheDecompressionSlots(t *testing.T) {
	l := newMemEnv().open(t)
	mustAppend(t, l, rawBatch{records: recs(4), count: 4, codec: kgo.CodecZstd, ts: 1000}.bytes(t))
	for i := 0; i < cap(lookupSlots); i++ {
		lookupSlots <- struct{}{}
	}
	found := make(chan int64, 1)
	go func() { off, _, _, _ := l.OffsetForTimestamp(1002); found <- off }()
	mustAppend(t, l, rawBatch{records: recs(4), count: 4, codec: kgo.CodecZstd, ts: 1000}.bytes(t)) // produce still decompresses
	select {
	case off := <-found:
		t.Fatalf("lookup finished with every lookup slot taken: %d", off)
	case <-time.After(100 * time.Millisecond):
	}
	for i := 0; i < cap(lookupSlots); i++ {
		<-lookupSlots
	}
	if off := <-found; off != 2 {
		t.Fatalf("offset for 1002: %d, want 2", off)
	}
}

// A search by timestamp decompresses only the one batch that holds the
// answer, and only up to the answer.
func TestOffsetForTimestampWork(t *testing.T) {
	e := newMemEnv()
	l := e.open(t)
	big := func(base int64) []byte {
		var b []byte
		for i := 0; i < 1000; i++ {
			v := bytes.Repeat([]byte{byte('a' + i%26)}, 1000)
			b = append(b, withLen(rawRec{offDelta: int64(i), tsDelta: int64(i), value: v}.body())...)
		}
		return rawBatch{records: b, count: 1000, codec: kgo.CodecZstd, ts: base}.bytes(t)
	}
	for i := 0; i < 20; i++ {
		mustAppend(t, l, big(int64(i)*10_000))
	}
	n0, b0 := decompressions.Load(), decompressedBytes.Load()
	off, ts, _, ok := l.OffsetForTimestamp(150_000) // batch 15, first record
	if !ok || off != 15_000 || ts != 150_000 {
		t.Fatalf("offset for 150000: %d %d %v", off, ts, ok)
	}
	if n := decompressions.Load() - n0; n != 1 {
		t.Fatalf("%d decompressions for one search, want 1", n)
	}
	if b := decompressedBytes.Load() - b0; b > 200<<10 {
		t.Fatalf("the search decompressed %d bytes to find the batch's first record", b)
	}
}
