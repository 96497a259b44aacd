package plog

import (
	"encoding/binary"
	"io"
	"testing"
)

// sliceLastOffsets returns the last offset of every batch of fs whose
// header prefix is in it, the partial last batch included.
func sliceLastOffsets(t *testing.T, fs FileSlice) []int64 {
	t.Helper()
	b := make([]byte, fs.Len)
	if _, err := fs.File.ReadAt(b, fs.Pos); err != nil && err != io.EOF {
		t.Fatalf("read slice: %v", err)
	}
	var out []int64
	for len(b) >= offLastOffsetDelta+4 {
		base := int64(binary.BigEndian.Uint64(b))
		out = append(out, base+int64(int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:]))))
		size := int(int32(binary.BigEndian.Uint32(b[offBatchLength:]))) + logOverhead
		if size > len(b) {
			break
		}
		b = b[size:]
	}
	return out
}

// TestReadCommittedForFetchUpperBound: the bound of the aborted
// transactions' search is above every offset of the slice, partial batch
// included, and with a dense index close to it (Kafka's
// fetchUpperBoundOffset); a slice of whole batches gives its last offset
// + 1; in a sealed segment without index entries past the slice, the
// segment's end.
func TestReadCommittedForFetchUpperBound(t *testing.T) {
	forEachFS(t, func(t *testing.T, e *logEnv) {
		e.cfg.IndexIntervalBytes = 1 // every batch indexed
		e.cfg.SegmentBytes = 16 << 10
		l := e.open(t)
		const recs = 3
		appendN(t, l, e, 120, recs, 100) // about 400 bytes a batch: several segments
		segs := l.Segments()
		if len(segs) < 3 {
			t.Fatalf("%d segments, want at least 3", len(segs))
		}
		leo := l.LogEndOffset()
		for _, from := range []int64{0, 31, segs[1].BaseOffset, segs[len(segs)-1].BaseOffset + 3} {
			for _, maxBytes := range []int{100, 500, 1000, 5000, 1 << 20} {
				sl, upper, err := l.ReadCommittedForFetch(from, leo, maxBytes, true)
				if err != nil {
					t.Fatal(err)
				}
				lasts := sliceLastOffsets(t, sl)
				if len(lasts) == 0 {
					t.Fatalf("from %d, %d bytes: empty slice", from, maxBytes)
				}
				last := lasts[len(lasts)-1]
				if upper <= last {
					t.Errorf("from %d, %d bytes: upper %d not above the slice's last offset %d", from, maxBytes, upper, last)
				}
				if sl.LastOffset >= 0 && upper != sl.LastOffset+1 {
					t.Errorf("from %d, %d bytes: whole batches to %d, upper %d", from, maxBytes, sl.LastOffset, upper)
				}
				if upper > last+1+recs {
					t.Errorf("from %d, %d bytes: upper %d far past the slice's last offset %d with every batch indexed", from, maxBytes, upper, last)
				}
			}
		}
		// Below a bound that cuts a segment: whole batches, last + 1.
		sl, upper, err := l.ReadCommittedForFetch(0, 10, 1<<20, true)
		if err != nil || sl.LastOffset != 8 || upper != 9 {
			t.Errorf("below offset 10: last offset %d, upper %d, err %v; want 8, 9", sl.LastOffset, upper, err)
		}
	})
	t.Run("sparse index", func(t *testing.T) {
		e := newMemEnv()
		e.cfg.SegmentBytes = 16 << 10 // index.interval.bytes 4096: few entries
		l := e.open(t)
		appendN(t, l, e, 120, 3, 100)
		segs := l.Segments()
		s0 := segs[0]
		// From the last batch of the first segment, cut inside it: no
		// index entry after it, so the segment's end bounds the search.
		sl, upper, err := l.ReadCommittedForFetch(s0.NextOffset-3, l.LogEndOffset(), 10, true)
		if err != nil {
			t.Fatal(err)
		}
		if sl.Len == 0 || upper != s0.NextOffset {
			t.Errorf("last batch of segment 0 (next offset %d): %d bytes, upper %d", s0.NextOffset, sl.Len, upper)
		}
	})
}
