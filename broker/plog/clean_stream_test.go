package plog

import (
	"bytes"
	"crypto/md5"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// decompressWhole reads a whole records section through openRecords
// (tests).
func decompressWhole(data []byte, codec int) ([]byte, error) {
	if codec == codecNone {
		return data, nil
	}
	r, done, err := openRecords(data, codec, maxDecompressedBatch)
	if err != nil {
		return nil, err
	}
	defer done()
	return io.ReadAll(r)
}

// zstdZeros is a records section as one zstd frame declaring a window of
// window bytes and no content size: prefix in a raw block, then zeros
// zero bytes in RLE blocks (a few KB for a GiB).
func zstdZeros(prefix []byte, zeros int, window uint64) []byte {
	out := []byte{0x28, 0xb5, 0x2f, 0xfd, 0x00}
	exp := 0
	for (uint64(1) << (10 + exp)) < window {
		exp++
	}
	out = append(out, byte(exp<<3))
	block := func(last bool, typ, size int) {
		v := uint32(size)<<3 | uint32(typ)<<1
		if last {
			v |= 1
		}
		out = append(out, byte(v), byte(v>>8), byte(v>>16))
	}
	block(zeros == 0, 0, len(prefix))
	out = append(out, prefix...)
	for left := zeros; left > 0; {
		n := min(left, 128<<10)
		left -= n
		block(left == 0, 1, n)
		out = append(out, 0)
	}
	return out
}

// bigRecordBatch is a zstd batch at offset base of two records: key "a"
// with value "old", then key "k" with a value of size zero bytes (its
// header count the last zero of the stream).
func bigRecordBatch(base int64, size int, ts int64) []byte {
	prefix := withLen(rawRec{key: []byte("a"), value: []byte("old")}.body())
	head := []byte{0, 2, 2, 2, 'k'} // attributes, ts delta 1, offset delta 1, key length 1, key
	head = binary.AppendVarint(head, int64(size))
	prefix = binary.AppendVarint(prefix, int64(len(head)+size+1))
	prefix = append(prefix, head...)
	b := frame(zstdZeros(prefix, size+1, 1<<20), 2, int16(kgo.CodecZstd), ts, 0, 0, 0)
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(base))
	putCRC(b)
	return b
}

// rawBatches returns the bytes of every batch of the log.
func rawBatches(t *testing.T, l *Log) [][]byte {
	t.Helper()
	var out [][]byte
	for off := int64(0); off < l.LogEndOffset(); {
		fs, err := l.Read(off, 1<<62, 1<<20, true)
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		b := make([]byte, fs.Len)
		if _, err := fs.File.ReadAt(b, fs.Pos); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		for len(b) > 0 {
			h, err := checkFrame(b)
			if err != nil {
				t.Fatalf("bad batch: %v", err)
			}
			out = append(out, b[:h.size()])
			b = b[h.size():]
		}
		off = fs.LastOffset + 1
	}
	return out
}

// streamedRecords reads a batch's records as the cleaner does: offset to
// record size.
func streamedRecords(t *testing.T, b []byte) map[int64]int64 {
	t.Helper()
	h := parseHeader(b)
	s, err := openRecordStream(b, &h, nil, 0)
	if err != nil {
		t.Fatalf("batch at %d: %v", h.BaseOffset, err)
	}
	defer s.close()
	out := map[int64]int64{}
	for i := int32(0); i < h.RecordCount; i++ {
		var r streamRecord
		if err := s.next(i, &r); err != nil {
			t.Fatalf("batch at %d record %d: %v", h.BaseOffset, i, err)
		}
		out[r.offset] = r.length
	}
	if err := s.end(); err != nil {
		t.Fatalf("batch at %d: %v", h.BaseOffset, err)
	}
	return out
}

// fillBig appends a big-record batch at offset 0, a newer "a" at 2, and
// small batches after it, so that segments roll and the first is
// cleanable.
func fillBig(t *testing.T, l *Log, size int) []byte {
	t.Helper()
	big := bigRecordBatch(0, size, 1000)
	if len(big) > 64<<10 {
		t.Fatalf("big batch of %d bytes", len(big))
	}
	if _, err := l.AppendReplicated(big); err != nil {
		t.Fatal(err)
	}
	for i := int64(2); i < 40; i++ {
		b := kvBatchSpec{recs: kvs(fmt.Sprintf("u%d", i), strings.Repeat("v", 200)), ts: 1000 + i}.bytes(t)
		if i == 2 {
			b = kvBatchSpec{recs: kvs("a", "new"), ts: 1002}.bytes(t)
		}
		binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(i))
		putCRC(b)
		if _, err := l.AppendReplicated(b); err != nil {
			t.Fatal(err)
		}
	}
	return big
}

// allocDuring returns the bytes allocated while f runs.
func allocDuring(f func()) uint64 {
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Issue 25: the cleaner decompressed a whole stored batch in memory. A
// batch of a few KB holding a 200 MiB record, with an older record of a
// key written again later, is cleaned as a stream: the older record goes,
// the big one stays whole, and the pass allocates a few MiB.
func TestCleanStreamsBigRecord(t *testing.T) {
	const size = 200 << 20
	e := compactEnv()
	l := e.open(t)
	fillBig(t, l, size)
	var st CleanStats
	var err error
	alloc := allocDuring(func() { st, err = l.Clean() })
	if err != nil {
		t.Fatalf("clean: %v", err)
	}
	if alloc > 32<<20 {
		t.Fatalf("cleaning a batch of a %d MiB record allocated %d MiB", size>>20, alloc>>20)
	}
	if !st.Cleaned || st.BatchesSkipped != 0 {
		t.Fatalf("stats %+v", st)
	}
	first := rawBatches(t, l)[0]
	h, err := checkFrame(first)
	if err != nil {
		t.Fatal(err)
	}
	got := streamedRecords(t, first)
	if _, ok := got[0]; ok || h.RecordCount != 1 || got[1] < size {
		t.Fatalf("cleaned batch: %d records %v, want only offset 1 of more than %d bytes", h.RecordCount, got, size)
	}
	// The rebuilt batch is whole: it passes the produce path's checks.
	if err := walkBatch(first, &h, func(recordInfo) bool { return true }, false, maxDecompressedBatch); err != nil {
		t.Fatalf("rebuilt batch: %v", err)
	}
	t.Logf("cleaned in %d KiB allocated: %+v", alloc>>10, st)
}

// A stored batch decompressing far past the cleaner's bound (1 GiB, bound
// 256 MiB) is kept as it is, with every record, and the pass goes on
// compacting the rest with bounded memory.
func TestCleanKeepsBatchPastBound(t *testing.T) {
	const size = 1 << 30
	e := compactEnv()
	l := e.open(t)
	big := fillBig(t, l, size)
	fillUnique(t, l, e, 0)
	var st CleanStats
	var err error
	alloc := allocDuring(func() { st, err = l.Clean() })
	if err != nil {
		t.Fatalf("clean: %v", err)
	}
	if alloc > 32<<20 {
		t.Fatalf("cleaning allocated %d MiB", alloc>>20)
	}
	if st.BatchesSkipped != 1 || !st.Cleaned {
		t.Fatalf("stats %+v: want the big batch skipped", st)
	}
	if first := rawBatches(t, l)[0]; !bytes.Equal(first, big) {
		t.Fatal("the batch past the bound was changed")
	}
	t.Logf("%+v, %d KiB allocated", st, alloc>>10)
}

// What the cleaner holds for a compressed batch is charged to its Memory
// and given back; a refused charge keeps the batch as it is, so nothing is
// lost.
func TestCleanChargesMemory(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		e := compactEnv()
		l := e.open(t)
		fillKeys(t, l, e, 60, kgo.CodecZstd)
		before := readBatchesKV(t, l)
		var held, most, charges int64
		mem := Memory(func(n int64) (func(), error) {
			if refuse {
				return nil, errors.New("over the budget")
			}
			charges++
			held += n
			most = max(most, held)
			return func() { held -= n }, nil
		})
		st, err := l.CleanBelowCharged(math.MaxInt64, mem)
		if err != nil {
			t.Fatal(err)
		}
		after := readBatchesKV(t, l)
		switch {
		case held != 0:
			t.Fatalf("%d bytes still charged", held)
		case !refuse && (charges == 0 || most < zstdMinWindow || st.RecordsKept >= st.RecordsRead):
			t.Fatalf("charges %d, most %d, stats %+v", charges, most, st)
		case refuse && (st.BatchesSkipped == 0 || !reflect.DeepEqual(before, after)):
			t.Fatalf("refused charges: stats %+v; log changed: %v", st, !reflect.DeepEqual(before, after))
		}
		t.Logf("refuse=%v: %d charges, at most %d bytes held, %+v", refuse, charges, most, st)
	}
}

// A search by timestamp charges the stream of the batch holding the answer
// to its Memory, and gives it back; a refused charge answers with the
// batch's base offset without decompressing anything.
func TestOffsetForTimestampCharged(t *testing.T) {
	e := newMemEnv()
	l := e.open(t)
	b := rawBatch{records: append(withLen(rawRec{key: []byte("a"), value: []byte("1")}.body()),
		withLen(rawRec{offDelta: 1, tsDelta: 10, key: []byte("b"), value: []byte("2")}.body())...),
		count: 2, codec: kgo.CodecZstd, ts: 1000, maxTs: 1010}.bytes(t)
	mustAppend(t, l, b)
	var held, most int64
	mem := Memory(func(n int64) (func(), error) {
		held += n
		most = max(most, held)
		return func() { held -= n }, nil
	})
	if off, ts, _, ok := l.OffsetForTimestampCharged(1005, mem); !ok || off != 1 || ts != 1010 {
		t.Fatalf("charged search: offset %d at %d (%v), want 1 at 1010", off, ts, ok)
	}
	if held != 0 || most < zstdMinWindow {
		t.Fatalf("charged %d bytes at most, %d still held", most, held)
	}
	refuse := Memory(func(int64) (func(), error) { return nil, errors.New("over the budget") })
	n := decompressions.Load()
	if off, ts, _, ok := l.OffsetForTimestampCharged(1005, refuse); !ok || off != 0 || ts != 1010 {
		t.Fatalf("refused search: offset %d at %d (%v), want the batch: 0 at 1010", off, ts, ok)
	}
	if off, _, _ := l.MaxTimestampCharged(refuse); off != 1 {
		t.Fatalf("refused max timestamp: offset %d, want the offset the segment recorded (1)", off)
	}
	if decompressions.Load() != n {
		t.Fatal("a refused charge decompressed")
	}
}

// FuzzCleanRecords: the cleaner's reading of a stored batch, whatever its
// records section holds, plain and zstd-compressed, never panics, and a
// batch it rebuilds is whole.
func FuzzCleanRecords(f *testing.F) {
	f.Add(append(withLen(rawRec{key: []byte("a"), value: []byte("1")}.body()),
		withLen(rawRec{offDelta: 1, key: []byte("a"), value: nil}.body())...), int32(2))
	f.Add(withLen(rawRec{key: []byte("k"), value: []byte("v"), headers: []hdr{{key: []byte("h"), value: []byte("x")}}}.body()), int32(1))
	f.Add([]byte{0x7f, 0, 0, 0, 2, 'k', 1}, int32(1))
	f.Fuzz(func(t *testing.T, records []byte, count int32) {
		for _, codec := range []int{codecNone, codecZstd} {
			data, err := compressRecords(records, codec)
			if err != nil {
				t.Fatal(err)
			}
			b := frame(data, count, int16(codec), 1000, 0, 0, 0)
			c := &cleaner{l: &Log{logger: slog.New(slog.DiscardHandler)}, cfg: &Config{}, now: 5000,
				offsets: offsetMap{m: map[[16]byte]int64{md5.Sum([]byte("a")): 1}, latest: 1}}
			out, err := c.filterBatch(b)
			if err != nil || out == nil || bytes.Equal(out, b) {
				continue
			}
			// A batch of well-formed records is rebuilt of well-formed
			// records (the cleaner copies what it does not read).
			bh := parseHeader(b)
			if walkBatch(b, &bh, func(recordInfo) bool { return true }, true, maxDecompressedBatch) != nil {
				continue
			}
			if _, err := checkFrame(out); err != nil {
				t.Fatalf("rebuilt batch: %v", err)
			}
			h := parseHeader(out)
			if err := walkBatch(out, &h, func(recordInfo) bool { return true }, false, maxDecompressedBatch); err != nil {
				t.Fatalf("rebuilt batch's records: %v", err)
			}
		}
	})
}
