package tier

import (
	"bytes"
	"context"
	"encoding/binary"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/index"
)

type tsRecord struct {
	offset, ts int64
	epoch      int32
}

// tsBatch is a batch of records with the given timestamps (in order of
// offset, not necessarily ascending), compressed with codec (0 none).
func tsBatch(t testing.TB, tss []int64, codec kgo.CompressionCodec, compress bool) []byte {
	t.Helper()
	first, maxTs := tss[0], tss[0]
	for _, ts := range tss {
		first, maxTs = min(first, ts), max(maxTs, ts)
	}
	var recs []byte
	for i, ts := range tss {
		rec := kmsg.Record{TimestampDelta64: ts - first, OffsetDelta: int32(i), Value: bytes.Repeat([]byte{'v'}, 40)}
		rec.Length = int32(len(rec.AppendTo(nil)) - 1)
		recs = rec.AppendTo(recs)
	}
	var attrs int16
	if compress {
		c, err := kgo.DefaultCompressor(codec)
		if err != nil {
			t.Fatal(err)
		}
		out, typ := c.Compress(new(bytes.Buffer), recs)
		recs, attrs = append([]byte(nil), out...), int16(typ)
		if attrs == 0 {
			t.Fatal("records not compressed")
		}
	}
	b := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs, LastOffsetDelta: int32(len(tss) - 1),
		FirstTimestamp: first, MaxTimestamp: maxTs, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(len(tss)), Records: recs}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// TestReaderOffsetForTimestamp: by-timestamp lookups in remote segments
// answer as Kafka does (the first batch whose max timestamp reaches the
// target, then its first record at or after it; as records are in offset
// order, that is the first record at or after the start offset with a
// timestamp >= the target), through compressed batches and timestamps out
// of order, and agree with the local log's answer.
func TestReaderOffsetForTimestamp(t *testing.T) {
	l, _ := openTestLog(t, 4096, 300)
	codecs := []kgo.CompressionCodec{kgo.GzipCompression(), kgo.SnappyCompression(), kgo.Lz4Compression(), kgo.ZstdCompression()}
	const t0 = 1_700_000_000_000
	var recs []tsRecord
	for i := range 120 {
		base := t0 + int64(i)*100
		if i%7 == 3 {
			base -= 450 // a batch older than the ones before it
		}
		tss := []int64{base + 30, base, base + 70, base + 10}
		epoch := int32(i / 40)
		if _, err := l.Append(tsBatch(t, tss, codecs[i%4], i%3 != 0), epoch); err != nil {
			t.Fatal(err)
		}
		for _, ts := range tss {
			recs = append(recs, tsRecord{int64(len(recs)), ts, epoch})
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	u, store := newTestUploader(t)
	if _, err := u.CopyPartition(context.Background(), upTP, "t", l, l.LogEndOffset(), Leadership{}); err != nil {
		t.Fatal(err)
	}
	remoteEnd, ok, err := u.Index.LogEnd(upTP)
	if err != nil || !ok || remoteEnd < 200 {
		t.Fatalf("remote log end %d %v %v", remoteEnd, ok, err)
	}
	segs, _ := u.Index.Segments(upTP)
	r := newTestReader(t, ReaderConfig{Store: store, ChunkSize: 512, CacheBytes: 1 << 20, IndexCacheBytes: 1 << 20, ReadAhead: 1})
	ctx := context.Background()
	// remote searches the remote log as the broker does: segments by max
	// timestamp from the index, then the Reader.
	remote := func(ts, from int64) (tsRecord, bool) {
		for range len(segs) + 1 {
			m, err := u.Index.SegmentForTimestamp(upTP, ts, from)
			if err != nil {
				return tsRecord{}, false
			}
			off, rts, epoch, ok, err := r.OffsetForTimestamp(ctx, &m, ts, from)
			if err != nil {
				t.Fatalf("ts %d from %d: %v", ts, from, err)
			}
			if ok {
				return tsRecord{off, rts, epoch}, true
			}
			from = m.EndOffset + 1
		}
		t.Fatalf("ts %d: no end", ts)
		return tsRecord{}, false
	}
	for _, from := range []int64{0, 57, 200} {
		for ts := int64(t0 - 600); ts <= t0+120*100+100; ts += 13 {
			want, found := tsRecord{}, false
			for _, rec := range recs {
				if rec.offset >= from && rec.offset <= remoteEnd && rec.ts >= ts {
					want, found = rec, true
					break
				}
			}
			got, ok := remote(ts, from)
			if ok != found || got != want {
				t.Fatalf("ts %d from %d: got %+v %v, want %+v %v", ts, from, got, ok, want, found)
			}
			if from == 0 && found {
				lo, lts, lep, lok := l.OffsetForTimestamp(ts)
				if !lok || (tsRecord{lo, lts, lep}) != want {
					t.Fatalf("ts %d: local log answers %d %d %d %v, remote %+v", ts, lo, lts, lep, lok, want)
				}
			}
		}
	}
	// The .timeindex positions the scan: a lookup near the end of a
	// segment GETs fewer chunks than the segment has.
	m := segs[len(segs)/2]
	fresh := newTestReader(t, ReaderConfig{Store: store, ChunkSize: 512, CacheBytes: 1 << 20, IndexCacheBytes: 1 << 20})
	var last tsRecord
	for _, rec := range recs {
		if rec.offset <= m.EndOffset {
			last = rec
		}
	}
	if _, _, _, ok, err := fresh.OffsetForTimestamp(ctx, &m, m.MaxTimestamp, last.offset); err != nil || !ok {
		t.Fatalf("lookup of the segment's max timestamp: %v %v", ok, err)
	}
	chunks := (m.SegmentSize + 511) / 512
	if st := fresh.Stats(); st.DemandGets-2 >= chunks/2 {
		t.Fatalf("lookup GET %d of %d chunks (and two indexes)", st.DemandGets-2, chunks)
	}
}

// FuzzReader: arbitrary .log, .index and .timeindex bytes (from outside:
// the bucket) give batches, a by-timestamp answer or an error, never a
// panic, bytes outside the .log, or a cache above its bound.
func FuzzReader(f *testing.F) {
	// A real segment: compressed and plain batches, Kafka's indexes.
	var logb, idx, tidx []byte
	off := int64(100)
	for i := range 6 {
		tss := []int64{1000 + int64(i)*10, 990 + int64(i)*10, 1005 + int64(i)*10}
		b := tsBatch(f, tss, kgo.GzipCompression(), i%2 == 1)
		binary.BigEndian.PutUint64(b, uint64(off))
		idx = binary.BigEndian.AppendUint32(idx, uint32(off+2-100))
		idx = binary.BigEndian.AppendUint32(idx, uint32(len(logb)))
		tidx = binary.BigEndian.AppendUint64(tidx, uint64(1005+int64(i)*10))
		tidx = binary.BigEndian.AppendUint32(tidx, uint32(off+2-100))
		logb = append(logb, b...)
		off += 3
	}
	f.Add(logb, idx, tidx, int64(104), int64(1021), 200)
	f.Add(logb, idx[:8], tidx[:12], int64(100), int64(0), 1)
	f.Add(logb[:len(logb)-5], []byte{}, []byte{}, int64(110), int64(1100), 1<<20)
	f.Add(fakeBatch(100, 101, 60), []byte{0, 0, 0, 1, 0, 0, 0, 0}, []byte{0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0}, int64(101), int64(5), 10)
	f.Fuzz(func(t *testing.T, logb, idx, tidx []byte, offset, ts int64, maxBytes int) {
		store := NewMemStore()
		m := &index.SegmentMetadata{
			Partition: index.TopicIDPartition{TopicID: index.NewUUID(), Partition: 1}, SegmentID: index.NewUUID(),
			StartOffset: 100, EndOffset: 200, SegmentSize: int64(len(logb)), State: index.CopySegmentFinished,
			Objects: []index.ObjectEntry{{Kind: index.ObjectLog, Size: int64(len(logb))},
				{Kind: index.ObjectOffsetIndex, Size: int64(len(idx))}, {Kind: index.ObjectTimeIndex, Size: int64(len(tidx))}},
		}
		ctx := context.Background()
		for kind, b := range map[index.ObjectKind][]byte{index.ObjectLog: logb, index.ObjectOffsetIndex: idx, index.ObjectTimeIndex: tidx} {
			if err := store.Put(ctx, ObjectKey(m, kind), bytes.NewReader(b), int64(len(b))); err != nil {
				t.Fatal(err)
			}
		}
		const bound = 256
		r := NewReader(ReaderConfig{Store: store, ChunkSize: 64, CacheBytes: bound, IndexCacheBytes: 1 << 16, ReadAhead: 2})
		defer r.Close()
		from := 100 + int64(uint64(offset)%101)
		for range 2 { // cold, then from the cache
			got, err := r.Read(ctx, m, from, maxBytes)
			if err == nil && (len(got) > len(logb) || !bytes.Contains(logb, got)) {
				t.Fatalf("%d bytes not from the %d-byte object", len(got), len(logb))
			}
			o, _, _, ok, err := r.OffsetForTimestamp(ctx, m, ts, from)
			if err == nil && ok && o < from {
				t.Fatalf("by timestamp from %d: offset %d", from, o)
			}
		}
		r.Close()
		if st := r.Stats(); st.CacheBytes > bound {
			t.Fatalf("cache holds %d bytes, bound %d", st.CacheBytes, bound)
		}
	})
}
