package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Write writes report.json, report.md, bench.txt (benchstat lines) and, per
// workload, <name>-latency.png, <name>-throughput.png, <name>-lag.png and,
// when rebalances were measured, <name>-rebalance.png into dir.
func (s *Suite) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bench output dir: %w", err)
	}
	js, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	files := map[string][]byte{
		"report.json": append(js, '\n'),
		"report.md":   []byte(s.Markdown("")),
		"bench.txt":   []byte(s.Benchstat()),
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	for _, rep := range s.Reports {
		for _, pf := range plotFiles {
			if pf.applies != nil && !pf.applies(rep) {
				continue
			}
			if err := pf.draw(rep, filepath.Join(dir, rep.Label()+pf.suffix)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Markdown renders the suite. Plot links are relative to plotDir ("" for
// links beside the markdown file).
func (s *Suite) Markdown(plotDir string) string {
	var b strings.Builder
	b.WriteString("# Strata benchmark\n\n")
	m := s.Machine
	fmt.Fprintf(&b, "- machine: %d CPUs, %s, %.1f GiB memory, %s/%s, %s\n", m.NumCPU, m.CPUModel, float64(m.MemTotalBytes)/(1<<30), m.OS, m.Arch, m.GoVersion)
	commit := m.Commit
	if commit == "" {
		commit = "(none)"
	}
	fmt.Fprintf(&b, "- commit: %s\n", commit)
	if m.LoadAvg != "" {
		fmt.Fprintf(&b, "- load average at start: %s\n", m.LoadAvg)
	}

	if s.Command != "" {
		fmt.Fprintf(&b, "- command: `%s`\n", s.Command)
	}
	if len(s.Reports) > 0 {
		fmt.Fprintf(&b, "- started: %s\n", s.Reports[0].Started.Format(time.RFC3339))
	}
	for _, rep := range s.Reports {
		if busy(rep.LoadAvg) {
			b.WriteString("\n**Warning:** the load average exceeded the number of CPUs during this run: other work competed with the benchmark and the figures are noisy. Rerun on a quiet machine (and with --count) before drawing conclusions.\n")
			break
		}
	}
	if len(s.Goals) > 0 {
		b.WriteString("\n## Goals\n\n| goal | want | measured | result |\n|---|---|---|---|\n")
		for _, g := range s.Goals {
			measured, result := "—", g.Verdict()
			if g.Evaluated {
				measured = fmt.Sprintf("%.2f%s", g.Measured, g.Unit)
				if g.Runs > 1 {
					measured += fmt.Sprintf(" (runs %.2f–%.2f%s)", g.Min, g.Max, g.Unit)
				}
			}
			if g.Note != "" {
				result += " (" + g.Note + ")"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", g.Name, g.Want, measured, result)
		}
		b.WriteString(goalLegend)
	}
	if s.history != "" {
		fmt.Fprintf(&b, "\nEarlier measurements, and what was learnt from them: [%s](%s).\n", s.history, s.history)
	}
	b.WriteString(s.notes())
	for _, rep := range s.Reports {
		b.WriteString("\n")
		b.WriteString(rep.Markdown(plotDir))
	}
	return b.String()
}

// goalLegend says how the goals table judges a result (see [GoalResult]).
const goalLegend = "\nA goal comparing two targets is judged on the median of their ratio over the runs (--count); the runs' range is beside it. " +
	"A median that misses is INCONCLUSIVE when at least one run met the goal: the goal lies within the run-to-run noise measured, " +
	"so rerun on a quiet machine or with a higher --count. It is FAIL when no run met it, or when there was only one run " +
	"(\"1 run, noise unknown\"). A goal on one target is a bound that every run must hold: the worst run decides; " +
	"but one that compares two figures of the same run (a history size against another) is judged as a ratio, on the median.\n"

// notes explains the figures that need it, for the workloads in the suite.
func (s *Suite) notes() string {
	var raw, fault, repl, kafka, cpu, tlsOn bool
	for _, rep := range s.Reports {
		raw = raw || rep.Workload.RawReadBack
		fault = fault || len(rep.Workload.Faults) > 0
		repl = repl || rep.Workload.ReplicationFactor > 1 && len(rep.Workload.Faults) == 0 && rep.Workload.Move == nil
		for _, res := range rep.Results {
			kafka = kafka || res.Target == TargetKafka || res.Target == TargetKafkaCluster || res.Target == TargetKafkaTLS
			tlsOn = tlsOn || tlsTarget(res.Target)
			cpu = cpu || res.Broker != nil
		}
	}
	if !raw && !fault && !repl && !kafka && !tlsOn {
		return ""
	}
	var b strings.Builder
	b.WriteString("\n## What the figures measure\n\n")
	if kafka {
		fmt.Fprintf(&b, "- **kafka, kafka-cluster**: Apache Kafka %s (`org.apache.kafka:kafka_2.13` from Maven Central, fetched once by "+
			"`deploy/install-deps.sh kafka`) on this machine's Java, started by the harness: one node (kafka) or three (kafka-cluster), "+
			"each a broker and KRaft controller in one JVM with kafka-server-start.sh's 1 GiB heap and kafka-run-class.sh's JVM options, "+
			"on free loopback ports with a fresh log directory, and Kafka's defaults otherwise (no fsync per write), except: on one node "+
			"the internal topics have one replica; three nodes take min.insync.replicas=2, as the Strata cluster. "+
			"Its topics get the workload's replication factor on three nodes, 1 on one. The tier workload has no Kafka column: Kafka tiers "+
			"only through a RemoteStorageManager plugin and ships none for S3. The failover workload runs on the Strata cluster only: "+
			"its fault driver stops and restarts the brokers of deploy/local/cluster.sh.\n", KafkaVersion)
	}
	if tlsOn {
		fmt.Fprintf(&b, "- **strata-tls, kafka-tls**: a Strata broker and one Kafka node serving only an SSL listener, with the same certificate "+
			"(ECDSA P-256, for 127.0.0.1 and localhost) signed by a CA made for the run, given with Kafka's names (`ssl.keystore.type=PEM`; "+
			"Strata reads the keystore file, Kafka the same PEM inline). Every client of the harness dials TLS trusting that CA. Kafka is held to "+
			"TLS 1.3 and %s, the suite Go's client and server agree on with AES hardware, so that both brokers do the same cryptography; "+
			"each result names what a connection negotiated. **AES-GCM floor**: before the targets, Go's AES-128-GCM seals and then opens "+
			"16 KiB records (TLS's largest) on one goroutine locked to one thread, a CPU second each, its MB/s taken over the thread's CPU time (not the time that passed, which on a busy machine includes waiting for a CPU): 1000 / MB/s is the least CPU seconds per "+
			"GB that TLS adds to a broker (sealing what it serves, opening what it is sent).\n", kafkaTLSCipher)
	}
	if cpu {
		b.WriteString("- **broker CPU, RSS**: for a broker process the harness started (strata, kafka: the JVM), utime+stime from /proc/<pid>/stat " +
			"split by phase, and the peak of VmRSS and VmHWM from /proc/<pid>/status. CPU s per GB produced: the run phase's CPU over the " +
			"record values acknowledged in it (10^9 bytes; consumers read alongside when the workload has them). CPU s per GB served: the raw " +
			"read-back's CPU over the record batches it served in all its passes.\n")
	}
	if raw {
		b.WriteString("- **read-back (franz-go)**: after the run, three fresh franz-go consumers sharing the partitions read everything again from offset 0 " +
			"(from the page cache on Strata, from memory on kfake), three times over with new clients each time, in a client process of their own. " +
			"This is what an application gets; on a small machine it is bounded by the client, which decodes every record on the CPUs the broker uses too. " +
			"The figure is the fastest of the three passes: a first pass also pays for the client's heap growing; the first pass is beside it. MB/s are record values.\n")
		b.WriteString("- **raw read-back**: then the same reads three more times without a client library: per partition leader three TCP connections, " +
			"each with one Fetch v11 request in flight (fetch.max.bytes 52428800, max.partition.fetch.bytes 1048576, no fetch session) for its share of the " +
			"partitions; each returned batch has its CRC32C checked and its records counted from the batch header; no record is decoded. " +
			"Every pass must count every record. The figure is the fastest of the three passes (other work on the machine only ever slows a pass); " +
			"the median pass is beside it. MB/s are record-batch bytes. The page-cache goal compares these records/s: what each broker serves.\n")
		b.WriteString("- **floor servers**: after Strata's raw read-back, a server in a process of its own copies Strata's batches and answers " +
			"the same Fetch requests with a header and the batches in one writev, doing nothing else; the raw read-back is then run against it " +
			"(metadata still from Strata): once with the batches in memory (no broker process could serve more on this machine) and once with them " +
			"in files, read with pread into reused buffers (no broker serving from the page cache that way could). Their ratios to kfake bound the page-cache goal's.\n")
	}
	if repl {
		b.WriteString("- **replication**: the cluster target is ZooKeeper and three Strata brokers on this machine, started by deploy/local/cluster.sh " +
			"(min.insync.replicas=2); its topics have RF=3, those of the single broker RF=1; both take acks=-1 as fast as the producer sends. " +
			"The three brokers and the bench share the same CPUs.\n")
	}
	if fault {
		b.WriteString("- **failover**: producers send 2,000 records/s open loop (round-robin keys: every partition gets its share) with acks=-1 on RF=3; " +
			"the broker leading the most partitions gets SIGKILL (kill) or SIGTERM (shutdown: controlled shutdown). The unavailability window is the " +
			"longest time between consecutive acknowledgements on one of the partitions it led, from 1 s before the signal until acks resumed on all of them; " +
			"\"longest gap on any partition\" is the same over every partition. After each fault the broker is restarted, the ISRs fill and preferred " +
			"leaders are elected again before the next. zookeeper.session.timeout.ms is read from a broker.\n")
	}
	return b.String()
}

// noKafkaTier is the tier workload's word on its missing Kafka column.
const noKafkaTier = "Apache Kafka has no column here: it tiers only through a RemoteStorageManager plugin and ships none for S3, " +
	"so there is no Kafka to compare on this workload.\n"

// floorRow is a figure of a floor server's raw read-back (floor.go): its
// records/s, or (share) the broker's raw read-back divided by them.
func floorRow(name string, floor func(Result) *RawReadBack, share bool) row {
	return row{name, func(r Result) (float64, bool) {
		f, rb := floor(r), r.RawReadBack
		if f == nil || f.Records == 0 {
			return 0, false
		}
		if !share {
			return f.RecordsPerSec, true
		}
		if rb == nil || rb.Records == 0 {
			return 0, false
		}
		return rb.RecordsPerSec / f.RecordsPerSec, true
	}}
}

// floorSummary compares the floor servers' raw read-backs with kfake's,
// when the report has them.
func (r *Report) floorSummary() string {
	st, ok1 := r.Result(TargetStrata)
	kf, ok2 := r.Result(TargetKfake)
	mem, pc := st.RawReadFloor, st.RawReadFloorPageCache
	if !ok1 || !ok2 || mem == nil || mem.Records == 0 || pc == nil || pc.Records == 0 || kf.RawReadBack == nil || kf.RawReadBack.Records == 0 {
		return ""
	}
	k := kf.RawReadBack.RecordsPerSec
	return fmt.Sprintf("\nFloor servers in this run (a process of their own, one writev per Fetch, nothing else): from memory %.2fx kfake's raw read-back, "+
		"the most any broker process could serve here; from the page cache (pread into reused buffers) %.2fx, the most a broker serving from the page cache "+
		"this way could; %s served %.2fx of the page-cache floor (%.2fx kfake's).\n",
		mem.RecordsPerSec/k, pc.RecordsPerSec/k, TargetStrata, st.RawReadBack.RecordsPerSec/pc.RecordsPerSec, st.RawReadBack.RecordsPerSec/k)
}

// row is one metric of the comparison table.
type row struct {
	name  string
	value func(Result) (float64, bool)
}

func latencyRows(what string, get func(Result) LatencySummary) []row {
	q := func(name string, f func(LatencySummary) float64) row {
		return row{what + " latency " + name + " ms", func(r Result) (float64, bool) { s := get(r); return f(s), s.Count > 0 }}
	}
	return []row{
		q("p50", func(s LatencySummary) float64 { return s.P50Ms }),
		q("p99", func(s LatencySummary) float64 { return s.P99Ms }),
		q("p99.9", func(s LatencySummary) float64 { return s.P999Ms }),
		q("max", func(s LatencySummary) float64 { return s.MaxMs }),
	}
}

func brokerRow(name string, f func(*Resources) (float64, bool)) row {
	return row{"broker " + name, func(r Result) (float64, bool) {
		if r.Broker == nil {
			return 0, false
		}
		return f(r.Broker)
	}}
}

func phaseCPURow(phase string) row {
	return brokerRow("CPU s ("+phase+")", func(b *Resources) (float64, bool) { v, ok := b.PhaseCPU[phase]; return v, ok })
}

func count(f func(Result) int64) func(Result) (float64, bool) {
	return func(r Result) (float64, bool) { return float64(f(r)), true }
}

// rawReadRow is a figure of the raw read-back.
func rawReadRow(name string, f func(*RawReadBack) float64) row {
	return row{"raw read-back " + name, func(r Result) (float64, bool) {
		if r.RawReadBack == nil || r.RawReadBack.Records == 0 {
			return 0, false
		}
		return f(r.RawReadBack), true
	}}
}

// readBackRow is a figure of the franz-go read-back.
func readBackRow(name string, f func(*ReadBack) float64) row {
	return row{"read-back (franz-go) " + name, func(r Result) (float64, bool) {
		if r.ReadBack == nil || r.ReadBack.Records == 0 || len(r.ReadBack.Passes) == 0 {
			return 0, false
		}
		return f(r.ReadBack), true
	}}
}

// tierRow is a figure of the tier benchmark.
func tierRow(name string, f func(*TierResult) (float64, bool)) row {
	return row{"tier: " + name, func(r Result) (float64, bool) {
		if r.Tier == nil {
			return 0, false
		}
		return f(r.Tier)
	}}
}

// groupRows are the p50 and max of a consumer-group figure.
func groupRows(what string, get func(*GroupStats) Spread) []row {
	q := func(name string, f func(Spread) float64) row {
		return row{what + " " + name + " ms", func(r Result) (float64, bool) {
			if r.Group == nil {
				return 0, false
			}
			s := get(r.Group)
			return f(s), s.N > 0
		}}
	}
	return []row{q("p50", func(s Spread) float64 { return s.P50Ms }), q("max", func(s Spread) float64 { return s.MaxMs })}
}

// faultRows are the figures of the first fault of kind (the failover
// preset injects each kind once).
func faultRows(kind string) []row {
	get := func(r Result) (Fault, bool) {
		if r.Failover == nil {
			return Fault{}, false
		}
		for _, f := range r.Failover.Faults {
			if f.Kind == kind {
				return f, true
			}
		}
		return Fault{}, false
	}
	q := func(name string, v func(Fault) float64) row {
		return row{kind + ": " + name, func(r Result) (float64, bool) { f, ok := get(r); return v(f), ok }}
	}
	return []row{
		q("unavailability window ms (partitions it led)", func(f Fault) float64 { return f.WindowMs }),
		q("longest gap on any partition ms", func(f Fault) float64 { return f.AnyPartitionMs }),
		q("leaders moved after ms", func(f Fault) float64 { return f.LeadersMovedMs }),
		q("partitions it led", func(f Fault) float64 { return float64(f.Partitions) }),
		q("it was the controller (1 = yes)", func(f Fault) float64 {
			if f.WasController {
				return 1
			}
			return 0
		}),
		q("healed after restart ms", func(f Fault) float64 { return f.HealedMs }),
	}
}

var tableRows = slices.Concat(
	[]row{
		{"replication factor", func(r Result) (float64, bool) { return float64(r.ReplicationFactor), r.ReplicationFactor > 0 }},
		{"produce MB/s", func(r Result) (float64, bool) { return r.Produce.MBPerSec, r.Produce.Records > 0 }},
		{"produce records/s", func(r Result) (float64, bool) { return r.Produce.RecordsPerSec, r.Produce.Records > 0 }},
	},
	latencyRows("produce", func(r Result) LatencySummary { return r.ProduceLatency }),
	latencyRows("end-to-end", func(r Result) LatencySummary { return r.EndToEnd }),
	[]row{
		{"consume MB/s (during run)", func(r Result) (float64, bool) { return r.Consume.MBPerSec, r.Consume.Records > 0 }},
		{"catch-up s", func(r Result) (float64, bool) { return r.CatchUpSeconds, r.CatchUpSeconds != 0 }},
		{"max consumer lag records", func(r Result) (float64, bool) { return float64(r.MaxLagRecords), r.MaxLagRecords > 0 }},
	},
	[]row{{"zookeeper.session.timeout.ms", func(r Result) (float64, bool) {
		if r.Failover == nil {
			return 0, false
		}
		return float64(r.Failover.SessionTimeoutMs), true
	}}},
	faultRows(FaultKill),
	faultRows(FaultShutdown),
	groupRows("group join to first record", func(g *GroupStats) Spread { return g.JoinToFirstRecord }),
	groupRows("rebalance pause (no record to any member)", func(g *GroupStats) Spread { return g.Pause }),
	groupRows("rebalance longest gap on a partition", func(g *GroupStats) Spread { return g.PartitionPause }),
	groupRows("rebalance until every partition consumed", func(g *GroupStats) Spread { return g.Resume }),
	[]row{
		{"rebalances measured", func(r Result) (float64, bool) {
			if r.Group == nil {
				return 0, false
			}
			return float64(len(r.Group.Rebalances)), len(r.Group.Rebalances) > 0
		}},
		readBackRow("MB/s (fastest pass)", func(b *ReadBack) float64 { return b.MBPerSec }),
		readBackRow("records/s (fastest pass)", func(b *ReadBack) float64 { return b.RecordsPerSec }),
		readBackRow("MB/s (first pass)", func(b *ReadBack) float64 { return b.Passes[0].MBPerSec }),
		readBackRow("first record after ms", func(b *ReadBack) float64 { return b.FirstRecordMs }),
		rawReadRow("records/s (fastest pass)", func(b *RawReadBack) float64 { return b.RecordsPerSec }),
		rawReadRow("records/s (median pass)", func(b *RawReadBack) float64 { return b.MedianRecordsPerSec }),
		rawReadRow("batch MB/s (fastest pass)", func(b *RawReadBack) float64 { return b.MBPerSec }),
		rawReadRow("first batch after ms", func(b *RawReadBack) float64 { return b.FirstBatchMs }),
		rawReadRow("Fetch requests per pass", func(b *RawReadBack) float64 { return float64(b.Requests) }),
		floorRow("raw read-back of the floor server from memory records/s (fastest pass)", func(r Result) *RawReadBack { return r.RawReadFloor }, false),
		floorRow("raw read-back of the floor server from the page cache records/s (fastest pass)", func(r Result) *RawReadBack { return r.RawReadFloorPageCache }, false),
		floorRow("raw read-back ÷ the page-cache floor's", func(r Result) *RawReadBack { return r.RawReadFloorPageCache }, true),
		{"records sent (all)", count(func(r Result) int64 { return r.Sent })},
		{"records acknowledged (all)", count(func(r Result) int64 { return r.Acked })},
		{"records in topics", count(func(r Result) int64 { return r.TopicRecords })},
		{"transactions committed (all)", func(r Result) (float64, bool) { return float64(r.Transactions), r.Transactions > 0 }},
		{"commit markers in topics", func(r Result) (float64, bool) { return float64(r.TxnMarkers), r.TxnMarkers > 0 }},
		{"records consumed", count(func(r Result) int64 { return r.Consumed })},
		{"duplicates consumed", count(func(r Result) int64 { return r.Duplicates })},
		{"produce errors", count(func(r Result) int64 { return r.ProduceErrors })},
		{"negative latencies", count(func(r Result) int64 { return r.ProduceLatency.Negative + r.EndToEnd.Negative })},
		tierRow("upload MB/s (segments and indexes, remotecopybytes_total)", func(t *TierResult) (float64, bool) { return t.Upload.MBPerSec, t.Upload.Seconds > 0 }),
		tierRow("upload segments", func(t *TierResult) (float64, bool) { return float64(t.UploadSegments), true }),
		tierRow("upload s", func(t *TierResult) (float64, bool) { return t.Upload.Seconds, t.Upload.Seconds > 0 }),
		tierRow("raw PUT MB/s (same sizes, a stream per partition)", func(t *TierResult) (float64, bool) { return t.RawPut.MBPerSec, t.RawPut.Seconds > 0 }),
		tierRow("upload / raw PUT", func(t *TierResult) (float64, bool) {
			return t.UploadRatio(), t.RawPut.Seconds > 0 && t.Upload.Seconds > 0
		}),
		tierRow("raw GET MB/s (same objects, a stream per partition)", func(t *TierResult) (float64, bool) { return t.RawGet.MBPerSec, t.RawGet.Seconds > 0 }),
		tierRow("cold read records/s (bucket, after restart)", func(t *TierResult) (float64, bool) { return t.ColdRead.RecordsPerSec, t.ColdRead.Records > 0 }),
		tierRow("cold read batch MB/s", func(t *TierResult) (float64, bool) { return t.ColdRead.MBPerSec, t.ColdRead.Records > 0 }),
		tierRow("cold read records from the bucket", func(t *TierResult) (float64, bool) { return float64(t.RemoteRecords), t.ColdRead.Records > 0 }),
		tierRow("local read records/s (same records, untiered topic)", func(t *TierResult) (float64, bool) { return t.LocalRead.RecordsPerSec, t.LocalRead.Records > 0 }),
		tierRow("local read batch MB/s", func(t *TierResult) (float64, bool) { return t.LocalRead.MBPerSec, t.LocalRead.Records > 0 }),
		tierRow("cold read / local read (records/s)", func(t *TierResult) (float64, bool) {
			return t.ColdReadRatio(), t.LocalRead.Records > 0 && t.ColdRead.Records > 0
		}),
		tierRow("cold first record p50 ms", func(t *TierResult) (float64, bool) { return t.ColdFirstRecord.P50Ms, t.ColdFirstRecord.N > 0 }),
		tierRow("cold first record max ms", func(t *TierResult) (float64, bool) { return t.ColdFirstRecord.MaxMs, t.ColdFirstRecord.N > 0 }),
		tierRow("cold first-record probes", func(t *TierResult) (float64, bool) { return float64(t.ColdFirstRecord.N), t.ColdFirstRecord.N > 0 }),
		tierRow("local first record p50 ms", func(t *TierResult) (float64, bool) { return t.LocalFirstRecord.P50Ms, t.LocalFirstRecord.N > 0 }),
		tierRow("local first record max ms", func(t *TierResult) (float64, bool) { return t.LocalFirstRecord.MaxMs, t.LocalFirstRecord.N > 0 }),
		brokerRow("peak RSS MB", func(b *Resources) (float64, bool) { return float64(b.PeakRSSBytes) / (1 << 20), true }),
		brokerRow("CPU s (total)", func(b *Resources) (float64, bool) { return b.CPUSeconds, true }),
		{"broker CPU s per GB produced (run)", cpuPerGBProduced},
		{"broker CPU s per GB served (raw read-back)", cpuPerGBServed},
		phaseCPURow(phaseBacklog),
		phaseCPURow(phaseRun),
		phaseCPURow(phaseDrain),
		phaseCPURow(phaseReadBack),
		phaseCPURow(phaseRawRead),
		brokerRow("disk writes MB", func(b *Resources) (float64, bool) { return float64(b.WrittenBytes) / 1e6, b.WrittenBytes >= 0 }),
		brokerRow("bucket writes MB", func(b *Resources) (float64, bool) {
			return float64(b.BucketWrittenBytes) / 1e6, b.BucketWrittenBytes > 0
		}),
	},
)

func fmtNum(v float64) string {
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1e15:
		return fmt.Sprintf("%d", int64(v))
	case v >= 1000:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// Markdown renders one workload: its settings and a table with a column
// per target and the ratio of the first target to each other target.
func (r *Report) Markdown(plotDir string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Workload %s\n\n", r.Label())
	fmt.Fprintf(&b, "%s.\n", r.Workload.Describe())
	if r.LoadAvg != "" {
		fmt.Fprintf(&b, "Load average at start: %s", r.LoadAvg)
		if busy(r.LoadAvg) {
			b.WriteString(" (**busy machine: figures are noisy**)")
		}
		b.WriteString(".\n")
	}
	if r.Workload.Tier != nil {
		b.WriteString(noKafkaTier)
	}
	b.WriteString("\n")
	targets := make([]string, len(r.Results))
	for i, res := range r.Results {
		targets[i] = res.Target
	}
	b.WriteString("| metric | " + strings.Join(targets, " | "))
	for _, t := range targets[min(1, len(targets)):] {
		fmt.Fprintf(&b, " | %s/%s", targets[0], t)
	}
	b.WriteString(" |\n|---" + strings.Repeat("|---:", len(targets)+max(len(targets)-1, 0)) + "|\n")
	for _, rw := range tableRows {
		cells := make([]string, len(r.Results))
		vals := make([]float64, len(r.Results))
		oks := make([]bool, len(r.Results))
		any := false
		for i, res := range r.Results {
			vals[i], oks[i] = rw.value(res)
			cells[i] = "—"
			if oks[i] {
				cells[i] = fmtNum(vals[i])
				any = true
			}
		}
		if !any {
			continue
		}
		fmt.Fprintf(&b, "| %s | %s", rw.name, strings.Join(cells, " | "))
		for i := 1; i < len(vals); i++ {
			rc := "—"
			if oks[0] && oks[i] && vals[i] != 0 {
				rc = fmt.Sprintf("%.2fx", vals[0]/vals[i])
			}
			b.WriteString(" | " + rc)
		}
		b.WriteString(" |\n")
	}
	b.WriteString(r.floorSummary())
	b.WriteString(r.tlsSummary())
	b.WriteString(r.moveSummary())
	for _, res := range r.Results {
		if res.Error != "" {
			fmt.Fprintf(&b, "\n**%s failed:** %s\n", res.Target, res.Error)
		}
	}
	b.WriteString("\n")
	for _, pf := range plotFiles {
		if pf.applies != nil && !pf.applies(r) {
			continue
		}
		fmt.Fprintf(&b, "![%[1]s%[3]s](%[2]s%[1]s%[3]s) ", r.Label(), plotDir, pf.suffix)
	}
	b.WriteString("\n")
	return b.String()
}

// Benchstat renders the suite as Go benchmark lines that benchstat reads:
// per workload and target a Produce line (iterations: measured records), an
// EndToEnd line when consumers ran, a Group line in group mode (iterations:
// members; ns/op: median join to first record; rebalance figures when
// measured), a ReadBack line when the workload reads back with franz-go and
// a RawReadBack line (MB/s of record batches) when it reads back raw, and
// a CipherFloor line per operation (ns/op: one 16 KiB TLS record) when a
// target served TLS.
func (s *Suite) Benchstat() string {
	var b strings.Builder
	fmt.Fprintf(&b, "goos: %s\ngoarch: %s\npkg: strata/bench\n", s.Machine.OS, s.Machine.Arch)
	if s.Machine.CPUModel != "" {
		fmt.Fprintf(&b, "cpu: %s\n", s.Machine.CPUModel)
	}
	for _, rep := range s.Reports {
		if f := rep.CipherFloor; f != nil && f.SealMBPerSec > 0 {
			for _, op := range []struct {
				name string
				mbps float64
			}{{"seal", f.SealMBPerSec}, {"open", f.OpenMBPerSec}} {
				fmt.Fprintf(&b, "BenchmarkCipherFloor/workload=%s/cipher=%s/op=%s 1 %.0f ns/op %.2f MB/s\n",
					rep.Workload.Name, f.Cipher, op.name, float64(f.RecordBytes)*1e3/op.mbps, op.mbps)
			}
		}
		for _, res := range rep.Results {
			if res.Error != "" {
				continue
			}
			name := fmt.Sprintf("workload=%s/target=%s", rep.Workload.Name, benchName(res.Target))
			if p := res.Produce; p.Records > 0 {
				l := res.ProduceLatency
				fmt.Fprintf(&b, "BenchmarkProduce/%s %d %.0f ns/op %.2f MB/s %.0f records/s %.4g p50-ms %.4g p99-ms %.4g p999-ms %.4g max-ms",
					name, p.Records, p.Seconds*1e9/float64(p.Records), p.MBPerSec, p.RecordsPerSec, l.P50Ms, l.P99Ms, l.P999Ms, l.MaxMs)
				if res.Broker != nil {
					fmt.Fprintf(&b, " %d peak-rss-B %.3g broker-cpu-s", res.Broker.PeakRSSBytes, res.Broker.PhaseCPU[phaseRun])
				}
				b.WriteString("\n")
			}
			if c, l := res.Consume, res.EndToEnd; c.Records > 0 && l.Count > 0 {
				fmt.Fprintf(&b, "BenchmarkEndToEnd/%s %d %.0f ns/op %.2f MB/s %.4g p50-ms %.4g p99-ms %.4g p999-ms %.4g max-ms",
					name, c.Records, c.Seconds*1e9/float64(c.Records), c.MBPerSec, l.P50Ms, l.P99Ms, l.P999Ms, l.MaxMs)
				if res.CatchUpSeconds > 0 {
					fmt.Fprintf(&b, " %.4g catch-up-s", res.CatchUpSeconds)
				}
				b.WriteString("\n")
			}
			if g := res.Group; g != nil && g.JoinToFirstRecord.N > 0 {
				j := g.JoinToFirstRecord
				fmt.Fprintf(&b, "BenchmarkGroup/%s %d %.0f ns/op %.4g join-p50-ms %.4g join-max-ms",
					name, j.N, j.P50Ms*1e6, j.P50Ms, j.MaxMs)
				if g.Pause.N > 0 {
					fmt.Fprintf(&b, " %d rebalances %.4g pause-p50-ms %.4g pause-max-ms %.4g partition-gap-max-ms %.4g resume-p50-ms %.4g resume-max-ms",
						g.Pause.N, g.Pause.P50Ms, g.Pause.MaxMs, g.PartitionPause.MaxMs, g.Resume.P50Ms, g.Resume.MaxMs)
				}
				b.WriteString("\n")
			}
			if rb := res.ReadBack; rb != nil && rb.Records > 0 {
				fmt.Fprintf(&b, "BenchmarkReadBack/%s %d %.0f ns/op %.2f MB/s %.0f records/s\n",
					name, rb.Records, rb.Seconds*1e9/float64(rb.Records), rb.MBPerSec, rb.RecordsPerSec)
			}
			if fo := res.Failover; fo != nil {
				for _, f := range fo.Faults {
					fmt.Fprintf(&b, "BenchmarkFailover/%s/fault=%s 1 %.0f ns/op %.4g window-ms %.4g any-partition-ms %.4g leaders-moved-ms %d session-timeout-ms\n",
						name, f.Kind, f.WindowMs*1e6, f.WindowMs, f.AnyPartitionMs, f.LeadersMovedMs, fo.SessionTimeoutMs)
				}
			}
			if res.Move != nil {
				b.WriteString(res.Move.benchstat(name))
			}
			if rb := res.RawReadBack; rb != nil && rb.Records > 0 {
				fmt.Fprintf(&b, "BenchmarkRawReadBack/%s %d %.0f ns/op %.2f MB/s %.0f records/s %d fetches\n",
					name, rb.Records, rb.Seconds*1e9/float64(rb.Records), rb.MBPerSec, rb.RecordsPerSec, rb.Requests)
			}
		}
	}
	return b.String()
}

// benchName makes a target usable in a benchmark name (no spaces; ':' is
// kept, '/' would start a sub-benchmark).
func benchName(s string) string {
	return strings.NewReplacer(" ", "_", "/", "_").Replace(s)
}

// historyFile, beside a results file (bench/HISTORY.md beside
// bench/RESULTS.md), holds the earlier measurements.
const historyFile = "HISTORY.md"

// WriteMarkdown writes the markdown report to path with plot links
// pointing into plotDir (where Write put the plots).
func (s *Suite) WriteMarkdown(path, plotDir string) error {
	rel, err := filepath.Rel(filepath.Dir(path), plotDir)
	if err != nil {
		rel = plotDir
	}
	// A history written by hand beside the file is linked from it.
	if _, err := os.Stat(filepath.Join(filepath.Dir(path), historyFile)); err == nil {
		s.history = historyFile
		defer func() { s.history = "" }()
	}
	if err := os.WriteFile(path, []byte(s.Markdown(filepath.ToSlash(rel)+"/")), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
