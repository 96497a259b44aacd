package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/testenv"
)

// TestClusterRestoreFromBucket scales a tiered cluster to zero with
// strata admin cluster drain, then loses ZooKeeper too (the new brokers
// use another chroot: a ZooKeeper that never saw the cluster) and every
// disk. strata admin restore brings the topics back from the metadata
// snapshot in the bucket, with their ids; every acknowledged record reads
// back, the consumer group's committed offsets are there again, and a new
// idempotent producer writes on.
func TestClusterRestoreFromBucket(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := startReassignCluster(t, ctx, "before")
	const topic, parts, valueSize = "restored", 2, 1000
	str := func(s string) *string { return &s }
	adm := c.admin()
	if r, err := adm.CreateTopic(ctx, parts, 2, map[string]*string{
		"remote.storage.enable": str("true"), "segment.bytes": str("65536"),
		"local.retention.bytes": str("262144"), "retention.ms": str("604800000"),
	}, topic); err != nil || r.Err != nil {
		t.Fatalf("create topic: %v %v", err, r.Err)
	}
	byPart := map[int32]*ackLog{0: {acked: map[int64][]byte{}}, 1: {acked: map[int64][]byte{}}}
	prod := newClient(t, c.seeds[0], kgo.SeedBrokers(c.seeds...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for i := 0; i < 1200; i += 20 {
		var recs []*kgo.Record
		for j := range 20 {
			recs = append(recs, &kgo.Record{Value: moveValue(i+j, valueSize), Partition: int32((i + j) % parts)})
		}
		for _, r := range prod.ProduceSync(ctx, recs...) {
			if r.Err != nil {
				t.Fatalf("produce: %v", r.Err)
			}
			byPart[r.Record.Partition].add(r.Record, nil)
		}
	}
	var committed kadm.Offsets
	committed.Add(kadm.Offset{Topic: topic, Partition: 0, At: 100, LeaderEpoch: -1})
	committed.Add(kadm.Offset{Topic: topic, Partition: 1, At: 250, LeaderEpoch: -1, Metadata: "m"})
	if rs, err := adm.CommitOffsets(ctx, "restore-group", committed); err != nil || rs.Error() != nil {
		t.Fatalf("commit offsets: %v %v", err, rs.Error())
	}
	oldTopics, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	oldID := oldTopics[topic].ID
	time.Sleep(2 * time.Second) // a snapshot round: the group offsets reach the bucket

	res := testenv.RunStrata(t, 2*time.Minute, "admin", "--bootstrap", strings.Join(c.seeds, ","), "cluster", "drain")
	if res.ExitCode != 0 {
		t.Fatalf("cluster drain: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	t.Logf("cluster drain: %s", strings.TrimSpace(res.Stdout))
	for _, b := range c.bs {
		b.Stop()
	}

	// A new cluster: a ZooKeeper namespace that never saw the old one,
	// brokers on empty disks, the same bucket.
	args := []string{"--zookeeper", c.zk.Addr() + "/after"}
	for i := 0; i < len(c.args); i++ {
		if c.args[i] == "--zookeeper" {
			i++
			continue
		}
		args = append(args, c.args[i])
	}
	var seeds []string
	for id := 1; id <= 3; id++ {
		b := testenv.StartBroker(t, testenv.BrokerOptions{ID: id, Sets: c.sets, Args: args})
		seeds = append(seeds, b.Addr())
	}
	restoreArgs := []string{"admin", "--bootstrap", strings.Join(seeds, ","), "restore", "--zookeeper", c.zk.Addr() + "/after"}
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "--tier", "--s3-endpoint", "--s3-region":
			restoreArgs = append(restoreArgs, args[i], args[i+1])
		}
	}
	res = testenv.RunStrata(t, 3*time.Minute, restoreArgs...)
	if res.ExitCode != 0 {
		t.Fatalf("restore: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	t.Logf("restore: %s", strings.TrimSpace(res.Stdout))

	nadm := kadm.NewClient(newClient(t, seeds[0], kgo.SeedBrokers(seeds...)))
	newTopics, err := nadm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	if newTopics[topic].ID != oldID {
		t.Fatalf("restored topic id %v, was %v", newTopics[topic].ID, oldID)
	}
	for p, a := range byPart {
		verifyPartition(t, ctx, seeds, topic, p, a)
	}
	got, err := nadm.FetchOffsets(ctx, "restore-group")
	if err != nil {
		t.Fatalf("fetch offsets: %v", err)
	}
	for _, want := range []struct {
		p  int32
		at int64
	}{{0, 100}, {1, 250}} {
		if o, ok := got.Lookup(topic, want.p); !ok || o.At != want.at {
			t.Fatalf("restored group offset of partition %d: %+v, want %d", want.p, o, want.at)
		}
	}
	nprod := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := range 10 {
		if err := nprod.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "after-%d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce to the restored cluster: %v", err)
		}
	}
}
