package broker

// Protocol tests: record batches that lie about their records (issue 15,
// "Record batches must be validated as Kafka's LogValidator does") are
// refused per partition with Kafka's error codes, nothing of them reaches
// the log, and the other partitions of the request are unaffected.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// lieRecord encodes one record (its length first) with the given offset
// and timestamp deltas, a key and a value.
func lieRecord(offDelta, tsDelta int64, key, value []byte) []byte {
	body := []byte{0}
	body = binary.AppendVarint(body, tsDelta)
	body = binary.AppendVarint(body, offDelta)
	body = binary.AppendVarint(body, int64(len(key)))
	body = append(body, key...)
	body = binary.AppendVarint(body, int64(len(value)))
	body = append(body, value...)
	body = binary.AppendVarint(body, 0)
	return append(binary.AppendVarint(nil, int64(len(body))), body...)
}

// lieRecords encodes n well-formed records.
func lieRecords(n int) []byte {
	var b []byte
	for i := 0; i < n; i++ {
		b = append(b, lieRecord(int64(i), int64(i), []byte("k"), []byte("value"))...)
	}
	return b
}

// lieBatch frames a records section with a header claiming count records
// (lastOffsetDelta count-1), compressing the records with franz-go's
// compressor for codec; its length and CRC are right, so only the records
// can be blamed.
func lieBatch(t testing.TB, records []byte, count int32, codec kgo.CompressionCodec, pid int64, seq int32) []byte {
	t.Helper()
	var attrs int16
	if comp, err := kgo.DefaultCompressor(codec); err != nil {
		t.Fatal(err)
	} else if comp != nil {
		out, used := comp.Compress(new(bytes.Buffer), records)
		records, attrs = append([]byte(nil), out...), int16(used)
	}
	return rawFrame(records, count, attrs, time.Now().UnixMilli(), pid, seq)
}

func rawFrame(records []byte, count int32, attrs int16, ts, pid int64, seq int32) []byte {
	b := make([]byte, 61, 61+len(records))
	binary.BigEndian.PutUint32(b[8:], uint32(49+len(records)))
	binary.BigEndian.PutUint32(b[12:], math.MaxUint32)
	b[16] = 2
	binary.BigEndian.PutUint16(b[21:], uint16(attrs))
	binary.BigEndian.PutUint32(b[23:], uint32(count-1))
	binary.BigEndian.PutUint64(b[27:], uint64(ts))
	binary.BigEndian.PutUint64(b[35:], uint64(ts)) // the broker sets it from the records
	binary.BigEndian.PutUint64(b[43:], uint64(pid))
	binary.BigEndian.PutUint16(b[51:], 0)
	binary.BigEndian.PutUint32(b[53:], uint32(seq))
	binary.BigEndian.PutUint32(b[57:], uint32(count))
	b = append(b, records...)
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32c))
	return b
}

// produceTwo sends one produce request with records for partitions 0 and
// 1 of topic and returns both answers.
func (rc *rawConn) produceTwo(topic string, r0, r1 []byte) (p0, p1 kmsg.ProduceResponseTopicPartition) {
	rc.t.Helper()
	req := produceReq(topic, 0, -1, r0)
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition, rp.Records = 1, r1
	req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	resp := rc.do(req, 9).(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 2 {
		rc.t.Fatalf("produce response: %d topics", len(resp.Topics))
	}
	for _, p := range resp.Topics[0].Partitions {
		if p.Partition == 0 {
			p0 = p
		} else {
			p1 = p
		}
	}
	return p0, p1
}

func errMsg(p kmsg.ProduceResponseTopicPartition) string {
	if p.ErrorMessage == nil {
		return ""
	}
	return *p.ErrorMessage
}

// A 61-byte batch claiming 10^9 records was accepted and moved the log
// end by 10^9.
func TestProtoProduceRecordCountLie(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("lie", 1, nil)
	rc.produceOK("lie", 0, plainBatch(1000, "first").build(t))

	lie := rawFrame(nil, 1_000_000_000, 0, 1000, -1, -1)
	if len(lie) != 61 {
		t.Fatalf("lying batch is %d bytes, want 61", len(lie))
	}
	p := rc.producePart("lie", 0, lie)
	wantCode(t, "10^9 records in 61 bytes", p.ErrorCode, kerr.InvalidRecord)
	if !strings.Contains(errMsg(p), "premature EOF") {
		t.Errorf("error message %q does not say the records are missing", errMsg(p))
	}
	if hw := rc.offsetAt("lie", 0, -1); hw != 1 {
		t.Fatalf("log end %d after the lying batch, want 1", hw)
	}
	if base := rc.produceOK("lie", 0, plainBatch(1000, "next").build(t)); base != 1 {
		t.Fatalf("next batch at %d, want 1", base)
	}
}

// A batch claiming 2^31-1 records forced a segment roll on every produce:
// 200 produces made 200 segments and file descriptors ran out.
func TestProtoProduceMaxRecordCountNoRoll(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("roll", 1, nil)
	rc.produceOK("roll", 0, plainBatch(1000, "first").build(t))
	for i := 0; i < 200; i++ {
		p := rc.producePart("roll", 0, lieBatch(t, lieRecords(2), math.MaxInt32, kgo.NoCompression(), -1, -1))
		wantCode(t, "2^31-1 records", p.ErrorCode, kerr.InvalidRecord)
	}
	if n := len(ts.partition("roll", 0).Log().Segments()); n != 1 {
		t.Fatalf("%d segments after 200 refused produces, want 1", n)
	}
	if hw := rc.offsetAt("roll", 0, -1); hw != 1 {
		t.Fatalf("log end %d, want 1", hw)
	}
}

// A produce with fewer than 12 bytes of records panicked its handler.
// Records too short for a batch are INVALID_RECORD (Kafka: "must have at
// least one record batch"), and the connection keeps working.
func TestProtoProduceShortRecords(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("short", 1, nil)
	good := plainBatch(1000, "ok").build(t)
	for n := 0; n < 17; n++ {
		p := rc.producePart("short", 0, good[:n])
		wantCode(t, fmt.Sprintf("records of %d bytes", n), p.ErrorCode, kerr.InvalidRecord)
	}
	// A length field below the smallest record is corrupt (Kafka's
	// "record size is less than the minimum record overhead").
	p := rc.producePart("short", 0, make([]byte, 12))
	wantCode(t, "12 zero bytes", p.ErrorCode, kerr.CorruptMessage)
	p = rc.producePart("short", 0, nil)
	wantCode(t, "null records", p.ErrorCode, kerr.InvalidRecord)
	p = rc.producePart("short", 0, good[:len(good)-1])
	wantCode(t, "a batch longer than the records", p.ErrorCode, kerr.InvalidRecord)
	if base := rc.produceOK("short", 0, good); base != 0 {
		t.Fatalf("good batch at %d, want 0", base)
	}
}

// Records that lie, for every codec, are refused with INVALID_RECORD and
// Kafka's meaning in the error message; the request's other partition is
// appended.
func TestProtoProduceMalformedRecords(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("mal", 2, nil)
	rec := func(off int64) []byte { return lieRecord(off, 0, []byte("k"), []byte("v")) }
	cases := []struct {
		name, msg string
		records   []byte
		count     int32
		pid       int64
		seq       int32
	}{
		{"offset delta gap", "not consecutive", bytes.Join([][]byte{rec(0), rec(2), rec(3)}, nil), 3, -1, -1},
		{"offset deltas repeated", "not consecutive", bytes.Join([][]byte{rec(0), rec(0)}, nil), 2, -1, -1},
		{"count above the records", "premature EOF", lieRecords(3), 5, -1, -1},
		{"count below the records", "records still remaining", lieRecords(3), 2, -1, -1},
		{"key length past the record", "key", append(binary.AppendVarint(nil, 6), 0, 0, 0, 100, 'k', 0), 1, -1, -1},
		{"negative header count", "headers", append(binary.AppendVarint(nil, 6), 0, 0, 0, 1, 1, 1), 1, -1, -1},
		{"bytes after the last record", "remaining", append(lieRecords(2), 0, 0, 0), 2, -1, -1},
		{"record length past the end", "record size", append(binary.AppendVarint(nil, 500), lieRecords(1)[1:]...), 1, -1, -1},
		{"idempotent without a sequence", "sequence", lieRecords(2), 2, 9, -1},
	}
	good := 0
	for _, c := range protoCodecs {
		for _, tc := range cases {
			bad := lieBatch(t, tc.records, tc.count, c.codec, tc.pid, tc.seq)
			p0, p1 := rc.produceTwo("mal", bad, plainBatch(1000, "good").build(t))
			wantCode(t, c.name+": "+tc.name, p0.ErrorCode, kerr.InvalidRecord)
			if !strings.Contains(errMsg(p0), tc.msg) {
				t.Errorf("%s: %s: error message %q lacks %q", c.name, tc.name, errMsg(p0), tc.msg)
			}
			wantCode(t, c.name+": "+tc.name+": the other partition", p1.ErrorCode, nil)
			if p1.BaseOffset != int64(good) {
				t.Fatalf("%s: %s: other partition at %d, want %d", c.name, tc.name, p1.BaseOffset, good)
			}
			good++
		}
		// The same records, honest, are accepted.
		rc.produceOK("mal", 0, lieBatch(t, lieRecords(3), 3, c.codec, -1, -1))
	}
	if hw := rc.offsetAt("mal", 0, -1); hw != int64(3*len(protoCodecs)) {
		t.Fatalf("partition 0 ends at %d, want %d: refused records reached the log", hw, 3*len(protoCodecs))
	}
	if n := len(consumeAll(t, ts, "mal", good+3*len(protoCodecs))); n != good+3*len(protoCodecs) {
		t.Fatalf("consumed %d records", n)
	}
}

// A zstd batch of 19 KiB whose single record inflates to 300 MiB, past
// the topic's bound (32 times max.message.bytes), is refused with
// MESSAGE_TOO_LARGE without being held in memory.
func TestProtoProduceZipBomb(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("bomb", 1, nil)

	const size = 300 << 20
	var hdr []byte
	hdr = append(hdr, 0, 0, 0, 1) // attributes, timestamp delta, offset delta, null key
	hdr = binary.AppendVarint(hdr, size)
	body := int64(len(hdr)) + size + 1 // + header count
	var buf bytes.Buffer
	zw, err := zstd.NewWriter(&buf, zstd.WithEncoderLevel(zstd.SpeedFastest))
	if err != nil {
		t.Fatal(err)
	}
	zw.Write(binary.AppendVarint(nil, body))
	zw.Write(hdr)
	zeros := make([]byte, 1<<20)
	for i := 0; i < size>>20; i++ {
		zw.Write(zeros)
	}
	zw.Write([]byte{0})
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	bomb := rawFrame(buf.Bytes(), 1, 4, time.Now().UnixMilli(), -1, -1)
	if len(bomb) > 1<<20 {
		t.Fatalf("bomb of %d bytes does not fit max.message.bytes", len(bomb))
	}
	p := rc.producePart("bomb", 0, bomb)
	wantCode(t, "zstd batch inflating to 300 MiB", p.ErrorCode, kerr.MessageTooLarge)
	if !strings.Contains(errMsg(p), "more than") {
		t.Errorf("error message %q does not name the bound", errMsg(p))
	}
	if hw := rc.offsetAt("bomb", 0, -1); hw != 0 {
		t.Fatalf("log end %d after the bomb", hw)
	}
}

// Every record's timestamp is checked against
// message.timestamp.before.max.ms, and the refused records are listed in
// RecordErrors with Kafka's summary as the error message.
func TestProtoProduceRecordTimestampErrors(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("tsr", 1, map[string]string{"message.timestamp.before.max.ms": "60000"})
	now := time.Now().UnixMilli()
	records := bytes.Join([][]byte{
		lieRecord(0, 0, nil, []byte("a")),
		lieRecord(1, -3_600_000, nil, []byte("an hour old")),
		lieRecord(2, 0, nil, []byte("c")),
	}, nil)
	p := rc.producePart("tsr", 0, rawFrame(records, 3, 0, now, -1, -1))
	wantCode(t, "a record an hour old", p.ErrorCode, kerr.InvalidTimestamp)
	if len(p.ErrorRecords) != 1 || p.ErrorRecords[0].RelativeOffset != 1 || p.ErrorRecords[0].ErrorMessage == nil ||
		!strings.Contains(*p.ErrorRecords[0].ErrorMessage, "out of range") {
		t.Fatalf("record errors %+v, want record 1 out of range", p.ErrorRecords)
	}
	if !strings.Contains(errMsg(p), "rejected due to invalid timestamp") {
		t.Errorf("error message %q", errMsg(p))
	}
	if hw := rc.offsetAt("tsr", 0, -1); hw != 0 {
		t.Fatalf("log end %d", hw)
	}
}
