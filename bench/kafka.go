package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// kafkaPOM is bench/kafka/pom.xml: deploy/install-deps.sh kafka fetches
// Apache Kafka's jars with it, and its kafka.version property is the one
// place the version is written.
//
//go:embed kafka/pom.xml
var kafkaPOM string

// KafkaVersion is the Apache Kafka the kafka targets run.
var KafkaVersion = pomProperty(kafkaPOM, "kafka.version")

// pomProperty returns the value of <name>…</name> in a pom, or "".
func pomProperty(pom, name string) string {
	m := regexp.MustCompile(`<` + regexp.QuoteMeta(name) + `>\s*([^<\s]+)\s*</`).FindStringSubmatch(pom)
	if m == nil {
		return ""
	}
	return m[1]
}

// Apache Kafka as a peer: the kafka target is one node in KRaft mode
// (broker and controller in one process), kafka-cluster three such nodes,
// each a JVM the harness starts from the jars deploy/install-deps.sh kafka
// fetched, with Kafka's defaults except what a node on loopback needs.
const (
	TargetKafka        = "kafka"
	TargetKafkaCluster = "kafka-cluster"
	// kafkaClusterNodes is the size of kafka-cluster, as the Strata
	// cluster's.
	kafkaClusterNodes = 3
	// kafkaReadyTimeout bounds formatting and starting the nodes: a JVM
	// takes 10 to 20 s to serve on a busy 2-CPU machine.
	kafkaReadyTimeout = 2 * time.Minute
	// kafkaStopTimeout bounds a node's exit after SIGTERM before SIGKILL.
	kafkaStopTimeout = 20 * time.Second
)

// kafkaJVMOpts are what Kafka's own scripts give a broker:
// kafka-server-start.sh's 1 GiB heap and kafka-run-class.sh's
// KAFKA_JVM_PERFORMANCE_OPTS. slf4j-simple (bench/kafka/pom.xml) writes
// the log, at INFO as the distribution's server.log, to stderr.
var kafkaJVMOpts = []string{
	"-Xmx1g", "-Xms1g",
	"-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:InitiatingHeapOccupancyPercent=35",
	"-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15", "-Djava.awt.headless=true",
	"-Dorg.slf4j.simpleLogger.defaultLogLevel=info", "-Dorg.slf4j.simpleLogger.showDateTime=true",
}

// kafkaToolJVMOpts start the storage tool quickly (it runs for a second).
var kafkaToolJVMOpts = []string{"-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn"}

// kafkaHome is where deploy/install-deps.sh kafka puts Apache Kafka:
// $STRATA_KAFKA, or <user cache dir>/strata/kafka-<version>; the jars are
// in its libs directory.
func kafkaHome() (string, error) {
	if p := os.Getenv("STRATA_KAFKA"); p != "" {
		return p, nil
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find the user cache dir for kafka: %w", err)
	}
	return filepath.Join(cache, "strata", "kafka-"+KafkaVersion), nil
}

// kafkaInstalled reports whether home holds the broker's jar.
func kafkaInstalled(home string) bool {
	_, err := os.Stat(filepath.Join(home, "libs", "kafka_2.13-"+KafkaVersion+".jar"))
	return err == nil
}

// ensureKafka returns Kafka's home, running deploy/install-deps.sh kafka
// (found above the working directory or the executable) when the jars are
// missing; Maven's output goes to progress.
func ensureKafka(ctx context.Context, progress io.Writer) (string, error) {
	home, err := kafkaHome()
	if err != nil {
		return "", err
	}
	if kafkaInstalled(home) {
		return home, nil
	}
	script, err := findRepoFile("deploy/install-deps.sh")
	if err != nil {
		return "", fmt.Errorf("Apache Kafka %s is not in %s, and %v: run deploy/install-deps.sh kafka (make test-deps and make bench do); it fetches the jars with Maven", KafkaVersion, home, err)
	}
	var out bytes.Buffer
	w := io.Writer(&out)
	if progress != nil {
		w = io.MultiWriter(&out, progress)
		fmt.Fprintf(progress, "[kafka] Apache Kafka %s is not in %s: %s kafka\n", KafkaVersion, home, script)
	}
	cmd := exec.CommandContext(ctx, script, "kafka")
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s kafka: %w: %s", script, err, lastLines(out.String(), 8))
	}
	if !kafkaInstalled(home) {
		return "", fmt.Errorf("%s kafka finished, but %s lacks kafka_2.13-%s.jar (is STRATA_KAFKA or XDG_CACHE_HOME different for the script?)", script, filepath.Join(home, "libs"), KafkaVersion)
	}
	return home, nil
}

// kafkaNode is one Kafka JVM.
type kafkaNode struct {
	id            int
	dir           string // config, log and data
	addr, ctrAddr string // PLAINTEXT and CONTROLLER listeners
	cmd           *exec.Cmd
	done          chan struct{}
	out           *tailWriter
}

// kafkaTarget is one or three Kafka nodes the harness started in a fresh
// directory, removed when it stops them.
type kafkaTarget struct {
	dir   string
	nodes []*kafkaNode
}

// startKafka formats storage for n KRaft nodes, starts them and waits
// until every one is a registered broker in the metadata. With certs, the
// nodes serve clients and each other on an SSL listener with them.
func startKafka(ctx context.Context, cfg Config, n int, certs *tlsCerts) (_ *kafkaTarget, err error) {
	home, err := ensureKafka(ctx, cfg.Progress)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "strata-bench-kafka-")
	if err != nil {
		return nil, fmt.Errorf("kafka dir: %w", err)
	}
	k := &kafkaTarget{dir: dir}
	defer func() {
		if err != nil {
			_ = k.Close()
		}
	}()
	addrs, err := freeLoopbackPorts(2 * n)
	if err != nil {
		return nil, err
	}
	var voters []string
	for i := range n {
		nd := &kafkaNode{id: i + 1, dir: filepath.Join(dir, fmt.Sprintf("node-%d", i+1)), addr: addrs[2*i], ctrAddr: addrs[2*i+1], done: make(chan struct{})}
		if err := os.MkdirAll(nd.dir, 0o755); err != nil {
			return nil, err
		}
		k.nodes = append(k.nodes, nd)
		voters = append(voters, fmt.Sprintf("%d@%s", nd.id, nd.ctrAddr))
	}
	for _, nd := range k.nodes {
		props := kafkaProperties(nd, strings.Join(voters, ","), n, certs)
		if err := os.WriteFile(nd.props(), []byte(props), 0o644); err != nil {
			return nil, err
		}
	}
	classpath := filepath.Join(home, "libs", "*") // expanded by java, not a shell
	began := time.Now()
	label := fmt.Sprintf("[%s] Apache Kafka %s", kafkaTargetName(n, certs != nil), KafkaVersion)
	progress := func(what string) {
		if cfg.Progress != nil {
			fmt.Fprintf(cfg.Progress, "\r\x1b[K%s: %s %.0fs", label, what, time.Since(began).Seconds())
		}
	}
	// Format every node's log directory for the same cluster (KRaft's
	// storage tool, as kafka-storage.sh format), in parallel.
	progress("formatting storage")
	clusterID := newKafkaClusterID()
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, nd := range k.nodes {
		wg.Go(func() {
			args := append(append([]string{}, kafkaToolJVMOpts...), "-cp", classpath, "kafka.tools.StorageTool", "format", "-t", clusterID, "-c", nd.props())
			out, err := exec.CommandContext(ctx, "java", args...).CombinedOutput()
			if err != nil {
				errs[i] = fmt.Errorf("kafka node %d: format storage: %w: %s", nd.id, err, lastLines(string(out), 8))
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, nd := range k.nodes {
		if err := nd.start(classpath, cfg.BrokerLog); err != nil {
			return nil, err
		}
	}
	var caPEM []byte
	if certs != nil {
		caPEM = certs.caPEM
	}
	br, err := overTLS(k.Seeds(), caPEM)
	if err != nil {
		return nil, err
	}
	cl, err := br.client(kgo.DialTimeout(time.Second), kgo.RetryTimeout(time.Second))
	if err != nil {
		return nil, fmt.Errorf("kafka: client: %w", err)
	}
	defer cl.Close()
	deadline := time.Now().Add(kafkaReadyTimeout)
	for {
		progress(fmt.Sprintf("starting %d node(s), 1 GiB heap each", n))
		ok, seen := kafkaReady(ctx, cl, n)
		if ok {
			break
		}
		for _, nd := range k.nodes {
			select {
			case <-nd.done:
				return nil, fmt.Errorf("kafka node %d exited before ready (%v): %s", nd.id, nd.cmd.ProcessState, nd.out.tail())
			default:
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("kafka: %d node(s) not ready after %s (%s): node 1: %s", n, kafkaReadyTimeout, seen, k.nodes[0].out.tail())
		}
		if !sleepCtx(ctx, 250*time.Millisecond) {
			return nil, fmt.Errorf("kafka start: %w", ctx.Err())
		}
	}
	progress("ready after")
	if cfg.Progress != nil {
		fmt.Fprintln(cfg.Progress)
	}
	cfg.Logger.Info("kafka ready", "version", KafkaVersion, "nodes", n, "bootstrap", strings.Join(k.Seeds(), ","), "dir", dir, "startup", time.Since(began).Round(time.Millisecond))
	return k, nil
}

// kafkaReady asks every node for the cluster's metadata, directly (not
// through the client's metadata cache), and reports whether each one
// lists n brokers and names a controller, and what each answered.
func kafkaReady(ctx context.Context, cl *kgo.Client, n int) (ok bool, seen string) {
	ok = true
	var answers []string
	for i, b := range cl.SeedBrokers() {
		req := kmsg.NewPtrMetadataRequest()
		req.Topics = []kmsg.MetadataRequestTopic{}
		actx, cancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := b.Request(actx, req)
		cancel()
		addr := fmt.Sprintf("node %d", i+1) // the seeds are the nodes, in order
		if err != nil {
			ok = false
			answers = append(answers, fmt.Sprintf("%s: %v", addr, err))
			continue
		}
		md := resp.(*kmsg.MetadataResponse)
		if len(md.Brokers) != n || md.ControllerID < 0 {
			ok = false
		}
		answers = append(answers, fmt.Sprintf("%s: %d broker(s), controller %d", addr, len(md.Brokers), md.ControllerID))
	}
	return ok, strings.Join(answers, "; ")
}

// kafkaTargetName names the target of n nodes.
func kafkaTargetName(n int, tls bool) string {
	switch {
	case tls:
		return TargetKafkaTLS
	case n == 1:
		return TargetKafka
	}
	return TargetKafkaCluster
}

func (nd *kafkaNode) props() string { return filepath.Join(nd.dir, "server.properties") }

// kafkaProperties is a node's server.properties: Kafka's defaults (no
// fsync per write: log.flush.interval.messages stays unbounded) except
// the listeners, the quorum and the log directory; on one node the
// internal topics get one replica (their default of three cannot be
// placed), and three nodes take min.insync.replicas=2 as the Strata
// cluster of deploy/local/cluster.sh does. With certs the client and
// inter-broker listener is SSL (the controller's stays plaintext).
func kafkaProperties(nd *kafkaNode, voters string, n int, certs *tlsCerts) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by strata bench for Apache Kafka %s: node %d of %d.\n", KafkaVersion, nd.id, n)
	fmt.Fprintf(&b, "process.roles=broker,controller\nnode.id=%d\ncontroller.quorum.voters=%s\n", nd.id, voters)
	listener := "PLAINTEXT"
	if certs != nil {
		listener = "SSL"
	}
	fmt.Fprintf(&b, "listeners=%[1]s://%[2]s,CONTROLLER://%[3]s\nadvertised.listeners=%[1]s://%[2]s\n", listener, nd.addr, nd.ctrAddr)
	fmt.Fprintf(&b, "controller.listener.names=CONTROLLER\ninter.broker.listener.name=%s\n", listener)
	fmt.Fprintf(&b, "listener.security.protocol.map=CONTROLLER:PLAINTEXT,%[1]s:%[1]s\n", listener)
	if certs != nil {
		b.WriteString(certs.kafkaProperties())
	}
	fmt.Fprintf(&b, "log.dirs=%s\n", filepath.Join(nd.dir, "data"))
	if n == 1 {
		b.WriteString("offsets.topic.replication.factor=1\ntransaction.state.log.replication.factor=1\ntransaction.state.log.min.isr=1\n")
		b.WriteString("share.coordinator.state.topic.replication.factor=1\nshare.coordinator.state.topic.min.isr=1\n")
	} else {
		b.WriteString("min.insync.replicas=2\n")
	}
	return b.String()
}

// newKafkaClusterID is a random cluster id as kafka-storage.sh random-uuid
// prints it: 16 bytes in URL-safe base64 without padding.
func newKafkaClusterID() string {
	var id [16]byte
	_, _ = rand.Read(id[:])
	id[0] &= 0x7f // Kafka rejects ids whose base64 starts with '-'
	return base64.RawURLEncoding.EncodeToString(id[:])
}

// freeLoopbackPorts returns n distinct free loopback addresses, holding
// each open until all are found.
func freeLoopbackPorts(n int) ([]string, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var addrs []string
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, nil
}

// start runs the node's JVM (kafka.Kafka server.properties); its output
// goes to node.log in its directory and, prefixed, to brokerLog.
func (nd *kafkaNode) start(classpath string, brokerLog io.Writer) error {
	logf, err := os.Create(filepath.Join(nd.dir, "node.log"))
	if err != nil {
		return err
	}
	nd.out = &tailWriter{w: logf, prefix: fmt.Sprintf("kafka node %d: ", nd.id), also: brokerLog}
	args := append(append([]string{}, kafkaJVMOpts...), "-cp", classpath, "kafka.Kafka", nd.props())
	nd.cmd = exec.Command("java", args...)
	nd.cmd.Dir = nd.dir
	nd.cmd.Stdout, nd.cmd.Stderr = nd.out, nd.out
	nd.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := nd.cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("kafka node %d: start java: %w", nd.id, err)
	}
	go func() {
		_ = nd.cmd.Wait()
		logf.Close()
		close(nd.done)
	}()
	return nil
}

func (k *kafkaTarget) Seeds() []string {
	seeds := make([]string, len(k.nodes))
	for i, nd := range k.nodes {
		seeds[i] = nd.addr
	}
	return seeds
}

// Sample reads the JVM of a one-node target, as the Strata broker's
// process is read: /proc/<pid>/status, stat and io.
func (k *kafkaTarget) Sample() (procSample, bool) {
	if len(k.nodes) != 1 || k.nodes[0].cmd == nil {
		return procSample{}, false
	}
	nd := k.nodes[0]
	select {
	case <-nd.done:
		return procSample{}, false
	default:
	}
	p, err := readProc(nd.cmd.Process.Pid)
	return p, err == nil
}

// Close stops every node (SIGTERM to all at once, SIGKILL after
// kafkaStopTimeout) and removes the directory. How a node exits is not an
// error: the JVM exits with 143 after SIGTERM, and the harness throws
// the data away.
func (k *kafkaTarget) Close() error {
	var started []*kafkaNode
	for _, nd := range k.nodes {
		if nd.cmd != nil {
			started = append(started, nd)
			_ = nd.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	timer := time.NewTimer(kafkaStopTimeout)
	defer timer.Stop()
	for _, nd := range started {
		select {
		case <-nd.done:
		case <-timer.C:
			for _, nd := range started {
				_ = nd.cmd.Process.Kill()
			}
			<-nd.done
		}
	}
	for _, nd := range started {
		<-nd.done
	}
	return os.RemoveAll(k.dir)
}

// tailWriter writes a process's output to w and, line by line with a
// prefix, to also (when set), and keeps its last lines for errors.
type tailWriter struct {
	w      io.Writer
	prefix string
	also   io.Writer

	mu      sync.Mutex
	partial []byte
	lines   []string
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.partial = append(t.partial, p...)
	for {
		i := bytes.IndexByte(t.partial, '\n')
		if i < 0 {
			break
		}
		line := string(t.partial[:i])
		t.partial = t.partial[i+1:]
		t.lines = append(t.lines, line)
		if len(t.lines) > 12 {
			t.lines = t.lines[1:]
		}
		if t.also != nil {
			fmt.Fprintf(t.also, "%s%s\n", t.prefix, line)
		}
	}
	if len(t.partial) > 64<<10 {
		t.partial = t.partial[:0] // a line without end: keep the tail bounded
	}
	return t.w.Write(p)
}

func (t *tailWriter) tail() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.lines) == 0 {
		return "no output"
	}
	return strings.Join(t.lines, " | ")
}
