package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// tieredEnds returns, for each partition of topic, its log end (-1) and
// last tiered offset (-5) as the leaders answer.
func tieredEnds(ctx context.Context, seeds []string, topic string, parts int32) (end, tiered map[int32]int64, err error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return nil, nil, err
	}
	defer cl.Close()
	end, tiered = map[int32]int64{}, map[int32]int64{}
	for _, ts := range []int64{-1, -5} {
		req := kmsg.NewPtrListOffsetsRequest()
		req.Version = 9
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		for p := range parts {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = p, -1, ts
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := req.RequestWith(rctx, cl)
		cancel()
		if err != nil {
			return nil, nil, err
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return nil, nil, fmt.Errorf("partition %d timestamp %d: %w", p.Partition, ts, err)
				}
				if ts == -1 {
					end[p.Partition] = p.Offset
				} else {
					tiered[p.Partition] = p.Offset
				}
			}
		}
	}
	return end, tiered, nil
}

// TestClusterDrainToZero drains a 3-broker cluster with a tiered topic
// (strata.drain.requested.ms): writes are refused and every partition's
// active segment is rolled and uploaded, until the last tiered offset of
// each partition is its log end. Then every broker stops, its data
// directory is wiped, and all start again on empty disks with ZooKeeper
// kept: they accept writes again (started after the drain), the leaders
// take their log ends from the bucket, every acknowledged record reads
// back, and the idempotent producer that wrote before the drain goes on
// with its sequence numbers (its state came back from the bucket).
func TestClusterDrainToZero(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := startReassignCluster(t, ctx, "drain")
	const topic, parts, valueSize = "drained", 2, 1000
	str := func(s string) *string { return &s }
	adm := c.admin()
	if r, err := adm.CreateTopic(ctx, parts, 2, map[string]*string{
		"remote.storage.enable": str("true"), "segment.bytes": str("65536"),
		"local.retention.bytes": str("262144"), "min.insync.replicas": str("2"),
	}, topic); err != nil || r.Err != nil {
		t.Fatalf("create topic: %v %v", err, r.Err)
	}
	acks := &ackLog{acked: map[int64][]byte{}}
	byPart := map[int32]*ackLog{0: {acked: map[int64][]byte{}}, 1: {acked: map[int64][]byte{}}}
	prod := newClient(t, c.seeds[0], kgo.SeedBrokers(c.seeds...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(3*time.Second),
		kgo.MetadataMinAge(100*time.Millisecond))
	i := 0
	produce := func(n int) error {
		var recs []*kgo.Record
		for range n {
			recs = append(recs, &kgo.Record{Value: moveValue(i, valueSize), Partition: int32(i % parts)})
			i++
		}
		var first error
		for _, r := range prod.ProduceSync(ctx, recs...) {
			if r.Err != nil && first == nil {
				first = r.Err
			}
			if r.Err == nil {
				byPart[r.Record.Partition].add(r.Record, nil)
				acks.add(r.Record, nil)
			}
		}
		return first
	}
	waitFor(t, 30*time.Second, "the topic writable", func() bool { return produce(2) == nil })
	for range 60 {
		if err := produce(20); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}

	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "strata.drain.requested.ms", Value: &now}})
	if err == nil {
		for _, r := range rs {
			err = errors.Join(err, r.Err)
		}
	}
	if err != nil {
		t.Fatalf("drain: %v", err)
	}
	// Producers retry the refusal (NOT_ENOUGH_REPLICAS) until their
	// delivery timeout.
	var refusal error
	waitFor(t, 20*time.Second, "produce refused while draining", func() bool {
		refusal = produce(1)
		return errors.Is(refusal, kerr.NotEnoughReplicas) || errors.Is(refusal, kgo.ErrRecordTimeout)
	})
	t.Logf("produce while draining: %v", refusal)
	for id, b := range c.bs {
		if !strings.Contains(b.Logs(), "draining for scale to zero") {
			t.Fatalf("broker %d did not start draining", id)
		}
	}
	waitState(t, 60*time.Second, "every partition uploaded up to its log end", func() (string, bool) {
		end, tiered, err := tieredEnds(ctx, c.seeds, topic, parts)
		if err != nil {
			return err.Error(), false
		}
		ok := true
		for p := range int32(parts) {
			ok = ok && end[p] > 0 && tiered[p] == end[p]-1
		}
		return fmt.Sprintf("log ends %v, last tiered %v", end, tiered), ok
	})

	// Scale to zero, then back on empty disks.
	for _, b := range c.bs {
		b.Stop()
	}
	for _, b := range c.bs {
		if err := os.RemoveAll(b.DataDir()); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range c.bs {
		b.Restart()
	}
	waitFor(t, 60*time.Second, "the idempotent producer writing again", func() bool { return produce(4) == nil })
	for range 5 {
		if err := produce(20); err != nil {
			t.Fatalf("produce after the restart: %v", err)
		}
	}
	for p, a := range byPart {
		if n := len(a.acked); n == 0 {
			t.Fatalf("partition %d: nothing acknowledged", p)
		}
	}
	for p, a := range byPart {
		verifyPartition(t, ctx, c.seeds, topic, p, a)
	}
	for _, b := range c.bs {
		if !strings.Contains(b.Logs(), "restored leader log end from remote storage") && !strings.Contains(b.Logs(), "rebuilt follower log from remote storage") {
			t.Errorf("broker restarted on an empty disk logged neither a leader restore nor a follower rebuild")
		}
	}
}
