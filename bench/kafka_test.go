package bench

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"strata/internal/testenv"
)

// TestKafkaVersionOnePlace checks that deploy/install-deps.sh kafka and
// the harness read the version from bench/kafka/pom.xml and agree on
// where Kafka lives.
func TestKafkaVersionOnePlace(t *testing.T) {
	if !regexp.MustCompile(`^\d+\.\d+\.\d+$`).MatchString(KafkaVersion) {
		t.Fatalf("kafka.version in bench/kafka/pom.xml is %q", KafkaVersion)
	}
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("STRATA_KAFKA", "")
	t.Setenv("XDG_CACHE_HOME", "/cache")
	out, err := exec.Command(filepath.Join(root, "deploy", "install-deps.sh"), "--path", "kafka").Output()
	if err != nil {
		t.Fatalf("install-deps.sh --path kafka: %v", err)
	}
	home, err := kafkaHome()
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(string(out)); got != home || home != "/cache/strata/kafka-"+KafkaVersion {
		t.Fatalf("install-deps.sh puts Kafka in %s, the harness looks in %s", got, home)
	}
}

func TestKafkaProperties(t *testing.T) {
	nd := &kafkaNode{id: 2, dir: "/d/node-2", addr: "127.0.0.1:1000", ctrAddr: "127.0.0.1:1001"}
	one := kafkaProperties(nd, "2@127.0.0.1:1001", 1, nil)
	three := kafkaProperties(nd, "1@a:1,2@b:2,3@c:3", 3, nil)
	for _, want := range []string{"process.roles=broker,controller\n", "node.id=2\n", "controller.quorum.voters=2@127.0.0.1:1001\n",
		"listeners=PLAINTEXT://127.0.0.1:1000,CONTROLLER://127.0.0.1:1001\n", "advertised.listeners=PLAINTEXT://127.0.0.1:1000\n",
		"log.dirs=/d/node-2/data\n", "offsets.topic.replication.factor=1\n"} {
		if !strings.Contains(one, want) {
			t.Errorf("one node's properties lack %q:\n%s", want, one)
		}
	}
	if strings.Contains(three, "replication.factor") || !strings.Contains(three, "min.insync.replicas=2\n") || strings.Contains(one, "min.insync") {
		t.Errorf("three nodes:\n%s\none:\n%s", three, one)
	}
	for _, s := range []string{one, three} {
		if strings.Contains(s, "flush") {
			t.Errorf("properties change the flush policy (Kafka's default: no fsync per write):\n%s", s)
		}
	}
	ids := map[string]bool{}
	for range 100 {
		id := newKafkaClusterID()
		if len(id) != 22 || id[0] == '-' || ids[id] {
			t.Fatalf("cluster id %q", id)
		}
		ids[id] = true
	}
}

func TestKafkaDefaultTargets(t *testing.T) {
	for name, want := range map[string][]string{
		"throughput":          {TargetStrata, TargetKafka, TargetKfake},
		"latency":             {TargetStrata, TargetKafka, TargetKfake},
		"catch-up":            {TargetStrata, TargetKafka, TargetKfake},
		"groups":              {TargetStrata, TargetKafka, TargetKfake},
		"replication":         {TargetCluster, TargetKafkaCluster, TargetStrata},
		"replication-latency": {TargetCluster, TargetKafkaCluster, TargetStrata},
		"tls":                 {TargetStrataTLS, TargetKafkaTLS, TargetStrata},
		"tls-latency":         {TargetStrataTLS, TargetKafkaTLS, TargetStrata},
		"failover":            {TargetCluster},
		"tier":                {TargetTier},
		"move":                {TargetMove},
		"txn":                 {TargetStrata, TargetKafka},
		"txn-100":             {TargetStrata, TargetKafka},
		"txn-idempotent":      {TargetStrata, TargetKafka},
		"txn-latency":         {TargetStrata, TargetKafka},
	} {
		c := Config{Workload: Presets[name]}.withDefaults()
		if !slices.Equal(c.Targets, want) {
			t.Errorf("%s: default targets %v, want %v", name, c.Targets, want)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if len(Presets) != 15 {
		t.Errorf("%d presets: give the new one its default targets here", len(Presets))
	}
	bad := Config{Workload: Presets["failover"], Targets: []string{TargetKafkaCluster}}.withDefaults()
	if err := bad.Validate(); err == nil {
		t.Error("faults accepted on kafka-cluster")
	}
}

// syncBuffer is a bytes.Buffer safe for the monitor's goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestKafkaTarget starts the real Apache Kafka target, one node (fetched
// by deploy/install-deps.sh kafka when missing: no Kafka is a failure),
// beside a Strata broker and kfake, runs a small workload named like the
// throughput preset with both read-backs through all three, and checks
// the Kafka figures, the report's Kafka column and ratios, and the goals
// against Kafka. It is the test run's one Kafka start (a JVM takes 10 to
// 20 s to serve on two busy CPUs).
func TestKafkaTarget(t *testing.T) {
	bin := testenv.BuildStrata(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	w := Workload{Name: "throughput", Partitions: 3, RecordSize: 256, Records: 4000, Linger: Duration(5 * time.Millisecond),
		Consumers: 1, ReadBack: true, RawReadBack: true, Warmup: Duration(100 * time.Millisecond),
		SampleInterval: Duration(100 * time.Millisecond)}
	var progress, brokerLog syncBuffer
	began := time.Now()
	rep, err := Run(ctx, Config{Workload: w, StrataBin: bin, Progress: &progress, BrokerLog: &brokerLog})
	t.Logf("3 targets in %s", time.Since(began).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("%v\nkafka log tail: %s", err, lastLines(brokerLog.String(), 20))
	}
	if got := rep.Targets; !slices.Equal(got, []string{TargetStrata, TargetKafka, TargetKfake}) {
		t.Fatalf("targets %v", got)
	}
	for _, res := range rep.Results {
		checkConsistent(t, res, rep.Workload)
		if rb := res.RawReadBack; rb != nil {
			t.Logf("%s: %.1fs, produce %.1f MB/s p99 %.2f ms, raw read-back %.0f records/s", res.Target, res.ElapsedSeconds,
				res.Produce.MBPerSec, res.ProduceLatency.P99Ms, rb.RecordsPerSec)
		}
	}
	for _, target := range []string{TargetStrata, TargetKafka} {
		res, _ := rep.Result(target)
		b := res.Broker
		if b == nil || b.PeakRSSBytes <= 0 || b.CPUSeconds <= 0 || b.PhaseCPU[phaseRun] <= 0 || len(b.Samples) == 0 {
			t.Fatalf("%s: broker resources %+v", target, b)
		}
		served, ok1 := cpuPerGBServed(res)
		produced, ok2 := cpuPerGBProduced(res)
		if !ok1 || !ok2 || served < 0 || produced <= 0 || res.RunBytes < 4000*256 {
			t.Errorf("%s: CPU s per GB served %g (%v), produced %g (%v), run bytes %d", target, served, ok1, produced, ok2, res.RunBytes)
		}
		t.Logf("%s: peak RSS %d MB, CPU %.2fs (run %.2fs), %.2f CPU s/GB produced, %.2f CPU s/GB served", target,
			b.PeakRSSBytes>>20, b.CPUSeconds, b.PhaseCPU[phaseRun], produced, served)
	}
	if k, _ := rep.Result(TargetKafka); k.Broker.PeakRSSBytes < 64<<20 {
		t.Errorf("Kafka's JVM peaked at %d MB: is that the JVM?", k.Broker.PeakRSSBytes>>20)
	}
	if !strings.Contains(progress.String(), "[kafka] Apache Kafka "+KafkaVersion+": ready after") {
		t.Errorf("no Kafka start progress in:\n%s", progress.String())
	}
	if !strings.Contains(brokerLog.String(), "kafka node 1: ") {
		t.Errorf("the broker log lacks Kafka's lines")
	}

	s := &Suite{Machine: ReadMachine(), Reports: []*Report{rep}, Goals: EvaluateGoals(Goals, []*Report{rep})}
	md := s.Markdown("")
	num := `[0-9.]+`
	for _, re := range []string{
		`\| metric \| strata \| kafka \| kfake \| strata/kafka \| strata/kfake \|\n\|---(\|---:){5}\|`,
		`\| produce MB/s \| ` + num + ` \| ` + num + ` \| ` + num + ` \| ` + num + `x \| ` + num + `x \|`,
		`\| raw read-back records/s \(fastest pass\) \| ` + num + ` \| ` + num + ` \| ` + num + ` \| ` + num + `x \| ` + num + `x \|`,
		`\| broker peak RSS MB \| ` + num + ` \| ` + num + ` \| — \| ` + num + `x \| — \|`,
		`\| broker CPU s per GB served \(raw read-back\) \| ` + num + ` \| ` + num + ` \| — \| ` + num + `x \| — \|`,
		`\| broker CPU s per GB produced \(run\) \| ` + num + ` \| ` + num + ` \| — \| ` + num + `x \| — \|`,
		`Apache Kafka ` + regexp.QuoteMeta(KafkaVersion) + ` \(` + "`org.apache.kafka:kafka_2.13`",
	} {
		if !regexp.MustCompile(re).MatchString(md) {
			t.Errorf("report lacks %s:\n%s", re, md)
		}
	}
	for _, g := range s.Goals {
		for _, kg := range Issue17Goals {
			if g.Name == kg.Name && kg.Workload == "throughput" && !g.Evaluated {
				t.Errorf("goal %q not evaluated: %s", g.Name, g.Note)
			}
		}
	}
	// The Kafka directory is gone with the target.
	if m, _ := filepath.Glob(filepath.Join(os.TempDir(), "strata-bench-kafka-*")); len(m) > 0 {
		for _, d := range m {
			if fi, err := os.Stat(d); err == nil && fi.ModTime().After(began) {
				t.Errorf("%s left behind", d)
			}
		}
	}
}
