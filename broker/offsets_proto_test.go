package broker

// Protocol tests: ListOffsets, DeleteRecords, OffsetForLeaderEpoch.

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestProtoListOffsets(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("lo", 1, nil)

	// Empty log.
	for _, q := range []int64{-1, -2, -4} {
		if got := rc.offsetAt("lo", 0, q); got != 0 {
			t.Errorf("empty log: timestamp %d gives offset %d, want 0", q, got)
		}
	}
	if got := rc.offsetAt("lo", 0, -3); got != -1 {
		t.Errorf("empty log: max timestamp gives offset %d, want -1", got)
	}
	if got := rc.offsetAt("lo", 0, 0); got != -1 {
		t.Errorf("empty log: timestamp 0 gives offset %d, want -1", got)
	}

	// Offsets 0-1 at 1000/1001, 2 at 5000 (the max), 3-4 at 2000/2001.
	b := plainBatch(1000, "a", "b")
	b.records[1].tsDelta = 1
	rc.produceOK("lo", 0, b.build(t))
	rc.produceOK("lo", 0, plainBatch(5000, "max").build(t))
	b = plainBatch(2000, "c", "d")
	b.records[1].tsDelta = 1
	rc.produceOK("lo", 0, b.build(t))

	type want struct{ off, ts int64 }
	for _, c := range []struct {
		ts   int64
		want want
	}{
		{-1, want{5, -1}},     // latest: the high watermark
		{-2, want{0, -1}},     // earliest
		{-4, want{0, -1}},     // earliest local
		{-3, want{2, 5000}},   // max timestamp (KIP-734)
		{0, want{0, 1000}},    // first offset with timestamp >= 0
		{1001, want{1, 1001}}, // inside the first batch
		{1500, want{2, 5000}}, // the first record at or after 1500 is offset 2
		{5000, want{2, 5000}},
		{5001, want{-1, -1}}, // none
	} {
		p := rc.listOffset("lo", 0, c.ts)
		wantCode(t, "list offsets", p.ErrorCode, nil)
		if p.Offset != c.want.off {
			t.Errorf("timestamp %d: offset %d, want %d", c.ts, p.Offset, c.want.off)
		}
		if c.want.ts != -1 && p.Timestamp != c.want.ts {
			t.Errorf("timestamp %d: answered timestamp %d, want %d", c.ts, p.Timestamp, c.want.ts)
		}
		if c.ts == 5001 && p.Timestamp != -1 {
			t.Errorf("timestamp %d: answered timestamp %d for no offset, want -1", c.ts, p.Timestamp)
		}
	}
	// -5 latest tiered: nothing is tiered, so -1 (KIP-1005).
	p := rc.listOffset("lo", 0, -5)
	wantCode(t, "list offsets -5", p.ErrorCode, nil)
	if p.Offset != -1 {
		t.Errorf("latest tiered offset %d with no tiering, want -1", p.Offset)
	}
	// Unknown partition.
	p = rc.listOffset("lo", 3, -1)
	wantCode(t, "list offsets of partition 3", p.ErrorCode, kerr.UnknownTopicOrPartition)
	p = rc.listOffset("no-such-topic", 0, -1)
	wantCode(t, "list offsets of an unknown topic", p.ErrorCode, kerr.UnknownTopicOrPartition)

	// Older versions: v1 (no leader epoch) still answers latest/earliest.
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = "lo"
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp = 0, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := rc.do(req, 1).(*kmsg.ListOffsetsResponse)
	if got := resp.Topics[0].Partitions[0]; got.ErrorCode != 0 || got.Offset != 5 {
		t.Errorf("ListOffsets v1 latest: %v offset %d, want 5", kerr.ErrorForCode(got.ErrorCode), got.Offset)
	}
}

func TestProtoDeleteRecords(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("dr", 1, nil)
	for i := 0; i < 10; i++ {
		rc.produceOK("dr", 0, plainBatch(1000, string(rune('a'+i))).build(t))
	}

	deleteRecords := func(off int64) kmsg.DeleteRecordsResponseTopicPartition {
		t.Helper()
		return deleteRecordsWithin(t, rc, "dr", off, 10000)
	}

	p := deleteRecords(4)
	wantCode(t, "delete records before 4", p.ErrorCode, nil)
	if p.LowWatermark != 4 {
		t.Errorf("low watermark %d, want 4", p.LowWatermark)
	}
	if got := rc.offsetAt("dr", 0, -2); got != 4 {
		t.Errorf("earliest offset %d after deleting before 4, want 4", got)
	}
	if got := rc.offsetAt("dr", 0, -1); got != 10 {
		t.Errorf("latest offset %d, want 10", got)
	}
	fp := rc.fetchOne("dr", 0, 2, 1<<20)
	wantCode(t, "fetch below the log start", fp.ErrorCode, kerr.OffsetOutOfRange)
	if fp.LogStartOffset != 4 && fp.LogStartOffset != -1 {
		t.Errorf("fetch response log start offset %d, want 4", fp.LogStartOffset)
	}
	// Consumers from the earliest start at the low watermark.
	recs := consumeAll(t, ts, "dr", 6)
	if recs[0].Offset != 4 || string(recs[0].Value) != "e" {
		t.Errorf("first consumed record offset %d value %q, want 4 \"e\"", recs[0].Offset, recs[0].Value)
	}

	// Moving down is a no-op; past the high watermark is out of range.
	p = deleteRecords(2)
	wantCode(t, "delete records before 2 (below the low watermark)", p.ErrorCode, nil)
	if p.LowWatermark != 4 {
		t.Errorf("low watermark %d after a lower delete, want 4", p.LowWatermark)
	}
	p = deleteRecords(11)
	wantCode(t, "delete records past the high watermark", p.ErrorCode, kerr.OffsetOutOfRange)
	// -1: up to the high watermark.
	p = deleteRecords(-1)
	wantCode(t, "delete records to the high watermark", p.ErrorCode, nil)
	if p.LowWatermark != 10 {
		t.Errorf("low watermark %d after deleting everything, want 10", p.LowWatermark)
	}
	if base := rc.produceOK("dr", 0, plainBatch(1000, "k").build(t)); base != 10 {
		t.Errorf("produce after deleting everything at %d, want 10", base)
	}
	if got := rc.offsetAt("dr", 0, -2); got != 10 {
		t.Errorf("earliest offset %d, want 10", got)
	}
}

// The low watermark survives a restart.
func TestProtoDeleteRecordsRestart(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	adm := ts.admin(t)
	ctx := testCtx(t)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("drr", 1, nil)
	for i := 0; i < 5; i++ {
		rc.produceOK("drr", 0, plainBatch(1000, "x").build(t))
	}
	var offs kadm.Offsets
	offs.AddOffset("drr", 0, 3, -1)
	res, err := adm.DeleteRecords(ctx, offs)
	if err != nil {
		t.Fatal(err)
	}
	res.Each(func(r kadm.DeleteRecordsResponse) {
		if r.Err != nil || r.LowWatermark != 3 {
			t.Fatalf("kadm DeleteRecords %s-%d: low watermark %d, %v; want 3", r.Topic, r.Partition, r.LowWatermark, r.Err)
		}
	})
	ts.Close()
	ts2 := startTestServerDir(t, ts.dir, ts.sets)
	rc2 := dialRaw(t, ts2.addr())
	if got := rc2.offsetAt("drr", 0, -2); got != 3 {
		t.Errorf("earliest offset %d after a restart, want 3", got)
	}
	if got := rc2.offsetAt("drr", 0, -1); got != 5 {
		t.Errorf("latest offset %d after a restart, want 5", got)
	}
	recs := consumeAll(t, ts2, "drr", 2, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if recs[0].Offset != 3 {
		t.Errorf("first record after a restart at %d, want 3", recs[0].Offset)
	}
}

func TestProtoOffsetForLeaderEpoch(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("ofle", 1, nil)
	md := rc.do(metadataReq("ofle"), 12).(*kmsg.MetadataResponse)
	epoch := mdTopic(md, "ofle").Partitions[0].LeaderEpoch
	for i := 0; i < 3; i++ {
		rc.produceOK("ofle", 0, plainBatch(1000, "a", "b").build(t))
	}

	ask := func(topic string, part, current, leaderEpoch int32) kmsg.OffsetForLeaderEpochResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrOffsetForLeaderEpochRequest()
		req.ReplicaID = -1
		rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = part, current, leaderEpoch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := rc.do(req, 4).(*kmsg.OffsetForLeaderEpochResponse)
		return resp.Topics[0].Partitions[0]
	}

	p := ask("ofle", 0, -1, epoch)
	wantCode(t, "OffsetForLeaderEpoch", p.ErrorCode, nil)
	if p.LeaderEpoch != epoch || p.EndOffset != 6 {
		t.Errorf("epoch %d: answered epoch %d end offset %d, want %d and 6 (the log end)", epoch, p.LeaderEpoch, p.EndOffset, epoch)
	}
	p = ask("ofle", 0, epoch, epoch)
	wantCode(t, "OffsetForLeaderEpoch with the current epoch", p.ErrorCode, nil)
	if p.EndOffset != 6 {
		t.Errorf("end offset %d, want 6", p.EndOffset)
	}
	p = ask("ofle", 0, epoch+1, epoch)
	wantCode(t, "OffsetForLeaderEpoch with a future current epoch", p.ErrorCode, kerr.UnknownLeaderEpoch)
	p = ask("ofle", 7, -1, epoch)
	wantCode(t, "OffsetForLeaderEpoch of an unknown partition", p.ErrorCode, kerr.UnknownTopicOrPartition)
	p = ask("nope", 0, -1, epoch)
	wantCode(t, "OffsetForLeaderEpoch of an unknown topic", p.ErrorCode, kerr.UnknownTopicOrPartition)
}
