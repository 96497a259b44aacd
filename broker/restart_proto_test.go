package broker

// Protocol tests across a clean restart (Close, then a new server on the
// same data directory): data and idempotent producer state survive.

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestProtoRestartKeepsData(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	id := rc.createTopic("keep", 2, map[string]string{"retention.ms": "86400000"})

	// Every codec on partition 0, franz-go's producer on partition 1.
	for _, c := range protoCodecs {
		bs := plainBatch(5000)
		bs.codec = c.codec
		for j := 0; j < 5; j++ {
			bs.records = append(bs.records, recordSpec{key: []byte("k"), value: []byte(fmt.Sprint(c.name, j)), tsDelta: int64(j)})
		}
		rc.produceOK("keep", 0, bs.build(t))
	}
	pr := ts.client(t, kgo.DefaultProduceTopic("keep"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := testCtx(t)
	for i := 0; i < 50; i++ {
		if err := pr.ProduceSync(ctx, &kgo.Record{Partition: 1, Value: []byte(fmt.Sprint("client ", i))}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	before0 := rc.fetchOne("keep", 0, 0, 16<<20).RecordBatches
	before1 := rc.fetchOne("keep", 1, 0, 16<<20).RecordBatches
	pr.Close()

	if err := ts.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	ts2 := startTestServerDir(t, ts.dir, ts.sets)
	rc2 := dialRaw(t, ts2.addr())

	md := rc2.do(metadataReq("keep"), 12).(*kmsg.MetadataResponse)
	mt := mdTopic(md, "keep")
	if mt == nil || len(mt.Partitions) != 2 || mt.TopicID != id {
		t.Fatalf("metadata after a restart: %+v", mt)
	}
	if c := describeTopicConfig(t, rc2, "keep", "retention.ms"); strOrNull(c.Value) != "86400000" {
		t.Errorf("retention.ms override after a restart: %s", strOrNull(c.Value))
	}
	for part, want := range map[int32]int64{0: int64(5 * len(protoCodecs)), 1: 50} {
		if got := rc2.offsetAt("keep", part, -1); got != want {
			t.Errorf("partition %d: latest offset %d after a restart, want %d", part, got, want)
		}
	}
	after0 := rc2.fetchOne("keep", 0, 0, 16<<20).RecordBatches
	after1 := rc2.fetchOne("keep", 1, 0, 16<<20).RecordBatches
	if !bytes.Equal(before0, after0) || !bytes.Equal(before1, after1) {
		t.Errorf("stored batches changed across a restart (%d/%d bytes before, %d/%d after)",
			len(before0), len(before1), len(after0), len(after1))
	}
	if n := len(splitBatches(t, after0)); n != len(protoCodecs) {
		t.Errorf("partition 0: %d batches after a restart, want %d", n, len(protoCodecs))
	}
	recs := consumeAll(t, ts2, "keep", 5*len(protoCodecs)+50)
	seen := map[string]bool{}
	for _, r := range recs {
		seen[string(r.Value)] = true
	}
	for _, c := range protoCodecs {
		for j := 0; j < 5; j++ {
			if v := fmt.Sprint(c.name, j); !seen[v] {
				t.Errorf("record %q lost across a restart", v)
			}
		}
	}
	// Appends continue at the old log end.
	if base := rc2.produceOK("keep", 0, plainBatch(6000, "after").build(t)); base != int64(5*len(protoCodecs)) {
		t.Errorf("first append after a restart at %d, want %d", base, 5*len(protoCodecs))
	}
}

func TestProtoRestartKeepsProducerState(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("pstate", 1, nil)
	pid, epoch := rc.initProducerID()

	b0 := idemBatch(pid, epoch, 0, "a", "b").build(t)
	b1 := idemBatch(pid, epoch, 2, "c", "d", "e").build(t)
	rc.produceOK("pstate", 0, b0)
	if base := rc.produceOK("pstate", 0, b1); base != 2 {
		t.Fatalf("second batch at %d, want 2", base)
	}

	if err := ts.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	ts2 := startTestServerDir(t, ts.dir, ts.sets)
	rc2 := dialRaw(t, ts2.addr())

	// The retry of the last batch is recognised as a duplicate.
	p := rc2.producePart("pstate", 0, b1)
	wantCode(t, "duplicate of the last batch after a restart", p.ErrorCode, nil)
	if p.BaseOffset != 2 {
		t.Errorf("duplicate after a restart answered with %d, want the original 2", p.BaseOffset)
	}
	if got := rc2.offsetAt("pstate", 0, -1); got != 5 {
		t.Fatalf("latest offset %d after a duplicate, want 5 (nothing appended)", got)
	}
	// A gap is still detected: the broker knows the last sequence.
	p = rc2.producePart("pstate", 0, idemBatch(pid, epoch, 9, "gap").build(t))
	wantCode(t, "sequence gap after a restart", p.ErrorCode, kerr.OutOfOrderSequenceNumber)
	// The next sequence is accepted.
	if base := rc2.produceOK("pstate", 0, idemBatch(pid, epoch, 5, "f").build(t)); base != 5 {
		t.Errorf("next batch after a restart at %d, want 5", base)
	}

	// A second restart right after (producer state written again at close).
	if err := ts2.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	ts3 := startTestServerDir(t, ts.dir, ts.sets)
	rc3 := dialRaw(t, ts3.addr())
	p = rc3.producePart("pstate", 0, idemBatch(pid, epoch, 5, "f").build(t))
	wantCode(t, "duplicate after a second restart", p.ErrorCode, nil)
	if p.BaseOffset != 5 {
		t.Errorf("duplicate after a second restart answered with %d, want 5", p.BaseOffset)
	}
	if got := rc3.offsetAt("pstate", 0, -1); got != 6 {
		t.Errorf("latest offset %d, want 6", got)
	}
}
