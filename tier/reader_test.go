package tier

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"strata/index"
)

// fakeBatch is a record batch header (v2) of records offsets [base, last]
// padded to size bytes; ReadRemote reads headers only.
func fakeBatch(base, last int64, size int) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint64(b[0:], uint64(base))
	binary.BigEndian.PutUint32(b[8:], uint32(size-12))
	b[16] = 2
	binary.BigEndian.PutUint32(b[23:], uint32(last-base))
	for i := 27; i < size; i++ {
		b[i] = byte(base)
	}
	return b
}

// remoteSegment puts a segment of batches of 1..3 records and sizes 100..
// 2000 bytes, with an offset index entry every other batch, in store.
func remoteSegment(t testing.TB, store ObjectStore, logb, idx []byte, end int64) *index.SegmentMetadata {
	t.Helper()
	m := &index.SegmentMetadata{
		Partition: index.TopicIDPartition{TopicID: index.NewUUID(), Partition: 3}, SegmentID: index.NewUUID(),
		StartOffset: 100, EndOffset: end, SegmentSize: int64(len(logb)), State: index.CopySegmentFinished,
		Objects: []index.ObjectEntry{{Kind: index.ObjectLog, Size: int64(len(logb))}, {Kind: index.ObjectOffsetIndex, Size: int64(len(idx))}},
	}
	ctx := context.Background()
	if err := store.Put(ctx, ObjectKey(m, index.ObjectLog), bytes.NewReader(logb), int64(len(logb))); err != nil {
		t.Fatal(err)
	}
	if err := store.Put(ctx, ObjectKey(m, index.ObjectOffsetIndex), bytes.NewReader(idx), int64(len(idx))); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestReadRemote(t *testing.T) {
	var logb, idx []byte
	type batch struct{ base, last, pos, size int64 }
	var batches []batch
	off := int64(100)
	for i := range 40 {
		size, n := 100+i*47%1900, int64(1+i%3)
		if i%2 == 0 {
			idx = binary.BigEndian.AppendUint32(idx, uint32(off-100))
			idx = binary.BigEndian.AppendUint32(idx, uint32(len(logb)))
		}
		batches = append(batches, batch{off, off + n - 1, int64(len(logb)), int64(size)})
		logb = append(logb, fakeBatch(off, off+n-1, size)...)
		off += n
	}
	store := NewMemStore()
	m := remoteSegment(t, store, logb, idx, off-1)
	ctx := context.Background()
	for _, b := range batches {
		for o := b.base; o <= b.last; o++ {
			for _, maxBytes := range []int{1, 3000, 1 << 20} {
				got, err := ReadRemote(ctx, store, m, o, maxBytes)
				if err != nil {
					t.Fatalf("offset %d, max %d: %v", o, maxBytes, err)
				}
				// Whole batches from b's, b whole, within maxBytes after the first.
				wantEnd := b.pos + b.size
				for _, c := range batches {
					if c.pos >= wantEnd && c.pos+c.size-b.pos <= int64(maxBytes) {
						wantEnd = c.pos + c.size
					}
				}
				if !bytes.Equal(got, logb[b.pos:wantEnd]) {
					t.Fatalf("offset %d, max %d: got %d bytes, want [%d, %d)", o, maxBytes, len(got), b.pos, wantEnd)
				}
			}
		}
	}
	// The .index skips the log's head: a read at the last offset GETs no
	// more of the .log than the tail from the last index entry.
	before := store.Calls(OpGet)
	if _, err := ReadRemote(ctx, store, m, off-1, 1); err != nil {
		t.Fatal(err)
	}
	if n := store.Calls(OpGet) - before; n != 2 {
		t.Fatalf("%d GETs for a read at the end, want 2 (.index, .log)", n)
	}
	if _, err := ReadRemote(ctx, store, m, off, 1); !errors.Is(err, ErrInvalidRange) {
		t.Fatalf("read past the segment: %v, want ErrInvalidRange", err)
	}
}

// FuzzReadRemote: arbitrary .log and .index bytes give batches or an
// error, never a panic or bytes outside the object.
func FuzzReadRemote(f *testing.F) {
	f.Add(append(fakeBatch(100, 101, 60), fakeBatch(102, 102, 40)...), []byte{0, 0, 0, 2, 0, 0, 0, 60}, int64(102), 10)
	f.Add(fakeBatch(100, 100, 30), []byte{}, int64(100), 1)
	f.Add([]byte{1, 2, 3}, []byte{0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, int64(100), 100)
	f.Fuzz(func(t *testing.T, logb, idx []byte, offset int64, maxBytes int) {
		store := NewMemStore()
		m := remoteSegment(t, store, logb, idx, 200)
		got, err := ReadRemote(context.Background(), store, m, offset, maxBytes)
		if err == nil && len(got) > len(logb) {
			t.Fatalf("%d bytes from a %d-byte object", len(got), len(logb))
		}
	})
}

// seqSegment is a segment of n fake batches of 1..3 records and 100..2000
// bytes from offset 100, indexed every other batch, in a new MemStore.
func seqSegment(t testing.TB, n int) (*MemStore, *index.SegmentMetadata, []byte) {
	t.Helper()
	var logb, idx []byte
	off := int64(100)
	for i := range n {
		size, k := 100+i*47%1900, int64(1+i%3)
		if i%2 == 0 {
			idx = binary.BigEndian.AppendUint32(idx, uint32(off+k-1-100))
			idx = binary.BigEndian.AppendUint32(idx, uint32(len(logb)))
		}
		logb = append(logb, fakeBatch(off, off+k-1, size)...)
		off += k
	}
	store := NewMemStore()
	return store, remoteSegment(t, store, logb, idx, off-1), logb
}

func newTestReader(t testing.TB, cfg ReaderConfig) *Reader {
	t.Helper()
	r := NewReader(cfg)
	t.Cleanup(r.Close)
	return r
}

// readAll reads the segment from its start in fetches of maxBytes, as a
// consumer does, checking each answer against ReadRemote's.
func readAll(t *testing.T, r *Reader, store ObjectStore, m *index.SegmentMetadata, maxBytes int) int {
	t.Helper()
	ctx := context.Background()
	reads := 0
	for off := m.StartOffset; off <= m.EndOffset; reads++ {
		got, err := r.Read(ctx, m, off, maxBytes)
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		want, err := ReadRemote(ctx, store, m, off, maxBytes)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) || len(got) == 0 {
			t.Fatalf("read %d: %d bytes, ReadRemote %d", off, len(got), len(want))
		}
		for b := got; len(b) > 0; {
			n := 12 + int(binary.BigEndian.Uint32(b[8:]))
			off = int64(binary.BigEndian.Uint64(b)) + int64(binary.BigEndian.Uint32(b[23:])) + 1
			b = b[n:]
		}
	}
	return reads
}

// TestReaderCacheHit: a second read of the same offset GETs nothing.
func TestReaderCacheHit(t *testing.T) {
	store, m, _ := seqSegment(t, 40)
	r := newTestReader(t, ReaderConfig{Store: store, ChunkSize: 4096, CacheBytes: 1 << 20, IndexCacheBytes: 1 << 20})
	ctx := context.Background()
	first, err := r.Read(ctx, m, 150, 3000)
	if err != nil {
		t.Fatal(err)
	}
	gets := store.Calls(OpGet)
	if gets < 2 {
		t.Fatalf("%d GETs for a cold read, want the .index and a chunk", gets)
	}
	hits := r.Stats().Hits
	again, err := r.Read(ctx, m, 150, 3000)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, again) {
		t.Fatal("second read differs")
	}
	if n := store.Calls(OpGet); n != gets {
		t.Fatalf("a cached read made %d GETs", n-gets)
	}
	if st := r.Stats(); st.Hits <= hits || st.CacheBytes == 0 || st.IndexBytes == 0 {
		t.Fatalf("stats %+v after a hit", st)
	}
}

// TestReaderCacheBound: reads all over a segment never hold more chunk
// bytes, or index bytes, than the bounds, and still answer right.
func TestReaderCacheBound(t *testing.T) {
	store, m, _ := seqSegment(t, 120)
	const chunk = 2048
	r := newTestReader(t, ReaderConfig{Store: store, ChunkSize: chunk, CacheBytes: 3*chunk + 100, IndexCacheBytes: 1 << 20, ReadAhead: 2})
	ctx := context.Background()
	for i := range 300 {
		off := m.StartOffset + int64(i*7919)%(m.EndOffset-m.StartOffset+1)
		got, err := r.Read(ctx, m, off, 1+i*37%5000)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := ReadRemote(ctx, store, m, off, 1+i*37%5000)
		if !bytes.Equal(got, want) {
			t.Fatalf("read %d differs", off)
		}
		if st := r.Stats(); st.CacheBytes > 3*chunk+100 {
			t.Fatalf("cache holds %d bytes, bound %d", st.CacheBytes, 3*chunk+100)
		}
	}
	r.Close() // read-aheads land before Close returns
	if st := r.Stats(); st.CacheBytes > 3*chunk+100 || st.CacheBytes == 0 {
		t.Fatalf("cache holds %d bytes, bound %d", st.CacheBytes, 3*chunk+100)
	}
	// An index bound below the .index object's size caches no index.
	r2 := newTestReader(t, ReaderConfig{Store: store, ChunkSize: chunk, CacheBytes: 1 << 20, IndexCacheBytes: 8})
	var gets [2]int64
	for i := range 2 {
		if _, err := r2.Read(ctx, m, m.EndOffset, 1); err != nil {
			t.Fatal(err)
		}
		gets[i] = r2.Stats().DemandGets
	}
	if st := r2.Stats(); st.IndexBytes != 0 || gets[1] != gets[0]+1 {
		t.Fatalf("stats %+v, GETs %v: want no index cached, and the .index GET again", st, gets)
	}
}

// TestReaderReadAhead: a consumer reading a segment from its start finds
// the chunks fetched ahead of it: of its many chunks it GETs one or two
// itself, read-ahead the others; a second pass is all hits.
func TestReaderReadAhead(t *testing.T) {
	store, m, logb := seqSegment(t, 200)
	const chunk = 4096
	chunks := (len(logb) + chunk - 1) / chunk
	r := newTestReader(t, ReaderConfig{Store: store, ChunkSize: chunk, CacheBytes: 1 << 30, IndexCacheBytes: 1 << 20, ReadAhead: 2})
	before := store.Calls(OpGet)
	reads := readAll(t, r, store, m, 1500)
	st := r.Stats()
	// DemandGets counts the .index too.
	if st.DemandGets-1 > 2 || st.DemandGets-1+st.ReadAheadGets != int64(chunks) {
		t.Fatalf("sequential pass over %d chunks (%d reads): %+v; want at most 2 demand GETs of chunks and the rest read ahead", chunks, reads, st)
	}
	if chunks < 20 {
		t.Fatalf("only %d chunks", chunks)
	}
	gets := store.Calls(OpGet) - before
	// The same pass again: no GET, no miss.
	readGets := store.Calls(OpGet)
	misses := r.Stats().Misses
	for off := m.StartOffset; off <= m.EndOffset; off += 13 {
		if _, err := r.Read(context.Background(), m, off, 1500); err != nil {
			t.Fatal(err)
		}
	}
	if n := store.Calls(OpGet) - readGets; n > 0 {
		t.Fatalf("second pass made %d GETs (first pass %d)", n, gets)
	}
	if st := r.Stats(); st.Misses != misses {
		t.Fatalf("second pass missed %d times", st.Misses-misses)
	}
	// Without read-ahead every chunk is a demand GET.
	r3 := newTestReader(t, ReaderConfig{Store: store, ChunkSize: chunk, CacheBytes: 1 << 30, IndexCacheBytes: 1 << 20})
	readAll(t, r3, store, m, 1500)
	if st := r3.Stats(); st.DemandGets-1 != int64(chunks) || st.ReadAheadGets != 0 {
		t.Fatalf("pass without read-ahead: %+v, want %d demand GETs", st, chunks+1)
	}
}

// TestReaderSharedGet: concurrent reads of one chunk share one GET.
func TestReaderSharedGet(t *testing.T) {
	store, m, _ := seqSegment(t, 40)
	r := newTestReader(t, ReaderConfig{Store: store, ChunkSize: 1 << 20, CacheBytes: 1 << 20, IndexCacheBytes: 1 << 20})
	release := make(chan struct{})
	store.SetFault(func(op Op, key string) error {
		if op == OpGet {
			<-release
		}
		return nil
	})
	const n = 8
	errs := make(chan error, n)
	var want []byte
	want, _ = ReadRemote(context.Background(), memStoreCopy(t, store), m, 120, 5000)
	for range n {
		go func() {
			got, err := r.Read(context.Background(), m, 120, 5000)
			if err == nil && !bytes.Equal(got, want) {
				err = errors.New("wrong bytes")
			}
			errs <- err
		}()
	}
	// Every reader waits on the one .index GET under way.
	waitFor(t, func() bool { return r.Stats().Misses == n })
	if g := store.Calls(OpGet); g != 1 {
		t.Fatalf("%d GETs under way for %d readers, want 1", g, n)
	}
	close(release)
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if g := store.Calls(OpGet); g != 2 {
		t.Fatalf("%d GETs for %d concurrent reads, want 2 (.index, one chunk)", g, n)
	}
}

// memStoreCopy copies a MemStore's objects into a new one (no faults,
// its own counters).
func memStoreCopy(t testing.TB, s *MemStore) *MemStore {
	t.Helper()
	out := NewMemStore()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, o := range s.objects {
		out.objects[k] = memObject{data: o.data, modTime: o.modTime}
	}
	return out
}

// waitFor waits until cond holds, failing after ten seconds.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met in 10s")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestReaderErrors: missing objects are ErrNotFound, inconsistent ones
// ErrCorruptSegment, a failing bucket its error; errors are not cached.
func TestReaderErrors(t *testing.T) {
	ctx := context.Background()
	t.Run("missing log", func(t *testing.T) {
		store, m, _ := seqSegment(t, 10)
		store.Delete(ctx, ObjectKey(m, index.ObjectLog))
		r := newTestReader(t, ReaderConfig{Store: store, CacheBytes: 1 << 20, IndexCacheBytes: 1 << 20})
		if _, err := r.Read(ctx, m, 100, 100); !errors.Is(err, ErrNotFound) {
			t.Fatalf("read: %v, want ErrNotFound", err)
		}
	})
	t.Run("missing index", func(t *testing.T) {
		store, m, _ := seqSegment(t, 10)
		store.Delete(ctx, ObjectKey(m, index.ObjectOffsetIndex))
		r := newTestReader(t, ReaderConfig{Store: store, CacheBytes: 1 << 20, IndexCacheBytes: 1 << 20})
		if _, err := r.Read(ctx, m, 101, 100); !errors.Is(err, ErrNotFound) { // past the start: the .index is needed
			t.Fatalf("read: %v, want ErrNotFound", err)
		}
	})
	corrupt := map[string]func(*MemStore, *index.SegmentMetadata){
		"index size": func(s *MemStore, m *index.SegmentMetadata) {
			m.Objects[1].Size += 3
			s.Put(ctx, ObjectKey(m, index.ObjectOffsetIndex), bytes.NewReader(make([]byte, m.Objects[1].Size)), m.Objects[1].Size)
		},
		"index shorter than the manifest": func(s *MemStore, m *index.SegmentMetadata) { m.Objects[1].Size += 8 },
		"index past the log": func(s *MemStore, m *index.SegmentMetadata) {
			b := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 0), uint32(m.SegmentSize+5))
			s.Put(ctx, ObjectKey(m, index.ObjectOffsetIndex), bytes.NewReader(b), 8)
			m.Objects[1].Size = 8
		},
		"log shorter than the manifest": func(s *MemStore, m *index.SegmentMetadata) { m.SegmentSize += 4096 },
		"batch out of bounds": func(s *MemStore, m *index.SegmentMetadata) {
			b := fakeBatch(100, 100, 100)
			binary.BigEndian.PutUint32(b[8:], 1<<20)
			s.Put(ctx, ObjectKey(m, index.ObjectLog), bytes.NewReader(b), 100)
			s.Delete(ctx, ObjectKey(m, index.ObjectOffsetIndex))
			m.SegmentSize, m.Objects = 100, m.Objects[:1]
		},
	}
	for name, f := range corrupt {
		t.Run(name, func(t *testing.T) {
			store, m, _ := seqSegment(t, 10)
			f(store, m)
			r := newTestReader(t, ReaderConfig{Store: store, CacheBytes: 1 << 20, IndexCacheBytes: 1 << 20})
			if _, err := r.Read(ctx, m, 101, 100); !errors.Is(err, ErrCorruptSegment) {
				t.Fatalf("read: %v, want ErrCorruptSegment", err)
			}
			if _, _, _, _, err := r.OffsetForTimestamp(ctx, m, 0, 0); !errors.Is(err, ErrCorruptSegment) {
				t.Fatalf("by timestamp: %v, want ErrCorruptSegment", err)
			}
		})
	}
	t.Run("failing bucket, then not", func(t *testing.T) {
		store, m, _ := seqSegment(t, 10)
		boom := errors.New("boom")
		store.SetFault(func(op Op, key string) error { return boom })
		r := newTestReader(t, ReaderConfig{Store: store, CacheBytes: 1 << 20, IndexCacheBytes: 1 << 20})
		if _, err := r.Read(ctx, m, 100, 100); !errors.Is(err, boom) {
			t.Fatalf("read: %v, want the bucket's error", err)
		}
		store.SetFault(nil)
		if b, err := r.Read(ctx, m, 100, 100); err != nil || len(b) == 0 {
			t.Fatalf("read after the bucket recovered: %d bytes, %v", len(b), err)
		}
	})
	t.Run("closed", func(t *testing.T) {
		store, m, _ := seqSegment(t, 10)
		r := NewReader(ReaderConfig{Store: store})
		r.Close()
		if _, err := r.Read(ctx, m, 100, 100); !errors.Is(err, ErrReaderClosed) {
			t.Fatalf("read after Close: %v", err)
		}
	})
}

// TestReaderSegmentStartAndNext: a read at a segment's start offset GETs
// no .index (its first batch is at position 0), and read-ahead that
// passes a segment's end starts on the segment Next names, so that a
// sequential reader finds its first chunk fetched.
func TestReaderSegmentStartAndNext(t *testing.T) {
	ctx := context.Background()
	store, m, _ := seqSegment(t, 40)
	store2, m2, _ := seqSegment(t, 40)
	for k, o := range memStoreCopy(t, store2).objects { // the second segment beside the first
		store.objects[k] = o
	}
	const chunk = 4096
	var asked []index.UUID
	r := newTestReader(t, ReaderConfig{Store: store, ChunkSize: chunk, CacheBytes: 1 << 30, IndexCacheBytes: 1 << 20, ReadAhead: 2,
		Next: func(s *index.SegmentMetadata) (index.SegmentMetadata, bool) {
			asked = append(asked, s.SegmentID)
			if s.SegmentID == m.SegmentID {
				return *m2, true
			}
			return index.SegmentMetadata{}, false
		}})
	before := store.Calls(OpGet)
	if _, err := r.Read(ctx, m, m.StartOffset, 100); err != nil {
		t.Fatal(err)
	}
	if n := store.Calls(OpGet) - before; n != 1 {
		t.Fatalf("%d GETs for a read at the segment's start, want 1 (.log only)", n)
	}
	readAll(t, r, store, m, 1500)
	if !slices.Contains(asked, m.SegmentID) {
		t.Fatal("read-ahead did not ask for the next segment")
	}
	waitFor(t, func() bool { // the read-ahead GETs done
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.inflight) == 0
	})
	before, misses := store.Calls(OpGet), r.Stats().Misses
	if _, err := r.Read(ctx, m2, m2.StartOffset, 1500); err != nil {
		t.Fatal(err)
	}
	if n := store.Calls(OpGet) - before; n != 0 || r.Stats().Misses != misses {
		t.Fatalf("the next segment's first read: %d GETs, %d misses; want its first chunk read ahead", n, r.Stats().Misses-misses)
	}
}

// TestReaderPinnedChunksNotReused: the parts a ReadPinned returns keep
// their bytes while later reads evict their chunks and fetch others, and
// the evicted chunks' buffers hold later chunks only once released.
func TestReaderPinnedChunksNotReused(t *testing.T) {
	store, m, logb := seqSegment(t, 200)
	const chunk = 4096
	if len(logb) < 8*chunk {
		t.Fatalf("segment of %d bytes, want 8 chunks", len(logb))
	}
	r := newTestReader(t, ReaderConfig{Store: store, ChunkSize: chunk, CacheBytes: chunk, IndexCacheBytes: 1 << 20})
	ctx := context.Background()
	first, err := r.ReadPinned(ctx, m, m.StartOffset, chunk)
	if err != nil || first.Len == 0 {
		t.Fatalf("read: %v (%d bytes)", err, first.Len)
	}
	want := first.Bytes()
	// Read the rest of the segment through the one-chunk cache.
	readAll(t, r, store, m, 3000)
	if got := first.Bytes(); !bytes.Equal(got, want) {
		t.Fatal("a pinned read's bytes changed while its chunk was evicted and others fetched")
	}
	r.mu.Lock()
	free := len(r.free)
	r.mu.Unlock()
	first.Release()
	first.Release() // twice is harmless
	r.mu.Lock()
	if len(r.free) != free+1 {
		t.Errorf("%d free buffers after releasing an evicted chunk, had %d", len(r.free), free)
	}
	r.mu.Unlock()
	if first.Parts != nil {
		t.Error("parts kept after Release")
	}
	// A new read takes the recycled buffer, and still reads right.
	readAll(t, r, store, m, 3000)
}

// TestReaderRecyclesShortChunks: the last chunk of a segment, shorter
// than the chunk size but at least half of it, takes a recycled buffer and
// gives it back, so that reading a segment again and again through a
// one-chunk cache allocates no new buffers; the cache charges each chunk
// its whole buffer and stays within its bound. A chunk under half the chunk
// size gets a buffer of its own size.
func TestReaderRecyclesShortChunks(t *testing.T) {
	store, m, logb := seqSegment(t, 200)
	for _, c := range []struct {
		name      string
		chunks10  int64 // the segment is this many tenths of a chunk
		wantBytes func(chunk int64) int64
	}{
		{"last chunk 0.7", 27, func(chunk int64) int64 { return chunk }},
		{"last chunk 0.3", 23, func(chunk int64) int64 { return int64(len(logb)) - 2*chunk }},
	} {
		chunk := int64(len(logb)) * 10 / c.chunks10
		r := newTestReader(t, ReaderConfig{Store: store, ChunkSize: chunk, CacheBytes: chunk, IndexCacheBytes: 1 << 20})
		for range 4 {
			readAll(t, r, store, m, int(chunk/3))
		}
		st := r.Stats()
		if gets := st.DemandGets + st.ReadAheadGets; gets < 12 {
			t.Fatalf("%s: %d GETs for four passes over three chunks", c.name, gets)
		}
		if c.chunks10 == 27 && st.BuffersMade > 3 {
			t.Errorf("%s: %d chunk buffers made in %d GETs, want at most 3", c.name, st.BuffersMade, st.DemandGets+st.ReadAheadGets)
		}
		if st.CacheBytes > chunk {
			t.Errorf("%s: %d bytes cached, bound %d", c.name, st.CacheBytes, chunk)
		}
		// The last chunk is the one cached: it is charged its buffer.
		if got, want := st.CacheBytes, c.wantBytes(chunk); got != want {
			t.Errorf("%s: the cached last chunk is charged %d bytes, want %d", c.name, got, want)
		}
	}
}

// TestReaderPinnedConcurrent: many readers at random offsets through a
// small cache with read-ahead, each holding its parts a while before
// checking them against the object: a buffer reused while pinned shows
// as wrong bytes.
func TestReaderPinnedConcurrent(t *testing.T) {
	store, m, _ := seqSegment(t, 300)
	const chunk = 2048
	r := newTestReader(t, ReaderConfig{Store: store, ChunkSize: chunk, CacheBytes: 3 * chunk, IndexCacheBytes: 1 << 20, ReadAhead: 2})
	ref := memStoreCopy(t, store)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx := context.Background()
			for i := range 150 {
				off := m.StartOffset + int64((g*7919+i*104729)%int(m.EndOffset-m.StartOffset+1))
				size := 1 + (g*31+i*977)%9000
				p, err := r.ReadPinned(ctx, m, off, size)
				if err != nil {
					errs <- err
					return
				}
				want, err := ReadRemote(ctx, ref, m, off, size)
				if err != nil {
					errs <- err
					return
				}
				time.Sleep(time.Duration(i%3) * 100 * time.Microsecond)
				got := p.Bytes()
				p.Release()
				if !bytes.Equal(got, want) {
					errs <- fmt.Errorf("read at %d (max %d): %d bytes differ from the object's %d", off, size, len(got), len(want))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for e := r.data.ll.Front(); e != nil; e = e.Next() {
		if cb := e.Value.(*lruEntry).val.(*chunkBuf); cb.pins != 0 {
			t.Fatalf("a cached chunk holds %d pins after every read was released", cb.pins)
		}
	}
	if len(r.free) > r.maxFree {
		t.Fatalf("%d free buffers, bound %d", len(r.free), r.maxFree)
	}
}

// TestReaderCanceledWaiterUnpins: a read that gives up waiting for a GET
// leaves no pin on the chunk when it lands.
func TestReaderCanceledWaiterUnpins(t *testing.T) {
	store, m, _ := seqSegment(t, 40)
	r := newTestReader(t, ReaderConfig{Store: store, ChunkSize: 1 << 20, CacheBytes: 1 << 20, IndexCacheBytes: 1 << 20})
	release := make(chan struct{})
	store.SetFault(func(op Op, key string) error {
		if op == OpGet && strings.HasSuffix(key, ".log") {
			<-release
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := r.ReadPinned(ctx, m, m.StartOffset, 100)
		done <- err
	}()
	waitFor(t, func() bool { return r.Stats().Misses == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled read: %v", err)
	}
	close(release)
	waitFor(t, func() bool { return r.Stats().CacheBytes > 0 })
	r.mu.Lock()
	defer r.mu.Unlock()
	for e := r.data.ll.Front(); e != nil; e = e.Next() {
		if cb := e.Value.(*lruEntry).val.(*chunkBuf); cb.pins != 0 {
			t.Fatalf("the chunk holds %d pins after its only reader gave up", cb.pins)
		}
	}
}

// TestReaderPackedIndex: a segment whose .index is packed in its .indexes
// object (after another object) reads as the same segment with a .index
// of its own; an .indexes object shorter than the manifest says is
// ErrCorruptSegment for reads that need the index, and GetObject reads the
// packed objects back.
func TestReaderPackedIndex(t *testing.T) {
	store, plain, _ := seqSegment(t, 60)
	ctx := context.Background()
	idx, err := GetObject(ctx, store, plain, index.ObjectOffsetIndex, 1<<20)
	if err != nil || len(idx) == 0 {
		t.Fatalf("plain .index: %d bytes, %v", len(idx), err)
	}
	packed := *plain
	packed.SegmentID = index.NewUUID()
	ck := []byte("0\n1\n0 100\n")
	packs := append(slices.Clone(ck), idx...)
	packed.Objects = []index.ObjectEntry{plain.Objects[0], {Kind: index.ObjectIndexes, Size: int64(len(packs))},
		{Kind: index.ObjectLeaderEpochCheckpoint, Size: int64(len(ck)), Packed: true},
		{Kind: index.ObjectOffsetIndex, Size: int64(len(idx)), Packed: true, Offset: int64(len(ck))}}
	logb, err := ReadAll(ctx, store, ObjectKey(plain, index.ObjectLog))
	if err != nil {
		t.Fatal(err)
	}
	for key, b := range map[string][]byte{ObjectKey(&packed, index.ObjectLog): logb, ObjectKey(&packed, index.ObjectIndexes): packs} {
		if err := store.Put(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := GetObject(ctx, store, &packed, index.ObjectLeaderEpochCheckpoint, 1<<20); err != nil || !bytes.Equal(got, ck) {
		t.Fatalf("packed checkpoint %q, %v", got, err)
	}
	r := newTestReader(t, ReaderConfig{Store: store, ChunkSize: 4096, CacheBytes: 1 << 20, IndexCacheBytes: 1 << 20})
	for off := packed.StartOffset; off <= packed.EndOffset; off += 7 {
		got, err := r.Read(ctx, &packed, off, 3000)
		if err != nil {
			t.Fatalf("packed read %d: %v", off, err)
		}
		want, err := ReadRemote(ctx, store, plain, off, 3000)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("packed read %d: %d bytes, the plain segment %d (%v)", off, len(got), len(want), err)
		}
	}
	// The .indexes object cut short: the packed .index is corrupt.
	short := packed
	short.SegmentID = index.NewUUID()
	store.Put(ctx, ObjectKey(&short, index.ObjectLog), bytes.NewReader(logb), int64(len(logb)))
	store.Put(ctx, ObjectKey(&short, index.ObjectIndexes), bytes.NewReader(packs[:len(packs)-8]), int64(len(packs)-8))
	if _, err := r.Read(ctx, &short, short.EndOffset, 100); !errors.Is(err, ErrCorruptSegment) {
		t.Fatalf("read with a short .indexes object: %v, want ErrCorruptSegment", err)
	}
	if _, err := GetObject(ctx, store, &short, index.ObjectOffsetIndex, 1<<20); !errors.Is(err, ErrCorruptSegment) {
		t.Fatalf("GetObject of a cut packed object: %v, want ErrCorruptSegment", err)
	}
	// And missing: not found.
	store.Delete(ctx, ObjectKey(&short, index.ObjectIndexes))
	if _, err := GetObject(ctx, store, &short, index.ObjectOffsetIndex, 1<<20); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetObject with no .indexes object: %v, want ErrNotFound", err)
	}
}

// TestLRUReplace: adding a key already cached reports the value it
// replaces as evicted (a chunk, by identity), and never compares values
// that cannot be compared (parsed indexes hold slices).
func TestLRUReplace(t *testing.T) {
	var evicted []any
	c := newLRU(100)
	c.onEvict = func(v any) { evicted = append(evicted, v) }
	k := cacheKey{chunk: 1}
	a, b := &chunkBuf{}, &chunkBuf{}
	c.add(k, a, 10)
	c.add(k, a, 10) // the same chunk again: nothing evicted
	c.add(k, b, 10)
	if len(evicted) != 1 || evicted[0] != a || c.size != 10 {
		t.Fatalf("evicted %v, size %d; want the first chunk only, 10 bytes", evicted, c.size)
	}
	idx := newLRU(100)
	type parsed struct{ entries []int64 }
	idx.add(k, parsed{[]int64{1}}, 10)
	idx.add(k, parsed{[]int64{2}}, 10) // must not panic
	if v, _ := idx.get(k); v.(parsed).entries[0] != 2 || idx.size != 10 {
		t.Fatalf("index cache holds %v, %d bytes", v, idx.size)
	}
	c.add(cacheKey{chunk: 2}, &chunkBuf{}, 101) // over the bound: never cached, evicted at once
	if len(evicted) != 2 {
		t.Fatalf("a chunk over the bound was not reported evicted")
	}
}
