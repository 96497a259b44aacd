package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"strata/broker/group"
	"strata/internal/testenv"
	"strata/tier"
)

// Scale to zero and back, as docs/scaling.md's "Scale to zero and back" has a
// person do it, with the pauses a person takes: three `strata serve`
// processes on a real ZooKeeper share a MinIO bucket; the reconciliation
// runs every second with a grace of two seconds (10 task intervals), so
// that a test can wait past it.

// scaleCluster is one such cluster.
type scaleCluster struct {
	t      *testing.T
	zk     *testenv.ZooKeeper
	m      *testenv.MinIO
	mc     *minio.Client
	bucket string
	sets   []string
	tier   []string // --tier, --s3-endpoint, --s3-region and their values
	bs     []*testenv.Broker
	seeds  []string
}

const scalePrefix = "strata" // the --tier URL's prefix in the bucket

func startScaleCluster(t *testing.T, chroot string, sets ...string) *scaleCluster {
	m := testenv.SharedMinIO(t)
	bucket := m.NewBucket(t)
	t.Setenv("AWS_ACCESS_KEY_ID", m.AccessKey())
	t.Setenv("AWS_SECRET_ACCESS_KEY", m.SecretKey())
	c := &scaleCluster{t: t, zk: testenv.StartZooKeeper(t), m: m, mc: m.Client(t), bucket: bucket,
		sets: []string{
			"min.insync.replicas=2", "replica.lag.time.max.ms=3000", "zookeeper.session.timeout.ms=3000",
			"remote.log.manager.task.interval.ms=200", "log.retention.check.interval.ms=200",
			"remote.log.reconciliation.interval.ms=1000", "remote.log.reconciliation.grace.ms=1000",
		},
		tier: []string{"--tier", "s3://" + bucket + "/" + scalePrefix, "--s3-endpoint", m.Endpoint(), "--s3-region", testenv.MinIORegion},
	}
	c.sets = append(c.sets, sets...)
	c.start(chroot)
	return c
}

// start starts brokers 1-3 on empty data directories, on ZooKeeper
// namespace chroot.
func (c *scaleCluster) start(chroot string) {
	c.bs, c.seeds = nil, nil
	args := append([]string{"--zookeeper", c.zk.Addr() + "/" + chroot}, c.tier...)
	for id := 1; id <= 3; id++ {
		b := testenv.StartBroker(c.t, testenv.BrokerOptions{ID: id, Sets: c.sets, Args: args})
		c.bs = append(c.bs, b)
		c.seeds = append(c.seeds, b.Addr())
	}
}

func (c *scaleCluster) admin() *kadm.Client {
	return kadm.NewClient(newClient(c.t, c.seeds[0], kgo.SeedBrokers(c.seeds...)))
}

// stopAndWipe stops every broker and removes its data directory.
func (c *scaleCluster) stopAndWipe() {
	for _, b := range c.bs {
		b.Stop()
	}
	for _, b := range c.bs {
		if err := os.RemoveAll(b.DataDir()); err != nil {
			c.t.Fatal(err)
		}
	}
}

// waitLog waits until some broker's log has a line containing s.
func (c *scaleCluster) waitLog(d time.Duration, s string) {
	c.t.Helper()
	waitFor(c.t, d, "a broker to log "+s, func() bool {
		for _, b := range c.bs {
			if strings.Contains(b.Logs(), s) {
				return true
			}
		}
		return false
	})
}

// keys lists the bucket under the tier's prefix with minio-go.
func (c *scaleCluster) keys() map[string]bool {
	out := map[string]bool{}
	for k := range minioBucket(c.t, c.mc, c.bucket, scalePrefix) {
		out[k] = true
	}
	return out
}

// nothingDeleted fails the test if a key of before is not in the bucket.
func (c *scaleCluster) nothingDeleted(before map[string]bool, when string) {
	c.t.Helper()
	now := c.keys()
	var gone []string
	for k := range before {
		if !now[k] {
			gone = append(gone, k)
		}
	}
	if len(gone) > 0 {
		slices.Sort(gone)
		c.t.Fatalf("%s: %d of the %d objects in the bucket after the drain were deleted, among them %v", when, len(gone), len(before), gone[:min(len(gone), 5)])
	}
}

// getJSON reads an object of the bucket with minio-go into v.
func (c *scaleCluster) getJSON(key string, v any) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	obj, err := c.mc.GetObject(ctx, c.bucket, scalePrefix+"/"+key, minio.GetObjectOptions{})
	if err != nil {
		c.t.Fatalf("get %s: %v", key, err)
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		c.t.Fatalf("read %s: %v", key, err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		c.t.Fatalf("%s: %v", key, err)
	}
}

func (c *scaleCluster) clusterSnapshot() tier.ClusterSnapshot {
	var s tier.ClusterSnapshot
	c.getJSON(tier.SnapshotPrefix+"cluster.json", &s)
	return s
}

func (c *scaleCluster) groupSnapshot(g string) tier.GroupOffsetsSnapshot {
	var s tier.GroupOffsetsSnapshot
	c.getJSON(fmt.Sprintf("%sgroup-offsets/%d.json", tier.SnapshotPrefix, group.PartitionFor(g, 50)), &s)
	return s
}

// drain runs strata admin cluster drain and checks that it says the
// group offsets are in the bucket.
func (c *scaleCluster) drain() {
	c.t.Helper()
	res := testenv.RunStrata(c.t, 2*time.Minute, "admin", "--bootstrap", strings.Join(c.seeds, ","), "cluster", "drain")
	if res.ExitCode != 0 {
		c.t.Fatalf("cluster drain: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	c.t.Logf("cluster drain: %s", strings.TrimSpace(res.Stdout))
	if !strings.Contains(res.Stdout, "group offsets: the committed offsets of") || !strings.Contains(res.Stdout, "the brokers may stop") {
		c.t.Fatalf("cluster drain says nothing of the group offsets:\n%s", res.Stdout)
	}
}

// scaleWorkload is what a scale test writes before the drain and checks
// after: records of a tiered topic of two partitions, and the committed
// offsets of two groups (one a consumer group that consumed and left,
// one committed by an admin).
type scaleWorkload struct {
	topic     string
	byPart    map[int32]*ackLog
	committed map[string]kadm.OffsetResponses
}

var scaleGroups = []string{"zero-consumers", "zero-admin"}

func (c *scaleCluster) writeWorkload(ctx context.Context, topic string) *scaleWorkload {
	t := c.t
	const parts, valueSize = 2, 1000
	str := func(s string) *string { return &s }
	adm := c.admin()
	if r, err := adm.CreateTopic(ctx, parts, 2, map[string]*string{
		"remote.storage.enable": str("true"), "segment.bytes": str("65536"),
		"local.retention.bytes": str("262144"), "retention.ms": str("604800000"),
	}, topic); err != nil || r.Err != nil {
		t.Fatalf("create topic: %v %v", err, r.Err)
	}
	w := &scaleWorkload{topic: topic, byPart: map[int32]*ackLog{0: {acked: map[int64][]byte{}}, 1: {acked: map[int64][]byte{}}},
		committed: map[string]kadm.OffsetResponses{}}
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
			w.byPart[r.Record.Partition].add(r.Record, nil)
		}
	}
	// A consumer group member consumes 500 records, commits, and leaves.
	cons := newClient(t, c.seeds[0], kgo.SeedBrokers(c.seeds...), kgo.ConsumerGroup(scaleGroups[0]), kgo.ConsumeTopics(topic),
		kgo.DisableAutoCommit(), kgo.FetchMaxWait(200*time.Millisecond), kgo.SessionTimeout(6*time.Second))
	for n := 0; n < 500; {
		fs := cons.PollRecords(ctx, 500-n)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		n += fs.NumRecords()
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	cons.Close()
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: topic, Partition: 0, At: 100, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: topic, Partition: 1, At: 250, LeaderEpoch: -1, Metadata: "m"})
	if rs, err := adm.CommitOffsets(ctx, scaleGroups[1], offs); err != nil || rs.Error() != nil {
		t.Fatalf("commit offsets: %v %v", err, rs.Error())
	}
	for _, g := range scaleGroups {
		got, err := adm.FetchOffsets(ctx, g)
		if err != nil || got.Error() != nil {
			t.Fatalf("fetch offsets of %s: %v %v", g, err, got.Error())
		}
		if len(got) == 0 {
			t.Fatalf("group %s committed nothing", g)
		}
		w.committed[g] = got
	}
	return w
}

// verify checks every acknowledged record and every committed offset on
// the cluster now running, and that the groups exist.
func (c *scaleCluster) verify(ctx context.Context, w *scaleWorkload) {
	t := c.t
	for p, a := range w.byPart {
		verifyPartition(t, ctx, c.seeds, w.topic, p, a)
	}
	adm := c.admin()
	described, err := adm.DescribeGroups(ctx, scaleGroups...)
	if err != nil {
		t.Fatalf("describe groups: %v", err)
	}
	for _, g := range scaleGroups {
		if d, ok := described[g]; !ok || d.Err != nil || d.State == "Dead" {
			t.Fatalf("group %s: %+v (not found)", g, d)
		}
		got, err := adm.FetchOffsets(ctx, g)
		if err != nil || got.Error() != nil {
			t.Fatalf("fetch offsets of %s: %v %v", g, err, got.Error())
		}
		w.committed[g].Each(func(want kadm.OffsetResponse) {
			o, ok := got.Lookup(want.Topic, want.Partition)
			if !ok || o.At != want.At || o.Metadata != want.Metadata {
				t.Fatalf("group %s, %s-%d: committed offset %+v, want %d %q", g, want.Topic, want.Partition, o.Offset, want.At, want.Metadata)
			}
		})
		t.Logf("group %s: %d committed offsets back", g, len(slices.Collect(maps.Keys(w.committed[g][w.topic]))))
	}
}

// TestScaleToZeroZooKeeperKept is docs/scaling.md's scale to zero and back
// with ZooKeeper kept and every disk wiped: the brokers start on empty
// disks and run for more than a snapshot period (their snapshot writer
// rewrites the group offsets in the bucket) before anyone looks. Every
// acknowledged record and every committed offset is back, the groups
// exist, and nothing in the bucket was deleted (minio-go's listing).
func TestScaleToZeroZooKeeperKept(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := startScaleCluster(t, "kept")
	w := c.writeWorkload(ctx, "zero-kept")
	c.drain()
	c.stopAndWipe()
	before := c.keys()
	snapBefore := c.clusterSnapshot()
	time.Sleep(2 * time.Second) // a person's pause
	restarted := time.Now().UnixMilli()
	for _, b := range c.bs {
		b.Restart()
	}
	// The coordinators loaded the bucket's offsets into the empty
	// __consumer_offsets partitions and wrote them back: each group's
	// offsets object was rewritten after the start, with its offsets.
	for _, g := range scaleGroups {
		waitState(t, 60*time.Second, "the offsets snapshot of "+g+" rewritten by the restarted cluster", func() (string, bool) {
			s := c.groupSnapshot(g)
			return fmt.Sprintf("written %d (start %d), groups %v", s.WrittenMs, restarted, slices.Sorted(maps.Keys(s.Groups))), s.WrittenMs > restarted
		})
		if s := c.groupSnapshot(g); len(s.Groups[g]) == 0 {
			t.Fatalf("the restarted cluster wrote the offsets snapshot of %s without it: %+v", g, s.Groups)
		}
	}
	c.waitLog(time.Second, "loaded committed offsets into an empty __consumer_offsets partition from the bucket's snapshot")
	waitState(t, 30*time.Second, "the cluster snapshot rewritten", func() (string, bool) {
		s := c.clusterSnapshot()
		return fmt.Sprintf("generation %d, written %d", s.Generation, s.WrittenMs), s.WrittenMs > restarted
	})
	c.verify(ctx, w)
	snapAfter := c.clusterSnapshot()
	if snapAfter.ClusterID != snapBefore.ClusterID || snapAfter.Generation <= snapBefore.Generation || len(snapAfter.Topics) != len(snapBefore.Topics) {
		t.Fatalf("cluster snapshot after: %s generation %d, %d topics; before: %s generation %d, %d topics",
			snapAfter.ClusterID, snapAfter.Generation, len(snapAfter.Topics), snapBefore.ClusterID, snapBefore.Generation, len(snapBefore.Topics))
	}
	c.nothingDeleted(before, "after the restart")
}

// TestScaleToZeroDiscard: a fresh cluster finds another cluster's
// snapshot in its bucket, warns, and leaves it and its objects alone
// until strata admin restore --discard hands the bucket over; then the
// new cluster writes its own snapshot at the next generation and the
// reconciliation deletes the discarded topic's objects.
func TestScaleToZeroDiscard(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := startScaleCluster(t, "old")
	w := c.writeWorkload(ctx, "discarded")
	old := c.admin()
	td, err := old.ListTopics(ctx, w.topic)
	if err != nil {
		t.Fatal(err)
	}
	oldID := td[w.topic].ID.String()
	c.drain()
	c.stopAndWipe()
	snapOld := c.clusterSnapshot()

	c.start("new")
	c.waitLog(30*time.Second, "the bucket holds the metadata snapshot of another cluster")
	c.waitLog(30*time.Second, "left the objects of topic ids the cluster does not know")
	if s := c.clusterSnapshot(); s.ClusterID != snapOld.ClusterID || s.Generation != snapOld.Generation {
		t.Fatalf("a fresh cluster wrote over another's snapshot: %s generation %d, was %s generation %d", s.ClusterID, s.Generation, snapOld.ClusterID, snapOld.Generation)
	}
	// The old cluster's snapshot is minutes old at most: refused (its
	// cluster may be running) unless --force.
	res := testenv.RunStrata(t, time.Minute, append([]string{"admin", "--bootstrap", strings.Join(c.seeds, ","), "restore", "--discard"}, c.tier...)...)
	if res.ExitCode == 0 || !strings.Contains(res.Stderr, "refused") {
		t.Fatalf("restore --discard of a recent snapshot: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	res = testenv.RunStrata(t, time.Minute, append([]string{"admin", "--bootstrap", strings.Join(c.seeds, ","), "restore", "--discard", "--force"}, c.tier...)...)
	if res.ExitCode != 0 {
		t.Fatalf("restore --discard: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	t.Logf("restore --discard: %s", strings.TrimSpace(res.Stdout))
	if !strings.Contains(res.Stdout, "discarded the metadata snapshot of cluster "+snapOld.ClusterID) {
		t.Fatalf("restore --discard output: %s", res.Stdout)
	}
	md, err := c.admin().Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitState(t, 30*time.Second, "the new cluster's snapshot", func() (string, bool) {
		s := c.clusterSnapshot()
		return fmt.Sprintf("%s generation %d (discarded %+v)", s.ClusterID, s.Generation, s.Discarded),
			s.ClusterID == md.Cluster && s.Generation > snapOld.Generation+1 && s.Discarded != nil && s.Discarded.ClusterID == snapOld.ClusterID
	})
	waitState(t, 60*time.Second, "the discarded topic's objects deleted", func() (string, bool) {
		n := 0
		for k := range c.keys() {
			if strings.HasPrefix(k, oldID+"/") {
				n++
			}
		}
		return fmt.Sprintf("%d objects left", n), n == 0
	})
}
