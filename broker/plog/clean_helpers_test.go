package plog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kv is a record to build; nil key or value is null.
type kv struct{ key, value []byte }

func kvs(pairs ...string) []kv {
	var out []kv
	for i := 0; i+1 < len(pairs); i += 2 {
		r := kv{key: []byte(pairs[i]), value: []byte(pairs[i+1])}
		if pairs[i+1] == "<nil>" {
			r.value = nil
		}
		out = append(out, r)
	}
	return out
}

// kvBatchSpec builds a batch of keyed records, compressed with franz-go's
// own compressor so the cleaner's codecs are checked against it.
type kvBatchSpec struct {
	recs  []kv
	ts    int64
	codec kgo.CompressionCodecType
	pid   int64 // 0 means -1
	epoch int16
	seq   int32
	txn   bool // transactional attribute
}

var testCodecs = map[kgo.CompressionCodecType]kgo.CompressionCodec{
	kgo.CodecGzip:   kgo.GzipCompression(),
	kgo.CodecSnappy: kgo.SnappyCompression(),
	kgo.CodecLz4:    kgo.Lz4Compression(),
	kgo.CodecZstd:   kgo.ZstdCompression(),
}

func (b kvBatchSpec) bytes(t testing.TB) []byte {
	t.Helper()
	if b.pid == 0 {
		b.pid = -1
	}
	var recs []byte
	for i, r := range b.recs {
		rec := kmsg.Record{TimestampDelta64: int64(i), OffsetDelta: int32(i), Key: r.key, Value: r.value}
		body := rec.AppendTo(nil)
		// AppendTo wrote a zero length first; recompute it.
		_, n := binary.Varint(body)
		body = body[n:]
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	if b.codec != kgo.CodecNone {
		c, err := kgo.DefaultCompressor(testCodecs[b.codec])
		if err != nil {
			t.Fatal(err)
		}
		out, used := c.Compress(new(bytes.Buffer), recs)
		if used != b.codec {
			t.Fatalf("compressed with %d, want %d", used, b.codec)
		}
		recs = append([]byte(nil), out...)
	}
	seq := b.seq
	if b.pid < 0 {
		seq = -1
	}
	rb := kmsg.RecordBatch{
		Length:               int32(batchHeaderSize - logOverhead + len(recs)),
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           int16(b.codec) | txnAttr(b.txn),
		LastOffsetDelta:      int32(len(b.recs) - 1),
		FirstTimestamp:       b.ts,
		MaxTimestamp:         b.ts + int64(len(b.recs)-1),
		ProducerID:           b.pid,
		ProducerEpoch:        b.epoch,
		FirstSequence:        seq,
		NumRecords:           int32(len(b.recs)),
		Records:              recs,
	}
	out := rb.AppendTo(nil)
	putCRC(out)
	return out
}

func txnAttr(txn bool) int16 {
	if txn {
		return attrTransactional
	}
	return 0
}

// gotRecord is a record read back from the log.
type gotRecord struct {
	offset int64
	ts     int64
	key    []byte
	value  []byte
}

// gotBatch is a batch read back from the log with its records, decoded
// with franz-go's decompressor and kmsg.
type gotBatch struct {
	h    batchHeader
	recs []gotRecord
}

// testDecompressor is franz-go's, independent of the broker's codecs.
var testDecompressor = kgo.DefaultDecompressor()

func decodeForTest(t testing.TB, b []byte) gotBatch {
	t.Helper()
	h, err := checkFrame(b)
	if err != nil {
		t.Fatalf("bad batch: %v", err)
	}
	data, err := testDecompressor.Decompress(b[batchHeaderSize:h.size()], kgo.CompressionCodecType(h.codec()))
	if err != nil {
		t.Fatalf("decompress batch at %d (codec %d): %v", h.BaseOffset, h.codec(), err)
	}
	g := gotBatch{h: h}
	for i := int32(0); i < h.RecordCount; i++ {
		length, n := binary.Varint(data)
		if n <= 0 || int64(len(data)-n) < length {
			t.Fatalf("batch at %d: bad record %d", h.BaseOffset, i)
		}
		var r kmsg.Record
		if err := r.ReadFrom(data[:n+int(length)]); err != nil {
			t.Fatalf("batch at %d record %d: %v", h.BaseOffset, i, err)
		}
		data = data[n+int(length):]
		g.recs = append(g.recs, gotRecord{offset: h.BaseOffset + int64(r.OffsetDelta), ts: h.BaseTimestamp + r.TimestampDelta64, key: r.Key, value: r.Value})
	}
	if len(data) != 0 {
		t.Fatalf("batch at %d: %d trailing bytes", h.BaseOffset, len(data))
	}
	return g
}

// readBatchesKV reads every batch from the log start to the log end.
func readBatchesKV(t testing.TB, l *Log) []gotBatch {
	t.Helper()
	var out []gotBatch
	var last int64 = -1
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		fs, err := l.Read(off, 1<<62, 1<<20, true)
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		if fs.Len == 0 {
			t.Fatalf("empty read at %d below log end %d", off, l.LogEndOffset())
		}
		b := make([]byte, fs.Len)
		if _, err := fs.File.ReadAt(b, fs.Pos); err != nil {
			t.Fatalf("read slice: %v", err)
		}
		for len(b) > 0 {
			g := decodeForTest(t, b)
			if g.h.BaseOffset <= last {
				t.Fatalf("batch at %d after offset %d", g.h.BaseOffset, last)
			}
			last = g.h.lastOffset()
			out = append(out, g)
			b = b[g.h.size():]
		}
		if last != fs.LastOffset {
			t.Fatalf("slice LastOffset %d, last batch ends at %d", fs.LastOffset, last)
		}
		off = fs.LastOffset + 1
	}
	return out
}

// latestByKey is the logical content of a compacted log: each key's last
// value ("<nil>" for a tombstone) and its offset.
func latestByKey(bs []gotBatch) map[string]string {
	m := map[string]string{}
	for _, b := range bs {
		for _, r := range b.recs {
			v := string(r.value)
			if r.value == nil {
				v = "<nil>"
			}
			m[string(r.key)] = fmt.Sprintf("%s@%d", v, r.offset)
		}
	}
	return m
}

// liveKeys drops tombstones from latestByKey.
func liveKeys(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		if !bytes.HasPrefix([]byte(v), []byte("<nil>@")) {
			out[k] = v
		}
	}
	return out
}
