package broker

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/index"
	"strata/tier"
)

// replicaFetch sends a Fetch v12 as replica id replica for partition 0 of
// topic at offset and returns the partition's answer.
func replicaFetch(t *testing.T, rc *rawConn, replica int32, topic string, epoch int32, offset int64) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = replica
	req.MaxBytes = 1 << 20
	req.SessionEpoch = -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.FetchOffset, rp.CurrentLeaderEpoch, rp.PartitionMaxBytes, rp.LogStartOffset = 0, offset, epoch, 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := rc.do(req, 12).(*kmsg.FetchResponse)
	return resp.Topics[0].Partitions[0]
}

// manifestBases counts the bucket's manifests per base offset of one
// partition.
func manifestBases(t *testing.T, store *tier.MemStore, tp index.TopicIDPartition) map[int64]int {
	t.Helper()
	out := map[int64]int{}
	for _, k := range store.Keys() {
		if !strings.HasPrefix(k, tier.PartitionPrefix(tp)) || !strings.HasSuffix(k, tier.ManifestSuffix) {
			continue
		}
		sk, err := tier.ParseSegmentKey(k)
		if err != nil {
			t.Fatal(err)
		}
		out[sk.BaseOffset]++
	}
	return out
}

// TestTieredFollowers runs three in-process brokers on one in-memory
// bucket: followers learn the leader's uploads and keep only the local
// tail; the leader answers a replica fetch below its local log start with
// OFFSET_MOVED_TO_TIERED_STORAGE; a follower whose data directory is
// wiped rebuilds from the leader's local tail and rejoins the ISR; made
// leader, it serves every record from offset 0 and uploads nothing
// twice.
func TestTieredFollowers(t *testing.T) {
	store := tier.NewMemStore()
	c := startTierCluster(t, 3, tierClusterSets(), store)
	const topic, localBytes, segBytes = "tf", 20000, 8192
	c.createTopic(topic, []int32{0, 1, 2}, map[string]string{
		"remote.storage.enable": "true", "segment.bytes": fmt.Sprint(segBytes),
		"local.retention.bytes": fmt.Sprint(localBytes), "file.delete.delay.ms": "0", "min.insync.replicas": "2",
	})
	leader := c.partition(topic).Leader
	if leader != 0 {
		t.Fatalf("leader %d, want 0", leader)
	}
	ctx := testCtx(t)
	seeds := []string{c.servers[0].Addr().String(), c.servers[1].Addr().String(), c.servers[2].Addr().String()}
	prod, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MetadataMinAge(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	acked := map[int64][]byte{}
	produce := func(n int) {
		t.Helper()
		for i := 0; i < n; {
			var recs []*kgo.Record
			for range min(n-i, 1+i%7) {
				recs = append(recs, &kgo.Record{Value: tierValue(len(acked) + len(recs)), Partition: 0})
			}
			res := prod.ProduceSync(ctx, recs...)
			if err := res.FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			for _, r := range res {
				acked[r.Record.Offset] = r.Record.Value
			}
			i += len(recs)
		}
	}
	produce(1500)
	p0 := c.servers[0].partition(topic, 0)
	tp := tierPartition(p0)

	// 1, 2: followers learn the uploads and apply local retention.
	waitFor(t, "followers' indexes and local logs follow the leader's", 60*time.Second, func() bool {
		end, ok, _ := c.servers[0].tier.idx.LogEnd(tp)
		if !ok || p0.Log().LogStartOffset() == 0 {
			return false
		}
		for _, id := range []int32{1, 2} {
			fe, fok, _ := c.servers[id].tier.idx.LogEnd(tp)
			p := c.servers[id].partition(topic, 0)
			if !fok || fe != end || p.Log().LogStartOffset() == 0 || p.Log().Size() > localBytes+segBytes {
				return false
			}
		}
		return true
	})

	// 3: a replica fetch below the local log start.
	rc := c.rc(0)
	epoch := c.partition(topic).LeaderEpoch
	fp := replicaFetch(t, rc, 2, topic, epoch, 0)
	wantCode(t, "replica fetch at 0", fp.ErrorCode, kerr.OffsetMovedToTieredStorage)
	fp = replicaFetch(t, rc, 2, topic, epoch, p0.Log().LogStartOffset())
	wantCode(t, "replica fetch at the local log start", fp.ErrorCode, nil)
	// ListOffsets EARLIEST_LOCAL from a replica id.
	lo := kmsg.NewPtrListOffsetsRequest()
	lo.ReplicaID = 2
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = topic
	lp := kmsg.NewListOffsetsRequestTopicPartition()
	lp.Partition, lp.CurrentLeaderEpoch, lp.Timestamp = 0, epoch, -4
	lt.Partitions = append(lt.Partitions, lp)
	lo.Topics = append(lo.Topics, lt)
	lr := rc.do(lo, 9).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	wantCode(t, "ListOffsets -4 from a replica", lr.ErrorCode, nil)
	if lr.Offset != p0.Log().LogStartOffset() {
		t.Fatalf("ListOffsets -4 from a replica: %d, want %d", lr.Offset, p0.Log().LogStartOffset())
	}

	// 4: wipe broker 2 and bring it back.
	c.kill(2)
	produce(300) // the ISR is {0, 1}: min.insync.replicas still met
	if err := os.RemoveAll(c.dirs[2]); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(c.dirs[2], 0o755); err != nil {
		t.Fatal(err)
	}
	c.start(2)
	c.waitISR(topic, 0, 1, 2)
	p2 := c.servers[2].partition(topic, 0)
	waitFor(t, "broker 2 caught up", 30*time.Second, func() bool { return p2.Log().LogEndOffset() == p0.Log().LogEndOffset() })
	if start := p2.Log().LogStartOffset(); start == 0 {
		t.Fatal("the wiped follower copied the whole log")
	}
	// It fetched from the leader's local log start on; its own local
	// retention then keeps about local.retention.bytes.
	waitFor(t, "the wiped follower holds about the local retention", 30*time.Second, func() bool {
		return p2.Log().Size() <= localBytes+segBytes
	})
	if got := tierMetric(t, c.servers[2], "buildremotelogauxstaterequests_total"); got < 1 {
		t.Fatalf("buildremotelogauxstaterequests_total = %v, want >= 1", got)
	}
	if got, want := p2.Log().LatestEpoch(), p0.Log().LatestEpoch(); got != want {
		t.Fatalf("rebuilt follower's latest epoch %d, leader's %d", got, want)
	}

	// 5: broker 2 leads; everything from offset 0 reads back bit for bit.
	c.kill(0)
	waitFor(t, "a new leader", 10*time.Second, func() bool { return c.partition(topic).Leader == 1 || c.partition(topic).Leader == 2 })
	c.kill(c.partition(topic).Leader)
	if c.partition(topic).Leader != 2 {
		waitFor(t, "broker 2 leads", 10*time.Second, func() bool { return c.partition(topic).Leader == 2 })
	}
	waitFor(t, "broker 2 knows every uploaded segment", 30*time.Second, func() bool {
		start, ok, _ := c.servers[2].tier.idx.LogStart(tp)
		return ok && start == 0
	})
	recs := consumeAll(t, &testServer{Server: c.servers[2]}, topic, len(acked))
	if len(recs) != len(acked) {
		t.Fatalf("consumed %d records, acknowledged %d", len(recs), len(acked))
	}
	for _, r := range recs {
		if !bytes.Equal(r.Value, acked[r.Offset]) {
			t.Fatalf("offset %d: consumed %q, acknowledged %q", r.Offset, r.Value, acked[r.Offset])
		}
	}
	// As leader it uploads what follows (acks=1: the others are gone),
	// and nothing again.
	before := manifestBases(t, store, tp)
	one, err := kgo.NewClient(kgo.SeedBrokers(c.servers[2].Addr().String()), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.LeaderAck()),
		kgo.DisableIdempotentWrite(), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	for i := range 600 {
		if err := one.ProduceSync(ctx, &kgo.Record{Value: tierValue(100000 + i), Partition: 0}).FirstErr(); err != nil {
			t.Fatalf("produce to the new leader: %v", err)
		}
	}
	waitFor(t, "the new leader uploads", 60*time.Second, func() bool { return len(manifestBases(t, store, tp)) > len(before) })
	for base, n := range manifestBases(t, store, tp) {
		if n != 1 {
			t.Fatalf("segment at %d uploaded %d times", base, n)
		}
	}
}

// TestTieredLeaderRefreshesBeforeUpload: a leader whose index does not
// know the uploads (as a broker that just became leader, or whose index
// lost the partition) refreshes it from the bucket before its first
// upload of the epoch, and so copies nothing a second time.
func TestTieredLeaderRefreshesBeforeUpload(t *testing.T) {
	store := tier.NewMemStore()
	ts, p, tp := tieredBroker(t, store, "lr", 1, 1200)
	before := manifestBases(t, store, tp)
	if len(before) == 0 {
		t.Fatal("nothing uploaded")
	}
	end, _, _ := ts.tier.idx.LogEnd(tp)
	// Forget the uploads, as a new leader would not know them, between
	// two passes.
	ts.tier.PausePasses()
	err := ts.tier.ForgetIndex(tierPart{p})
	ts.tier.ResumePasses()
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the index refreshed from the bucket", 30*time.Second, func() bool {
		got, ok, _ := ts.tier.idx.LogEnd(tp)
		return ok && got == end
	})
	// A few more passes: nothing is copied again.
	time.Sleep(500 * time.Millisecond)
	after := manifestBases(t, store, tp)
	for base, n := range after {
		if n != 1 {
			t.Fatalf("segment at %d uploaded %d times", base, n)
		}
	}
	if len(after) != len(before) {
		t.Fatalf("%d manifests after the refresh, %d before", len(after), len(before))
	}
}

// TestTieredFollowerRebuildRetries: while the bucket fails the objects a
// wiped follower needs to rebuild a tiered partition, that partition
// waits (counted as failed rebuilds) and the follower's other partitions
// from the same leader keep replicating; once the bucket answers, the
// rebuild completes.
func TestTieredFollowerRebuildRetries(t *testing.T) {
	store := tier.NewMemStore()
	c := startTierCluster(t, 2, tierClusterSets(), store)
	c.createTopic("ta", []int32{0, 1}, map[string]string{
		"remote.storage.enable": "true", "segment.bytes": "8192", "local.retention.bytes": "20000", "file.delete.delay.ms": "0",
	})
	c.createTopic("tb", []int32{0, 1}, nil)
	ctx := testCtx(t)
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.servers[0].Addr().String()), kgo.ProducerLinger(0),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.MetadataMinAge(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produce := func(topic string, n int) {
		t.Helper()
		for i := range n {
			if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: tierValue(i)}).FirstErr(); err != nil {
				t.Fatalf("produce to %s: %v", topic, err)
			}
		}
	}
	produce("ta", 600)
	pa := c.servers[0].partition("ta", 0)
	waitFor(t, "the leader's local log start moves up", 30*time.Second, func() bool { return pa.Log().LogStartOffset() > 0 })

	c.kill(1)
	if err := os.RemoveAll(c.dirs[1]); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(c.dirs[1], 0o755); err != nil {
		t.Fatal(err)
	}
	store.SetFault(func(op tier.Op, key string) error {
		if op == tier.OpGet && strings.HasSuffix(key, index.ObjectIndexes.Suffix()) { // the leader-epoch-checkpoint is packed there
			return errors.New("bucket down")
		}
		return nil
	})
	c.start(1)
	produce("tb", 50)
	waitFor(t, "the plain partition replicates meanwhile", 30*time.Second, func() bool {
		return c.leo(1, "tb") == c.leo(0, "tb")
	})
	waitFor(t, "failed rebuilds counted", 30*time.Second, func() bool {
		return tierMetric(t, c.servers[1], "failedbuildremotelogauxstaterequests_total") >= 1
	})
	if p := c.servers[1].partition("ta", 0); p.Log().LogEndOffset() != 0 {
		t.Fatalf("tiered partition at %d without its rebuild", p.Log().LogEndOffset())
	}
	store.SetFault(nil)
	waitFor(t, "the tiered partition rebuilt and caught up", 30*time.Second, func() bool {
		p := c.servers[1].partition("ta", 0)
		return p.Log().LogStartOffset() > 0 && p.Log().LogEndOffset() == pa.Log().LogEndOffset()
	})
}
