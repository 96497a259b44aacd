package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/config"
	"strata/index"
	"strata/internal/testenv"
	"strata/tier"
)

// tieredBroker starts a broker with the given tier and a topic with
// remote.storage.enable=true, small segments and little local retention,
// produces n records (tierValue) and waits until every sealed segment is
// uploaded and the local log start has moved past 0. props are more
// broker configs, key then value.
func tieredBroker(t *testing.T, store tier.ObjectStore, topic string, partitions int32, n int, props ...string) (*testServer, *partition, index.TopicIDPartition) {
	t.Helper()
	dir := t.TempDir()
	kv := map[string]string{
		"broker.id": "0", "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": dir,
		"remote.log.storage.system.enable":    "true",
		"remote.log.manager.task.interval.ms": "100",
		"log.retention.check.interval.ms":     "100",
	}
	for i := 0; i+1 < len(props); i += 2 {
		kv[props[i]] = props[i+1]
	}
	cfg, err := config.Load(kv)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Options{Config: cfg, Listen: cfg.ListenAddr(), TierStore: store})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ts := &testServer{Server: srv, dir: dir}
	const localBytes, segBytes = 20000, 8192
	str := func(s string) *string { return &s }
	ctx := testCtx(t)
	if _, err := ts.admin(t).CreateTopic(ctx, partitions, 1, map[string]*string{
		"remote.storage.enable": str("true"), "segment.bytes": str(fmt.Sprint(segBytes)),
		"local.retention.bytes": str(fmt.Sprint(localBytes)), "file.delete.delay.ms": str("0"),
	}, topic); err != nil {
		t.Fatal(err)
	}
	cl := ts.client(t, kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 0; i < n; {
		var recs []*kgo.Record
		for range min(n-i, 1+i%7) { // batches of 1 to 7 records
			recs = append(recs, &kgo.Record{Topic: topic, Value: tierValue(i + len(recs))})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
		i += len(recs)
	}
	var p *partition
	waitFor(t, "the partition", 10*time.Second, func() bool { p = srv.partition(topic, 0); return p != nil })
	tp := index.TopicIDPartition{TopicID: index.UUID(p.TopicID()), Partition: 0}
	waitFor(t, "sealed segments uploaded and local retention applied", 60*time.Second, func() bool {
		end, ok, err := srv.tier.idx.LogEnd(tp)
		if err != nil {
			t.Fatal(err)
		}
		sealedEnd := int64(-1)
		for _, s := range p.Log().Segments() {
			if s.Sealed {
				sealedEnd = s.NextOffset - 1
			}
		}
		return ok && end == sealedEnd && p.Log().LogStartOffset() > 0 && p.Log().Size() <= localBytes+segBytes
	})
	return ts, p, tp
}

// listOffsets asks ListOffsets v9 for one timestamp of partition 0.
func listOffsets(t *testing.T, ts *testServer, topic string, timestamp int64) (int64, int16) {
	t.Helper()
	sp := listOffsetsAt(t, ts, topic, timestamp)
	return sp.Offset, sp.ErrorCode
}

// TestTieredConsumeFromStart produces far past local retention to a
// broker with a real MinIO tier, then reads every record back from offset
// 0 with a franz-go consumer (the old ones from the bucket, with small
// partition max bytes so that reads start inside segments) and checks
// ListOffsets EARLIEST, EARLIEST_LOCAL and LATEST_TIERED, and the log start
// offset in fetch responses.
func TestTieredConsumeFromStart(t *testing.T) {
	m := testenv.StartMinIO(t)
	t.Setenv("AWS_ACCESS_KEY_ID", m.AccessKey())
	t.Setenv("AWS_SECRET_ACCESS_KEY", m.SecretKey())
	s3s, err := tier.NewS3Store(tier.S3Config{Bucket: m.Bucket(), Prefix: "reader-test", Endpoint: m.Endpoint(), Region: testenv.MinIORegion,
		MaxAttempts: 2, MaxBackoff: 50 * time.Millisecond, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	const topic, n = "tiered-read", 300
	ts, p, tp := tieredBroker(t, s3s, topic, 1, n)

	// The broker's retention and upload passes go on meanwhile: each
	// answer lies between what the log and the index said before the
	// request and what they say after it.
	localStart := func() int64 { return p.Log().LogStartOffset() }
	remoteEnd := func() int64 { end, _, _ := ts.tier.idx.LogEnd(tp); return end }
	for _, c := range []struct {
		name      string
		timestamp int64
		want      func() int64
	}{{"EARLIEST", -2, func() int64 { return 0 }}, {"EARLIEST_LOCAL", -4, localStart}, {"LATEST_TIERED", -5, remoteEnd}} {
		lo := c.want()
		off, code := listOffsets(t, ts, topic, c.timestamp)
		if hi := c.want(); code != 0 || off < lo || off > hi {
			t.Errorf("ListOffsets %s: offset %d, error %d; want %d to %d", c.name, off, code, lo, hi)
		}
	}

	// A consumer's fetch, of local records or of remote ones, reports the
	// partition's log start, which is in the bucket (Kafka's UnifiedLog).
	for _, at := range []int64{localStart(), 0} {
		rp := fetchAsConsumer(t, ts, topic, map[int32]int64{0: at}).Topics[0].Partitions[0]
		if rp.ErrorCode != 0 || len(rp.RecordBatches) == 0 || rp.LogStartOffset != 0 {
			t.Errorf("fetch at %d: error %d, %d record bytes, log start %d; want records and log start 0",
				at, rp.ErrorCode, len(rp.RecordBatches), rp.LogStartOffset)
		}
	}

	for _, maxBytes := range []int32{1 << 20, 1500} {
		cl := ts.client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}),
			kgo.FetchMaxPartitionBytes(maxBytes))
		ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
		var got []*kgo.Record
		for len(got) < n && ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			for _, e := range fs.Errors() {
				if !errors.Is(e.Err, context.DeadlineExceeded) {
					t.Fatalf("max bytes %d: fetch error: %v", maxBytes, e.Err)
				}
			}
			got = append(got, fs.Records()...)
		}
		cancel()
		if len(got) != n {
			t.Fatalf("max bytes %d: consumed %d records, want %d", maxBytes, len(got), n)
		}
		for i, r := range got {
			if r.Offset != int64(i) || r.Key != nil || len(r.Headers) != 0 || !bytes.Equal(r.Value, tierValue(i)) {
				t.Fatalf("max bytes %d: record %d: offset %d, value %.20q…, want offset %d value %.20q…", maxBytes, i, r.Offset, r.Value, i, tierValue(i))
			}
		}
	}
}

// fetchAsConsumer sends one consumer Fetch (no session) for the partitions
// of topic at the offsets in at, and returns the response.
func fetchAsConsumer(t *testing.T, ts *testServer, topic string, at map[int32]int64) *kmsg.FetchResponse {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis, req.MaxBytes, req.SessionEpoch = 100, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rt.TopicID = ts.partition(topic, 0).TopicID() // the client may send v13+, which names topics by id
	for part, offset := range at {
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.FetchOffset, rp.LogStartOffset, rp.PartitionMaxBytes = part, -1, offset, -1, 1<<20
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), ts.client(t))
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != len(at) {
		t.Fatalf("fetch response: error %d, %d topics", resp.ErrorCode, len(resp.Topics))
	}
	return resp
}

// fetchTwo fetches offset 0 of partitions 0 and 1 and
// returns their error codes and record bytes.
func fetchTwo(t *testing.T, ts *testServer, topic string) (codes [2]int16, recs [2]int) {
	t.Helper()
	resp := fetchAsConsumer(t, ts, topic, map[int32]int64{0: 0, 1: 0})
	for _, rp := range resp.Topics[0].Partitions {
		codes[rp.Partition], recs[rp.Partition] = rp.ErrorCode, len(rp.RecordBatches)
	}
	return codes, recs
}

// TestTieredFetchRemoteFailures: a failing bucket, a missing .log object
// and a corrupt one each give the remote partition KAFKA_STORAGE_ERROR,
// while the other partition of the same fetch is served; the broker keeps
// serving, and a repaired object is read again. The reader caches no .log
// chunk (remote.log.reader.cache.size.bytes=0), so that every fetch GETs
// the object as it is now: a cached chunk of an object damaged in place
// would be served (objects never change in place otherwise).
func TestTieredFetchRemoteFailures(t *testing.T) {
	store := tier.NewMemStore()
	const topic = "tiered-fail"
	ts, _, tp := tieredBroker(t, store, topic, 2, 120, "remote.log.reader.cache.size.bytes", "0")
	// Partition 1 holds a little local data only.
	cl := ts.client(t, kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := cl.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Partition: 1, Value: []byte("local")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	codes, recs := fetchTwo(t, ts, topic)
	if codes != [2]int16{0, 0} || recs[0] == 0 || recs[1] == 0 {
		t.Fatalf("healthy bucket: codes %v, record bytes %v", codes, recs)
	}

	m, err := ts.tier.idx.SegmentForOffset(tp, 0)
	if err != nil {
		t.Fatal(err)
	}
	logKey := tier.ObjectKey(&m, index.ObjectLog)
	orig, err := tier.ReadAll(context.Background(), store, logKey)
	if err != nil {
		t.Fatal(err)
	}
	put := func(b []byte) {
		if err := store.Put(context.Background(), logKey, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	storage := kerr.KafkaStorageError.Code
	for _, c := range []struct {
		name   string
		damage func()
	}{
		{"failing GETs", func() {
			store.SetFault(func(op tier.Op, key string) error {
				if op == tier.OpGet && strings.HasSuffix(key, ".log") {
					return errors.New("injected GET failure")
				}
				return nil
			})
		}},
		{"missing .log object", func() {
			if err := store.Delete(context.Background(), logKey); err != nil {
				t.Fatal(err)
			}
		}},
		{"corrupt batch header", func() {
			bad := bytes.Clone(orig)
			copy(bad[8:12], []byte{0x7f, 0xff, 0xff, 0xff}) // batch length past the object
			put(bad)
		}},
		{"truncated .log object", func() { put(orig[:len(orig)/2]) }},
	} {
		c.damage()
		codes, recs := fetchTwo(t, ts, topic)
		if codes[0] != storage || recs[0] != 0 || codes[1] != 0 || recs[1] == 0 {
			t.Errorf("%s: codes %v, record bytes %v; want [%d 0] and records of partition 1", c.name, codes, recs, storage)
		}
		store.SetFault(nil)
		put(orig)
		if codes, recs := fetchTwo(t, ts, topic); codes != [2]int16{0, 0} || recs[0] == 0 {
			t.Fatalf("after %s repaired: codes %v, record bytes %v", c.name, codes, recs)
		}
	}
}

// TestTieredIndexNotReady: until a tiered partition's index has been
// built from the bucket (a wiped or new data directory), its earliest
// offset and its reads below the local log start answer
// REPLICA_NOT_AVAILABLE, which clients retry, not the local log start or
// OFFSET_OUT_OF_RANGE (which would send consumers past the remote log).
// A partition is ready once refreshed, whatever the others are.
func TestTieredIndexNotReady(t *testing.T) {
	const topic = "tiered-notready"
	ts, p, _ := tieredBroker(t, tier.NewMemStore(), topic, 2, 1200)
	localStart := p.Log().LogStartOffset()
	// Between two passes (they wait while the checks run, so no refresh
	// happens), partition 0 is as if just opened.
	ts.tier.PausePasses()
	ts.tier.SetIndexFresh(tierPart{p}, false)
	for _, c := range []struct {
		timestamp int64
		want      int64
		code      int16
	}{{-2, -1, kerr.ReplicaNotAvailable.Code}, {-5, -1, kerr.ReplicaNotAvailable.Code}, {0, -1, kerr.ReplicaNotAvailable.Code}, {-4, localStart, 0}} {
		if off, code := listOffsets(t, ts, topic, c.timestamp); code != c.code || off != c.want {
			t.Errorf("index not ready: ListOffsets %d: offset %d, error %d; want %d, error %d", c.timestamp, off, code, c.want, c.code)
		}
	}
	codes, recs := fetchTwo(t, ts, topic)
	if codes[0] != kerr.ReplicaNotAvailable.Code || codes[1] != 0 {
		t.Errorf("index not ready: fetch at 0: error codes %v (%d bytes of partition 0), want [%d 0]", codes, recs[0], kerr.ReplicaNotAvailable.Code)
	}
	ts.tier.SetIndexFresh(tierPart{p}, true) // refreshed
	defer ts.tier.ResumePasses()
	if off, code := listOffsets(t, ts, topic, -2); code != 0 || off != 0 {
		t.Errorf("index ready: ListOffsets earliest: offset %d, error %d; want 0", off, code)
	}
	if codes, recs := fetchTwo(t, ts, topic); codes[0] != 0 || recs[0] == 0 {
		t.Errorf("index ready: fetch at 0: error %d, %d bytes", codes[0], recs[0])
	}
}
