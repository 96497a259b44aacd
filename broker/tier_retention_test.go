package broker

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/controller"
	"strata/index"
	"strata/tier"
)

// fetchAt fetches one offset of partition 0 and returns the error code
// and the bytes of records.
func fetchAt(t *testing.T, ts *testServer, topic string, offset int64) (int16, int) {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.MaxWaitMillis, req.MaxBytes, req.SessionEpoch = 100, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rt.TopicID = ts.partition(topic, 0).TopicID()
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.FetchOffset, rp.LogStartOffset, rp.PartitionMaxBytes = 0, -1, offset, -1, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), ts.client(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch response: error %d, %d topics", resp.ErrorCode, len(resp.Topics))
	}
	p := resp.Topics[0].Partitions[0]
	return p.ErrorCode, len(p.RecordBatches)
}

// consumeTiered reads partition 0 from offset start to the high watermark
// and checks every record is tierValue of its offset.
func consumeTiered(t *testing.T, ts *testServer, topic string, start, end int64) {
	t.Helper()
	cl := ts.client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(start)}}))
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	next := start
	for next < end && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) {
				t.Fatalf("consume from %d: %v", start, e.Err)
			}
		}
		for _, r := range fs.Records() {
			if r.Offset != next || !bytes.Equal(r.Value, tierValue(int(r.Offset))) {
				t.Fatalf("consume from %d: record at %d, want %d with its value", start, r.Offset, next)
			}
			next++
		}
	}
	if next != end {
		t.Fatalf("consume from %d: reached %d, want %d", start, next, end)
	}
}

func segmentsOf(t *testing.T, ts *testServer, tp index.TopicIDPartition) []index.SegmentMetadata {
	t.Helper()
	segs, err := ts.tier.idx.Segments(tp)
	if err != nil {
		t.Fatal(err)
	}
	return segs
}

func keysUnder(t *testing.T, store *tier.MemStore, prefix string) []string {
	t.Helper()
	var out []string
	for _, k := range store.Keys() {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return out
}

// localOnly is the size of the local segments not in the remote log.
func localOnly(t *testing.T, ts *testServer, p *partition, tp index.TopicIDPartition) int64 {
	t.Helper()
	end, ok, err := ts.tier.idx.LogEnd(tp)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, s := range p.Log().Segments() {
		if !ok || s.NextOffset-1 > end {
			n += s.Size
		}
	}
	return n
}

func alterTopic(t *testing.T, ts *testServer, topic string, kv ...string) error {
	t.Helper()
	var ops []kadm.AlterConfig
	for i := 0; i < len(kv); i += 2 {
		v := kv[i+1]
		ops = append(ops, kadm.AlterConfig{Op: kadm.SetConfig, Name: kv[i], Value: &v})
	}
	rs, err := ts.admin(t).AlterTopicConfigs(testCtx(t), ops, topic)
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Err != nil {
		return errors.New(rs[0].Err.Error() + ": " + rs[0].ErrMessage)
	}
	return nil
}

// TestTieredRemoteRetention: DeleteRecords below the local log start,
// retention.bytes on the remote log, a failing bucket, DescribeLogDirs'
// remote entry and the metrics, on a broker with an in-memory tier.
func TestTieredRemoteRetention(t *testing.T) {
	store := tier.NewMemStore()
	const topic, n = "tiered-retention", 200
	ts, p, tp := tieredBroker(t, store, topic, 1, n)
	segs := segmentsOf(t, ts, tp)
	if len(segs) < 8 {
		t.Fatalf("%d remote segments", len(segs))
	}
	hw := p.HW()

	// DescribeLogDirs: the local dir and the remote tier with its size.
	dirs, err := ts.admin(t).DescribeAllLogDirs(testCtx(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	var remoteSize int64
	for _, m := range segs {
		remoteSize += m.SegmentSize
	}
	found := false
	dirs.Each(func(d kadm.DescribedLogDir) {
		if d.Dir != store.String() {
			return
		}
		found = true
		if sz := d.Topics[topic][0].Size; sz != remoteSize {
			t.Errorf("remote log dir: size %d, want %d", sz, remoteSize)
		}
	})
	if !found {
		t.Fatalf("no log dir %s in DescribeLogDirs: %+v", store.String(), dirs)
	}
	// DescribeConfigs: the read-only size entries, parsed by kadm.
	rcs, err := ts.admin(t).DescribeTopicConfigs(testCtx(t), topic)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rcs.On(topic, nil)
	if err != nil || rc.Err != nil {
		t.Fatalf("describe configs: %v %v", err, rc.Err)
	}
	sizes := map[string]string{}
	for _, c := range rc.Configs {
		if strings.HasPrefix(c.Key, "strata.") {
			sizes[c.Key] = c.MaybeValue()
		}
	}
	if sizes["strata.remote.log.size.bytes"] != itoa(remoteSize) || sizes["strata.local.log.size.bytes"] != itoa(p.Log().Size()) {
		t.Fatalf("size entries %v; remote %d, local %d", sizes, remoteSize, p.Log().Size())
	}

	// DeleteRecords inside the third remote segment, below the local log start.
	cut := segs[2].StartOffset + 1
	if cut >= p.Log().LogStartOffset() {
		t.Fatalf("cut %d not below the local log start %d", cut, p.Log().LogStartOffset())
	}
	res, err := ts.admin(t).DeleteRecords(testCtx(t), kadm.Offsets{topic: {0: {Topic: topic, Partition: 0, At: cut}}})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := res.Lookup(topic, 0); r.Err != nil || r.LowWatermark != cut {
		t.Fatalf("DeleteRecords: %+v", r)
	}
	if off, code := listOffsets(t, ts, topic, -2); code != 0 || off != cut {
		t.Fatalf("earliest after DeleteRecords: %d (%d), want %d", off, code, cut)
	}
	if code, _ := fetchAt(t, ts, topic, cut-1); code != kerr.OffsetOutOfRange.Code {
		t.Fatalf("fetch below the log start: code %d", code)
	}
	waitFor(t, "the two remote segments below the log start deleted", 30*time.Second, func() bool {
		return len(segmentsOf(t, ts, tp)) == len(segs)-2
	})
	for i, m := range segs {
		gone := len(keysUnder(t, store, tier.ManifestKey(&m))) == 0 && len(keysUnder(t, store, tier.ObjectKey(&m, index.ObjectLog))) == 0
		if gone != (i < 2) {
			t.Fatalf("segment %d: objects gone %v", i, gone)
		}
	}
	consumeTiered(t, ts, topic, cut, hw)
	if v := tierMetric(t, ts.Server, "remotedeleterequests_total"); v < 2 {
		t.Fatalf("remotedeleterequests_total %v", v)
	}

	// A failing bucket fails deletions (counted), and they resume after.
	store.SetFault(func(op tier.Op, key string) error {
		if op == tier.OpDeleteMany || op == tier.OpPut && strings.HasSuffix(key, tier.ManifestSuffix) {
			return errors.New("bucket down")
		}
		return nil
	})
	segs = segmentsOf(t, ts, tp)
	var total int64
	for _, m := range segs {
		total += m.SegmentSize
	}
	// retention.bytes: room for the local log and the newest half of the remote one.
	limit := total/2 + localOnly(t, ts, p, tp)
	if err := alterTopic(t, ts, topic, "retention.bytes", itoa(limit), "local.retention.bytes", "20000"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "failed remote deletions", 30*time.Second, func() bool {
		return tierMetric(t, ts.Server, "remotedeleteerrors_total") >= 2
	})
	if got := segmentsOf(t, ts, tp); got[0].State != index.DeleteSegmentStarted || len(got) != len(segs) {
		t.Fatalf("with the bucket down: %d segments, first %s", len(got), got[0].State)
	}
	store.SetFault(nil)
	waitFor(t, "remote retention by size", 30*time.Second, func() bool {
		got := segmentsOf(t, ts, tp)
		var sz int64
		for _, m := range got {
			sz += m.SegmentSize
		}
		return len(got) < len(segs) && sz+localOnly(t, ts, p, tp) < limit+got[0].SegmentSize && got[0].State == index.CopySegmentFinished
	})
	got := segmentsOf(t, ts, tp)
	var sz int64
	for _, m := range got {
		sz += m.SegmentSize
	}
	// Never below the limit: one segment fewer would be.
	if lo := localOnly(t, ts, p, tp); sz+lo < limit {
		t.Fatalf("remote %d + local %d below retention.bytes %d", sz, lo, limit)
	}
	start := got[0].StartOffset
	if off, _ := listOffsets(t, ts, topic, -2); off != start {
		t.Fatalf("earliest %d, want the remote log start %d", off, start)
	}
	if len(keysUnder(t, store, tier.PartitionPrefix(tp))) != 0 {
		for _, m := range segs[:len(segs)-len(got)] {
			if k := keysUnder(t, store, tier.ManifestKey(&m)); len(k) != 0 {
				t.Fatalf("objects of a deleted segment remain: %v", k)
			}
		}
	}
	consumeTiered(t, ts, topic, start, hw)
	waitFor(t, "the remote log size gauge", 10*time.Second, func() bool {
		return tierMetric(t, ts.Server, "remotelogsizebytes") == float64(sz)
	})
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestTieredSwitches: remote.storage.enable cannot go off without
// remote.log.delete.on.disable=true (Kafka's message), compaction is
// refused on tiered topics, and with delete on disable the remote log is
// deleted; remote.log.copy.disable keeps remote reads.
func TestTieredSwitches(t *testing.T) {
	store := tier.NewMemStore()
	const topic, n = "tiered-switches", 120
	ts, p, tp := tieredBroker(t, store, topic, 1, n)
	hw := p.HW()

	err := alterTopic(t, ts, topic, "remote.storage.enable", "false")
	if err == nil || !strings.Contains(err.Error(), "INVALID_CONFIG") || !strings.Contains(err.Error(), "It is invalid to disable remote storage without deleting remote data.") {
		t.Fatalf("turning remote storage off: %v", err)
	}
	err = alterTopic(t, ts, topic, "remote.storage.enable", "true", "cleanup.policy", "compact")
	if err == nil || !strings.Contains(err.Error(), "Remote log storage only supports topics with cleanup.policy=delete") {
		t.Fatalf("compacting a tiered topic: %v", err)
	}
	str := func(s string) *string { return &s }
	cr, err := ts.admin(t).CreateTopic(testCtx(t), 1, 1, map[string]*string{"remote.storage.enable": str("true"), "cleanup.policy": str("compact,delete")}, "tiered-compacted")
	if err == nil && cr.Err == nil {
		t.Fatal("created a compacted tiered topic")
	}

	// Copy disabled: reads from the bucket go on.
	if err := alterTopic(t, ts, topic, "remote.storage.enable", "true", "remote.log.copy.disable", "true", "local.retention.bytes", "-2"); err != nil {
		t.Fatal(err)
	}
	consumeTiered(t, ts, topic, 0, hw)

	before := len(keysUnder(t, store, tier.PartitionPrefix(tp)))
	if before == 0 {
		t.Fatal("nothing in the bucket")
	}
	if err := alterTopic(t, ts, topic, "remote.storage.enable", "false", "remote.log.delete.on.disable", "true"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the remote log deleted", 30*time.Second, func() bool {
		return len(keysUnder(t, store, tier.PartitionPrefix(tp))) == 0 && len(segmentsOf(t, ts, tp)) == 0
	})
	if off, _ := listOffsets(t, ts, topic, -2); off != p.Log().LogStartOffset() {
		t.Fatalf("earliest %d, want the local log start %d", off, p.Log().LogStartOffset())
	}
	consumeTiered(t, ts, topic, p.Log().LogStartOffset(), hw)
}

// TestTieredTopicDeletion: deleting a tiered topic deletes its objects and
// index entries; with the bucket down at the time, a later pass does.
// Another tiered topic is untouched.
func TestTieredTopicDeletion(t *testing.T) {
	store := tier.NewMemStore()
	const topic, n = "tiered-deleted", 120
	ts, _, tp := tieredBroker(t, store, topic, 1, n)
	str := func(s string) *string { return &s }
	if _, err := ts.admin(t).CreateTopic(testCtx(t), 1, 1, map[string]*string{"remote.storage.enable": str("true")}, "kept"); err != nil {
		t.Fatal(err)
	}
	kept := ts.partition("kept", 0)
	otherKey := tier.TopicPrefix(index.UUID(kept.TopicID())) + "0/00000000000000000000-" + index.NewUUID().String() + ".log"
	if err := store.Put(context.Background(), otherKey, strings.NewReader("x"), 1); err != nil {
		t.Fatal(err)
	}
	if len(keysUnder(t, store, tier.TopicPrefix(tp.TopicID))) == 0 {
		t.Fatal("nothing in the bucket")
	}
	store.SetFault(func(op tier.Op, key string) error {
		if op == tier.OpDeleteMany || op == tier.OpList {
			return errors.New("bucket down")
		}
		return nil
	})
	if _, err := ts.admin(t).DeleteTopic(testCtx(t), topic); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deletion pending", 10*time.Second, func() bool {
		pend, _ := ts.tier.idx.PendingTopicDeletions()
		return len(pend) == 1 && pend[0].TopicID == tp.TopicID && store.Calls(tier.OpList) > 0
	})
	lists := store.Calls(tier.OpList)
	waitFor(t, "more failing passes", 10*time.Second, func() bool { return store.Calls(tier.OpList) >= lists+2 })
	if len(keysUnder(t, store, tier.TopicPrefix(tp.TopicID))) == 0 {
		t.Fatal("objects deleted with the bucket down")
	}
	store.SetFault(nil)
	waitFor(t, "the deleted topic's objects gone", 30*time.Second, func() bool {
		pend, _ := ts.tier.idx.PendingTopicDeletions()
		return len(keysUnder(t, store, tier.TopicPrefix(tp.TopicID))) == 0 && len(pend) == 0
	})
	if len(segmentsOf(t, ts, tp)) != 0 {
		t.Fatal("index entries of the deleted topic remain")
	}
	if len(keysUnder(t, store, otherKey)) != 1 {
		t.Fatal("the other topic's object was deleted")
	}
}

// TestTieredForgetMovedOrDeleted: a partition dropped by reconcile marks
// its topic's remote data for deletion only when the topic is gone; a
// replica moved off this broker does not, and a partition gone while its
// topic remains (ZooKeeper's partition-by-partition deletion) is marked
// once the topic id is gone.
func TestTieredForgetMovedOrDeleted(t *testing.T) {
	store := tier.NewMemStore()
	ts, p, _ := tieredBroker(t, store, "tiered-forget", 2, 40)
	id := p.TopicID()
	pending := func() int {
		pend, err := ts.tier.idx.PendingTopicDeletions()
		if err != nil {
			t.Fatal(err)
		}
		return len(pend)
	}
	md := ts.ctrl.Metadata()
	moved := *md
	ts.forgetRemoteTopic(p, &moved) // the topic and its partition 0 are still there
	if pending() != 0 {
		t.Fatal("a moved replica marked its topic deleted")
	}
	// Partition 1 gone, the topic still there: a deletion under way.
	p1 := ts.partition("tiered-forget", 1)
	shrunk := *md
	shrunk.Topics = map[string]*controller.Topic{}
	for k, v := range md.Topics {
		shrunk.Topics[k] = v
	}
	cut := *md.Topics["tiered-forget"]
	cut.Partitions = cut.Partitions[:1]
	shrunk.Topics["tiered-forget"] = &cut
	ts.forgetRemoteTopic(p1, &shrunk)
	if pending() != 0 {
		t.Fatal("marked while the topic is still in the metadata")
	}
	suspect := ts.tier.TopicDeletionUnderWay(id)
	if !suspect {
		t.Fatal("the partly deleted topic is not remembered")
	}
	// The topic gone: marked.
	gone := *md
	gone.TopicIDs = map[[16]byte]string{}
	ts.forgetRemoteTopic(p, &gone)
	if pending() != 1 {
		t.Fatal("a deleted topic was not marked")
	}
}

// TestTieredLiveTopicMarkedDeleted: a topic marked deleted in the index
// whose id is in the metadata (ZooKeeper wiped while the brokers ran, then
// restored) keeps its objects, even with its deletion recorded by this
// cluster and gone from the cluster snapshot; its mark is cleared.
func TestTieredLiveTopicMarkedDeleted(t *testing.T) {
	store := tier.NewMemStore()
	const topic = "tiered-live-marked"
	ts, p, tp := tieredBroker(t, store, topic, 1, 40)
	if len(keysUnder(t, store, tier.TopicPrefix(tp.TopicID))) == 0 {
		t.Fatal("nothing in the bucket")
	}
	rec := tier.TopicDeletion{TopicID: index.UUID(p.TopicID()).String(), ClusterID: ts.ctrl.Metadata().ClusterID, DeletedMs: 1}
	if err := tier.RecordTopicDeletion(testCtx(t), store, rec); err != nil {
		t.Fatal(err)
	}
	if err := ts.tier.idx.MarkTopicDeleted(p.TopicID(), topic); err != nil {
		t.Fatal(err)
	}
	// The worst case: the cluster snapshot does not name it.
	if _, err := tier.UpdateClusterSnapshot(testCtx(t), store, rec.ClusterID, func(*tier.ClusterSnapshot) (tier.ClusterSnapshot, error) {
		return tier.ClusterSnapshot{}, nil
	}); err != nil {
		t.Fatal(err)
	}
	ts.tier.DeleteRemoteTopics()
	if pend, err := ts.tier.idx.PendingTopicDeletions(); err != nil || len(pend) != 0 {
		t.Fatalf("pending %v, %v; want the live topic's mark cleared", pend, err)
	}
	if len(keysUnder(t, store, tier.TopicPrefix(tp.TopicID))) == 0 || len(segmentsOf(t, ts, tp)) == 0 {
		t.Fatal("the live topic's remote data was deleted")
	}
}
