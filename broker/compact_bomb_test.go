package broker

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"math"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// zstdBombRecords is a records section of one record (key "k", a value of
// size zero bytes) as one single-segment zstd frame of RLE blocks: what
// a zstd EncodeAll of the record declares (the frame's content size, so
// a streaming decoder's window is the whole record), in a few KB.
func zstdBombRecords(size int) []byte {
	head := []byte{0, 0, 0, 2, 'k'} // attributes, timestamp delta, offset delta, key length 1, key
	head = binary.AppendVarint(head, int64(size))
	prefix := append(binary.AppendVarint(nil, int64(len(head)+size+1)), head...)
	out := []byte{0x28, 0xb5, 0x2f, 0xfd, 0xe0} // magic; single segment, 8-byte content size
	out = binary.LittleEndian.AppendUint64(out, uint64(len(prefix)+size+1))
	block := func(last bool, typ, n int) {
		v := uint32(n)<<3 | uint32(typ)<<1
		if last {
			v |= 1
		}
		out = append(out, byte(v), byte(v>>8), byte(v>>16))
	}
	block(false, 0, len(prefix))
	out = append(out, prefix...)
	for left := size + 1; left > 0; { // the value's zeros, then header count 0
		n := min(left, 128<<10)
		left -= n
		block(left == 0, 1, n)
		out = append(out, 0)
	}
	return out
}

// TestCompactedZstdBombRefused (issue 25): a zstd batch of a few KB
// holding one 200 MiB record, produced to a compacted topic, took the
// broker from 23 MB to 740 MB. It is refused with MESSAGE_TOO_LARGE, the
// broker allocates little while refusing it, its decompression is
// charged to queued.max.request.bytes and given back, and the broker
// goes on serving.
func TestCompactedZstdBombRefused(t *testing.T) {
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("bombed", 1, map[string]string{"cleanup.policy": "compact"})
	batch := rawFrame(zstdBombRecords(200<<20), 1, 4, time.Now().UnixMilli(), -1, -1)
	if len(batch) > 32<<10 {
		t.Fatalf("bomb of %d bytes", len(batch))
	}
	req := produceReq("bombed", 0, -1, batch)
	req.SetVersion(9)
	if charge := decodeCharge(0, 9, req.AppendTo(nil)); charge < 200<<20 {
		t.Errorf("a Produce declaring a 200 MiB zstd window is charged %d bytes of queued.max.request.bytes", charge)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	p := rc.producePart("bombed", 0, batch)
	runtime.ReadMemStats(&after)
	if p.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("zstd bomb: error %v (%s), want MESSAGE_TOO_LARGE", kerr.ErrorForCode(p.ErrorCode), errMsg(p))
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 32<<20 {
		t.Fatalf("refusing a %d-byte zstd bomb allocated %d MiB", len(batch), got>>20)
	}
	if after.HeapInuse > before.HeapInuse+64<<20 {
		t.Fatalf("heap in use went from %d to %d MiB", before.HeapInuse>>20, after.HeapInuse>>20)
	}
	if !holdsWithin(5*time.Second, func() bool { return ts.network.RequestMemoryInUse() == 0 }) {
		t.Fatalf("%d bytes of queued.max.request.bytes still held", ts.network.RequestMemoryInUse())
	}
	t.Logf("%d-byte bomb refused, %d KiB allocated: %s", len(batch), (after.TotalAlloc-before.TotalAlloc)>>10, errMsg(p))
	// The partition is untouched and still takes ordinary batches.
	ok := batchSpec{producerID: -1, producerEpoch: -1, firstSequence: -1, firstTS: time.Now().UnixMilli(),
		codec: kgo.ZstdCompression(), records: []recordSpec{{key: []byte("k"), value: []byte("v")}}}.build(t)
	if p := rc.producePart("bombed", 0, ok); p.ErrorCode != 0 || p.BaseOffset != 0 {
		t.Fatalf("ordinary zstd batch after the bomb: %v at %d", kerr.ErrorForCode(p.ErrorCode), p.BaseOffset)
	}
}

// Ordinary compressed batches on a compacted topic, every codec, through
// franz-go: accepted and read back; a batch with a keyless record is
// refused with INVALID_RECORD whatever its codec.
func TestCompactedTopicCodecs(t *testing.T) {
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	ctx := testCtx(t)
	for _, c := range protoCodecs {
		topic := "compacted-" + c.name
		rc.createTopic(topic, 1, map[string]string{"cleanup.policy": "compact"})
		cl := ts.client(t, kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(c.codec), kgo.ProducerLinger(0))
		var rs []*kgo.Record
		for i := range 50 {
			rs = append(rs, &kgo.Record{Key: []byte{'k', byte('0' + i%10)}, Value: make([]byte, 1000+i)})
		}
		if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
			t.Fatalf("%s: produce to a compacted topic: %v", c.name, err)
		}
		if got := consumeFrom(t, ts, topic, 50); len(got) != 50 {
			t.Fatalf("%s: read back %d records of 50", c.name, len(got))
		}
		bad := batchSpec{producerID: -1, producerEpoch: -1, firstSequence: -1, firstTS: time.Now().UnixMilli(), codec: c.codec,
			records: []recordSpec{{key: []byte("k"), value: []byte("v")}, {value: []byte("no key")}}}.build(t)
		if p := rc.producePart(topic, 0, bad); p.ErrorCode != kerr.InvalidRecord.Code {
			t.Fatalf("%s: keyless record on a compacted topic: %v, want INVALID_RECORD", c.name, kerr.ErrorForCode(p.ErrorCode))
		}
	}
}

// zstdWindowedBomb is zstdBombRecords as a frame that declares a window
// of window bytes and no content size: a streaming decoder holds only the
// window, however large the record.
func zstdWindowedBomb(size int, window uint64) []byte {
	single := zstdBombRecords(size)
	exp := 0
	for (uint64(1) << (10 + exp)) < window {
		exp++
	}
	// Replace the single-segment header (magic, descriptor, 8-byte
	// content size) with a windowed one; the blocks stay.
	return append([]byte{0x28, 0xb5, 0x2f, 0xfd, 0x00, byte(exp << 3)}, single[13:]...)
}

// TestCleanerStreamsCompactedBombs (issue 25): the log cleaner decompressed
// a whole stored batch in memory. Stored batches of a few KB holding a
// 1 GiB record (a 1 MiB window: past the cleaner's 256 MiB bound, read as
// a stream until then) and a 200 MiB record (a single-segment frame, its
// whole content as window: more than queued.max.request.bytes allows) are
// kept as they are, every record of them, while the rest of the log is
// compacted; the pass allocates little and gives back what it charged to
// queued.max.request.bytes.
func TestCleanerStreamsCompactedBombs(t *testing.T) {
	ts := startTestServer(t, map[string]string{"queued.max.request.bytes": "134217728"})
	rc := dialRaw(t, ts.addr())
	rc.createTopic("swept", 1, map[string]string{"cleanup.policy": "compact", "segment.bytes": "1024"})
	p := ts.partition("swept", 0)
	now := time.Now().UnixMilli()
	windowed := rawFrame(zstdWindowedBomb(1<<30, 1<<20), 1, 4, now, -1, -1)
	single := rawFrame(zstdBombRecords(200<<20), 1, 4, now, -1, -1)
	binary.BigEndian.PutUint64(single[0:], 1)
	binary.BigEndian.PutUint32(single[17:], crc32.Checksum(single[21:], crc32c))
	for _, b := range [][]byte{windowed, single} {
		if len(b) > 64<<10 {
			t.Fatalf("bomb of %d bytes", len(b))
		}
		if _, err := p.Log().AppendReplicated(b); err != nil {
			t.Fatal(err)
		}
	}
	for i := range int64(30) {
		b := batchSpec{producerID: -1, producerEpoch: -1, firstSequence: -1, firstTS: now,
			records: []recordSpec{{key: []byte{'d', byte('0' + i%3)}, value: make([]byte, 300)}}}.build(t)
		binary.BigEndian.PutUint64(b[0:], uint64(2+i))
		binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32c))
		if _, err := p.Log().AppendReplicated(b); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	st, err := p.Log().CleanBelowCharged(p.Log().LogEndOffset(), ts.cleanerMemory)
	runtime.ReadMemStats(&after)
	if err != nil {
		t.Fatalf("clean: %v", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 32<<20 {
		t.Fatalf("cleaning past two bombs allocated %d MiB", got>>20)
	}
	if st.BatchesSkipped < 2 || st.RecordsKept >= st.RecordsRead {
		t.Fatalf("clean stats %+v: want both bombs kept and the rest compacted", st)
	}
	for off, want := range map[int64][]byte{0: windowed, 1: single} {
		fs, err := p.Log().Read(off, math.MaxInt64, 1<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]byte, fs.Len)
		if _, err := fs.File.ReadAt(got, fs.Pos); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if !bytes.Contains(got, want[21:]) {
			t.Fatalf("the batch at offset %d was changed or lost", off)
		}
	}
	if n := ts.network.RequestMemoryInUse(); n != 0 {
		t.Fatalf("%d bytes of queued.max.request.bytes still held", n)
	}
	t.Logf("%d KiB allocated: %+v", (after.TotalAlloc-before.TotalAlloc)>>10, st)
}
