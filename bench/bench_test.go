package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestHistogramPercentiles(t *testing.T) {
	h := newLatencyHist()
	for i := 1; i <= 1000; i++ { // 1 ms .. 1000 ms
		h.record(time.Duration(i) * time.Millisecond)
	}
	h.record(-time.Millisecond)
	s := h.summary()
	if s.Count != 1000 || s.Negative != 1 {
		t.Fatalf("count %d negative %d, want 1000 and 1", s.Count, s.Negative)
	}
	near := func(name string, got, want float64) {
		t.Helper()
		if d := got - want; d < -want*0.002 || d > want*0.002 {
			t.Errorf("%s = %g, want %g ±0.2%%", name, got, want)
		}
	}
	near("p50", s.P50Ms, 500)
	near("p99", s.P99Ms, 990)
	near("p99.9", s.P999Ms, 999)
	near("max", s.MaxMs, 1000)
	near("mean", s.MeanMs, 500.5)
	for i := 1; i < len(s.Curve); i++ {
		if s.Curve[i].Percentile <= s.Curve[i-1].Percentile || s.Curve[i].Ms < s.Curve[i-1].Ms {
			t.Fatalf("curve not monotonic at %d: %+v %+v", i, s.Curve[i-1], s.Curve[i])
		}
	}
	// A histogram filled alone merges in with its negative count.
	local := newHDR()
	neg := recordInto(local, 2*time.Second) + recordInto(local, -time.Nanosecond)
	h.merge(local, neg)
	if s := h.summary(); s.Count != 1001 || s.Negative != 2 || s.MaxMs < 1999 {
		t.Fatalf("after merge %+v", s)
	}
	// Out-of-range values are clamped, not dropped.
	h2 := newLatencyHist()
	h2.record(0)
	h2.record(time.Hour)
	if s := h2.summary(); s.Count != 2 || s.MaxMs < 59_000 {
		t.Fatalf("clamped summary %+v", s)
	}
}

func TestParseProc(t *testing.T) {
	rss, hwm := parseStatus([]byte("Name:\tstrata\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n"))
	if rss != 100<<20 || hwm != 200<<20 {
		t.Fatalf("rss %d hwm %d", rss, hwm)
	}
	// A command name with spaces and parentheses must not shift fields.
	stat := "42 (a b) c) S 1 42 42 0 -1 4194560 100 0 0 0 250 150 0 0 20 0 1 0 1 1 1"
	cpu, err := parseStatCPU([]byte(stat))
	if err != nil || cpu != 4.0 {
		t.Fatalf("cpu %g err %v, want 4", cpu, err)
	}
	if _, err := parseStatCPU([]byte("garbage")); err == nil {
		t.Fatal("garbage stat parsed")
	}
	if n := parseIOWriteBytes([]byte("rchar: 1\nwrite_bytes: 8192\n")); n != 8192 {
		t.Fatalf("write_bytes %d", n)
	}
	// Our own process is readable.
	if s, err := readProc(os.Getpid()); err != nil || s.RSSBytes <= 0 || s.HWMBytes < s.RSSBytes {
		t.Fatalf("readProc self: %+v %v", s, err)
	}
}

func TestParseReady(t *testing.T) {
	for line, want := range map[string]string{
		"ready broker_id=0 listen=127.0.0.1:40123":                                       "127.0.0.1:40123",
		`time=2026-01-01T00:00:00Z level=INFO msg="ready broker_id=3 listen=[::1]:9092"`: "[::1]:9092",
		"level=INFO msg=starting":                                                        "",
	} {
		got, ok := parseReady(line)
		if got != want || ok != (want != "") {
			t.Errorf("parseReady(%q) = %q %v, want %q", line, got, ok, want)
		}
	}
}

// fakeSuite is a suite with made-up figures for the report writer.
func fakeSuite() *Suite {
	res := func(target string, mbps, p99 float64, rss int64) Result {
		lat := LatencySummary{Count: 1000, P50Ms: 1, P99Ms: p99, P999Ms: p99 * 2, MaxMs: p99 * 3,
			Curve: []CurvePoint{{0, 0.5}, {90, 1}, {99, p99}}}
		r := Result{
			Target:         target,
			Produce:        throughput(1000, 1000*1024, time.Duration(1024*1000/mbps)*time.Microsecond),
			Consume:        throughput(1000, 1000*1024, time.Duration(1024*1000/mbps)*time.Microsecond),
			ProduceLatency: lat,
			EndToEnd:       lat,
			ReadBack: &ReadBack{ReadBackPass: ReadBackPass{Throughput: throughput(1001, 1001*1024, 10*time.Millisecond), FirstRecordMs: 3},
				Passes: []ReadBackPass{{Throughput: throughput(1001, 1001*1024, 40*time.Millisecond)}}},
			RawReadBack: &RawReadBack{RawPass: RawPass{Throughput: throughput(1001, 1001*1100, time.Duration(float64(time.Second)/mbps)),
				Batches: 10, Requests: 4, Connections: 3, FirstBatchMs: 1}, MedianRecordsPerSec: 900 * mbps},
			Sent: 1001, Acked: 1001, TopicRecords: 1001, Consumed: 1001, MaxLagRecords: 40,
			Timeline: []TimelinePoint{
				{T: 0.5, Phase: phaseRun, ProduceMBPerSec: mbps, ConsumeMBPerSec: mbps, LagRecords: 40},
				{T: 1, Phase: phaseRun, ProduceMBPerSec: mbps, ConsumeMBPerSec: mbps, LagRecords: 10},
				{T: 1.5, Phase: phaseReadBack, ConsumeMBPerSec: 2 * mbps, LagRecords: 0},
			},
		}
		if rss > 0 { // the Strata broker, and its floor server
			r.RawReadFloor = &RawReadBack{RawPass: RawPass{Throughput: throughput(1001, 1001*1100, time.Duration(float64(time.Second)/mbps/2))}}
			r.RawReadFloorPageCache = &RawReadBack{RawPass: RawPass{Throughput: throughput(1001, 1001*1100, time.Duration(float64(time.Second)/mbps/1.6))}}
			r.Broker = &Resources{PeakRSSBytes: rss, WrittenBytes: -1, CPUSeconds: 2, PhaseCPU: map[string]float64{phaseRun: 1.5, phaseReadBack: 0.25}}
		}
		return r
	}
	tp := Workload{Name: "throughput", ReadBack: true}.WithDefaults()
	lat := Workload{Name: "latency", Rate: 2000, Duration: Duration(time.Second)}.WithDefaults()
	reports := []*Report{
		{Workload: tp, Results: []Result{res("strata", 200, 5, 100<<20), res("kfake", 100, 10, 0)}},
		{Workload: lat, Results: []Result{res("strata", 2, 4, 300<<20), res("kfake", 2, 2, 0)}},
	}
	return &Suite{Machine: ReadMachine(), Command: "strata bench --out x", Reports: reports, Goals: EvaluateGoals(Issue2Goals, reports)}
}

func TestGoals(t *testing.T) {
	s := fakeSuite()
	want := map[string]struct {
		measured float64
		pass     bool
	}{
		Issue2Goals[0].Name: {2, true},    // produce 200/100
		Issue2Goals[1].Name: {2, true},    // raw read-back records/s, 200/100
		Issue2Goals[2].Name: {1, false},   // franz-go read-back 2x/2x: equal throughput ratio
		Issue2Goals[3].Name: {2, false},   // p99 4/2
		Issue2Goals[4].Name: {300, false}, // worst RSS over both presets
	}
	for _, g := range s.Goals {
		w := want[g.Name]
		if !g.Evaluated || g.Pass != w.pass || g.Measured < w.measured*0.99 || g.Measured > w.measured*1.01 {
			t.Errorf("goal %q = %+v, want measured %g pass %v", g.Name, g, w.measured, w.pass)
		}
	}
	// Repeated runs: the median ratio decides.
	tp2 := &Report{Workload: s.Reports[0].Workload, Run: 2, Results: []Result{s.Reports[0].Results[0], s.Reports[0].Results[1]}}
	tp2.Results[0].Produce.MBPerSec = 300
	tp3 := &Report{Workload: s.Reports[0].Workload, Run: 3, Results: []Result{s.Reports[0].Results[0], s.Reports[0].Results[1]}}
	tp3.Results[0].Produce.MBPerSec = 20
	if g := Issue2Goals[0].Evaluate([]*Report{s.Reports[0], tp2, tp3}); g.Measured < 1.99 || g.Measured > 2.01 || !g.Pass {
		t.Errorf("median of ratios 2, 3, 0.2 = %+v, want 2", g)
	}
	if tp2.Label() != "throughput-run2" || s.Reports[0].Label() != "throughput" {
		t.Errorf("labels %q %q", tp2.Label(), s.Reports[0].Label())
	}
	// Missing results are reported as not evaluated, not as a pass.
	gs := EvaluateGoals(Issue2Goals, s.Reports[:1])
	if gs[3].Evaluated || gs[3].Pass {
		t.Errorf("latency goal without latency report: %+v", gs[2])
	}
}

func TestReportWriter(t *testing.T) {
	s := fakeSuite()
	for i, pause := range []float64{20, 10} {
		s.Reports[1].Results[i].Group = &GroupStats{Balancer: BalancerRange, Members: 6,
			JoinToFirstRecord: spread([]float64{100, 300, 200}),
			Rebalances:        []Rebalance{{AtS: 1, PauseMs: pause, PartitionPauseMs: 50, StableMs: 900, ResumeMs: 1000, RecordsPerSec: []float64{2000, 0, 2000}}},
			Pause:             spread([]float64{pause}), PartitionPause: spread([]float64{50}), Resume: spread([]float64{1000}),
		}
	}
	dir := t.TempDir()
	if err := s.Write(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"report.json", "report.md", "bench.txt", "throughput-latency.png", "throughput-throughput.png", "throughput-lag.png", "latency-latency.png", "latency-lag.png", "latency-rebalance.png"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", f, err)
		}
	}
	var back Suite
	b, _ := os.ReadFile(filepath.Join(dir, "report.json"))
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("report.json: %v", err)
	}
	if len(back.Reports) != 2 || back.Reports[0].Results[0].Produce.Records != 1000 || len(back.Goals) != 5 || back.Reports[0].Results[0].RawReadBack.Batches != 10 ||
		!reflect.DeepEqual(back.Reports[1].Workload, s.Reports[1].Workload) || back.Reports[0].Results[0].Broker.PhaseCPU[phaseRun] != 1.5 ||
		len(back.Reports[0].Results[0].Timeline) != 3 {
		t.Fatalf("report.json round trip: %+v", back)
	}
	if !strings.Contains(string(b), `"duration": "1s"`) {
		t.Errorf("report.json does not write durations as strings")
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	for _, want := range []string{
		"| metric | strata | kfake | strata/kfake |",
		"| produce MB/s | 200.0 | 100.0 | 2.00x |",
		"| produce latency p99 ms | 5 | 10 | 0.50x |",
		"| end-to-end latency p99.9 ms | 10 | 20 | 0.50x |",
		"| read-back (franz-go) first record after ms | 3 | 3 | 1.00x |",
		"| read-back (franz-go) MB/s (first pass) | 25.6 | 25.6 | 1.00x |",
		"| raw read-back of the floor server from memory records/s (fastest pass) | 400400 | — | — |",
		"| raw read-back of the floor server from the page cache records/s (fastest pass) | 320320 | — | — |",
		"| raw read-back ÷ the page-cache floor's | 0.62 | — | — |",
		"from memory 4.00x kfake's raw read-back, the most any broker process could serve here; from the page cache (pread into reused buffers) 3.20x, " +
			"the most a broker serving from the page cache this way could; strata served 0.62x of the page-cache floor (2.00x kfake's).",
		"| raw read-back records/s (fastest pass) | 200200 | 100100 | 2.00x |",
		"| raw read-back records/s (median pass) | 180000 | 90000 | 2.00x |",
		"| broker peak RSS MB | 100 | — | — |",
		"| broker CPU s (run) | 1.50 | — | — |",
		"| max consumer lag records | 40 | 40 | 1.00x |",
		"| group join to first record p50 ms | 200 | 200 | 1.00x |",
		"| rebalance pause (no record to any member) max ms | 20 | 10 | 2.00x |",
		"| rebalance until every partition consumed p50 ms | 1000 | 1000 | 1.00x |",
		"| rebalances measured | 1 | 1 | 1.00x |",
		"FAIL", "pass", "(throughput-latency.png)", "(throughput-lag.png)", "(latency-rebalance.png)",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	bs, _ := os.ReadFile(filepath.Join(dir, "bench.txt"))
	lines := 0
	for line := range strings.Lines(string(bs)) {
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		lines++
		f := strings.Fields(line)
		// name, iterations, then value/unit pairs.
		if len(f)%2 != 0 || f[2] == "" || f[3] != "ns/op" {
			t.Errorf("not a benchstat line: %q", line)
		}
	}
	if lines != 18 || !strings.Contains(string(bs), "BenchmarkGroup/workload=latency/target=kfake 3 200000000 ns/op 200 join-p50-ms 300 join-max-ms 1 rebalances 10 pause-p50-ms") {
		t.Errorf("%d benchmark lines, want 18 with group and raw read-back lines:\n%s", lines, bs)
	}
	if _, err := os.Stat(filepath.Join(dir, "throughput-rebalance.png")); err == nil {
		t.Errorf("rebalance plot for a workload without rebalances")
	}
	// RESULTS.md style: plots linked relative to the markdown file.
	res := filepath.Join(t.TempDir(), "RESULTS.md")
	if err := s.WriteMarkdown(res, filepath.Join(filepath.Dir(res), "results")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(res); !strings.Contains(string(b), "(results/latency-latency.png)") || strings.Contains(string(b), "HISTORY.md") {
		t.Errorf("RESULTS.md plot links:\n%s", b)
	}
	// A HISTORY.md beside it is linked.
	if err := os.WriteFile(filepath.Join(filepath.Dir(res), "HISTORY.md"), []byte("# History\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteMarkdown(res, filepath.Join(filepath.Dir(res), "results")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(res); !strings.Contains(string(b), "[HISTORY.md](HISTORY.md)") {
		t.Errorf("RESULTS.md does not link HISTORY.md:\n%s", b)
	}
}
