package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	minioCreds "github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/internal/testenv"
)

// TestClusterScript runs deploy/local/cluster.sh (what `make cluster` runs)
// up, uses the printed bootstrap address for an RF=3 topic with acks=-1
// writes and reads, checks kcat sees three brokers, checks with minio-go
// that the printed MinIO serves the bucket and that the sealed segments of
// a tiered topic reach it, that each printed metrics address serves
// /metrics and /healthz and that source-ing minio/credentials and
// cluster.env exports their variables. It then kills broker 2 and brings it
// back with start 2, restart 2, stop 2 and up (checkClusterBrokerRestart),
// runs down and checks every process it started is gone, and runs up again
// to check the ports (cluster.env, the printed addresses) and the data are
// the same. Last it adds a fourth broker with start 4, sees it registered,
// and stops it (checkClusterAddBroker).
func TestClusterScript(t *testing.T) {
	kcat := testenv.RequireKcat(t)
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := testenv.BuildStrata(t)
	dir := filepath.Join(t.TempDir(), "cluster")
	script := filepath.Join(root, "deploy", "local", "cluster.sh")
	// A ZooKeeper session of 6 s (Kafka's default is 18 s) bounds how long
	// a broker restarted after kill -9 waits for its old registration to
	// expire.
	const brokerArgs = "BROKER_ARGS=--set remote.log.manager.task.interval.ms=200 --set zookeeper.session.timeout.ms=6000"
	// runEnv runs the script with env added to the test's environment.
	runEnv := func(env []string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, script, args...)
		cmd.Dir = root
		cmd.Env = append(append(os.Environ(), "CLUSTER_DIR="+dir, "STRATA_BIN="+bin, "STOP_TIMEOUT=20"), env...)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return stdout.String(), fmt.Errorf("cluster.sh %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
		}
		return stdout.String(), nil
	}
	run := func(args ...string) (string, error) { return runEnv([]string{brokerArgs}, args...) }
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range []string{"zookeeper", "minio", "broker-1", "broker-2", "broker-3", "broker-4"} {
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
	pids := readClusterPIDs(t, dir)
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
	got := consumeN(t, ctx, seeds, topic, n)
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
	metrics := checkClusterMetrics(t, out, dir)
	checkClusterSourceFiles(t, dir, bootstrap)
	checkClusterBrokerRestart(t, dir, seeds, pids, run, runEnv)

	envBefore, err := os.ReadFile(filepath.Join(dir, "cluster.env"))
	if err != nil {
		t.Fatal(err)
	}
	pids = readClusterPIDs(t, dir)
	if len(pids) != 5 {
		t.Fatalf("want 5 PID files before down, got %v", pids)
	}
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

	// up again: the same ports (cluster.env unchanged, the same printed
	// addresses), and the data written before down is there.
	out, err = run("up")
	if err != nil {
		t.Fatal(err)
	}
	if envAfter, _ := os.ReadFile(filepath.Join(dir, "cluster.env")); !bytes.Equal(envAfter, envBefore) {
		t.Errorf("cluster.env changed across down / up:\nbefore:\n%s\nafter:\n%s", envBefore, envAfter)
	}
	if !strings.Contains(out, "bootstrap: "+bootstrap+"\n") || !strings.Contains(out, "metrics: "+strings.Join(metrics, ", ")+"\n") {
		t.Errorf("up after down printed other addresses (want bootstrap %s, metrics %v):\n%s", bootstrap, metrics, out)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel2()
	if got := consumeN(t, ctx2, seeds, topic, n); !slices.Equal(got, []string{"v0", "v1", "v2", "v3", "v4"}) {
		t.Fatalf("topic %s after down / up: %v", topic, got)
	}

	checkClusterAddBroker(t, dir, seeds, run, runEnv)
}

// checkClusterAddBroker adds broker 4 with `start 4` from an environment
// without BROKER_ARGS, and checks that it runs broker 1's command line with
// its own id, ports (saved in cluster.env, added to BOOTSTRAP) and data
// dir, registers (the cluster's metadata lists it, and it answers with
// four brokers), and that status, stop 4 and start 4 (again, with the
// same command line) know it. A start of something not a broker id adds
// nothing.
func checkClusterAddBroker(t *testing.T, dir string, seeds []string,
	run func(...string) (string, error), runEnv func([]string, ...string) (string, error)) {
	t.Helper()
	if _, err := run("start", "four"); err == nil || !strings.Contains(err.Error(), "cluster: error: broker id four") {
		t.Fatalf("start four: want an error naming the id, got %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "broker-four.cmd")); !os.IsNotExist(err) {
		t.Fatalf("start four left broker-four.cmd: %v", err)
	}

	if _, err := runEnv([]string{"BROKER_ARGS="}, "start", "4"); err != nil {
		t.Fatal(err)
	}
	env := clusterEnv(t, dir)
	port, mport := env["BROKER_4_PORT"], env["METRICS_4_PORT"]
	if port == "" || mport == "" {
		t.Fatalf("cluster.env after start 4 has no BROKER_4_PORT or METRICS_4_PORT: %v", env)
	}
	addr := "127.0.0.1:" + port
	if want := strings.Join(append(slices.Clone(seeds), addr), ","); env["BOOTSTRAP"] != want {
		t.Errorf("BOOTSTRAP after start 4 = %s, want %s", env["BOOTSTRAP"], want)
	}
	if env["STRATA_BOOTSTRAP"] != env["BOOTSTRAP"] {
		t.Errorf("STRATA_BOOTSTRAP after start 4 = %s, want BOOTSTRAP's %s", env["STRATA_BOOTSTRAP"], env["BOOTSTRAP"])
	}
	pids := readClusterPIDs(t, dir)
	pid := pids["broker-4.pid"]
	if !processAlive(pid) {
		t.Fatalf("after start 4: broker-4.pid holds %d, not running", pid)
	}
	cmdline := func(pid int) []string {
		t.Helper()
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00")
	}
	want := cmdline(pids["broker-1.pid"])
	own := map[string]string{"--broker-id": "4", "--listen": addr, "--metrics": "127.0.0.1:" + mport, "--data-dir": filepath.Join(dir, "broker-4")}
	for i := 0; i+1 < len(want); i++ {
		if v, ok := own[want[i]]; ok {
			want[i+1] = v
		}
	}
	got := cmdline(pid)
	if !slices.Equal(got, want) {
		t.Fatalf("broker 4's command line:\n%q\nwant broker 1's with its own id, ports and data dir:\n%q", got, want)
	}
	if !slices.Contains(got, "remote.log.manager.task.interval.ms=200") || !slices.Contains(got, "--tier") {
		t.Fatalf("broker 4 lacks the tier or BROKER_ARGS the others have: %q", got)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// brokers lists the broker ids the metadata from seeds names.
	brokers := func(seeds []string) []int32 {
		cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		mctx, mcancel := context.WithTimeout(ctx, 3*time.Second)
		defer mcancel()
		md, err := kadm.NewClient(cl).BrokerMetadata(mctx)
		if err != nil {
			return nil
		}
		var ids []int32
		for _, b := range md.Brokers {
			ids = append(ids, b.NodeID)
		}
		slices.Sort(ids)
		return ids
	}
	for ids := brokers(seeds); !slices.Equal(ids, []int32{1, 2, 3, 4}); ids = brokers(seeds) {
		if ctx.Err() != nil {
			t.Fatalf("the cluster's metadata lists brokers %v, want 1-4 after start 4", ids)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if ids := brokers([]string{addr}); !slices.Equal(ids, []int32{1, 2, 3, 4}) {
		t.Fatalf("broker 4 (%s) answers metadata with brokers %v, want 1-4", addr, ids)
	}
	st, err := run("status")
	if err != nil || !strings.Contains(st, "broker-4: running (pid "+strconv.Itoa(pid)+")\n") {
		t.Fatalf("status after start 4: %v\n%s", err, st)
	}

	// stop 4: gone from the processes, status and the cluster's metadata;
	// start 4 again runs the same command line, and stop 4 stops it.
	if _, err := run("stop", "4"); err != nil {
		t.Fatal(err)
	}
	if processAlive(pid) {
		t.Fatalf("broker 4 (pid %d) still runs after stop 4", pid)
	}
	if st, err := run("status"); err != nil || !strings.Contains(st, "broker-4: not running\n") {
		t.Fatalf("status after stop 4: %v\n%s", err, st)
	}
	for ids := brokers(seeds); !slices.Equal(ids, []int32{1, 2, 3}); ids = brokers(seeds) {
		if ctx.Err() != nil {
			t.Fatalf("the cluster's metadata lists brokers %v after stop 4, want 1-3", ids)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := run("start", "4"); err != nil {
		t.Fatal(err)
	}
	again := readClusterPIDs(t, dir)["broker-4.pid"]
	if again == pid || !processAlive(again) {
		t.Fatalf("start 4 of the stopped broker 4: pid %d (was %d), running %v", again, pid, processAlive(again))
	}
	if got := cmdline(again); !slices.Equal(got, want) {
		t.Fatalf("start 4 of the stopped broker 4 ran another command line:\n%q\nwant\n%q", got, want)
	}
	if _, err := run("stop", "4"); err != nil {
		t.Fatal(err)
	}
	if processAlive(again) {
		t.Fatalf("broker 4 (pid %d) still runs after the second stop 4", again)
	}
}

// readClusterPIDs reads the script's PID files, by file name.
func readClusterPIDs(t *testing.T, dir string) map[string]int {
	t.Helper()
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
	return pids
}

// consumeN reads n records of topic from its start, with a client that
// knows only seeds, and returns their values.
func consumeN(t *testing.T, ctx context.Context, seeds []string, topic string, n int) []string {
	t.Helper()
	cons, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Close()
	var got []string
	for len(got) < n {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consume %s: got %v before %v", topic, got, err)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Logf("fetch %s: %v", topic, err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// clusterEnv reads cluster.env's KEY=value and export KEY=value lines.
func clusterEnv(t *testing.T, dir string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "cluster.env"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for line := range strings.Lines(string(b)) {
		line = strings.TrimPrefix(strings.TrimSpace(line), "export ")
		if k, v, ok := strings.Cut(line, "="); ok && !strings.HasPrefix(k, "#") {
			env[k] = v
		}
	}
	return env
}

// checkClusterMetrics checks that up printed one metrics address per
// broker, the ones saved in cluster.env, and that each serves /metrics
// (the broker's Prometheus registry) and /healthz. It returns the
// addresses.
func checkClusterMetrics(t *testing.T, out, dir string) []string {
	t.Helper()
	var metrics []string
	for line := range strings.Lines(out) {
		if v, ok := strings.CutPrefix(line, "metrics: "); ok {
			for u := range strings.SplitSeq(strings.TrimSpace(v), ",") {
				metrics = append(metrics, strings.TrimSpace(u))
			}
		}
	}
	if len(metrics) != 3 {
		t.Fatalf("up printed no metrics line of three addresses:\n%s", out)
	}
	env := clusterEnv(t, dir)
	client := &http.Client{Timeout: 10 * time.Second}
	for i, u := range metrics {
		if want := fmt.Sprintf("http://127.0.0.1:%s/metrics", env[fmt.Sprintf("METRICS_%d_PORT", i+1)]); u != want {
			t.Errorf("broker %d's printed metrics address %s, want %s (from cluster.env)", i+1, u, want)
		}
		resp, err := client.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "kafka_server_socket_server_connection_count") {
			t.Fatalf("GET %s: %v, status %d, body:\n%s", u, err, resp.StatusCode, lastLines(string(body), 10))
		}
		health := strings.TrimSuffix(u, "/metrics") + "/healthz"
		resp, err = client.Get(health)
		if err != nil {
			t.Fatalf("GET %s: %v", health, err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(body)) != "ok" {
			t.Fatalf("GET %s: status %d, body %q", health, resp.StatusCode, body)
		}
	}
	return metrics
}

// checkClusterSourceFiles checks that source-ing minio/credentials and
// cluster.env in a shell with an otherwise empty environment exports their
// variables to a child process (env).
func checkClusterSourceFiles(t *testing.T, dir, bootstrap string) {
	t.Helper()
	creds := filepath.Join(dir, "minio", "credentials")
	cmd := exec.Command("bash", "-c", `source "$1" && source "$2" && env`, "bash", creds, filepath.Join(dir, "cluster.env"))
	cmd.Env = []string{"PATH=" + os.Getenv("PATH")}
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bash -c 'source credentials; source cluster.env; env': %v\n%s", err, b)
	}
	got := map[string]string{}
	for line := range strings.Lines(string(b)) {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok {
			got[k] = v
		}
	}
	want := readCredentials(t, dir)
	if want["AWS_ACCESS_KEY_ID"] == "" || want["AWS_SECRET_ACCESS_KEY"] == "" {
		t.Fatalf("credentials file holds %v", want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("after sourcing %s, the child's %s = %q, want %q", creds, k, got[k], v)
		}
	}
	if got["BOOTSTRAP"] != bootstrap || got["STRATA_BOOTSTRAP"] != bootstrap || got["ZOOKEEPER"] == "" || got["METRICS"] == "" || got["S3_ENDPOINT"] == "" {
		t.Errorf("after sourcing cluster.env, the child's BOOTSTRAP=%q and STRATA_BOOTSTRAP=%q (want %q), ZOOKEEPER=%q, METRICS=%q, S3_ENDPOINT=%q",
			got["BOOTSTRAP"], got["STRATA_BOOTSTRAP"], bootstrap, got["ZOOKEEPER"], got["METRICS"], got["S3_ENDPOINT"])
	}
}

// readCredentials reads minio/credentials's `export KEY=value` lines.
func readCredentials(t *testing.T, dir string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "minio", "credentials"))
	if err != nil {
		t.Fatal(err)
	}
	creds := map[string]string{}
	for line := range strings.Lines(string(b)) {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		rest, ok := strings.CutPrefix(line, "export ")
		if !ok {
			t.Errorf("credentials line %q does not export its variable", line)
		}
		if k, v, ok := strings.Cut(rest, "="); ok {
			creds[k] = v
		}
	}
	return creds
}

// checkClusterBrokerRestart kills broker 2 with SIGKILL, checks status
// reports it down, starts it again with `start 2` (from an environment
// without BROKER_ARGS: the command line is the one it had) and checks it
// leads a new partition through which records are written and read with a
// client that knows only broker 2; then `restart 2`, `stop 2`, a `start 2`
// refused because another process holds its saved port, and an up that
// starts broker 2 alone.
func checkClusterBrokerRestart(t *testing.T, dir string, seeds []string, pids map[string]int,
	run func(...string) (string, error), runEnv func([]string, ...string) (string, error)) {
	t.Helper()
	old := pids["broker-2.pid"]
	oldCmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", old))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); processAlive(old); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("broker 2 (pid %d) still runs 10s after SIGKILL", old)
		}
	}
	status := func(want ...string) {
		t.Helper()
		st, err := run("status")
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			if !strings.Contains(st, w+"\n") {
				t.Fatalf("status does not say %q:\n%s", w, st)
			}
		}
	}
	status("broker-2: not running", "broker-1: running (pid "+strconv.Itoa(pids["broker-1.pid"])+")")

	if _, err := runEnv([]string{"BROKER_ARGS="}, "start", "2"); err != nil {
		t.Fatal(err)
	}
	cur := readClusterPIDs(t, dir)["broker-2.pid"]
	if cur == old || !processAlive(cur) {
		t.Fatalf("after start 2: broker-2.pid holds %d (before: %d), alive %v", cur, old, processAlive(cur))
	}
	if newCmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", cur)); !bytes.Equal(newCmd, oldCmd) {
		t.Fatalf("start 2 ran another command line:\nbefore: %q\nafter:  %q", oldCmd, newCmd)
	}
	status("broker-2: running (pid " + strconv.Itoa(cur) + ")")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	only2 := []string{seeds[1]}
	const topic, n = "script-restarted", 5
	cl := newClient(t, seeds[1], kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
	req := kmsg.NewPtrCreateTopicsRequest()
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, []int32{2, 1, 3}
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
	}
	if err != nil {
		t.Fatalf("create %s with replicas [2 1 3]: %v", topic, err)
	}
	var leader int32 = -1
	for leader != 2 {
		md, err := clusterMetadata(ctx, only2, topic)
		if err == nil {
			if p, ok := md.Topics[topic].Partitions[0]; ok {
				leader = p.Leader
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("partition %s/0 led by %d, want broker 2 (the first of its replicas): %v", topic, leader, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for i := range n {
		if err := cl.ProduceSync(ctx, kgo.StringRecord("r"+strconv.Itoa(i))).FirstErr(); err != nil {
			t.Fatalf("produce %d to %s through broker 2: %v", i, topic, err)
		}
	}
	if got := consumeN(t, ctx, only2, topic, n); !slices.Equal(got, []string{"r0", "r1", "r2", "r3", "r4"}) {
		t.Fatalf("consume %s through broker 2: %v", topic, got)
	}

	// restart 2 of a running broker: another process, ready.
	if _, err := run("restart", "2"); err != nil {
		t.Fatal(err)
	}
	prev := cur
	cur = readClusterPIDs(t, dir)["broker-2.pid"]
	if cur == prev || processAlive(prev) || !processAlive(cur) {
		t.Fatalf("restart 2: pid %d before (alive %v), %d after (alive %v)", prev, processAlive(prev), cur, processAlive(cur))
	}
	if md, err := clusterMetadata(ctx, only2, topic); err != nil || len(md.Brokers) != 3 {
		t.Fatalf("metadata through broker 2 after restart 2: %v, brokers %v", err, md.Brokers)
	}

	// stop 2: gone, and status says so.
	if _, err := run("stop", "2"); err != nil {
		t.Fatal(err)
	}
	if processAlive(cur) {
		t.Fatalf("broker 2 (pid %d) still runs after stop 2", cur)
	}
	status("broker-2: not running", "broker-3: running (pid "+strconv.Itoa(pids["broker-3.pid"])+")")

	// Another process on broker 2's saved port: start 2 fails and says why.
	ln, err := net.Listen("tcp", seeds[1])
	if err != nil {
		t.Fatalf("listen on broker 2's port %s: %v", seeds[1], err)
	}
	_, err = run("start", "2")
	ln.Close()
	_, port, _ := net.SplitHostPort(seeds[1])
	if err == nil || !strings.Contains(err.Error(), "cluster: error: port "+port+" of broker 2") {
		t.Fatalf("start 2 with its port taken: want an error naming port %s, got %v", port, err)
	}

	// up with broker 2 down starts it alone.
	if _, err := run("up"); err != nil {
		t.Fatal(err)
	}
	after := readClusterPIDs(t, dir)
	for name, pid := range pids {
		if name != "broker-2.pid" && after[name] != pid {
			t.Errorf("up with broker 2 down restarted %s (pid %d, was %d)", name, after[name], pid)
		}
	}
	if p := after["broker-2.pid"]; p == 0 || p == cur || !processAlive(p) {
		t.Fatalf("up with broker 2 down: broker-2.pid holds %d (alive %v)", p, processAlive(p))
	}
	status("broker-2: running (pid " + strconv.Itoa(after["broker-2.pid"]) + ")")
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
	creds := readCredentials(t, dir)
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
