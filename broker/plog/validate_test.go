package plog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// hdr is one record header to encode; a nil value is null.
type hdr struct{ key, value []byte }

// rawRec is one record encoded by hand, so that any field may lie.
type rawRec struct {
	offDelta int64
	tsDelta  int64
	key      []byte // nil: null
	value    []byte // nil: null
	headers  []hdr
}

// body encodes the record without its length.
func (r rawRec) body() []byte {
	b := []byte{0}
	b = binary.AppendVarint(b, r.tsDelta)
	b = binary.AppendVarint(b, r.offDelta)
	for _, f := range [][]byte{r.key, r.value} {
		if f == nil {
			b = binary.AppendVarint(b, -1)
		} else {
			b = binary.AppendVarint(b, int64(len(f)))
			b = append(b, f...)
		}
	}
	b = binary.AppendVarint(b, int64(len(r.headers)))
	for _, h := range r.headers {
		b = binary.AppendVarint(b, int64(len(h.key)))
		b = append(b, h.key...)
		if h.value == nil {
			b = binary.AppendVarint(b, -1)
		} else {
			b = binary.AppendVarint(b, int64(len(h.value)))
			b = append(b, h.value...)
		}
	}
	return b
}

// withLen prefixes a record body with its length.
func withLen(body []byte) []byte {
	return append(binary.AppendVarint(nil, int64(len(body))), body...)
}

// recs encodes n well-formed records with consecutive offset deltas.
func recs(n int) []byte {
	var b []byte
	for i := 0; i < n; i++ {
		b = append(b, withLen(rawRec{offDelta: int64(i), tsDelta: int64(i), key: []byte("k"), value: []byte("value")}.body())...)
	}
	return b
}

// rawBatch frames a records section (compressed with codec by franz-go's
// compressor unless codec is none) with a header claiming count records
// and lastOffsetDelta count-1; the length and CRC are right.
type rawBatch struct {
	records []byte
	count   int32
	codec   kgo.CompressionCodecType
	ts      int64 // base timestamp; max timestamp is ts + count - 1 unless maxTs is set
	maxTs   int64
	pid     int64 // 0 means -1
	seq     int32
}

func (r rawBatch) bytes(t testing.TB) []byte {
	t.Helper()
	data := r.records
	if r.codec != kgo.CodecNone {
		c, err := kgo.DefaultCompressor(testCodecs[r.codec])
		if err != nil {
			t.Fatal(err)
		}
		out, used := c.Compress(new(bytes.Buffer), data)
		if used != r.codec {
			t.Fatalf("compressed with %d, want %d", used, r.codec)
		}
		data = append([]byte(nil), out...)
	}
	return frame(data, r.count, int16(r.codec), r.ts, r.maxTs, r.pid, r.seq)
}

// frame builds a batch around an already encoded records section.
func frame(data []byte, count int32, attrs int16, ts, maxTs, pid int64, seq int32) []byte {
	if pid == 0 {
		pid, seq = -1, -1
	}
	if maxTs == 0 {
		maxTs = ts + int64(max(count, 1)) - 1
	}
	b := make([]byte, batchHeaderSize, batchHeaderSize+len(data))
	binary.BigEndian.PutUint32(b[offBatchLength:], uint32(batchHeaderSize-logOverhead+len(data)))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], math.MaxUint32)
	b[offMagic] = 2
	binary.BigEndian.PutUint16(b[offAttributes:], uint16(attrs))
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(count-1))
	binary.BigEndian.PutUint64(b[offBaseTimestamp:], uint64(ts))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(maxTs))
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(pid))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], 0)
	binary.BigEndian.PutUint32(b[offBaseSequence:], uint32(seq))
	binary.BigEndian.PutUint32(b[offRecordCount:], uint32(count))
	b = append(b, data...)
	putCRC(b)
	return b
}

var allCodecs = []kgo.CompressionCodecType{kgo.CodecNone, kgo.CodecGzip, kgo.CodecSnappy, kgo.CodecLz4, kgo.CodecZstd}

// A batch claiming 10^9 records in 61 bytes (no records at all) was
// accepted and moved the log end by 10^9.
func TestAppendRefusesRecordCountLie(t *testing.T) {
	l := newMemEnv().open(t)
	lie := frame(nil, 1_000_000_000, 0, 1000, 0, 0, 0)
	if len(lie) != 61 {
		t.Fatalf("built %d bytes, want 61", len(lie))
	}
	if _, err := l.Append(lie, 0); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("10^9 records in 61 bytes: %v, want INVALID_RECORD", err)
	}
	if leo := l.LogEndOffset(); leo != 0 {
		t.Fatalf("log end %d after a refused batch, want 0", leo)
	}
	if info := mustAppend(t, l, rawBatch{records: recs(3), count: 3, ts: 1000}.bytes(t)); info.FirstOffset != 0 || info.LastOffset != 2 {
		t.Fatalf("next append: %+v", info)
	}
}

// A batch claiming 2^31-1 records forced a roll on every produce (its
// offsets could not fit the active segment), so 200 produces made 200
// segments.
func TestAppendMaxRecordCountNoRoll(t *testing.T) {
	e := newMemEnv()
	l := e.open(t)
	mustAppend(t, l, rawBatch{records: recs(1), count: 1, ts: 1000}.bytes(t))
	for i := 0; i < 200; i++ {
		b := frame(recs(2), math.MaxInt32, 0, 1000, 0, 0, 0)
		if _, err := l.Append(b, 0); !errors.Is(err, kerr.InvalidRecord) {
			t.Fatalf("produce %d of 2^31-1 records: %v, want INVALID_RECORD", i, err)
		}
	}
	if n := len(l.Segments()); n != 1 {
		t.Fatalf("%d segments after 200 refused produces, want 1", n)
	}
	if leo := l.LogEndOffset(); leo != 1 {
		t.Fatalf("log end %d, want 1", leo)
	}
}

// Each lie about the records is refused with INVALID_RECORD, for every
// codec, and nothing reaches the log.
func TestAppendRefusesMalformedRecords(t *testing.T) {
	good := rawRec{key: []byte("k"), value: []byte("v")}
	at := func(i int, r rawRec) rawRec { r.offDelta = int64(i); return r }
	join := func(parts ...[]byte) []byte { return bytes.Join(parts, nil) }
	body := good.body()
	cases := []struct {
		name    string
		records []byte
		count   int32
	}{
		{"count above records", recs(3), 5},
		{"count below records", recs(3), 2},
		{"offset delta gap", join(withLen(at(0, good).body()), withLen(at(2, good).body()), withLen(at(3, good).body())), 3},
		{"offset delta repeated", join(withLen(at(0, good).body()), withLen(at(0, good).body())), 2},
		{"offset delta from 1", join(withLen(at(1, good).body()), withLen(at(2, good).body())), 2},
		{"record length past the end", join(binary.AppendVarint(nil, 1000), body), 1},
		{"record length negative", join(binary.AppendVarint(nil, -3), body), 1},
		{"record length short of its fields", join(binary.AppendVarint(nil, int64(len(body)-2)), body), 1},
		{"record length beyond its fields", join(binary.AppendVarint(nil, int64(len(body)+1)), body, []byte{0}), 1},
		{"key length past the record", withLen(join([]byte{0, 0, 0}, binary.AppendVarint(nil, 100), []byte("k"), binary.AppendVarint(nil, -1), []byte{0})), 1},
		{"key length -2", withLen(join([]byte{0, 0, 0}, binary.AppendVarint(nil, -2), binary.AppendVarint(nil, -1), []byte{0})), 1},
		{"value length -7", withLen(join([]byte{0, 0, 0}, binary.AppendVarint(nil, -1), binary.AppendVarint(nil, -7), []byte{0})), 1},
		{"header count negative", withLen(join([]byte{0, 0, 0}, binary.AppendVarint(nil, -1), binary.AppendVarint(nil, -1), binary.AppendVarint(nil, -1))), 1},
		{"header count huge", withLen(join([]byte{0, 0, 0}, binary.AppendVarint(nil, -1), binary.AppendVarint(nil, -1), binary.AppendVarint(nil, 1<<30))), 1},
		{"header key negative", withLen(join([]byte{0, 0, 0}, binary.AppendVarint(nil, -1), binary.AppendVarint(nil, -1), binary.AppendVarint(nil, 1), binary.AppendVarint(nil, -1), binary.AppendVarint(nil, -1))), 1},
		{"header value past the record", withLen(join([]byte{0, 0, 0}, binary.AppendVarint(nil, -1), binary.AppendVarint(nil, -1), binary.AppendVarint(nil, 1), binary.AppendVarint(nil, 1), []byte("h"), binary.AppendVarint(nil, 50))), 1},
		{"offset delta overlong varint", withLen(join([]byte{0, 0}, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, binary.AppendVarint(nil, -1), binary.AppendVarint(nil, -1), []byte{0})), 1},
		{"offset delta beyond int32", withLen(join([]byte{0, 0}, binary.AppendVarint(nil, 1<<33), binary.AppendVarint(nil, -1), binary.AppendVarint(nil, -1), []byte{0})), 1},
		{"truncated varint", []byte{0x80}, 1},
		{"bytes after the last record", join(recs(2), []byte{0, 0}), 2},
		{"empty records", nil, 1},
	}
	for _, codec := range allCodecs {
		l := newMemEnv().open(t)
		for _, c := range cases {
			b := rawBatch{records: c.records, count: c.count, codec: codec, ts: 1000}.bytes(t)
			if _, err := l.Append(b, 0); !errors.Is(err, kerr.InvalidRecord) {
				t.Errorf("codec %d, %s: %v, want INVALID_RECORD", codec, c.name, err)
			}
		}
		if leo := l.LogEndOffset(); leo != 0 {
			t.Fatalf("codec %d: log end %d after refused batches", codec, leo)
		}
		// Well-formed records of every shape are accepted.
		ok := join(
			withLen(rawRec{offDelta: 0, key: nil, value: nil}.body()),
			withLen(rawRec{offDelta: 1, key: []byte{}, value: []byte{}}.body()),
			withLen(rawRec{offDelta: 2, tsDelta: -5, key: []byte("k"), value: []byte("v"), headers: []hdr{{[]byte("h"), nil}, {[]byte{}, []byte("x")}}}.body()),
			withLen(rawRec{offDelta: 3, value: bytes.Repeat([]byte("z"), 70000)}.body()),
		)
		if info, err := l.Append(rawBatch{records: ok, count: 4, codec: codec, ts: 1000}.bytes(t), 0); err != nil || info.LastOffset != 3 {
			t.Fatalf("codec %d: well-formed batch: %+v %v", codec, info, err)
		}
	}
}

// Kafka refuses an idempotent batch without a base sequence.
func TestAppendRefusesIdempotentWithoutSequence(t *testing.T) {
	l := newMemEnv().open(t)
	b := frame(recs(2), 2, 0, 1000, 0, 7, -1)
	if _, err := l.Append(b, 0); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("producer id 7 with base sequence -1: %v, want INVALID_RECORD", err)
	}
	if _, err := l.Append(frame(recs(2), 2, 0, 1000, 0, 7, 0), 0); err != nil {
		t.Fatalf("producer id 7 with base sequence 0: %v", err)
	}
}

// A compressed batch that inflates past maxDecompressedBatch is refused
// (MESSAGE_TOO_LARGE) without being read into memory.
func TestAppendRefusesZipBomb(t *testing.T) {
	old := maxDecompressedBatch
	maxDecompressedBatch = 1 << 20
	t.Cleanup(func() { maxDecompressedBatch = old })
	bomb := withLen(rawRec{value: make([]byte, 2<<20)}.body())
	for _, codec := range allCodecs[1:] {
		l := newMemEnv().open(t)
		b := rawBatch{records: bomb, count: 1, codec: codec, ts: 1000}.bytes(t)
		if _, err := l.Append(b, 0); !errors.Is(err, kerr.MessageTooLarge) {
			t.Errorf("codec %d: %d compressed bytes inflating to 2 MiB past a 1 MiB bound: %v, want MESSAGE_TOO_LARGE", codec, len(b), err)
		}
		if l.LogEndOffset() != 0 {
			t.Errorf("codec %d: refused batch written", codec)
		}
	}
	// Garbage that is not the codec's format.
	for _, codec := range allCodecs[1:] {
		l := newMemEnv().open(t)
		b := frame(bytes.Repeat([]byte{0xa5}, 100), 1, int16(codec), 1000, 0, 0, 0)
		if _, err := l.Append(b, 0); !errors.Is(err, kerr.InvalidRecord) {
			t.Errorf("codec %d: garbage: %v, want INVALID_RECORD", codec, err)
		}
	}
}

// Every record's timestamp is checked against message.timestamp.*.max.ms,
// not only the header's base and max: a record 10 s older than its base
// timestamp was accepted. The refusal lists the record (RecordErrors).
func TestAppendChecksEveryRecordTimestamp(t *testing.T) {
	e := newMemEnv()
	e.cfg.MessageTimestampBeforeMaxMs = 1000
	l := e.open(t)
	now := e.clock.Ms()
	records := bytes.Join([][]byte{
		withLen(rawRec{offDelta: 0, value: []byte("a")}.body()),
		withLen(rawRec{offDelta: 1, tsDelta: -10_000, value: []byte("b")}.body()),
		withLen(rawRec{offDelta: 2, value: []byte("c")}.body()),
	}, nil)
	_, err := l.Append(frame(records, 3, 0, now, now, 0, 0), 0)
	if !errors.Is(err, kerr.InvalidTimestamp) {
		t.Fatalf("record 10 s old: %v, want INVALID_TIMESTAMP", err)
	}
	var re *RecordErrors
	if !errors.As(err, &re) || len(re.Records) != 1 || re.Records[0].BatchIndex != 1 || !strings.Contains(re.Records[0].Message, "out of range") {
		t.Fatalf("record errors: %+v", re)
	}
	if l.LogEndOffset() != 0 {
		t.Fatal("refused batch written")
	}
}

// The batch's max timestamp is its records' largest, whatever the client
// wrote (Kafka sets it): a batch claiming a max below its records' hid
// them from ListOffsets by timestamp.
func TestAppendSetsMaxTimestamp(t *testing.T) {
	for _, codec := range allCodecs {
		l := newMemEnv().open(t)
		b := rawBatch{records: recs(6), count: 6, codec: codec, ts: 1000, maxTs: 1001}.bytes(t)
		mustAppend(t, l, b)
		off, ts, _, ok := l.OffsetForTimestamp(1005)
		if !ok || off != 5 || ts != 1005 {
			t.Fatalf("codec %d: offset for 1005: %d %d %v, want 5 1005", codec, off, ts, ok)
		}
		if _, mts, _ := l.MaxTimestamp(); mts != 1005 {
			t.Fatalf("codec %d: max timestamp %d, want 1005", codec, mts)
		}
		hs := readAll(t, l, 0) // CRC still valid
		if hs[0].MaxTimestamp != 1005 {
			t.Fatalf("codec %d: stored max timestamp %d", codec, hs[0].MaxTimestamp)
		}
	}
}

// At most decompressSlots decompressions run at once: with every slot
// taken, a compressed produce waits, an uncompressed one does not.
func TestDecompressionIsBounded(t *testing.T) {
	e := newMemEnv()
	l := e.open(t)
	mustAppend(t, l, rawBatch{records: recs(4), count: 4, codec: kgo.CodecZstd, ts: 1000}.bytes(t))

	for i := 0; i < cap(decompressSlots); i++ {
		decompressSlots <- struct{}{}
	}
	done := make(chan error, 1)
	go func() {
		_, err := l.Append(rawBatch{records: recs(4), count: 4, codec: kgo.CodecZstd, ts: 1000}.bytes(t), 0)
		done <- err
	}()
	mustAppend(t, l, rawBatch{records: recs(2), count: 2, ts: 1000}.bytes(t)) // no slot needed
	select {
	case err := <-done:
		t.Fatalf("compressed append finished with every decompression slot taken: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	<-decompressSlots
	if err := <-done; err != nil {
		t.Fatalf("compressed append: %v", err)
	}
	for i := 1; i < cap(decompressSlots); i++ {
		<-decompressSlots
	}
}
