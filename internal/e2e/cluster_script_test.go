package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	minioCreds "github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/testenv"
)

// TestClusterScript runs deploy/local/cluster.sh (what `make cluster` runs)
// up, uses the printed bootstrap address for an RF=3 topic with acks=-1
// writes and reads, checks kcat sees three brokers, checks with minio-go
// that the printed MinIO serves the bucket and that the sealed segments of
// a tiered topic reach it, then runs down and checks every process it
// started is gone.
func TestClusterScript(t *testing.T) {
	kcat := testenv.RequireKcat(t)
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := testenv.BuildStrata(t)
	dir := filepath.Join(t.TempDir(), "cluster")
	script := filepath.Join(root, "deploy", "local", "cluster.sh")
	run := func(args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, script, args...)
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CLUSTER_DIR="+dir, "STRATA_BIN="+bin, "STOP_TIMEOUT=20",
			"BROKER_ARGS=--set remote.log.manager.task.interval.ms=200")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return stdout.String(), fmt.Errorf("cluster.sh %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
		}
		return stdout.String(), nil
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range []string{"zookeeper", "minio", "broker-1", "broker-2", "broker-3"} {
				b, _ := os.ReadFile(filepath.Join(dir, name+".log"))
				t.Logf("%s log, last lines:\n%s", name, lastLines(string(b), 20))
			}
		}
		if _, err := run("down", "--purge"); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})

	out, err := run("up")
	if err != nil {
		t.Fatal(err)
	}
	var bootstrap, minioURL, tierURL string
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "bootstrap: "); ok {
			bootstrap = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "minio: "); ok {
			minioURL = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(line, "tier: "); ok {
			tierURL, _, _ = strings.Cut(strings.TrimSpace(v), " ")
		}
	}
	seeds := strings.Split(bootstrap, ",")
	if bootstrap == "" || len(seeds) != 3 {
		t.Fatalf("up printed no bootstrap address of three brokers:\n%s", out)
	}
	pids := map[string]int{}
	files, _ := filepath.Glob(filepath.Join(dir, "pids", "*.pid"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		pids[filepath.Base(f)] = pid
	}
	if len(pids) != 5 {
		t.Fatalf("want 5 PID files (zookeeper, minio and three brokers), got %v", pids)
	}
	if again, err := run("up"); err != nil || !strings.Contains(again, "bootstrap: "+bootstrap) {
		t.Fatalf("second up: %v\n%s", err, again)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	const topic, n = "script", 5
	adm := kadm.NewClient(newClient(t, seeds[0], kgo.SeedBrokers(seeds...)))
	if r, err := adm.CreateTopic(ctx, 1, 3, nil, topic); err != nil || r.Err != nil {
		t.Fatalf("create topic: %v %v %s", err, r.Err, r.ErrMessage)
	}
	prod := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
	for i := range n {
		if err := prod.ProduceSync(ctx, kgo.StringRecord("v"+strconv.Itoa(i))).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	cons := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var got []string
	for len(got) < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume: got %v before %v", got, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	for i, v := range got {
		if want := "v" + strconv.Itoa(i); v != want {
			t.Fatalf("record %d = %q, want %q (all: %v)", i, v, want, got)
		}
	}

	kc, err := exec.CommandContext(ctx, kcat, "-L", "-b", bootstrap, "-t", topic).CombinedOutput()
	if err != nil {
		t.Fatalf("kcat -L: %v\n%s", err, kc)
	}
	if !strings.Contains(string(kc), " 3 brokers:") {
		t.Fatalf("kcat -L does not list 3 brokers:\n%s", kc)
	}

	checkClusterTier(t, dir, minioURL, tierURL, seeds)

	if _, err := run("down"); err != nil {
		t.Fatal(err)
	}
	for name, pid := range pids {
		if processAlive(pid) {
			t.Errorf("%s (pid %d) still running after down", name, pid)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(dir, "pids", "*.pid")); len(left) != 0 {
		t.Errorf("PID files left after down: %v", left)
	}
	if _, err := os.Stat(filepath.Join(dir, "broker-1.log")); err != nil {
		t.Errorf("down without --purge removed the logs: %v", err)
	}
}

// checkClusterTier checks, with minio-go rather than the brokers' own S3
// client, that the cluster's MinIO serves the tier's bucket, then that the
// sealed segments of a tiered RF=3 topic appear in it under the tier's
// prefix (a .log object and a manifest per segment).
func checkClusterTier(t *testing.T, dir, minioURL, tierURL string, seeds []string) {
	t.Helper()
	bucket, prefix, ok := strings.Cut(strings.TrimPrefix(tierURL, "s3://"), "/")
	host, hasScheme := strings.CutPrefix(minioURL, "http://")
	if !strings.HasPrefix(tierURL, "s3://") || !ok || !hasScheme {
		t.Fatalf("up printed no MinIO address and s3:// tier (minio %q, tier %q)", minioURL, tierURL)
	}
	creds := map[string]string{}
	b, err := os.ReadFile(filepath.Join(dir, "minio", "credentials"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			creds[k] = v
		}
	}
	mc, err := minio.New(host, &minio.Options{
		Creds:  minioCreds.NewStaticV4(creds["AWS_ACCESS_KEY_ID"], creds["AWS_SECRET_ACCESS_KEY"], ""),
		Region: testenv.MinIORegion,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if ok, err := mc.BucketExists(ctx, bucket); err != nil || !ok {
		t.Fatalf("bucket %s on %s: exists=%v, err %v", bucket, minioURL, ok, err)
	}

	const topic, segBytes, n = "script-tiered", 16384, 200
	adm := kadm.NewClient(newClient(t, seeds[0], kgo.SeedBrokers(seeds...)))
	cfg := map[string]*string{"remote.storage.enable": kadm.StringPtr("true"), "segment.bytes": kadm.StringPtr(strconv.Itoa(segBytes))}
	if r, err := adm.CreateTopic(ctx, 1, 3, cfg, topic); err != nil || r.Err != nil {
		t.Fatalf("create tiered topic: %v %v %s", err, r.Err, r.ErrMessage)
	}
	prod := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic(topic), kgo.ProducerBatchCompression(kgo.NoCompression()))
	value := strings.Repeat("x", 1000)
	for i := range n {
		// One record per batch, so that segments roll every ~16 records.
		if err := prod.ProduceSync(ctx, kgo.StringRecord(value)).FirstErr(); err != nil {
			t.Fatalf("produce tiered %d: %v", i, err)
		}
	}
	var logs, manifests int
	for {
		logs, manifests = 0, 0
		for obj := range mc.ListObjects(ctx, bucket, minio.ListObjectsOptions{Prefix: prefix + "/", Recursive: true}) {
			if obj.Err != nil {
				t.Fatalf("list %s/%s: %v", bucket, prefix, obj.Err)
			}
			switch {
			case strings.HasSuffix(obj.Key, ".log"):
				logs++
			case strings.HasSuffix(obj.Key, ".manifest"):
				manifests++
			}
		}
		// 200 KB in 16 KB segments: at least 10 sealed ones.
		if logs >= 10 && manifests >= 10 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("bucket %s/%s holds %d .log and %d manifest objects, want at least 10 each", bucket, prefix, logs, manifests)
		case <-time.After(200 * time.Millisecond): // polling the bucket
		}
	}
	t.Logf("bucket %s/%s: %d segment .log objects, %d manifests", bucket, prefix, logs, manifests)
}

// processAlive reports whether pid names a process that is not a zombie.
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
