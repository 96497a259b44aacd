package broker

import (
	"encoding/binary"
	"hash/crc32"
	"runtime"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// listOffsetDebug asks ListOffsets v9 as the debugging replica (-2), which
// sees up to the log end.
func listOffsetDebug(rc *rawConn, topic string, ts int64) kmsg.ListOffsetsResponseTopicPartition {
	rc.t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -2
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp, rp.CurrentLeaderEpoch = ts, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := rc.do(req, 9).(*kmsg.ListOffsetsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		rc.t.Fatalf("list offsets: %d topics in response", len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0]
}

// Issue 25: ListOffsets by timestamp decompresses the batch that holds the
// answer, and that was not counted in queued.max.request.bytes. A stored
// zstd batch declaring a 64 MiB window (its one record) would take 64 MiB
// to search; with queued.max.request.bytes at 16 MiB the charge cannot be
// had, so the batch is not decompressed: the answer is the batch's base
// offset, and the search allocates little. A batch whose window fits is
// searched, and its charge given back.
func TestListOffsetsByTimestampCharged(t *testing.T) {
	ts := startTestServer(t, map[string]string{"queued.max.request.bytes": "16777216", "socket.request.max.bytes": "8388608"})
	rc := dialRaw(t, ts.addr())
	rc.createTopic("searched", 1, nil)
	p := ts.partition("searched", 0)
	if p == nil {
		t.Fatal("no partition")
	}
	const when = 1_700_000_000_000
	big := rawFrame(zstdBombRecords(64<<20), 1, 4, when, -1, -1)
	if _, err := p.Log().AppendReplicated(big); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	sp := listOffsetDebug(rc, "searched", when)
	runtime.ReadMemStats(&after)
	if sp.ErrorCode != 0 || sp.Offset != 0 {
		t.Fatalf("search past the budget: error %d, offset %d; want offset 0", sp.ErrorCode, sp.Offset)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
		t.Fatalf("a search by timestamp over a 64 MiB zstd window allocated %d MiB under a 16 MiB queued.max.request.bytes", got>>20)
	}
	small := rawFrame(zstdBombRecords(2<<20), 1, 4, when+1000, -1, -1)
	small[7] = 1 // base offset 1
	binary.BigEndian.PutUint32(small[17:], crc32.Checksum(small[21:], crc32c))
	if _, err := p.Log().AppendReplicated(small); err != nil {
		t.Fatal(err)
	}
	if sp := listOffsetDebug(rc, "searched", when+1000); sp.ErrorCode != 0 || sp.Offset != 1 || sp.Timestamp != when+1000 {
		t.Fatalf("search within the budget: error %d, offset %d at %d; want offset 1", sp.ErrorCode, sp.Offset, sp.Timestamp)
	}
	if !holdsWithin(5*time.Second, func() bool { return ts.network.RequestMemoryInUse() == 0 }) {
		t.Fatalf("%d bytes of queued.max.request.bytes still held", ts.network.RequestMemoryInUse())
	}
}
