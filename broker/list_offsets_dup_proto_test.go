package broker

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A partition named twice in one ListOffsets request gets INVALID_REQUEST
// at each mention, as in Kafka, so that one request cannot make the
// broker search (and decompress) the same batch again and again.
func TestProtoListOffsetsDuplicatePartitions(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("dup", 2, nil)
	bs := plainBatch(1000, "a", "b", "c")
	bs.codec = kgo.ZstdCompression()
	rc.produceOK("dup", 0, bs.build(t))
	rc.produceOK("dup", 1, bs.build(t))

	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "dup"
	for _, part := range []int32{0, 1, 0} {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = part, 1000, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp := rc.do(req, 9).(*kmsg.ListOffsetsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 3 {
		t.Fatalf("response: %+v", resp.Topics)
	}
	for _, p := range resp.Topics[0].Partitions {
		if p.Partition == 0 {
			wantCode(t, "duplicated partition 0", p.ErrorCode, kerr.InvalidRequest)
			continue
		}
		wantCode(t, "partition 1", p.ErrorCode, nil)
		if p.Offset != 0 || p.Timestamp != 1000 {
			t.Errorf("partition 1: offset %d timestamp %d, want 0 1000", p.Offset, p.Timestamp)
		}
	}
}
