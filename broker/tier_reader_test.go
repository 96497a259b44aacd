package broker

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/tier"
)

// listOffsetsAt asks ListOffsets v9 for a timestamp of partition 0 and
// returns the partition's answer.
func listOffsetsAt(t *testing.T, ts *testServer, topic string, timestamp int64) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.ReplicaID = 9, -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = 0, -1, timestamp
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), ts.client(t))
	if err != nil {
		t.Fatal(err)
	}
	return resp.Topics[0].Partitions[0]
}

// histogramCount reads the sample count of a histogram of s's registry.
func histogramCount(t *testing.T, s *Server, name string) uint64 {
	t.Helper()
	return soleMetric(t, s, name).GetHistogram().GetSampleCount()
}

// TestTieredReaderListOffsetsAndMetrics: on a tiered partition whose old
// records are only in the bucket, ListOffsets by timestamp answers the
// first offset whose timestamp reaches it across the remote segments and
// the local log (with the record's timestamp), and a failing bucket makes
// it KAFKA_STORAGE_ERROR; the remote read metrics move: requests, bytes,
// errors, latency, cache hits and misses, and the cache size.
func TestTieredReaderListOffsetsAndMetrics(t *testing.T) {
	store := tier.NewMemStore()
	const topic, n = "tiered-bytime", 400
	ts, p, _ := tieredBroker(t, store, topic, 1, n)
	localStart := p.Log().LogStartOffset()

	// A failing bucket: the fetch at 0 and a by-timestamp lookup in the
	// remote log fail with KAFKA_STORAGE_ERROR.
	store.SetFault(func(op tier.Op, key string) error {
		if op == tier.OpGet {
			return errors.New("injected GET failure")
		}
		return nil
	})
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxWaitMillis, req.MaxBytes, req.SessionEpoch = -1, 100, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic, rt.TopicID = topic, p.TopicID()
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.FetchOffset, rp.LogStartOffset, rp.PartitionMaxBytes = 0, -1, 0, -1, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(testCtx(t), ts.client(t))
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != kerr.KafkaStorageError.Code {
		t.Fatalf("fetch at 0 with a failing bucket: error %d", code)
	}
	if sp := listOffsetsAt(t, ts, topic, 0); sp.ErrorCode != kerr.KafkaStorageError.Code {
		t.Fatalf("ListOffsets by timestamp with a failing bucket: error %d, offset %d", sp.ErrorCode, sp.Offset)
	}
	if v := counterValue(t, ts.Server, "kafka_server_brokertopicmetrics_remotefetcherrors_total"); v != 1 {
		t.Fatalf("remotefetcherrors_total %v after one failed read", v)
	}
	store.SetFault(nil)

	// Every record's offset and timestamp, the old ones read from the bucket.
	cl := ts.client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(0)}}))
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	var tss []int64
	for len(tss) < n && ctx.Err() == nil {
		fs := cl.PollFetches(ctx)
		for _, e := range fs.Errors() {
			t.Fatalf("fetch: %v", e.Err)
		}
		for _, r := range fs.Records() {
			if r.Offset != int64(len(tss)) {
				t.Fatalf("record at offset %d, want %d", r.Offset, len(tss))
			}
			tss = append(tss, r.Timestamp.UnixMilli())
		}
	}
	if len(tss) != n {
		t.Fatalf("consumed %d records, want %d", len(tss), n)
	}
	for _, name := range []string{"kafka_server_brokertopicmetrics_remotefetchrequests_total",
		"kafka_server_brokertopicmetrics_remotefetchbytes_total", "strata_remote_log_reader_cache_misses_total"} {
		if v := counterValue(t, ts.Server, name); v <= 0 {
			t.Errorf("%s = %v after consuming from the bucket", name, v)
		}
	}
	if c := histogramCount(t, ts.Server, "kafka_log_remote_remotelogmanager_remotelogreaderfetchrateandtimems"); c < 2 {
		t.Errorf("remote read latency histogram: %d samples", c)
	}
	if v := strataMetric(t, ts.Server, "strata_remote_log_reader_cache_size_bytes"); v <= 0 {
		t.Errorf("cache size %v after remote reads", v)
	}

	hits := counterValue(t, ts.Server, "strata_remote_log_reader_cache_hits_total")
	first := func(target int64) int64 {
		for i, rts := range tss {
			if rts >= target {
				return int64(i)
			}
		}
		return -1
	}
	targets := []int64{0, tss[0] - 1, tss[0], tss[1], tss[localStart/3], tss[localStart/2] + 1, tss[localStart-1], tss[localStart],
		tss[n/2], tss[n-1], tss[n-1] + 1}
	for _, target := range targets {
		want := first(target)
		sp := listOffsetsAt(t, ts, topic, target)
		wantTs := int64(-1)
		if want >= 0 {
			wantTs = tss[want]
		}
		if sp.ErrorCode != 0 || sp.Offset != want || sp.Timestamp != wantTs {
			t.Errorf("ListOffsets by timestamp %d (local log from %d): offset %d timestamp %d error %d; want %d at %d",
				target, localStart, sp.Offset, sp.Timestamp, sp.ErrorCode, want, wantTs)
		}
		if want >= 0 && want < localStart && sp.LeaderEpoch < 0 {
			t.Errorf("ListOffsets by timestamp %d: leader epoch %d", target, sp.LeaderEpoch)
		}
	}
	if v := counterValue(t, ts.Server, "strata_remote_log_reader_cache_hits_total"); v <= hits {
		t.Errorf("cache hits %v → %v: the remote lookups did not go through the reader", hits, v)
	}
}
