package helm

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"

	"strata/internal/testenv"
)

// TestBrokersRunChartConfig starts two real brokers the way the chart's
// pods do, on ZooKeeper and a MinIO bucket: the rack init container's
// script writes each one's server.properties from the ConfigMap (here
// with a stand-in for the API server's Node), and each runs with the
// StatefulSet's arguments, with its pod index for $(POD_INDEX). Only
// what cannot work outside a cluster is swapped: the addresses (loopback
// and free ports for 0.0.0.0 and the pod DNS names), the ZooKeeper and
// bucket addresses, and the data directory. Both register under their
// pod index with their node's zone as rack and answer the probes'
// /healthz and /readyz on the metrics port. Then the scaling procedure of docs/kubernetes.md runs
// with the command lines of the chart's Jobs: decommission broker 1, stop
// it (SIGTERM, done well within the pod's grace period), start pod 1 anew
// and rebalance; no record is lost.
func TestBrokersRunChartConfig(t *testing.T) {
	m := render(t, "testdata/default.yaml")
	sts, c := brokers(t, m)
	cm := m.get(t, "ConfigMap", fullname).(*corev1.ConfigMap)
	grace := time.Duration(*sts.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second

	zk := testenv.StartZooKeeper(t)
	mio := testenv.SharedMinIO(t)
	for _, kv := range mio.Env() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	bucket := mio.NewBucket(t)
	chroot := "/strata"
	if v, _ := flagValue(c.Args, "zookeeper"); !strings.HasSuffix(v, chroot) {
		t.Fatalf("--zookeeper %q: the test expects the chroot %s of testdata/default.yaml", v, chroot)
	}

	zones := []string{"eu-west-1a", "eu-west-1b"}
	// startPod starts the broker of pod index i, as a new pod with a new
	// volume: the rack init script, then strata serve.
	startPod := func(i int) *testenv.Broker {
		labels := fmt.Sprintf(`"kubernetes.io/hostname":"node-%d","topology.kubernetes.io/zone":%q`, i, zones[i])
		props, log, err := runRackScript(t, cm, labels, true)
		if err != nil {
			t.Fatalf("rack script: %v\n%s", err, log)
		}
		var args []string
		for _, a := range c.Args {
			name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
			switch name {
			case "listen", "advertise", "data-dir":
				continue // testenv's loopback address and directory
			case "zookeeper":
				a = "--zookeeper=" + zk.Addr() + chroot
			case "tier":
				a = "--tier=s3://" + bucket + "/cluster"
				args = append(args, "--s3-endpoint="+mio.Endpoint(), "--s3-region="+testenv.MinIORegion)
			case "metrics":
				a = "--metrics=127.0.0.1:0"
			case "config":
				a = "--config=" + props
			}
			args = append(args, strings.ReplaceAll(a, "$(POD_INDEX)", strconv.Itoa(i)))
		}
		return testenv.StartBroker(t, testenv.BrokerOptions{ID: 99, Args: args})
	}
	started := []*testenv.Broker{startPod(0), startPod(1)}

	cl, err := kgo.NewClient(kgo.SeedBrokers(started[0].Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		md, err := adm.Metadata(ctx)
		cancel()
		got := map[int32]string{}
		if err == nil {
			for _, b := range md.Brokers {
				if b.Rack != nil {
					got[b.NodeID] = *b.Rack
				} else {
					got[b.NodeID] = ""
				}
			}
		}
		if err == nil && len(got) == 2 && got[0] == zones[0] && got[1] == zones[1] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("brokers and racks in metadata: %v (err %v), want 0:%s 1:%s", got, err, zones[0], zones[1])
		}
		time.Sleep(200 * time.Millisecond)
	}

	for i, b := range started {
		addr := b.MetricsAddr()
		if addr == "" {
			t.Fatalf("broker %d logged no metrics address", i)
		}
		// The paths of the pod's probes, on the metrics port.
		for _, path := range []string{c.LivenessProbe.HTTPGet.Path, c.ReadinessProbe.HTTPGet.Path, c.StartupProbe.HTTPGet.Path} {
			waitOK(t, fmt.Sprintf("broker %d", i), "http://"+addr+path)
		}
	}

	// Scaling in, as docs/kubernetes.md has it: the chart's decommission
	// Job for broker 1 (replicas going from 2 to 1), its command line run
	// as is but for the bootstrap address, then the pod's SIGTERM.
	const topic = "orders"
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	on, one := "true", "1"
	// Replication factor 1, so that one broker can hold every partition.
	r, err := adm.CreateTopic(ctx, 4, 1, map[string]*string{"remote.storage.enable": &on, "min.insync.replicas": &one}, topic)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		t.Fatalf("create %s: %v", topic, err)
	}
	const records = 200
	produce(t, cl, topic, 0, records)
	runJob(t, "replicas: 1\nscaling: {job: decommission, brokerId: 1}\n", started[0].Addr(), "may be stopped")
	if held := replicasOn(t, adm, topic); held[1] != 0 || held[0] != 4 {
		t.Errorf("after the decommission Job, replicas per broker %v, want all 4 on broker 0", held)
	}
	began := time.Now()
	started[1].Stop() // SIGTERM, as the kubelet sends: a controlled shutdown
	if d := time.Since(began); d > grace/2 {
		t.Errorf("broker 1 took %v to stop on SIGTERM; the pod's grace period is %v", d, grace)
	}

	// Scaling out: pod 1 comes back with a new volume, and the chart's
	// rebalance Job gives it its share.
	started[1] = startPod(1)
	produce(t, cl, topic, records, records)
	runJob(t, "replicas: 2\nscaling: {job: rebalance}\n", started[0].Addr(), "")
	if held := replicasOn(t, adm, topic); held[0] != 2 || held[1] != 2 {
		t.Errorf("after the rebalance Job, replicas per broker %v, want 2 on each", held)
	}
	if n := consumeAll(t, started[1].Addr(), topic, 2*records); n != 2*records {
		t.Errorf("consumed %d records after scaling in and out, want %d", n, 2*records)
	}
}

// waitOK waits up to 30 seconds for url to answer 200.
func waitOK(t *testing.T, what, url string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s: %v", what, url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runJob renders the chart's scaling Job with testdata/default.yaml plus
// extra values, and runs its command line with the real strata binary
// against bootstrap; it must succeed and, if want is set, say want.
func runJob(t *testing.T, extra, bootstrap, want string) {
	t.Helper()
	m := render(t, valuesWith(t, "testdata/default.yaml", extra))
	var job *batchv1.Job
	for _, o := range m.objs {
		if j, ok := o.(*batchv1.Job); ok {
			job = j
		}
	}
	if job == nil {
		t.Fatalf("no Job rendered with %q", extra)
	}
	cmd := slices.Clone(job.Spec.Template.Spec.Containers[0].Command)
	for i, a := range cmd {
		if strings.HasPrefix(a, "--bootstrap=") {
			cmd[i] = "--bootstrap=" + bootstrap
		}
	}
	res := exec.Command(testenv.BuildStrata(t), cmd[1:]...)
	out, err := res.CombinedOutput()
	if err != nil {
		t.Fatalf("strata %q: %v\n%s", cmd[1:], err, out)
	}
	if !strings.Contains(string(out), want) {
		t.Errorf("strata %q said\n%s\nwant %q", cmd[1:], out, want)
	}
}

// valuesWith writes a values file of base followed by extra.
func valuesWith(t *testing.T, base, extra string) string {
	t.Helper()
	b, err := os.ReadFile(base)
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(f, append(b, extra...), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// replicasOn counts the replicas of topic's partitions on each broker.
func replicasOn(t *testing.T, adm *kadm.Client, topic string) map[int32]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	held := map[int32]int{}
	for _, p := range md.Topics[topic].Partitions {
		for _, r := range p.Replicas {
			held[r]++
		}
	}
	return held
}

func produce(t *testing.T, cl *kgo.Client, topic string, from, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for i := from; i < from+n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(i))})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// consumeAll reads topic from the start through a client bootstrapped
// at addr until it has seen want distinct records or 30 s have passed,
// and returns how many it saw.
func consumeAll(t *testing.T, addr, topic string, want int) int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	seen := map[string]bool{}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(seen) < want && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { seen[string(r.Value)] = true })
	}
	return len(seen)
}

// runRackScript runs the chart's rack init script as the init container
// would, with a stand-in for curl that answers the API server's Node JSON
// with these labels (a JSON object's members), and returns the path of the
// server.properties it writes and its output.
func runRackScript(t *testing.T, cm *corev1.ConfigMap, labels string, required bool) (props, log string, err error) {
	t.Helper()
	dir := t.TempDir()
	etc, out, bin := filepath.Join(dir, "etc"), filepath.Join(dir, "out"), filepath.Join(dir, "bin")
	for _, d := range []string{etc, out, bin} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// As the API server writes it: compact, annotations and managed
	// fields (which name the label key too) after the labels.
	node := `{"kind":"Node","apiVersion":"v1","metadata":{"name":"node-a","labels":{` + labels +
		`},"annotations":{"note":"x"},"managedFields":[{"fieldsV1":{"f:metadata":{"f:labels":{"f:topology.kubernetes.io/zone":{}}}}}]}}`
	files := map[string]string{
		filepath.Join(bin, "curl"):              "#!/bin/sh\ncat \"$NODE_FILE\"\n",
		filepath.Join(dir, "node.json"):         node,
		filepath.Join(dir, "token"):             "t",
		filepath.Join(etc, "server.properties"): cm.Data["server.properties"],
	}
	for p, s := range files {
		if err := os.WriteFile(p, []byte(s), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script := strings.NewReplacer("/etc/strata/", etc+"/", "/var/run/strata/", out+"/", "/var/run/secrets/strata-rack", dir).Replace(cm.Data["rack.sh"])
	cmd := exec.Command("sh", "-c", script)
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin", "NODE_FILE=" + filepath.Join(dir, "node.json"),
		"NODE_NAME=node-a", "RACK_LABEL=topology.kubernetes.io/zone", "RACK_REQUIRED=" + strconv.FormatBool(required)}
	b, err := cmd.CombinedOutput()
	return filepath.Join(out, "server.properties"), string(b), err
}
