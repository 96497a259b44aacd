package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Produce v3+ carries exactly one batch per partition; two are refused and
// nothing is written. Below v3 the request is refused as unsupported even
// though ApiVersions lists v0 (KAFKA-18659).
func TestProduceOneBatchPerPartition(t *testing.T) {
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("one-batch", 1, nil)
	a := plainBatch(1000, "a").build(t)
	b := plainBatch(1000, "b").build(t)
	sp := rc.producePart("one-batch", 0, append(append([]byte{}, a...), b...))
	wantCode(t, "two batches", sp.ErrorCode, kerr.InvalidRecord)
	if end := rc.offsetAt("one-batch", 0, -1); end != 0 {
		t.Fatalf("log end after refused produce = %d, want 0", end)
	}
	if off := rc.produceOK("one-batch", 0, a); off != 0 {
		t.Fatalf("single batch at offset %d, want 0", off)
	}
	resp := rc.do(produceReq("one-batch", 0, 1, a), 2).(*kmsg.ProduceResponse)
	wantCode(t, "produce v2", resp.Topics[0].Partitions[0].ErrorCode, kerr.UnsupportedVersion)
}
