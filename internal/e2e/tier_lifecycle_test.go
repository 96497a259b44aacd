package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/lifecycle"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"strata/index"
	"strata/internal/testenv"
	"strata/tier"
)

// bucketKeys lists the keys under prefix with minio-go.
func bucketKeys(t *testing.T, mc *minio.Client, bucket, prefix string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for o := range mc.ListObjects(context.Background(), bucket, minio.ListObjectsOptions{Prefix: prefix, Recursive: true}) {
		if o.Err != nil {
			t.Fatalf("minio-go: list %s: %v", prefix, o.Err)
		}
		out[o.Key] = true
	}
	return out
}

func bucketRules(t *testing.T, mc *minio.Client, bucket string) map[string]lifecycle.Rule {
	t.Helper()
	cfg, err := mc.GetBucketLifecycle(context.Background(), bucket)
	out := map[string]lifecycle.Rule{}
	if err != nil {
		if minio.ToErrorResponse(err).Code == "NoSuchLifecycleConfiguration" {
			return out
		}
		t.Fatalf("minio-go: get lifecycle: %v", err)
	}
	for _, r := range cfg.Rules {
		out[r.ID] = r
	}
	return out
}

func putObject(t *testing.T, mc *minio.Client, bucket, key string, b []byte) {
	t.Helper()
	if _, err := mc.PutObject(context.Background(), bucket, key, bytes.NewReader(b), int64(len(b)), minio.PutObjectOptions{}); err != nil {
		t.Fatalf("minio-go: put %s: %v", key, err)
	}
}

// TestTierLifecycleRulesAndOrphans runs a broker on a MinIO tier with
// lifecycle rules on and a short reconciliation grace: the tiered topic's
// rule appears on the bucket beside an operator's rule, follows a
// retention change and goes with the topic; orphans planted with
// minio-go (objects without a manifest, a topic the cluster never had)
// are deleted while the real segments and keys outside the layout stay.
func TestTierLifecycleRulesAndOrphans(t *testing.T) {
	m := testenv.StartMinIO(t)
	for _, kv := range m.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	mc := m.Client(t)
	bucket, prefix := m.Bucket(), "lc"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	operator := lifecycle.NewConfiguration()
	operator.Rules = []lifecycle.Rule{{ID: "operator-tmp", Status: "Enabled", RuleFilter: lifecycle.Filter{Prefix: "tmp/"}, Expiration: lifecycle.Expiration{Days: 2}}}
	if err := mc.SetBucketLifecycle(ctx, bucket, operator); err != nil {
		t.Fatalf("minio-go: set lifecycle: %v", err)
	}

	b := testenv.StartBroker(t, testenv.BrokerOptions{
		Metrics: "127.0.0.1:0",
		Args:    []string{"--tier", "s3://" + bucket + "/" + prefix, "--s3-endpoint", m.Endpoint(), "--s3-region", testenv.MinIORegion},
		Sets: []string{"remote.log.manager.task.interval.ms=100", "log.retention.check.interval.ms=100",
			"remote.log.storage.lifecycle.rules.enable=true",
			"remote.log.reconciliation.interval.ms=300", "remote.log.reconciliation.grace.ms=1000"},
	})
	const topic = "lifecycled"
	str := func(s string) *string { return &s }
	createTopic(t, b.Addr(), topic, 1, map[string]*string{
		"remote.storage.enable": str("true"), "segment.bytes": str("16384"), "retention.ms": str(fmt.Sprint(3 * 24 * 3600 * 1000)),
	})
	adm := kadm.NewClient(newClient(t, b.Addr()))
	td, err := adm.ListTopics(ctx, topic)
	if err != nil || td[topic].Err != nil {
		t.Fatalf("list topics: %v %v", err, td[topic].Err)
	}
	topicID := index.UUID(td[topic].ID)
	topicPrefix := prefix + "/" + tier.TopicPrefix(topicID)
	ruleID := tier.LifecycleRuleIDPrefix + topicID.String()

	waitRule := func(what string, want int) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			rules := bucketRules(t, mc, bucket)
			r, ok := rules[ruleID]
			op, opOK := rules["operator-tmp"]
			if !opOK || op.RuleFilter.Prefix != "tmp/" || op.Expiration.Days != 2 {
				t.Fatalf("%s: the operator's rule changed: %+v (present %v)", what, op, opOK)
			}
			if (want == 0 && !ok) || (ok && int(r.Expiration.Days) == want && r.RuleFilter.Prefix == topicPrefix) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: rules %+v; want %s with %d days on %s", what, rules, ruleID, want, topicPrefix)
			}
			time.Sleep(100 * time.Millisecond) // polling the bucket
		}
	}
	// 3 days of retention + 1 day of margin.
	waitRule("after the topic's creation", 4)

	cl := newClient(t, b.Addr(), kgo.ProducerBatchCompression(kgo.NoCompression()))
	for i := range 10 {
		var recs []*kgo.Record
		for j := range 10 {
			recs = append(recs, &kgo.Record{Topic: topic, Value: bytes.Repeat([]byte{byte('a' + j)}, 1000), Key: fmt.Appendf(nil, "%d-%d", i, j)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	// Wait for the sealed segments' uploads.
	var real map[string]bool
	for deadline := time.Now().Add(60 * time.Second); ; {
		real = bucketKeys(t, mc, bucket, topicPrefix)
		finished := 0
		for k := range real {
			if !strings.HasSuffix(k, tier.ManifestSuffix) {
				continue
			}
			o, err := mc.GetObject(ctx, bucket, k, minio.GetObjectOptions{})
			if err != nil {
				t.Fatal(err)
			}
			raw, err := io.ReadAll(o)
			o.Close()
			if err != nil {
				continue // deleted meanwhile
			}
			if md, err := index.DecodeManifest(raw); err == nil && md.State == index.CopySegmentFinished {
				finished++
			}
		}
		if finished >= 3 && finished*3 <= len(real) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("uploads did not finish: %v", real)
		}
		time.Sleep(100 * time.Millisecond) // polling the bucket
	}

	// Plant orphans: a segment's objects without a manifest, and a
	// finished segment of a topic the cluster deleted (its deletion
	// recorded in the bucket, tier/deletions.go); and what is not ours to
	// delete: keys outside the layout, and a finished segment of a topic
	// the cluster never had and whose deletion nobody recorded (another
	// cluster's, for all this one knows).
	orphanStem := fmt.Sprintf("%s0/%020d-%s", topicPrefix, 999999, index.NewUUID())
	gone := index.TopicIDPartition{TopicID: index.NewUUID(), Partition: 0}
	gm := index.SegmentMetadata{Partition: gone, SegmentID: index.NewUUID(), Topic: "gone", StartOffset: 0, EndOffset: 9,
		MaxTimestamp: 1, EventTimestamp: 1, BrokerID: 0, SegmentSize: 3, State: index.CopySegmentFinished,
		LeaderEpochs: []index.EpochEntry{{Epoch: 0, StartOffset: 0}}, Objects: []index.ObjectEntry{{Kind: index.ObjectLog, Size: 3}}}
	gmb, err := index.EncodeManifest(&gm)
	if err != nil {
		t.Fatal(err)
	}
	orphans := map[string][]byte{
		orphanStem + ".log":   []byte("abc"),
		orphanStem + ".index": []byte("12345678"),
		prefix + "/" + tier.ObjectKey(&gm, index.ObjectLog): []byte("abc"),
		prefix + "/" + tier.ManifestKey(&gm):                gmb,
	}
	foreign := []string{topicPrefix + "0/README.txt", prefix + "/notes.txt", "tmp/scratch"}
	// A deletion counts only when the cluster that owns the bucket (the
	// one its cluster snapshot names) recorded it.
	owner := snapshotOwner(t, ctx, mc, bucket, prefix)
	putObject(t, mc, bucket, prefix+"/"+tier.SnapshotPrefix+"deleted-topics/"+gone.TopicID.String(),
		[]byte(`{"topic_id":"`+gone.TopicID.String()+`","cluster_id":"`+owner+`","deleted_ms":1}`))
	um := gm.Clone()
	um.Partition.TopicID, um.SegmentID = index.NewUUID(), index.NewUUID()
	umb, err := index.EncodeManifest(&um)
	if err != nil {
		t.Fatal(err)
	}
	putObject(t, mc, bucket, prefix+"/"+tier.ObjectKey(&um, index.ObjectLog), []byte("abc"))
	putObject(t, mc, bucket, prefix+"/"+tier.ManifestKey(&um), umb)
	foreign = append(foreign, prefix+"/"+tier.ObjectKey(&um, index.ObjectLog), prefix+"/"+tier.ManifestKey(&um))
	for k, v := range orphans {
		putObject(t, mc, bucket, k, v)
	}
	for _, k := range foreign {
		putObject(t, mc, bucket, k, []byte("not strata's"))
	}

	for deadline := time.Now().Add(60 * time.Second); ; {
		all := bucketKeys(t, mc, bucket, "")
		left := 0
		for k := range orphans {
			if all[k] {
				left++
			}
		}
		if left == 0 {
			for k := range real {
				if !all[k] {
					t.Fatalf("real segment object %s deleted", k)
				}
			}
			for _, k := range foreign {
				if !all[k] {
					t.Fatalf("key outside the layout %s deleted", k)
				}
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d planted orphans still in the bucket after 60s; broker log:\n%s", left, b.Logs())
		}
		time.Sleep(100 * time.Millisecond) // polling the bucket
	}
	if n := metricValue(t, b, "strata_remote_log_orphan_objects_deleted_total"); n < float64(len(orphans)) {
		t.Fatalf("strata_remote_log_orphan_objects_deleted_total = %v, want >= %d", n, len(orphans))
	}
	if n := metricValue(t, b, "strata_remote_log_unrecognized_objects"); n < 2 {
		t.Fatalf("strata_remote_log_unrecognized_objects = %v, want >= 2", n)
	}

	// Retention changes: the rule follows.
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: str(fmt.Sprint(10 * 24 * 3600 * 1000))}}, topic); err != nil {
		t.Fatalf("alter retention.ms: %v", err)
	}
	waitRule("after retention.ms=10 days", 11)

	// The topic is deleted: its rule goes, and so do its segments.
	if _, err := adm.DeleteTopic(ctx, topic); err != nil {
		t.Fatalf("delete topic: %v", err)
	}
	waitRule("after the topic's deletion", 0)
	for deadline := time.Now().Add(60 * time.Second); ; {
		left := 0
		for k := range bucketKeys(t, mc, bucket, topicPrefix) {
			if real[k] {
				left++
			}
		}
		if left == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d objects of the deleted topic still in the bucket", left)
		}
		time.Sleep(100 * time.Millisecond) // polling the bucket
	}
	if all := bucketKeys(t, mc, bucket, ""); !all[foreign[0]] {
		t.Fatalf("key outside the layout %s deleted with the topic", foreign[0])
	}
	// Who deleted them: the reconciliation of deleted topics, unless the
	// topic's deletion did so itself (informational).
	byReconcile := false
	for deadline := time.Now().Add(5 * time.Second); !byReconcile && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		byReconcile = strings.Contains(b.Logs(), "no longer has\" topic_id="+topicID.String())
	}
	t.Logf("the deleted topic's objects removed by reconciliation: %v", byReconcile)
	for line := range strings.Lines(b.Logs()) {
		if strings.Contains(line, "msg=") && (strings.Contains(line, "lifecycle") || strings.Contains(line, "reconciled") || strings.Contains(line, "no longer has")) {
			t.Log(strings.TrimSpace(line))
		}
	}
}

// snapshotOwner waits for the bucket's cluster snapshot and returns the
// cluster id it names, read with minio-go.
func snapshotOwner(t *testing.T, ctx context.Context, mc *minio.Client, bucket, prefix string) string {
	t.Helper()
	key := prefix + "/" + tier.SnapshotPrefix + "cluster.json"
	for deadline := time.Now().Add(30 * time.Second); ; {
		obj, err := mc.GetObject(ctx, bucket, key, minio.GetObjectOptions{})
		if err == nil {
			var snap struct {
				ClusterID string `json:"cluster_id"`
			}
			err = json.NewDecoder(obj).Decode(&snap)
			obj.Close()
			if err == nil && snap.ClusterID != "" {
				return snap.ClusterID
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no cluster snapshot naming its cluster at %s: %v", key, err)
		}
		time.Sleep(100 * time.Millisecond) // polling the bucket
	}
}
