package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/testenv"
	"strata/tier"
)

// TestTierBucketSecurity runs a broker against a bucket the way a
// careful operator would: MinIO serving https with a private CA (given
// with --s3-ca-bundle), SSE-KMS with a key id (MinIO's static KMS key),
// and credentials from a named profile of a shared credentials file, with
// none in the environment. Segments, manifests and the metadata snapshot
// reach the bucket, every object there is stored encrypted with the key
// (checked with minio-go), the records read back from the tier, and the
// broker's log never shows the secret key. A broker given an endpoint
// with credentials in it refuses to start, without printing them.
func TestTierBucketSecurity(t *testing.T) {
	const kmsKey, prefix = "strata-e2e-key", "secure"
	m := testenv.StartMinIOWith(t, testenv.MinIOOptions{KMSKey: kmsKey, TLS: true})
	dir := t.TempDir()
	creds := fmt.Sprintf("[strata]\naws_access_key_id = %s\naws_secret_access_key = %s\n", m.AccessKey(), m.SecretKey())
	if err := os.WriteFile(filepath.Join(dir, "credentials"), []byte(creds), 0o600); err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{
		"AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "AWS_SESSION_TOKEN": "", "AWS_CA_BUNDLE": "",
		"AWS_PROFILE": "strata", "AWS_SHARED_CREDENTIALS_FILE": filepath.Join(dir, "credentials"),
		"AWS_CONFIG_FILE": filepath.Join(dir, "config"), "AWS_EC2_METADATA_DISABLED": "true",
		"AWS_REGION": testenv.MinIORegion,
	} {
		t.Setenv(k, v)
	}
	b := testenv.StartBroker(t, testenv.BrokerOptions{
		Args: []string{"--tier", "s3://" + m.Bucket() + "/" + prefix, "--s3-endpoint", m.Endpoint(),
			"--s3-ca-bundle", m.CAFile(), "--s3-sse", "aws:kms", "--s3-sse-kms-key-id", kmsKey},
		Sets: []string{"remote.log.manager.task.interval.ms=50", "log.retention.check.interval.ms=50"},
	})
	const topic = "secure"
	str := func(s string) *string { return &s }
	createTopic(t, b.Addr(), topic, 1, map[string]*string{
		"remote.storage.enable": str("true"),
		"segment.bytes":         str("16384"),
		"local.retention.bytes": str("1"),
	})
	cl := newClient(t, b.Addr(), kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const n = 200
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprintf("%04d-%s", i, strings.Repeat("x", 500)))}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}

	// Wait until segments are in the tier and gone locally, and the
	// cluster snapshot is written.
	mc := m.Client(t)
	var keys []string
	for deadline := time.Now().Add(time.Minute); ; {
		keys = keys[:0]
		manifests, snapshot := 0, false
		for o := range mc.ListObjects(ctx, m.Bucket(), minio.ListObjectsOptions{Prefix: prefix + "/", Recursive: true}) {
			if o.Err != nil {
				t.Fatal(o.Err)
			}
			keys = append(keys, o.Key)
			if strings.HasSuffix(o.Key, tier.ManifestSuffix) {
				manifests++
			}
			if strings.HasPrefix(o.Key, prefix+"/"+tier.SnapshotPrefix) {
				snapshot = true
			}
		}
		if manifests >= 1 && snapshot && listOffset(t, b.Addr(), topic, -4) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("within a minute: bucket holds %v (%d manifests, snapshot %v), local log start %d; want a manifest, the snapshot and a local log start above 0",
				keys, manifests, snapshot, listOffset(t, b.Addr(), topic, -4))
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, k := range keys {
		st, err := mc.StatObject(ctx, m.Bucket(), k, minio.StatObjectOptions{})
		if err != nil {
			continue // deleted meanwhile
		}
		if sse := st.Metadata.Get("X-Amz-Server-Side-Encryption"); sse != "aws:kms" {
			t.Errorf("%s: X-Amz-Server-Side-Encryption %q, want aws:kms", k, sse)
		}
		if kid := st.Metadata.Get("X-Amz-Server-Side-Encryption-Aws-Kms-Key-Id"); !strings.HasSuffix(kid, kmsKey) {
			t.Errorf("%s: KMS key id %q, want %s", k, kid, kmsKey)
		}
	}

	// Everything reads back, the start from the tier.
	_, end := offsets(t, b.Addr(), topic)
	recs := consumeAll(t, b.Addr(), topic, end)
	if len(recs) != n {
		t.Fatalf("read back %d records, want %d", len(recs), n)
	}
	for i, r := range recs {
		if !strings.HasPrefix(string(r.Value), fmt.Sprintf("%04d-", i)) {
			t.Fatalf("record %d: %.10q", i, r.Value)
		}
	}
	if strings.Contains(b.Logs(), m.SecretKey()) {
		t.Error("the broker's log shows the secret key")
	}
	// Reads from the tier (ranged GETs MinIO answers without a checksum)
	// leave the log to the broker: the AWS SDK's own logger, which the
	// default configuration points at stderr, writes nothing.
	if i := strings.Index(b.Logs(), "SDK "); i >= 0 {
		t.Errorf("the AWS SDK logs to the broker's stderr: %.120q", b.Logs()[i:])
	}

	// An endpoint with credentials in it: refused in one line that does
	// not show them.
	ep := strings.Replace(m.Endpoint(), "://", "://"+m.AccessKey()+":"+m.SecretKey()+"@", 1)
	res := testenv.RunStrata(t, 30*time.Second, "serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(),
		"--tier", "s3://"+m.Bucket()+"/"+prefix, "--s3-endpoint", ep)
	reason := strings.TrimSpace(res.Stderr)
	if res.ExitCode == 0 || strings.Contains(reason, "\n") || !strings.Contains(reason, "--s3-endpoint") {
		t.Errorf("endpoint with credentials: exit %d, stderr %q; want non-zero and one line naming --s3-endpoint", res.ExitCode, reason)
	}
	if strings.Contains(res.Stderr+res.Stdout, m.SecretKey()) || strings.Contains(res.Stderr+res.Stdout, m.AccessKey()) {
		t.Errorf("the refusal shows the credentials: %q", res.Stderr)
	}
}
