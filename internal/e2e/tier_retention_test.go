package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"strata/index"
	"strata/internal/testenv"
	"strata/tier"
)

// minioBucket lists every object under prefix+"/" with minio-go, an
// independent client, and returns key (relative to prefix) → the object's
// bytes for manifests, nil for the others.
func minioBucket(t *testing.T, mc *minio.Client, bucket, prefix string) map[string][]byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out := map[string][]byte{}
	for o := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix + "/", Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("list the bucket: %v", o.Err)
		}
		key := strings.TrimPrefix(o.Key, prefix+"/")
		out[key] = nil
		if strings.HasSuffix(key, tier.ManifestSuffix) {
			obj, err := mc.GetObject(ctx, bucket, o.Key, minio.GetObjectOptions{})
			if err != nil {
				t.Fatalf("get %s: %v", o.Key, err)
			}
			b, err := io.ReadAll(obj)
			obj.Close()
			if err != nil {
				if minio.ToErrorResponse(err).Code == "NoSuchKey" {
					delete(out, key) // deleted meanwhile
					continue
				}
				t.Fatalf("read %s: %v", o.Key, err)
			}
			out[key] = b
		}
	}
	return out
}

// bucketSegments decodes the manifests of a bucket listing, by start offset.
func bucketSegments(t *testing.T, objs map[string][]byte) []index.SegmentMetadata {
	t.Helper()
	var segs []index.SegmentMetadata
	for k, b := range objs {
		if !strings.HasSuffix(k, tier.ManifestSuffix) {
			continue
		}
		m, err := index.DecodeManifest(b)
		if err != nil {
			t.Fatalf("manifest %s: %v", k, err)
		}
		segs = append(segs, m)
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].StartOffset < segs[j].StartOffset })
	return segs
}

// TestTierRemoteRetentionMinIO runs a broker on a real MinIO tier,
// produces records of which the first part carries timestamps two hours
// old, lets every sealed segment be uploaded, then sets retention.ms to
// one hour. Inspecting the bucket with minio-go it checks that exactly
// the segments whose max timestamp is past retention lost all their
// objects and that every object of the others remains, that the earliest
// offset moved to the first remaining segment, and that a consumer from
// earliest reads every remaining record. Deleting the topic then leaves
// nothing under its prefix.
func TestTierRemoteRetentionMinIO(t *testing.T) {
	m := testenv.StartMinIO(t)
	t.Setenv("AWS_ACCESS_KEY_ID", m.AccessKey())
	t.Setenv("AWS_SECRET_ACCESS_KEY", m.SecretKey())
	const prefix = "e2e-retention"
	b := testenv.StartBroker(t, testenv.BrokerOptions{
		Args: []string{"--tier", "s3://" + m.Bucket() + "/" + prefix, "--s3-endpoint", m.Endpoint(), "--s3-region", testenv.MinIORegion},
		Sets: []string{"remote.log.manager.task.interval.ms=100", "log.retention.check.interval.ms=100"},
	})
	mc := m.Client(t)
	const topic, segBytes, valueSize, n, old = "expiring", 16384, 1000, 400, 150
	str := func(s string) *string { return &s }
	createTopic(t, b.Addr(), topic, 1, map[string]*string{
		"remote.storage.enable": str("true"), "segment.bytes": str(fmt.Sprint(segBytes)),
		"local.retention.bytes": str("40000"), "file.delete.delay.ms": str("0"),
	})
	value := func(i int64) []byte {
		v := fmt.Appendf(nil, "%08d-", i)
		return append(v, bytes.Repeat([]byte{byte('a' + i%26)}, valueSize-len(v))...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	now := time.Now()
	cl := newClient(t, b.Addr(), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
	for i := int64(0); i < n; i += 5 {
		var recs []*kgo.Record
		for j := i; j < i+5; j++ {
			ts := now
			if j < old {
				ts = now.Add(-2 * time.Hour)
			}
			recs = append(recs, &kgo.Record{Topic: topic, Value: value(j), Timestamp: ts})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	adm := kadm.NewClient(newClient(t, b.Addr()))
	tds, err := adm.ListTopics(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	topicPrefix := tier.TopicPrefix(index.UUID(tds[topic].ID))

	// Everything sealed is uploaded: at most the active segment is not.
	perSeg := int64(segBytes/valueSize) + 1
	var before []index.SegmentMetadata
	var objsBefore map[string][]byte
	for deadline := time.Now().Add(60 * time.Second); ; {
		objsBefore = minioBucket(t, mc, m.Bucket(), prefix)
		before = bucketSegments(t, objsBefore)
		if len(before) > 0 && before[len(before)-1].EndOffset >= n-1-perSeg && before[len(before)-1].State == index.CopySegmentFinished {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("uploads did not settle: %d segments in the bucket", len(before))
		}
		time.Sleep(100 * time.Millisecond)
	}
	cutoff := now.Add(-time.Hour).UnixMilli()
	var expired, kept []index.SegmentMetadata
	for _, s := range before {
		if s.StartOffset != 0 && len(expired) == 0 && len(kept) == 0 {
			t.Fatalf("the bucket starts at %d", s.StartOffset)
		}
		if s.MaxTimestamp <= cutoff && len(kept) == 0 {
			expired = append(expired, s)
		} else {
			kept = append(kept, s)
		}
	}
	if len(expired) < 3 || len(kept) < 3 {
		t.Fatalf("%d segments to expire, %d to keep: the test needs several of each", len(expired), len(kept))
	}
	if start, _ := offsets(t, b.Addr(), topic); start[0] != 0 {
		t.Fatalf("earliest %d before retention, want 0", start[0])
	}

	rs, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: str("3600000")}}, topic)
	if err != nil || rs[0].Err != nil {
		t.Fatalf("set retention.ms: %v %v", err, rs)
	}
	firstKept := kept[0].StartOffset
	for deadline := time.Now().Add(60 * time.Second); ; {
		if start, _ := offsets(t, b.Addr(), topic); start[0] == firstKept {
			break
		}
		if time.Now().After(deadline) {
			start, _ := offsets(t, b.Addr(), topic)
			t.Fatalf("earliest offset %d, want %d", start[0], firstKept)
		}
		time.Sleep(100 * time.Millisecond)
	}
	stem := func(s *index.SegmentMetadata) string {
		return strings.TrimSuffix(tier.ManifestKey(s), tier.ManifestSuffix)
	}
	// The earliest offset moves once the last expired segment is
	// DELETE_SEGMENT_STARTED, before its objects go: wait for them.
	var after map[string][]byte
	for deadline := time.Now().Add(30 * time.Second); ; {
		after = minioBucket(t, mc, m.Bucket(), prefix)
		var left []string
		for i := range expired {
			for k := range after {
				if strings.HasPrefix(k, stem(&expired[i])) {
					left = append(left, fmt.Sprintf("%s (segment %d)", k, expired[i].StartOffset))
				}
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("objects of expired segments remain after 30s: %v", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i := range kept {
		for k := range objsBefore {
			if strings.HasPrefix(k, stem(&kept[i])) {
				if _, ok := after[k]; !ok {
					t.Errorf("object %s of kept segment %d is gone", k, kept[i].StartOffset)
				}
			}
		}
	}
	for k := range after {
		if !strings.HasPrefix(k, topicPrefix) && !strings.HasPrefix(k, tier.SnapshotPrefix) {
			t.Errorf("object %s outside the topic's prefix", k)
		}
	}

	_, end := offsets(t, b.Addr(), topic)
	consumer := newClient(t, b.Addr(), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	next := firstKept
	for next < end[0] && ctx.Err() == nil {
		fs := consumer.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume: %v", err)
		}
		for _, r := range fs.Records() {
			if r.Offset != next || !bytes.Equal(r.Value, value(r.Offset)) {
				t.Fatalf("consumed offset %d, want %d with its value", r.Offset, next)
			}
			next++
		}
	}
	if next != n {
		t.Fatalf("consumed up to %d, want %d", next, n)
	}
	t.Logf("%d segments uploaded; %d expired by retention.ms; earliest now %d", len(before), len(expired), firstKept)

	if _, err := adm.DeleteTopic(ctx, topic); err != nil {
		t.Fatal(err)
	}
	// Every object of the topic goes; the cluster's metadata snapshot
	// (tier.SnapshotPrefix) stays, and stops naming the topic.
	for deadline := time.Now().Add(60 * time.Second); ; {
		left := minioBucket(t, mc, m.Bucket(), prefix)
		for k := range left {
			if strings.HasPrefix(k, tier.SnapshotPrefix) && !snapshotNames(t, mc, m.Bucket(), prefix+"/"+k, topic) {
				delete(left, k)
			}
		}
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			keys := slices.Sorted(maps.Keys(left))
			t.Fatalf("%d objects left after the topic's deletion: %v", len(left), keys[:min(len(keys), 5)])
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// snapshotNames reports whether the metadata snapshot object at key
// mentions topic.
func snapshotNames(t *testing.T, mc *minio.Client, bucket, key, topic string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	obj, err := mc.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		if minio.ToErrorResponse(err).Code == "NoSuchKey" {
			return false
		}
		t.Fatalf("read %s: %v", key, err)
	}
	return bytes.Contains(b, []byte(`"`+topic+`"`))
}

// TestTierTopicDeletionCluster deletes a tiered topic of three partitions
// on a three-broker ZooKeeper cluster sharing one MinIO bucket (every
// leader uploads its partitions) and checks with minio-go that nothing is
// left under the topic's prefix, while another tiered topic's objects
// remain.
func TestTierTopicDeletionCluster(t *testing.T) {
	m := testenv.StartMinIO(t)
	t.Setenv("AWS_ACCESS_KEY_ID", m.AccessKey())
	t.Setenv("AWS_SECRET_ACCESS_KEY", m.SecretKey())
	zk := testenv.StartZooKeeper(t)
	const prefix = "e2e-cluster-delete"
	var seeds []string
	for id := 1; id <= 3; id++ {
		b := testenv.StartBroker(t, testenv.BrokerOptions{ID: id,
			Sets: []string{"remote.log.manager.task.interval.ms=100", "log.retention.check.interval.ms=100"},
			Args: []string{"--zookeeper", zk.Addr(), "--tier", "s3://" + m.Bucket() + "/" + prefix, "--s3-endpoint", m.Endpoint(), "--s3-region", testenv.MinIORegion}})
		seeds = append(seeds, b.Addr())
	}
	mc := m.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	adm := kadm.NewClient(newClient(t, seeds[0], kgo.SeedBrokers(seeds...)))
	str := func(s string) *string { return &s }
	cfg := map[string]*string{"remote.storage.enable": str("true"), "segment.bytes": str("8192"), "local.retention.bytes": str("20000")}
	for _, topic := range []string{"doomed", "kept"} {
		if r, err := adm.CreateTopic(ctx, 3, 2, cfg, topic); err != nil || r.Err != nil {
			t.Fatalf("create %s: %v %v", topic, err, r.Err)
		}
	}
	cl := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	for i := range 90 {
		for _, topic := range []string{"doomed", "kept"} {
			rec := &kgo.Record{Topic: topic, Partition: int32(i % 3), Value: bytes.Repeat([]byte{'v'}, 1000)}
			if err := cl.ProduceSync(ctx, rec).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
	}
	tds, err := adm.ListTopics(ctx, "doomed", "kept")
	if err != nil {
		t.Fatal(err)
	}
	doomed, kept := tier.TopicPrefix(index.UUID(tds["doomed"].ID)), tier.TopicPrefix(index.UUID(tds["kept"].ID))
	partsWithManifests := func(objs map[string][]byte, topicPrefix string) int {
		parts := map[string]bool{}
		for k := range objs {
			if strings.HasPrefix(k, topicPrefix) && strings.HasSuffix(k, tier.ManifestSuffix) {
				parts[strings.Split(k, "/")[1]] = true
			}
		}
		return len(parts)
	}
	var objs map[string][]byte
	for deadline := time.Now().Add(60 * time.Second); ; {
		objs = minioBucket(t, mc, m.Bucket(), prefix)
		if partsWithManifests(objs, doomed) == 3 && partsWithManifests(objs, kept) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not every partition uploaded: %d and %d partitions", partsWithManifests(objs, doomed), partsWithManifests(objs, kept))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r, err := adm.DeleteTopic(ctx, "doomed"); err != nil || r.Err != nil {
		t.Fatalf("delete: %v %v", err, r.Err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; {
		left := 0
		objs = minioBucket(t, mc, m.Bucket(), prefix)
		for k := range objs {
			if strings.HasPrefix(k, doomed) {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d objects of the deleted topic left", left)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if partsWithManifests(objs, kept) != 3 {
		t.Fatalf("the other topic lost objects: %d partitions with manifests", partsWithManifests(objs, kept))
	}
}
