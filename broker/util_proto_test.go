package broker

// Helpers for the protocol tests (*_proto_test.go): a raw Kafka connection
// that sends requests at exact versions, a record-batch builder, and small
// wrappers for the requests most tests need.

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// rawConn is one client connection speaking the Kafka framing by hand, so
// a test controls the request version and sees every response field.
type rawConn struct {
	t    testing.TB
	c    net.Conn
	corr int32
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c}
}

// encodeRequest frames req at version with correlation id corr.
func encodeRequest(req kmsg.Request, version int16, corr int32) []byte {
	req.SetVersion(version)
	b := []byte{0, 0, 0, 0}
	b = binary.BigEndian.AppendUint16(b, uint16(req.Key()))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, 5)
	b = append(b, "proto"...)
	if req.IsFlexible() {
		b = append(b, 0) // header tags
	}
	b = req.AppendTo(b)
	binary.BigEndian.PutUint32(b, uint32(len(b)-4))
	return b
}

// writeFrame sends raw bytes.
func (rc *rawConn) writeFrame(b []byte) {
	rc.t.Helper()
	rc.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	if _, err := rc.c.Write(b); err != nil {
		rc.t.Fatalf("write: %v", err)
	}
}

// send writes req at version and returns its correlation id.
func (rc *rawConn) send(req kmsg.Request, version int16) int32 {
	rc.t.Helper()
	rc.corr++
	rc.writeFrame(encodeRequest(req, version, rc.corr))
	return rc.corr
}

// readFrame reads one response frame: the correlation id and the rest.
func (rc *rawConn) readFrame() (int32, []byte) {
	rc.t.Helper()
	rc.c.SetReadDeadline(time.Now().Add(20 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(rc.c, size[:]); err != nil {
		rc.t.Fatalf("read response size: %v", err)
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 256<<20 {
		rc.t.Fatalf("bad response size %d", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(rc.c, body); err != nil {
		rc.t.Fatalf("read response body: %v", err)
	}
	return int32(binary.BigEndian.Uint32(body)), body[4:]
}

// recv reads the response to the request with correlation id corr, which
// must be the next one on the connection, into resp (its version set).
func (rc *rawConn) recv(corr int32, resp kmsg.Response) {
	rc.t.Helper()
	got, body := rc.readFrame()
	if got != corr {
		rc.t.Fatalf("response correlation id %d, want %d", got, corr)
	}
	if resp.IsFlexible() && resp.Key() != 18 {
		r := kbin.Reader{Src: body}
		kmsg.SkipTags(&r)
		if !r.Ok() {
			rc.t.Fatalf("bad response header tags")
		}
		body = r.Src
	}
	if err := resp.ReadFrom(body); err != nil {
		rc.t.Fatalf("decode %s v%d response: %v", kmsg.NameForKey(resp.Key()), resp.GetVersion(), err)
	}
}

// do sends req at version and returns its response.
func (rc *rawConn) do(req kmsg.Request, version int16) kmsg.Response {
	rc.t.Helper()
	corr := rc.send(req, version)
	resp := req.ResponseKind()
	resp.SetVersion(version)
	rc.recv(corr, resp)
	return resp
}

// rawDo sends one request at version on a fresh connection.
func rawDo[R kmsg.Response](t testing.TB, ts *testServer, req kmsg.Request, version int16) R {
	t.Helper()
	return dialRaw(t, ts.addr()).do(req, version).(R)
}

// wantCode fails the test unless got is the Kafka error want (nil = none).
func wantCode(t testing.TB, what string, got int16, want *kerr.Error) {
	t.Helper()
	var wc int16
	if want != nil {
		wc = want.Code
	}
	if got != wc {
		t.Fatalf("%s: error %v, want %v", what, kerr.ErrorForCode(got), want)
	}
}

// recordSpec is one record of a built batch.
type recordSpec struct {
	key, value []byte
	tsDelta    int64
}

// batchSpec describes a magic v2 record batch to build.
type batchSpec struct {
	producerID    int64 // -1 for none
	producerEpoch int16
	firstSequence int32
	firstTS       int64
	codec         kgo.CompressionCodec // zero value: none
	records       []recordSpec
}

func plainBatch(ts int64, values ...string) batchSpec {
	b := batchSpec{producerID: -1, producerEpoch: -1, firstSequence: -1, firstTS: ts}
	for _, v := range values {
		b.records = append(b.records, recordSpec{value: []byte(v)})
	}
	return b
}

func idemBatch(pid int64, epoch int16, seq int32, values ...string) batchSpec {
	b := plainBatch(time.Now().UnixMilli(), values...)
	b.producerID, b.producerEpoch, b.firstSequence = pid, epoch, seq
	return b
}

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// build encodes the batch with kmsg, compressing the records with franz-go's
// compressor, and sets Length and CRC as a producer would.
func (bs batchSpec) build(t testing.TB) []byte {
	t.Helper()
	var recs []byte
	maxTS := bs.firstTS
	for i, r := range bs.records {
		rec := kmsg.Record{TimestampDelta64: r.tsDelta, OffsetDelta: int32(i), Key: r.key, Value: r.value}
		body := rec.AppendTo(nil)[1:] // Length 0 encodes as one byte
		rec.Length = int32(len(body))
		recs = rec.AppendTo(recs)
		maxTS = max(maxTS, bs.firstTS+r.tsDelta)
	}
	var attrs int16
	comp, err := kgo.DefaultCompressor(bs.codec)
	if err != nil {
		t.Fatalf("compressor: %v", err)
	}
	if comp != nil {
		out, codec := comp.Compress(new(bytes.Buffer), recs)
		recs = append([]byte(nil), out...)
		attrs = int16(codec)
	}
	b := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      int32(len(bs.records) - 1),
		FirstTimestamp:       bs.firstTS,
		MaxTimestamp:         maxTS,
		ProducerID:           bs.producerID,
		ProducerEpoch:        bs.producerEpoch,
		FirstSequence:        bs.firstSequence,
		NumRecords:           int32(len(bs.records)),
		Records:              recs,
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32c))
	return raw
}

// splitBatches parses concatenated record batches; a partial batch at the
// end (allowed in fetch responses) is dropped.
func splitBatches(t testing.TB, b []byte) []kmsg.RecordBatch {
	t.Helper()
	var out []kmsg.RecordBatch
	for len(b) >= 12 {
		n := int(int32(binary.BigEndian.Uint32(b[8:]))) + 12
		if n > len(b) {
			break
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b[:n]); err != nil {
			t.Fatalf("parse batch: %v", err)
		}
		if got := int32(crc32.Checksum(b[21:n], crc32c)); got != rb.CRC {
			t.Fatalf("batch at offset %d: CRC %x, want %x", rb.FirstOffset, got, rb.CRC)
		}
		out = append(out, rb)
		b = b[n:]
	}
	return out
}

// produceReq builds a Produce request of one partition.
func produceReq(topic string, part int32, acks int16, records []byte) *kmsg.ProduceRequest {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = acks
	req.TimeoutMillis = 10000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = part
	rp.Records = records
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// producePart sends one batch with acks=-1 at Produce v9 and returns the
// partition's answer.
func (rc *rawConn) producePart(topic string, part int32, records []byte) kmsg.ProduceResponseTopicPartition {
	rc.t.Helper()
	resp := rc.do(produceReq(topic, part, -1, records), 9).(*kmsg.ProduceResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		rc.t.Fatalf("produce response has %d topics, want 1 with 1 partition", len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0]
}

// produceOK produces one batch and fails on an error; it returns the base
// offset.
func (rc *rawConn) produceOK(topic string, part int32, records []byte) int64 {
	rc.t.Helper()
	p := rc.producePart(topic, part, records)
	wantCode(rc.t, "produce", p.ErrorCode, nil)
	return p.BaseOffset
}

// createTopic creates a topic (CreateTopics v7) and returns its id.
func (rc *rawConn) createTopic(name string, parts int32, configs map[string]string) [16]byte {
	rc.t.Helper()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, parts, 1
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp := rc.do(req, 7).(*kmsg.CreateTopicsResponse)
	if len(resp.Topics) != 1 {
		rc.t.Fatalf("create topic %s: %d topics in response", name, len(resp.Topics))
	}
	st := resp.Topics[0]
	if st.ErrorCode != 0 {
		msg := ""
		if st.ErrorMessage != nil {
			msg = *st.ErrorMessage
		}
		rc.t.Fatalf("create topic %s: %v %s", name, kerr.ErrorForCode(st.ErrorCode), msg)
	}
	return st.TopicID
}

// listOffset asks ListOffsets v9 for one partition.
func (rc *rawConn) listOffset(topic string, part int32, ts int64) kmsg.ListOffsetsResponseTopicPartition {
	rc.t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = part, ts, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := rc.do(req, 9).(*kmsg.ListOffsetsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		rc.t.Fatalf("list offsets: %d topics in response", len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0]
}

// offsetAt returns the offset ListOffsets gives for ts, failing on errors.
func (rc *rawConn) offsetAt(topic string, part int32, ts int64) int64 {
	rc.t.Helper()
	p := rc.listOffset(topic, part, ts)
	wantCode(rc.t, "list offsets", p.ErrorCode, nil)
	return p.Offset
}

// fetchPart is one partition of a fetch request.
type fetchPart struct {
	topic    string
	part     int32
	offset   int64
	maxBytes int32
}

// fetchReq builds a sessionless Fetch request (v12 shape; by name).
func fetchReq(maxWaitMs, minBytes, maxBytes int32, parts ...fetchPart) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis, req.MinBytes, req.MaxBytes = maxWaitMs, minBytes, maxBytes
	req.SessionEpoch = -1
	idx := map[string]int{}
	for _, p := range parts {
		i, ok := idx[p.topic]
		if !ok {
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic = p.topic
			req.Topics = append(req.Topics, rt)
			i = len(req.Topics) - 1
			idx[p.topic] = i
		}
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p.part, p.offset, p.maxBytes
		rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
		req.Topics[i].Partitions = append(req.Topics[i].Partitions, rp)
	}
	return req
}

// fetchOne fetches one partition at Fetch v12 without waiting and returns
// its answer.
func (rc *rawConn) fetchOne(topic string, part int32, offset int64, maxBytes int32) kmsg.FetchResponseTopicPartition {
	rc.t.Helper()
	resp := rc.do(fetchReq(0, 0, maxBytes, fetchPart{topic, part, offset, maxBytes}), 12).(*kmsg.FetchResponse)
	wantCode(rc.t, "fetch", resp.ErrorCode, nil)
	p := findFetchPart(resp, topic, part)
	if p == nil {
		rc.t.Fatalf("fetch response lacks %s-%d", topic, part)
	}
	return *p
}

func findFetchPart(resp *kmsg.FetchResponse, topic string, part int32) *kmsg.FetchResponseTopicPartition {
	for i := range resp.Topics {
		if resp.Topics[i].Topic != topic {
			continue
		}
		for j := range resp.Topics[i].Partitions {
			if resp.Topics[i].Partitions[j].Partition == part {
				return &resp.Topics[i].Partitions[j]
			}
		}
	}
	return nil
}

// initProducerID asks for an idempotent producer id (InitProducerId v4).
func (rc *rawConn) initProducerID() (int64, int16) {
	rc.t.Helper()
	req := kmsg.NewPtrInitProducerIDRequest()
	req.TransactionTimeoutMillis = 60000
	req.ProducerID, req.ProducerEpoch = -1, -1
	resp := rc.do(req, 4).(*kmsg.InitProducerIDResponse)
	wantCode(rc.t, "init producer id", resp.ErrorCode, nil)
	return resp.ProducerID, resp.ProducerEpoch
}

// consumeAll reads count records of a topic from the start with franz-go.
func consumeAll(t testing.TB, ts *testServer, topic string, count int, opts ...kgo.Opt) []*kgo.Record {
	t.Helper()
	cl := ts.client(t, append([]kgo.Opt{
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200 * time.Millisecond),
	}, opts...)...)
	ctx := testCtx(t)
	var out []*kgo.Record
	for len(out) < count {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records of %s before timeout", len(out), count, topic)
		}
		fs.EachError(func(tp string, p int32, err error) {
			t.Fatalf("consume %s-%d: %v", tp, p, err)
		})
		out = append(out, fs.Records()...)
	}
	return out
}
