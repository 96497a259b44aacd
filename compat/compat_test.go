package compat

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// docPath is the document the suite writes, relative to the module root.
const docPath = "docs/compatibility.md"

// writeEnv, set to 1 (by `make compat`), makes the suite rewrite docPath
// instead of checking it.
const writeEnv = "STRATA_COMPAT_WRITE"

// records is how many records each produce check writes.
const records = 50

// oldLeader and newLeader are the leaders of the cluster's lc-* topics
// before and after a client's leader change.
const oldLeader, newLeader = 1, 2

// env is what every driver gets: the single broker, the cluster, and the
// means to move a cluster topic's leader.
type env struct {
	addr  string   // the single broker
	seeds []string // the two-broker cluster
	root  string   // module root
	sec   *secEnv  // the security broker (security_test.go)
	rec   *recorder
}

// recorder collects outcomes from drivers running in parallel.
type recorder struct {
	mu sync.Mutex
	m  Matrix
}

func (r *recorder) version(client, v string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m.Versions[client] = v
}

func (r *recorder) record(client, feature string, s Status, detail string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.m.Outcomes[cell{client, feature}] = Outcome{s, detail}
}

// check runs one in-process check and records PASS or FAIL with its error.
func (e *env) check(t *testing.T, client, feature string, f func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	start := time.Now()
	err := f(ctx)
	if err != nil {
		e.rec.record(client, feature, Fail, err.Error())
		t.Logf("%s %s: FAIL after %v: %v", client, feature, time.Since(start).Round(time.Millisecond), err)
		return
	}
	e.rec.record(client, feature, Pass, "")
	t.Logf("%s %s: PASS in %v", client, feature, time.Since(start).Round(time.Millisecond))
}

// TestCompat is the client matrix.
func TestCompat(t *testing.T) {
	start := time.Now()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dirs := installDeps(t, root)

	b := testenv.StartBroker(t, testenv.BrokerOptions{Sets: []string{"group.initial.rebalance.delay.ms=0"}})
	e := &env{addr: b.Addr(), root: root, rec: &recorder{m: Matrix{Versions: map[string]string{}, Outcomes: map[cell]Outcome{}}}}
	e.sec = startSecurity(t)
	e.seeds = startCluster(t)
	prepareTxn(t, []string{e.addr})
	t.Logf("brokers up in %v", time.Since(start).Round(time.Millisecond))

	drivers := []struct {
		name string
		run  func(t *testing.T, e *env)
	}{
		{"java", func(t *testing.T, e *env) { runJava(t, e, dirs.java) }},
		{"franz-go", runFranz},
		{"sarama", runSarama},
		{"kafka-go", runKafkaGo},
		{"kcat", runKcat},
		{"confluent-kafka-python", func(t *testing.T, e *env) {
			// Debian's librdkafka 2.0.2 is built without OIDC (libcurl).
			runPython(t, e, "confluent-kafka-python", debianPython, "callback")
		}},
		{"confluent-kafka-pypi", func(t *testing.T, e *env) {
			runPython(t, e, "confluent-kafka-pypi", filepath.Join(dirs.confluentKafka, "bin", "python"), "oidc")
		}},
		{"kafkajs", func(t *testing.T, e *env) { runKafkajs(t, e, dirs.kafkajs) }},
	}
	t.Run("clients", func(t *testing.T) {
		for _, d := range drivers {
			if only := os.Getenv("STRATA_COMPAT_ONLY"); only != "" && only != d.name {
				continue // debugging one client; Problems will list the rest
			}
			t.Run(d.name, func(t *testing.T) {
				t.Parallel()
				d.run(t, e)
			})
		}
	})

	verifyTxn(t, e)
	m := &e.rec.m
	for _, p := range m.Problems() {
		t.Error(p)
	}
	doc := m.Render()
	path := filepath.Join(root, docPath)
	if os.Getenv(writeEnv) == "1" {
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", docPath)
	} else if old, err := os.ReadFile(path); err != nil || string(old) != doc {
		t.Errorf("%s is not what this run found (run `make compat` to regenerate it): %v\n%s", docPath, err, firstDiff(string(old), doc))
	}
	t.Logf("client matrix in %v", time.Since(start).Round(time.Millisecond))
}

// firstDiff shows the first line where two documents differ.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  file: %s\n  run:  %s", i+1, x, y)
		}
	}
	return ""
}

// depDirs are where deploy/install-deps.sh put the clients the suite
// installs itself.
type depDirs struct {
	java, kafkajs, confluentKafka string
}

// installDeps builds the Java program, installs kafkajs and makes the
// virtual environment with PyPI's confluent-kafka through
// deploy/install-deps.sh (a no-op once they are in the cache) and returns
// their directories. Debian's kcat and python3-confluent-kafka come from
// `make test-deps`; a missing one fails its driver.
func installDeps(t *testing.T, root string) depDirs {
	t.Helper()
	script := filepath.Join(root, "deploy", "install-deps.sh")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	names := []string{"compat-java", "compat-kafkajs", "compat-confluent-kafka"}
	if out, err := exec.CommandContext(ctx, script, names...).CombinedOutput(); err != nil {
		t.Fatalf("deploy/install-deps.sh %s (needs java, mvn, node, npm, Debian's python3 with venv): %v\n%s", strings.Join(names, " "), err, out)
	}
	path := func(name string) string {
		out, err := exec.Command(script, "--path", name).Output()
		if err != nil {
			t.Fatalf("install-deps.sh --path %s: %v", name, err)
		}
		return strings.TrimSpace(string(out))
	}
	return depDirs{java: path("compat-java"), kafkajs: path("compat-kafkajs"), confluentKafka: path("compat-confluent-kafka")}
}

// leaderTopics are the cluster topics whose leader moves once, one per
// client that runs the leader-change check, and one for
// kafka-leader-election.
func leaderTopics() []string {
	var ts []string
	for _, c := range clients {
		if !c.Tool {
			if _, na := c.NA["leader-change"]; !na {
				ts = append(ts, "lc-"+c.Key)
			}
		}
	}
	return append(ts, "lc-tools")
}

// startCluster starts ZooKeeper and brokers 1 and 2 and leaves every
// leader topic (one partition, replicas [2 1]) led by broker 1 with both
// in the ISR, so that a preferred leader election moves it to broker 2.
func startCluster(t *testing.T) []string {
	t.Helper()
	zk := testenv.StartZooKeeper(t)
	sets := []string{"auto.leader.rebalance.enable=false", "group.initial.rebalance.delay.ms=0", "zookeeper.session.timeout.ms=6000"}
	var seeds []string
	var bs []*testenv.Broker
	for id := 1; id <= 2; id++ {
		b := testenv.StartBroker(t, testenv.BrokerOptions{ID: id, Sets: sets, Args: []string{"--zookeeper", zk.Addr() + "/compat"}})
		bs = append(bs, b)
		seeds = append(seeds, b.Addr())
	}
	cl := newClient(t, seeds)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	topics := leaderTopics()
	waitFor(t, ctx, "both brokers registered", func() error {
		md, err := kadm.NewClient(cl).BrokerMetadata(ctx)
		if err == nil && len(md.Brokers) != 2 {
			err = fmt.Errorf("%d brokers", len(md.Brokers))
		}
		return err
	})
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 20000
	for _, topic := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
		a := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
		a.Partition, a.Replicas = 0, []int32{newLeader, oldLeader}
		rt.ReplicaAssignment = append(rt.ReplicaAssignment, a)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatalf("create leader topics: %v", err)
	}
	for _, rt := range resp.Topics {
		if err := kerr.ErrorForCode(rt.ErrorCode); err != nil {
			t.Fatalf("create %s: %v", rt.Topic, err)
		}
	}
	leaders := func(leader int32, isr int) func() error {
		return func() error {
			md, err := freshMetadata(ctx, seeds, topics...)
			if err != nil {
				return err
			}
			for _, topic := range topics {
				p, ok := md.Topics[topic].Partitions[0]
				if !ok || p.Err != nil || p.Leader != leader || len(p.ISR) != isr {
					return fmt.Errorf("%s: %+v", topic, p)
				}
			}
			return nil
		}
	}
	waitFor(t, ctx, "broker 2 to lead every leader topic", leaders(newLeader, 2))
	bs[1].Stop() // controlled shutdown: leadership moves to broker 1
	waitFor(t, ctx, "broker 1 to lead every leader topic", leaders(oldLeader, 1))
	bs[1].Restart()
	waitFor(t, ctx, "broker 2 back in every ISR", leaders(oldLeader, 2))
	return seeds
}

// moveLeader moves topic's partition 0 to broker 2 by a preferred leader
// election and waits until the cluster says so.
func (e *env) moveLeader(ctx context.Context, topic string) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.seeds...))
	if err != nil {
		return err
	}
	defer cl.Close()
	res, err := kadm.NewClient(cl).ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {0: {}}})
	if err != nil {
		return fmt.Errorf("elect leaders of %s: %w", topic, err)
	}
	if r := res[topic][0]; r.Err != nil {
		return fmt.Errorf("elect leaders of %s: %w", topic, r.Err)
	}
	// Each broker's metadata must name the new leader (they learn it
	// from the controller, not at the same instant), so that a client
	// asking any of them sees the change.
	leaderBy := func(id int32) int32 {
		req := kmsg.NewPtrMetadataRequest()
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
		resp, err := req.RequestWith(ctx, cl.Broker(int(id)))
		if err != nil || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return -1
		}
		return resp.Topics[0].Partitions[0].Leader
	}
	for ctx.Err() == nil {
		if leaderBy(oldLeader) == newLeader && leaderBy(newLeader) == newLeader {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("%s: leader did not move to broker %d: %w", topic, newLeader, ctx.Err())
}

// freshMetadata asks for metadata with a new client, so that no cache
// hides a change.
func freshMetadata(ctx context.Context, seeds []string, topics ...string) (kadm.Metadata, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return kadm.Metadata{}, err
	}
	defer cl.Close()
	mctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return kadm.NewClient(cl).Metadata(mctx, topics...)
}

func newClient(t testing.TB, seeds []string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(seeds...)}, opts...)...)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// waitFor polls f until it returns nil, failing the test when ctx ends.
func waitFor(t testing.TB, ctx context.Context, what string, f func() error) {
	t.Helper()
	var err error
	for {
		if err = f(); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v (last: %v)", what, ctx.Err(), err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// resultLine is what external drivers print per check.
var resultLine = regexp.MustCompile(`^RESULT ([a-z0-9-]+)\|([a-z0-9-]+)\|(PASS|FAIL)\|(.*)$`)

// runProcess runs an external driver to completion (or timeout), records
// its RESULT and VERSION lines, and answers its MOVE lines.
func runProcess(t *testing.T, e *env, timeout time.Duration, cmd *exec.Cmd) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	cmd.Env = append(cmd.Env, e.sec.environ()...) // the security section's listeners and credentials
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &syncWriter{w: &stderr}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	killed := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			cmd.Process.Kill()
			close(killed)
		case <-killed:
		}
	}()
	done := false
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "VERSION "):
			f := strings.SplitN(line, " ", 3)
			if len(f) == 3 {
				e.rec.version(f[1], f[2])
			}
		case strings.HasPrefix(line, "MOVE "):
			topic := strings.TrimPrefix(line, "MOVE ")
			answer := "MOVED\n"
			if err := e.moveLeader(ctx, topic); err != nil {
				answer = "FAILED " + err.Error() + "\n"
				t.Logf("move leader of %s: %v", topic, err)
			}
			io.WriteString(stdin, answer)
		case strings.HasPrefix(line, "RESULT "):
			m := resultLine.FindStringSubmatch(line)
			if m == nil {
				t.Errorf("malformed line %q", line)
				continue
			}
			e.rec.record(m[1], m[2], Status(m[3]), m[4])
			t.Logf("%s %s: %s %s", m[1], m[2], m[3], m[4])
		case line == "DONE":
			done = true
		default:
			t.Logf("%s", line)
		}
	}
	stdin.Close()
	err = cmd.Wait()
	select {
	case <-killed:
		t.Errorf("%s did not finish within %v", filepath.Base(cmd.Path), timeout)
	default:
		close(killed)
	}
	if err != nil || !done {
		t.Errorf("%s: exit %v, finished: %v; stderr:\n%s", filepath.Base(cmd.Path), err, done, lastLines(stderr.String(), 40))
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// runJava runs every Java check, the client's and the tools', in one JVM.
func runJava(t *testing.T, e *env, dir string) {
	cmd := exec.Command("java", "-Xmx512m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
		// Kafka 4 fetches OAuth tokens only from the URLs allowed here.
		"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls="+e.sec.tokenURL,
		"-cp", filepath.Join(dir, "classes")+":"+filepath.Join(dir, "libs", "*"),
		"strata.compat.Main", e.addr, strings.Join(e.seeds, ","), fmt.Sprint(newLeader))
	runProcess(t, e, 4*time.Minute, cmd)
}

// debianPython is Debian's python, with Debian's python3-confluent-kafka.
const debianPython = "/usr/bin/python3"

// runPython runs the librdkafka checks (scripts/rdkafka.py) as client
// with python: Debian's, or the virtual environment's with PyPI's
// confluent-kafka. oauth is how it gets its OAUTHBEARER token: oidc
// (librdkafka's own login at the token endpoint) or callback (the
// binding's oauth_cb).
func runPython(t *testing.T, e *env, client, python, oauth string) {
	cmd := exec.Command(python, filepath.Join(e.root, "compat", "scripts", "rdkafka.py"),
		client, e.addr, strings.Join(e.seeds, ","), fmt.Sprint(newLeader))
	cmd.Env = append(os.Environ(), "STRATA_COMPAT_SEC_OAUTH="+oauth)
	runProcess(t, e, 3*time.Minute, cmd)
}

// runKafkajs runs the kafkajs checks with node.
func runKafkajs(t *testing.T, e *env, dir string) {
	cmd := exec.Command("node", filepath.Join(e.root, "compat", "scripts", "kafkajs.js"),
		e.addr, strings.Join(e.seeds, ","), fmt.Sprint(newLeader))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	runProcess(t, e, 3*time.Minute, cmd)
}
