package broker

// Protocol tests: Produce (acks, protoCodecs, validation, idempotence,
// min.insync.replicas, LogAppendTime) and InitProducerId.

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestProtoProduceAcks(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("acks", 1, nil)

	// acks=0: no response. The next request on the connection is answered
	// after the produce was handled (one request at a time per connection),
	// and its response is the next frame.
	rc.send(produceReq("acks", 0, 0, plainBatch(1000, "a0", "a1").build(t)), 9)
	if got := rc.offsetAt("acks", 0, -1); got != 2 {
		t.Fatalf("after acks=0 produce: high watermark %d, want 2", got)
	}

	for _, acks := range []int16{1, -1} {
		resp := rc.do(produceReq("acks", 0, acks, plainBatch(1000, "b").build(t)), 9).(*kmsg.ProduceResponse)
		p := resp.Topics[0].Partitions[0]
		wantCode(t, fmt.Sprintf("acks=%d", acks), p.ErrorCode, nil)
		want := int64(2)
		if acks == -1 {
			want = 3
		}
		if p.BaseOffset != want {
			t.Errorf("acks=%d: base offset %d, want %d", acks, p.BaseOffset, want)
		}
		if p.LogAppendTime != -1 {
			t.Errorf("acks=%d: LogAppendTime %d on a CreateTime topic, want -1", acks, p.LogAppendTime)
		}
		if p.LogStartOffset != 0 {
			t.Errorf("acks=%d: log start offset %d, want 0", acks, p.LogStartOffset)
		}
	}

	// acks=2 is not a valid value.
	p := rc.do(produceReq("acks", 0, 2, plainBatch(1000, "c").build(t)), 9).(*kmsg.ProduceResponse).Topics[0].Partitions[0]
	wantCode(t, "acks=2", p.ErrorCode, kerr.InvalidRequiredAcks)
	if got := rc.offsetAt("acks", 0, -1); got != 4 {
		t.Errorf("high watermark %d after a refused produce, want 4", got)
	}

	// Unknown partition of a known topic.
	p = rc.producePart("acks", 5, plainBatch(1000, "d").build(t))
	wantCode(t, "produce to partition 5 of a 1-partition topic", p.ErrorCode, kerr.UnknownTopicOrPartition)

	// An invalid topic name.
	p = rc.producePart("bad name!", 0, plainBatch(1000, "d").build(t))
	if p.ErrorCode != kerr.InvalidTopicException.Code && p.ErrorCode != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("produce to an invalid topic name: %v, want INVALID_TOPIC_EXCEPTION or UNKNOWN_TOPIC_OR_PARTITION", kerr.ErrorForCode(p.ErrorCode))
	}
}

func TestProtoProduceUnknownTopic(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil) // auto-create on: Produce still does not create
	rc := dialRaw(t, ts.addr())
	p := rc.producePart("never-created", 0, plainBatch(1000, "x").build(t))
	wantCode(t, "produce to an unknown topic", p.ErrorCode, kerr.UnknownTopicOrPartition)
	if p.BaseOffset != -1 {
		t.Errorf("base offset %d on error, want -1", p.BaseOffset)
	}
}

var protoCodecs = []struct {
	name  string
	codec kgo.CompressionCodec
	attr  int16
}{
	{"none", kgo.NoCompression(), 0},
	{"gzip", kgo.GzipCompression(), 1},
	{"snappy", kgo.SnappyCompression(), 2},
	{"lz4", kgo.Lz4Compression(), 3},
	{"zstd", kgo.ZstdCompression(), 4},
}

// Every codec: the stored batch is the producer's batch bit for bit (only
// the base offset and partition leader epoch are the broker's), and a
// franz-go consumer decodes the records.
func TestProtoProduceCodecsRoundTrip(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("protoCodecs", 1, nil)

	var sent [][]byte
	var values []string
	for i, c := range protoCodecs {
		bs := plainBatch(time.Now().UnixMilli())
		bs.codec = c.codec
		for j := 0; j < 20; j++ {
			v := fmt.Sprintf("%s-%d-%s", c.name, j, strings.Repeat("compressible ", 10))
			bs.records = append(bs.records, recordSpec{key: []byte(c.name), value: []byte(v), tsDelta: int64(j)})
			values = append(values, v)
		}
		raw := bs.build(t)
		if got := int16(raw[21])<<8 | int16(raw[22]); got&7 != c.attr {
			t.Fatalf("%s: built batch has codec %d, want %d", c.name, got&7, c.attr)
		}
		if base := rc.produceOK("protoCodecs", 0, raw); base != int64(i*20) {
			t.Fatalf("%s: base offset %d, want %d", c.name, base, i*20)
		}
		sent = append(sent, raw)
	}

	p := rc.fetchOne("protoCodecs", 0, 0, 10<<20)
	wantCode(t, "fetch", p.ErrorCode, nil)
	got := p.RecordBatches
	for i, raw := range sent {
		n := len(raw)
		if len(got) < n {
			t.Fatalf("%s: fetched %d bytes, batch is %d", protoCodecs[i].name, len(got), n)
		}
		b := got[:n]
		got = got[n:]
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatalf("%s: parse: %v", protoCodecs[i].name, err)
		}
		if rb.FirstOffset != int64(i*20) {
			t.Errorf("%s: stored base offset %d, want %d", protoCodecs[i].name, rb.FirstOffset, i*20)
		}
		// Length and everything from magic on (CRC, attributes, records).
		if !bytes.Equal(b[8:12], raw[8:12]) || !bytes.Equal(b[16:], raw[16:]) {
			t.Errorf("%s: stored batch differs from the produced one", protoCodecs[i].name)
		}
	}
	if len(got) != 0 {
		t.Errorf("%d extra bytes fetched", len(got))
	}

	recs := consumeAll(t, ts, "protoCodecs", len(values))
	for i, r := range recs {
		if string(r.Value) != values[i] || r.Offset != int64(i) {
			t.Fatalf("record %d: offset %d value %.20q, want %.20q", i, r.Offset, r.Value, values[i])
		}
	}
}

// Every codec through franz-go's producer and consumer.
func TestProtoProduceCodecsClient(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	adm := ts.admin(t)
	ctx := testCtx(t)
	for _, c := range protoCodecs {
		topic := "client-" + c.name
		if _, err := adm.CreateTopic(ctx, 2, 1, nil, topic); err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
		pr := ts.client(t, kgo.ProducerBatchCompression(c.codec), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
		want := map[string]bool{}
		var recs []*kgo.Record
		for i := 0; i < 200; i++ {
			v := fmt.Sprintf("%s value %d %s", c.name, i, strings.Repeat("z", i%50))
			want[v] = true
			recs = append(recs, kgo.StringRecord(v))
		}
		if err := pr.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("%s: produce: %v", c.name, err)
		}
		got := consumeAll(t, ts, topic, len(want))
		for _, r := range got {
			if !want[string(r.Value)] {
				t.Fatalf("%s: unexpected or duplicate record %q", c.name, r.Value)
			}
			delete(want, string(r.Value))
		}
	}
}

func TestProtoProduceCorrupt(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("corrupt", 1, nil)
	rc.produceOK("corrupt", 0, plainBatch(1000, "good").build(t))

	raw := plainBatch(1000, "hello", "world").build(t)
	bad := append([]byte(nil), raw...)
	bad[len(bad)-3] ^= 0xff // inside the last record's value
	p := rc.producePart("corrupt", 0, bad)
	wantCode(t, "produce with a corrupted record", p.ErrorCode, kerr.CorruptMessage)

	bad = append([]byte(nil), raw...)
	bad[17] ^= 0x01 // the CRC itself
	p = rc.producePart("corrupt", 0, bad)
	wantCode(t, "produce with a wrong CRC", p.ErrorCode, kerr.CorruptMessage)

	if got := rc.offsetAt("corrupt", 0, -1); got != 1 {
		t.Errorf("high watermark %d after corrupt batches, want 1", got)
	}
	// The connection and the partition still work.
	if base := rc.produceOK("corrupt", 0, raw); base != 1 {
		t.Errorf("base offset %d after corrupt batches, want 1", base)
	}
}

func TestProtoProduceTooLarge(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("large", 1, map[string]string{"max.message.bytes": "2000"})

	small := plainBatch(1000, strings.Repeat("s", 1000)).build(t)
	rc.produceOK("large", 0, small)
	big := plainBatch(1000, strings.Repeat("b", 3000)).build(t)
	p := rc.producePart("large", 0, big)
	wantCode(t, "produce over max.message.bytes", p.ErrorCode, kerr.MessageTooLarge)
	if got := rc.offsetAt("large", 0, -1); got != 1 {
		t.Errorf("high watermark %d, want 1", got)
	}
}

func TestProtoProduceIdempotent(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("idem", 1, nil)
	pid, epoch := rc.initProducerID()

	b0 := idemBatch(pid, epoch, 0, "a", "b", "c").build(t)
	if base := rc.produceOK("idem", 0, b0); base != 0 {
		t.Fatalf("first batch at %d, want 0", base)
	}
	b1 := idemBatch(pid, epoch, 3, "d", "e").build(t)
	if base := rc.produceOK("idem", 0, b1); base != 3 {
		t.Fatalf("second batch at %d, want 3", base)
	}
	// Retries of either of the last batches: original offsets, no error.
	if base := rc.produceOK("idem", 0, b1); base != 3 {
		t.Errorf("duplicate of the last batch answered with %d, want 3", base)
	}
	if base := rc.produceOK("idem", 0, b0); base != 0 {
		t.Errorf("duplicate of an earlier batch answered with %d, want 0", base)
	}
	if got := rc.offsetAt("idem", 0, -1); got != 5 {
		t.Fatalf("high watermark %d after duplicates, want 5", got)
	}
	// A gap.
	gap := idemBatch(pid, epoch, 9, "gap").build(t)
	p := rc.producePart("idem", 0, gap)
	wantCode(t, "sequence gap", p.ErrorCode, kerr.OutOfOrderSequenceNumber)
	// The next sequence still works.
	if base := rc.produceOK("idem", 0, idemBatch(pid, epoch, 5, "f").build(t)); base != 5 {
		t.Errorf("next batch at %d, want 5", base)
	}
	// Another producer is independent and starts at sequence 0.
	pid2, epoch2 := rc.initProducerID()
	if base := rc.produceOK("idem", 0, idemBatch(pid2, epoch2, 0, "x").build(t)); base != 6 {
		t.Errorf("second producer's batch at %d, want 6", base)
	}
	if got := rc.offsetAt("idem", 0, -1); got != 7 {
		t.Errorf("high watermark %d, want 7", got)
	}
	// A bumped epoch starts again at sequence 0 (a non-zero first sequence
	// is a gap); the old epoch is then fenced.
	p = rc.producePart("idem", 0, idemBatch(pid, epoch+1, 6, "bumped").build(t))
	wantCode(t, "new epoch not starting at sequence 0", p.ErrorCode, kerr.OutOfOrderSequenceNumber)
	if base := rc.produceOK("idem", 0, idemBatch(pid, epoch+1, 0, "bumped").build(t)); base != 7 {
		t.Errorf("first batch of the new epoch at %d, want 7", base)
	}
	p = rc.producePart("idem", 0, idemBatch(pid, epoch, 6, "stale").build(t))
	wantCode(t, "stale producer epoch", p.ErrorCode, kerr.InvalidProducerEpoch)
	if got := rc.offsetAt("idem", 0, -1); got != 8 {
		t.Errorf("high watermark %d, want 8", got)
	}
}

func TestProtoProduceMinISR(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("minisr", 1, map[string]string{"min.insync.replicas": "2"})

	p := rc.producePart("minisr", 0, plainBatch(1000, "x").build(t))
	wantCode(t, "acks=-1 with ISR 1 < min.insync.replicas 2", p.ErrorCode, kerr.NotEnoughReplicas)
	if got := rc.offsetAt("minisr", 0, -1); got != 0 {
		t.Errorf("high watermark %d after NOT_ENOUGH_REPLICAS, want 0 (nothing appended)", got)
	}
	// acks=1 does not look at min.insync.replicas.
	resp := rc.do(produceReq("minisr", 0, 1, plainBatch(1000, "y").build(t)), 9).(*kmsg.ProduceResponse)
	wantCode(t, "acks=1", resp.Topics[0].Partitions[0].ErrorCode, nil)
}

func TestProtoProduceLogAppendTime(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("lat", 1, map[string]string{"message.timestamp.type": "LogAppendTime"})

	before := time.Now().UnixMilli()
	bs := plainBatch(1000) // CreateTime far in the past
	bs.codec = kgo.Lz4Compression()
	for i := 0; i < 3; i++ {
		bs.records = append(bs.records, recordSpec{value: []byte(fmt.Sprint("v", i)), tsDelta: int64(i)})
	}
	p := rc.producePart("lat", 0, bs.build(t))
	after := time.Now().UnixMilli()
	wantCode(t, "produce", p.ErrorCode, nil)
	if p.LogAppendTime < before || p.LogAppendTime > after {
		t.Fatalf("LogAppendTime %d, want within [%d, %d]", p.LogAppendTime, before, after)
	}

	// The stored batch has the timestamp type bit, MaxTimestamp = the append
	// time, and a CRC that matches (splitBatches checks it).
	f := rc.fetchOne("lat", 0, 0, 1<<20)
	batches := splitBatches(t, f.RecordBatches)
	if len(batches) != 1 {
		t.Fatalf("fetched %d batches, want 1", len(batches))
	}
	if batches[0].Attributes&0x08 == 0 {
		t.Errorf("stored batch attributes %#x lack the LogAppendTime bit", batches[0].Attributes)
	}
	if batches[0].MaxTimestamp != p.LogAppendTime {
		t.Errorf("stored MaxTimestamp %d, want the append time %d", batches[0].MaxTimestamp, p.LogAppendTime)
	}

	recs := consumeAll(t, ts, "lat", 3)
	for _, r := range recs {
		if r.Timestamp.UnixMilli() != p.LogAppendTime {
			t.Errorf("record %d timestamp %d, want the append time %d", r.Offset, r.Timestamp.UnixMilli(), p.LogAppendTime)
		}
		if r.Attrs.TimestampType() != 1 {
			t.Errorf("record %d timestamp type %d, want 1 (LogAppendTime)", r.Offset, r.Attrs.TimestampType())
		}
	}
}

func TestProtoInitProducerID(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	seen := map[int64]bool{}
	for i := 0; i < 5; i++ {
		pid, epoch := rc.initProducerID()
		if pid < 0 || epoch != 0 {
			t.Fatalf("producer id %d epoch %d", pid, epoch)
		}
		if seen[pid] {
			t.Fatalf("producer id %d handed out twice", pid)
		}
		seen[pid] = true
	}
	// Transactional ids are refused for now, with a clean error.
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionalID = kmsg.StringPtr("txn")
	req.TransactionTimeoutMillis = 60000
	resp := rc.do(req, 4).(*kmsg.InitProducerIDResponse)
	if resp.ErrorCode == 0 {
		t.Errorf("transactional InitProducerId succeeded without a transaction coordinator")
	}

	// Unique across a restart on the same directory.
	ts.Close()
	ts2 := startTestServerDir(t, ts.dir, ts.sets)
	rc2 := dialRaw(t, ts2.addr())
	for i := 0; i < 5; i++ {
		pid, _ := rc2.initProducerID()
		if seen[pid] {
			t.Fatalf("producer id %d handed out again after a restart", pid)
		}
		seen[pid] = true
	}
}
