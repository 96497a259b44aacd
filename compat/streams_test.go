package compat

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/testenv"
)

// The Kafka Streams application of TestStreamsExactlyOnce
// (compat/streams, built by deploy/install-deps.sh compat-streams).
const (
	streamsAppID   = "strata-streams-eos"
	streamsInput   = "streams-in"
	streamsOutput  = "streams-counts"
	streamsKeys    = 40
	streamsThreads = 2
)

// TestStreamsExactlyOnce runs a Kafka Streams application with
// processing.guarantee=exactly_once_v2 (count per key, state store with a
// changelog and no cache, commit every 200 ms) against three brokers on
// ZooKeeper while records keep coming in. Mid-run it kills -9 the broker
// coordinating the app's transactions (and its group, when one does
// both), restarts it, moves the leaders back to it, then kills -9 the
// app and starts it again on the same state directory. A read_committed
// consumer of the output must then see, for each key, the counts 1, 2,
// ... up to exactly the records the key was given: a record processed
// twice (an aborted transaction's writes that leak, a changelog restored
// past the committed offsets, offsets committed apart from their output)
// shows as a count repeated or too high. The same test with
// at_least_once fails that way.
func TestStreamsExactlyOnce(t *testing.T) {
	start := time.Now()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	checkStreamsKafkaVersion(t, root)
	dir := installStreams(t, root)

	zk := testenv.StartZooKeeper(t)
	sets := []string{
		"group.initial.rebalance.delay.ms=0",
		"zookeeper.session.timeout.ms=6000",
		"auto.leader.rebalance.enable=false",
		"offsets.topic.num.partitions=6",
		"transaction.state.log.num.partitions=6",
	}
	brokers := map[int32]*testenv.Broker{}
	var seeds []string
	for id := 1; id <= 3; id++ {
		b := testenv.StartBroker(t, testenv.BrokerOptions{ID: id, Sets: sets, Args: []string{"--zookeeper", zk.Addr() + "/streams"}})
		brokers[int32(id)] = b
		seeds = append(seeds, b.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, seeds))
	waitFor(t, ctx, "three brokers registered", func() error {
		md, err := adm.BrokerMetadata(ctx)
		if err == nil && len(md.Brokers) != 3 {
			err = fmt.Errorf("%d brokers", len(md.Brokers))
		}
		return err
	})
	minISR := "2"
	for _, topic := range []string{streamsInput, streamsOutput} {
		resp, err := adm.CreateTopic(ctx, 6, 3, map[string]*string{"min.insync.replicas": &minISR}, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			t.Fatalf("create %s: %v", topic, err)
		}
	}
	t.Logf("cluster up in %v", time.Since(start).Round(time.Millisecond))

	bootstrap, stateDir := strings.Join(seeds, ","), t.TempDir()
	app := startStreamsApp(t, dir, bootstrap, stateDir)
	app.waitState(t, ctx, "RUNNING")
	t.Logf("streams app running after %v", time.Since(start).Round(time.Millisecond))

	feed := startStreamsFeed(ctx, newClient(t, seeds, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ProducerLinger(2*time.Millisecond)))
	since := func() time.Duration { return time.Since(start).Round(time.Millisecond) }
	time.Sleep(3 * time.Second)
	victim := streamsVictim(t, ctx, adm)
	processedAtKill := app.processed()
	brokers[victim].Kill9()
	t.Logf("killed -9 broker %d at %v (%d records in, the app had processed %d)", victim, since(), feed.records(), processedAtKill)
	time.Sleep(9 * time.Second)
	brokers[victim].Restart()
	t.Logf("restarted broker %d at %v (%d records in, the app had processed %d)", victim, since(), feed.records(), app.processed())
	// Once it has caught up, it leads its partitions again (the
	// coordinators' too): a second move, under the running app.
	internal := []string{streamsInput, streamsOutput, streamsAppID + "-counts-changelog", "__consumer_offsets", "__transaction_state"}
	waitFor(t, ctx, fmt.Sprintf("broker %d back in every ISR", victim), func() error {
		md, err := adm.Metadata(ctx, internal...)
		if err != nil {
			return err
		}
		for _, topic := range internal {
			td, ok := md.Topics[topic]
			if !ok || td.Err != nil || len(td.Partitions) == 0 {
				return fmt.Errorf("%s: %v", topic, td.Err)
			}
			for _, p := range td.Partitions {
				if len(p.ISR) != 3 {
					return fmt.Errorf("%s[%d] ISR %v", topic, p.Partition, p.ISR)
				}
			}
		}
		return nil
	})
	if _, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, nil); err != nil {
		t.Fatalf("preferred leader election: %v", err)
	}
	t.Logf("broker %d back in every ISR and preferred leaders elected at %v", victim, since())
	time.Sleep(2 * time.Second)

	// Then the app is killed -9 mid-transaction and started again on
	// the same state directory (so with the same transactional ids): the
	// new producers fence the old ones, whose open transactions are
	// aborted, and the counts are restored from the changelog.
	if !app.running() {
		t.Fatalf("the streams app exited after the broker was killed: %s", app.tail(40))
	}
	if p := app.processed(); p <= processedAtKill {
		t.Fatalf("the app processed nothing after the broker was killed (%d records)", p)
	}
	if u := app.lines("UNCAUGHT "); len(u) > 0 {
		t.Errorf("stream threads died (and were replaced): %s", strings.Join(u, "; "))
	}
	app.kill9()
	t.Logf("killed -9 the app at %v (%d records in, it had processed %d)", since(), feed.records(), app.processed())
	app = startStreamsApp(t, dir, bootstrap, stateDir)
	app.waitState(t, ctx, "RUNNING")
	t.Logf("the app running again at %v", since())
	time.Sleep(3 * time.Second)
	want, err := feed.stop()
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, n := range want {
		total += n
	}
	t.Logf("%d records in at %v; the app had processed %d", total, since(), app.processed())
	// Read the counts as a read_committed consumer until every key's
	// count is the records it was given, then a little longer: a late
	// duplicate would show as one more count.
	cons := newClient(t, seeds, kgo.ConsumeTopics(streamsOutput), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	got := make([]int64, streamsKeys)
	outputs := 0
	var bad []string
	var settled time.Time
	for {
		pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
		fs := cons.PollFetches(pctx)
		pcancel()
		if ctx.Err() != nil {
			t.Fatalf("counts not exact within the test's time: %s; the app restarted processed %d records, %d were produced; its output:\n%s",
				streamsDiff(got, want), app.processed(), total, app.tail(40))
		}
		fs.EachError(func(topic string, p int32, err error) {
			if err != context.DeadlineExceeded {
				t.Logf("fetch %s[%d]: %v", topic, p, err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			outputs++
			k, err := streamsKeyIndex(string(r.Key))
			if err != nil || len(r.Value) != 8 {
				t.Fatalf("output record %q=%x at %s[%d]@%d: not a key of ours with a long count", r.Key, r.Value, r.Topic, r.Partition, r.Offset)
			}
			n := int64(binary.BigEndian.Uint64(r.Value))
			if n != got[k]+1 || n > want[k] {
				bad = append(bad, fmt.Sprintf("key %s: count %d after %d at %s[%d]@%d", r.Key, n, got[k], r.Topic, r.Partition, r.Offset))
			}
			got[k] = n
		})
		if len(bad) > 0 {
			if len(bad) > 10 {
				bad = append(bad[:10], fmt.Sprintf("and %d more", len(bad)-10))
			}
			t.Fatalf("each committed count must be the one before plus one, up to the records of its key: %s", strings.Join(bad, "; "))
		}
		if streamsDiff(got, want) != "" {
			settled = time.Time{}
			continue
		}
		if settled.IsZero() {
			settled = time.Now()
			t.Logf("counts exact at %v (%d committed output records); watching 3 s more", time.Since(start).Round(time.Millisecond), outputs)
		}
		if time.Since(settled) > 3*time.Second {
			break
		}
	}

	if !app.running() {
		t.Errorf("the streams app exited: %s", app.tail(40))
	}
	if u := app.lines("UNCAUGHT "); len(u) > 0 {
		t.Errorf("stream threads died (and were replaced): %s", strings.Join(u, "; "))
	}
	app.stop(t)
	t.Logf("%d keys, %d records, counts exact; states %s; in %v", streamsKeys, total, strings.Join(app.lines("STATE "), ", "), time.Since(start).Round(time.Millisecond))
}

func streamsKey(k int) string { return fmt.Sprintf("key-%02d", k) }

func streamsKeyIndex(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimPrefix(s, "key-"))
	if err != nil || n < 0 || n >= streamsKeys || s != streamsKey(n) {
		return 0, fmt.Errorf("not a key: %q", s)
	}
	return n, nil
}

// streamsDiff names the keys whose count is not yet (or no longer) the
// wanted one, or returns "".
func streamsDiff(got, want []int64) string {
	var d []string
	for k := range want {
		if got[k] != want[k] {
			d = append(d, fmt.Sprintf("%s %d/%d", streamsKey(k), got[k], want[k]))
		}
	}
	if len(d) > 5 {
		d = append(d[:5], fmt.Sprintf("and %d more", len(d)-5))
	}
	return strings.Join(d, ", ")
}

// streamsVictim returns the broker to kill: the coordinator of one of
// the app's transactional ids (application id, process id, thread),
// preferably one that coordinates its group too.
func streamsVictim(t *testing.T, ctx context.Context, adm *kadm.Client) int32 {
	t.Helper()
	var victim int32 = -1
	waitFor(t, ctx, "the app's transactional ids and group coordinator", func() error {
		g := adm.FindGroupCoordinators(ctx, streamsAppID)
		if err := g.Error(); err != nil {
			return err
		}
		group := g[streamsAppID].NodeID
		ls, err := adm.ListTransactions(ctx, nil, nil)
		if err != nil {
			return err
		}
		var ids []string
		victim = -1
		for _, l := range ls.Sorted() {
			if strings.HasPrefix(l.TxnID, streamsAppID+"-") {
				ids = append(ids, fmt.Sprintf("%s@%d", l.TxnID, l.Coordinator))
				if victim < 0 || l.Coordinator == group {
					victim = l.Coordinator
				}
			}
		}
		if len(ids) < streamsThreads {
			return fmt.Errorf("transactional ids %v", ids)
		}
		t.Logf("the app's transactional ids (@coordinator): %s; its group's coordinator: %d", strings.Join(ids, " "), group)
		return nil
	})
	return victim
}

// streamsFeed produces batches of keyed records to the input topic (an
// idempotent producer, acks=all) until stopped, and counts per key what
// was acknowledged.
type streamsFeed struct {
	stopc chan struct{}
	done  chan error
	mu    sync.Mutex
	want  []int64
	n     int64
}

func startStreamsFeed(ctx context.Context, cl *kgo.Client) *streamsFeed {
	f := &streamsFeed{stopc: make(chan struct{}), done: make(chan error, 1), want: make([]int64, streamsKeys)}
	go func() {
		for b := 0; ; b++ {
			select {
			case <-f.stopc:
				f.done <- nil
				return
			default:
			}
			var rs []*kgo.Record
			for k := 0; k < streamsKeys; k++ {
				if (k*7+b)%5 < 3 {
					rs = append(rs, &kgo.Record{Topic: streamsInput, Key: []byte(streamsKey(k)), Value: []byte(fmt.Sprintf("%d-%d", b, k))})
				}
			}
			if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				f.done <- fmt.Errorf("produce batch %d: %w", b, err)
				return
			}
			f.mu.Lock()
			for _, r := range rs {
				k, _ := streamsKeyIndex(string(r.Key))
				f.want[k]++
			}
			f.n += int64(len(rs))
			f.mu.Unlock()
			time.Sleep(20 * time.Millisecond)
		}
	}()
	return f
}

// records is how many records were acknowledged so far.
func (f *streamsFeed) records() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// stop stops the feed and returns the records per key.
func (f *streamsFeed) stop() ([]int64, error) {
	close(f.stopc)
	err := <-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.want, err
}

// checkStreamsKafkaVersion: the Streams app uses the Kafka version of
// the Java client of the matrix.
func checkStreamsKafkaVersion(t *testing.T, root string) {
	t.Helper()
	re := regexp.MustCompile(`<kafka.version>(.*)</kafka.version>`)
	version := func(path string) string {
		data, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Fatal(err)
		}
		m := re.FindSubmatch(data)
		if m == nil {
			t.Fatalf("%s has no kafka.version", path)
		}
		return string(m[1])
	}
	if a, b := version("compat/streams/pom.xml"), version("compat/java/pom.xml"); a != b {
		t.Errorf("compat/streams/pom.xml kafka.version %s, compat/java/pom.xml %s", a, b)
	}
}

// installStreams builds compat/streams through deploy/install-deps.sh (a
// no-op once it is in the cache) and returns its directory.
func installStreams(t *testing.T, root string) string {
	t.Helper()
	script := filepath.Join(root, "deploy", "install-deps.sh")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, script, "compat-streams").CombinedOutput(); err != nil {
		t.Fatalf("deploy/install-deps.sh compat-streams (needs java and mvn): %v\n%s", err, out)
	}
	out, err := exec.Command(script, "--path", "compat-streams").Output()
	if err != nil {
		t.Fatalf("install-deps.sh --path compat-streams: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// streamsApp is the running Java application: its stdout lines are kept,
// its stderr goes to a file.
type streamsApp struct {
	cmd    *exec.Cmd
	stdin  interface{ Close() error }
	stderr string
	exited chan struct{}

	mu  sync.Mutex
	out []string
	n   int64 // last PROCESSED
}

func startStreamsApp(t *testing.T, dir, bootstrap, stateDir string) *streamsApp {
	t.Helper()
	tmp := t.TempDir()
	a := &streamsApp{stderr: filepath.Join(tmp, "stderr.log"), exited: make(chan struct{})}
	a.cmd = exec.Command("java", "-Xmx384m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-cp", filepath.Join(dir, "classes")+":"+filepath.Join(dir, "libs", "*"),
		"strata.streams.CountApp", bootstrap, streamsInput, streamsOutput, streamsAppID,
		stateDir, strconv.Itoa(streamsThreads))
	a.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	errf, err := os.Create(a.stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer errf.Close()
	a.cmd.Stderr = errf
	stdin, err := a.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	a.stdin = stdin
	stdout, err := a.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := a.cmd.Start(); err != nil {
		t.Fatalf("start the streams app (java): %v", err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			a.mu.Lock()
			a.out = append(a.out, line)
			if v, ok := strings.CutPrefix(line, "PROCESSED "); ok {
				a.n, _ = strconv.ParseInt(v, 10, 64)
			}
			a.mu.Unlock()
		}
		a.cmd.Wait()
		close(a.exited)
	}()
	t.Cleanup(func() {
		a.cmd.Process.Kill()
		<-a.exited
		if t.Failed() {
			t.Logf("streams app output:\n%s", a.tail(60))
		}
	})
	return a
}

// kill9 kills the app with SIGKILL and waits for it to be gone.
func (a *streamsApp) kill9() {
	a.cmd.Process.Kill()
	<-a.exited
}

func (a *streamsApp) running() bool {
	select {
	case <-a.exited:
		return false
	default:
		return true
	}
}

func (a *streamsApp) processed() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.n
}

// lines returns the stdout lines with prefix, without it.
func (a *streamsApp) lines(prefix string) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var ls []string
	for _, l := range a.out {
		if v, ok := strings.CutPrefix(l, prefix); ok {
			ls = append(ls, v)
		}
	}
	return ls
}

// tail is the last n lines of stdout and of stderr.
func (a *streamsApp) tail(n int) string {
	a.mu.Lock()
	out := a.out
	if len(out) > n {
		out = out[len(out)-n:]
	}
	s := strings.Join(out, "\n")
	a.mu.Unlock()
	errs, _ := os.ReadFile(a.stderr)
	return s + "\n--- stderr:\n" + lastLines(string(errs), n)
}

// waitState waits for the app to report state.
func (a *streamsApp) waitState(t *testing.T, ctx context.Context, state string) {
	t.Helper()
	waitFor(t, ctx, "streams state "+state, func() error {
		if !a.running() {
			t.Fatalf("the streams app exited: %s", a.tail(40))
		}
		s := a.lines("STATE ")
		if len(s) > 0 && s[len(s)-1] == state {
			return nil
		}
		return fmt.Errorf("states %v", s)
	})
}

// stop closes the app's stdin, which makes it close Kafka Streams and
// exit 0.
func (a *streamsApp) stop(t *testing.T) {
	t.Helper()
	a.stdin.Close()
	select {
	case <-a.exited:
	case <-time.After(40 * time.Second):
		t.Errorf("the streams app did not stop within 40 s of its stdin closing")
		return
	}
	if st := a.cmd.ProcessState; st == nil || !st.Success() {
		t.Errorf("the streams app stopped with %v: %s", a.cmd.ProcessState, a.tail(20))
	}
}
