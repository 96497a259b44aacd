package bench

import (
	"fmt"
	"slices"
)

// Goal is a target figure a workload must reach. A Ratio goal compares the
// metric of Numerator to that of Denominator in the report of Workload; an
// absolute goal takes the worst value of the metric over Numerator's
// results in every report.
type Goal struct {
	Name        string
	Workload    string // "" for every workload
	Numerator   string // target name
	Denominator string // target name; "" for an absolute goal
	AtLeast     bool   // measured >= Want; otherwise measured <= Want
	Want        float64
	Unit        string
	// DenominatorWorkload, when set, takes the denominator from the report
	// of that workload with the same run number (Report.Run) instead of
	// Workload's: a figure of one target under two workloads of one suite.
	DenominatorWorkload string
	// RatioInRun: the metric is already a ratio of two figures measured
	// in one run (a size against another on the same target), so the
	// goal is judged as a ratio goal is (the median of the runs, a miss
	// within their range INCONCLUSIVE), not as a bound on every run.
	RatioInRun bool
	metric     func(Result) (float64, bool)
}

// GoalResult is a Goal evaluated.
//
// A ratio goal is judged on the median of the runs' ratios: it passes when
// the median meets the goal. A median that misses is INCONCLUSIVE when at
// least one run met the goal (the goal lies within Min..Max, the runs'
// range: the run-to-run noise is wider than the miss), and FAIL when no run
// did. With one run the noise is unknown and a miss is a FAIL. An absolute
// goal is a bound every run must hold: it is judged on the worst run, and
// any run that misses makes it FAIL. A goal whose metric is a ratio within
// one run (Goal.RatioInRun) is judged as a ratio goal.
type GoalResult struct {
	Name      string  `json:"name"`
	Want      string  `json:"want"`
	Measured  float64 `json:"measured"` // the median ratio, or the worst value
	Unit      string  `json:"unit"`
	Evaluated bool    `json:"evaluated"` // false when the needed results are missing
	Pass      bool    `json:"pass"`
	// Inconclusive is set when a ratio goal's median missed but a run met
	// the goal; Pass is false then.
	Inconclusive bool    `json:"inconclusive,omitempty"`
	Runs         int     `json:"runs"` // runs measured
	Min          float64 `json:"min"`  // the smallest value of a run
	Max          float64 `json:"max"`  // the largest value of a run
	Note         string  `json:"note,omitempty"`
}

// Verdict is how the report shows the result: "pass", "FAIL",
// "INCONCLUSIVE" or "not evaluated".
func (g GoalResult) Verdict() string {
	switch {
	case !g.Evaluated:
		return "not evaluated"
	case g.Pass:
		return "pass"
	case g.Inconclusive:
		return "INCONCLUSIVE"
	}
	return "FAIL"
}

func produceMBps(r Result) (float64, bool) { return r.Produce.MBPerSec, r.Produce.Records > 0 }
func produceP99(r Result) (float64, bool)  { return r.ProduceLatency.P99Ms, r.ProduceLatency.Count > 0 }

// consumeMBps is the franz-go read-back throughput: every record read
// again from offset 0 after the run, so from the page cache on a disk
// broker, by consumers that decode every record (the fastest of
// readBackPasses passes).
func consumeMBps(r Result) (float64, bool) {
	if r.ReadBack == nil {
		return 0, false
	}
	return r.ReadBack.MBPerSec, r.ReadBack.Records > 0
}

// rawRecordsPerSec is the raw read-back throughput: records served per
// second to Fetch requests whose batches are checked and counted by their
// headers. Records, not bytes: the two targets hold the same records, but
// the producers may have batched them differently.
func rawRecordsPerSec(r Result) (float64, bool) {
	if r.RawReadBack == nil {
		return 0, false
	}
	return r.RawReadBack.RecordsPerSec, r.RawReadBack.Records > 0
}
func peakRSSMB(r Result) (float64, bool) {
	if r.Broker == nil {
		return 0, false
	}
	return float64(r.Broker.PeakRSSBytes) / (1 << 20), true
}

// cpuPerGBProduced is the broker's CPU seconds in the run phase per GB
// (10^9 bytes) of record values acknowledged in it; the throughput
// preset's run has one consumer reading alongside the producer.
func cpuPerGBProduced(r Result) (float64, bool) {
	if r.Broker == nil || r.RunBytes <= 0 {
		return 0, false
	}
	cpu, ok := r.Broker.PhaseCPU[phaseRun]
	return cpu / (float64(r.RunBytes) / 1e9), ok
}

// cpuPerGBServed is the broker's CPU seconds in the raw read-back per GB
// of record batches it served over all its passes.
func cpuPerGBServed(r Result) (float64, bool) {
	if r.Broker == nil || r.RawReadBack == nil {
		return 0, false
	}
	var served int64
	for _, p := range r.RawReadBack.Passes {
		served += p.Bytes
	}
	cpu, ok := r.Broker.PhaseCPU[phaseRawRead]
	if !ok || served <= 0 {
		return 0, false
	}
	return cpu / (float64(served) / 1e9), true
}

// Issue2Goals are the core broker's targets on a 2-core machine with 1 KB
// records and 6 partitions.
var Issue2Goals = []Goal{
	{Name: "produce throughput (throughput preset)", Workload: "throughput", Numerator: TargetStrata, Denominator: TargetKfake, AtLeast: true, Want: 1.0, Unit: "x", metric: produceMBps},
	{Name: "consume throughput from page cache, as served (throughput preset, raw Fetch read-back, fastest of 3 passes, records/s)", Workload: "throughput", Numerator: TargetStrata, Denominator: TargetKfake, AtLeast: true, Want: 1.5, Unit: "x", metric: rawRecordsPerSec},
	{Name: "consume throughput from page cache, as one application sees it (throughput preset, franz-go read-back, fastest of 3 passes, MB/s)", Workload: "throughput", Numerator: TargetStrata, Denominator: TargetKfake, AtLeast: true, Want: 1.5, Unit: "x", metric: consumeMBps},
	{Name: "p99 produce latency at 2,000 rec/s, linger 0 (latency preset)", Workload: "latency", Numerator: TargetStrata, Denominator: TargetKfake, AtLeast: false, Want: 1.0, Unit: "x", metric: produceP99},
	{Name: "broker peak RSS (all presets)", Numerator: TargetStrata, AtLeast: false, Want: 256, Unit: "MB", metric: peakRSSMB},
}

// faultWindow is the unavailability window of the first fault of kind;
// with minusSession, less zookeeper.session.timeout.ms (which must be
// known).
func faultWindow(kind string, minusSession bool) func(Result) (float64, bool) {
	return func(r Result) (float64, bool) {
		if r.Failover == nil || minusSession && r.Failover.SessionTimeoutMs < 0 {
			return 0, false
		}
		for _, f := range r.Failover.Faults {
			if f.Kind == kind {
				if minusSession {
					return f.WindowMs - float64(r.Failover.SessionTimeoutMs), true
				}
				return f.WindowMs, true
			}
		}
		return 0, false
	}
}

// Issue5Goals are the cluster's targets: replication costs at most half
// the throughput, and failover is bounded by the session timeout (kill
// -9) or quick (controlled shutdown).
var Issue5Goals = []Goal{
	{Name: "RF=3 acks=-1 produce throughput on 3 brokers vs RF=1 on one (replication preset)", Workload: "replication", Numerator: TargetCluster, Denominator: TargetStrata, AtLeast: true, Want: 0.5, Unit: "x", metric: produceMBps},
	{Name: "unavailability after kill -9 of a leader, beyond zookeeper.session.timeout.ms (failover preset)", Workload: "failover", Numerator: TargetCluster, AtLeast: false, Want: 1000, Unit: "ms", metric: faultWindow(FaultKill, true)},
	{Name: "unavailability after controlled shutdown of a leader (failover preset)", Workload: "failover", Numerator: TargetCluster, AtLeast: false, Want: 1000, Unit: "ms", metric: faultWindow(FaultShutdown, false)},
}

// tierMetric is a figure of the tier benchmark.
func tierMetric(f func(*TierResult) (float64, bool)) func(Result) (float64, bool) {
	return func(r Result) (float64, bool) {
		if r.Tier == nil || r.Error != "" {
			return 0, false
		}
		return f(r.Tier)
	}
}

// Issue6Goals are tiered storage's targets, each measured within one run
// of the tier preset (the worst run counts with --count).
var Issue6Goals = []Goal{
	{Name: "tiered upload throughput vs raw MinIO PUT of objects of the same sizes through tier.S3Store, one stream per partition (tier preset)", Workload: "tier", Numerator: TargetTier, AtLeast: true, Want: 0.7, Unit: "x",
		metric: tierMetric(func(t *TierResult) (float64, bool) {
			return t.UploadRatio(), t.RawPut.MBPerSec > 0 && t.Upload.MBPerSec > 0
		})},
	{Name: "cold read from the bucket vs the same records read from local segments (tier preset, raw Fetch from offset 0 after a restart, records/s)", Workload: "tier", Numerator: TargetTier, AtLeast: true, Want: 0.7, Unit: "x",
		metric: tierMetric(func(t *TierResult) (float64, bool) {
			return t.ColdReadRatio(), t.ColdRead.Records > 0 && t.LocalRead.Records > 0
		})},
	{Name: "first-record latency of a cold read, worst partition (tier preset)", Workload: "tier", Numerator: TargetTier, AtLeast: false, Want: 50, Unit: "ms",
		metric: tierMetric(func(t *TierResult) (float64, bool) { return t.ColdFirstRecord.MaxMs, t.ColdFirstRecord.N > 0 })},
}

// Issue17Goals compare Strata with Apache Kafka on the same machine in
// the same run (the kafka and kafka-cluster targets); issue 2's latency
// goal keeps the comparison with kfake.
var Issue17Goals = []Goal{
	{Name: "produce throughput vs Apache Kafka (throughput preset)", Workload: "throughput", Numerator: TargetStrata, Denominator: TargetKafka, AtLeast: true, Want: 1.5, Unit: "x", metric: produceMBps},
	{Name: "consume throughput from page cache vs Apache Kafka, as served (throughput preset, raw Fetch read-back, fastest of 3 passes, records/s)", Workload: "throughput", Numerator: TargetStrata, Denominator: TargetKafka, AtLeast: true, Want: 1.0, Unit: "x", metric: rawRecordsPerSec},
	{Name: "broker CPU seconds per GB served vs Apache Kafka (throughput preset, raw Fetch read-back, 3 passes)", Workload: "throughput", Numerator: TargetStrata, Denominator: TargetKafka, AtLeast: false, Want: 0.5, Unit: "x", metric: cpuPerGBServed},
	{Name: "broker CPU seconds per GB produced vs Apache Kafka (throughput preset, run phase, one consumer alongside)", Workload: "throughput", Numerator: TargetStrata, Denominator: TargetKafka, AtLeast: false, Want: 0.5, Unit: "x", metric: cpuPerGBProduced},
	{Name: "p99 produce latency at 2,000 rec/s, linger 0, vs Apache Kafka (latency preset)", Workload: "latency", Numerator: TargetStrata, Denominator: TargetKafka, AtLeast: false, Want: 0.5, Unit: "x", metric: produceP99},
	{Name: "p99 produce latency at 2,000 rec/s, linger 0, RF=3 acks=-1: three Strata brokers vs three Kafka nodes (replication-latency preset)", Workload: "replication-latency", Numerator: TargetCluster, Denominator: TargetKafkaCluster, AtLeast: false, Want: 0.5, Unit: "x", metric: produceP99},
	{Name: "broker peak RSS vs Apache Kafka (throughput preset)", Workload: "throughput", Numerator: TargetStrata, Denominator: TargetKafka, AtLeast: false, Want: 0.25, Unit: "x", metric: peakRSSMB},
}

// Issue25Goals compare Strata and Apache Kafka over TLS, with the same
// certificates and cipher suite, in the same run (the tls preset).
var Issue25Goals = []Goal{
	{Name: "produce throughput over TLS vs Apache Kafka over TLS (tls preset)", Workload: "tls", Numerator: TargetStrataTLS, Denominator: TargetKafkaTLS, AtLeast: true, Want: 1.5, Unit: "x", metric: produceMBps},
	{Name: "consume throughput from page cache over TLS vs Apache Kafka over TLS, as served (tls preset, raw Fetch read-back, fastest of 3 passes, records/s)", Workload: "tls", Numerator: TargetStrataTLS, Denominator: TargetKafkaTLS, AtLeast: true, Want: 1.5, Unit: "x", metric: rawRecordsPerSec},
	{Name: "broker CPU seconds per GB served over TLS vs Apache Kafka over TLS (tls preset, raw Fetch read-back, 3 passes)", Workload: "tls", Numerator: TargetStrataTLS, Denominator: TargetKafkaTLS, AtLeast: false, Want: 0.5, Unit: "x", metric: cpuPerGBServed},
	{Name: "broker CPU seconds per GB produced over TLS vs Apache Kafka over TLS (tls preset, run phase, one consumer alongside)", Workload: "tls", Numerator: TargetStrataTLS, Denominator: TargetKafkaTLS, AtLeast: false, Want: 0.5, Unit: "x", metric: cpuPerGBProduced},
}

func e2eP99(r Result) (float64, bool) { return r.EndToEnd.P99Ms, r.EndToEnd.Count > 0 }

// Issue26Goals are the transactions' targets: transactional produce
// (records counted once committed) against the idempotent producer on the
// same broker and against Apache Kafka's transactions, and the end-to-end
// latency a read_committed consumer sees, in the same run.
var Issue26Goals = []Goal{
	{Name: "transactional produce throughput, transactions of 10,000 records, vs idempotent produce on the same broker (txn vs txn-idempotent preset, Strata)", Workload: "txn", Numerator: TargetStrata, Denominator: TargetStrata, DenominatorWorkload: "txn-idempotent", AtLeast: true, Want: 0.8, Unit: "x", metric: produceMBps},
	{Name: "transactional produce throughput, transactions of 10,000 records, vs Apache Kafka (txn preset)", Workload: "txn", Numerator: TargetStrata, Denominator: TargetKafka, AtLeast: true, Want: 1.5, Unit: "x", metric: produceMBps},
	{Name: "transactional produce throughput, transactions of 100 records, vs Apache Kafka (txn-100 preset)", Workload: "txn-100", Numerator: TargetStrata, Denominator: TargetKafka, AtLeast: true, Want: 1.5, Unit: "x", metric: produceMBps},
	{Name: "p99 end-to-end latency of a read_committed consumer at 2,000 rec/s in transactions of 100, vs Apache Kafka (txn-latency preset)", Workload: "txn-latency", Numerator: TargetStrata, Denominator: TargetKafka, AtLeast: false, Want: 0.5, Unit: "x", metric: e2eP99},
}

// Goals are every issue's goals, as `strata bench` evaluates them.
var Goals = slices.Concat(Issue2Goals, Issue17Goals, Issue5Goals, Issue6Goals, Issue16Goals, Issue25Goals, Issue26Goals)

// Evaluate checks g against the reports (see [GoalResult] for how).
func (g Goal) Evaluate(reports []*Report) GoalResult {
	op := "≤"
	if g.AtLeast {
		op = "≥"
	}
	gr := GoalResult{Name: g.Name, Want: fmt.Sprintf("%s %g%s", op, g.Want, g.Unit), Unit: g.Unit}
	vals := g.values(reports)
	if len(vals) == 0 {
		if g.Denominator == "" {
			gr.Note = "no " + g.Numerator + " result"
		} else {
			gr.Note = fmt.Sprintf("workload %s has no successful run against both %s and %s", g.Workload, g.Numerator, g.Denominator)
			if g.DenominatorWorkload != "" {
				gr.Note = fmt.Sprintf("no run of both workload %s and workload %s on %s", g.Workload, g.DenominatorWorkload, g.Numerator)
			}
		}
		return gr
	}
	gr.Evaluated, gr.Runs, gr.Min, gr.Max = true, len(vals), slices.Min(vals), slices.Max(vals)
	worst, best := gr.Min, gr.Max
	if !g.AtLeast {
		worst, best = best, worst
	}
	if g.Denominator == "" && !g.RatioInRun {
		gr.Measured = worst
		gr.Pass = g.meets(worst)
		if gr.Runs > 1 {
			gr.Note = fmt.Sprintf("worst of %d runs", gr.Runs)
		}
		return gr
	}
	// The median ratio, so that repeated runs (--count) damp a noisy
	// machine; the runs' range is the noise that judges a miss.
	gr.Measured = median(vals)
	gr.Pass = g.meets(gr.Measured)
	switch {
	case gr.Runs == 1:
		if !gr.Pass {
			gr.Note = "1 run, noise unknown"
		}
	case !gr.Pass && g.meets(best):
		gr.Inconclusive = true
		gr.Note = fmt.Sprintf("median of %d runs; the goal is within their range", gr.Runs)
	default:
		gr.Note = fmt.Sprintf("median of %d runs", gr.Runs)
	}
	return gr
}

// meets reports whether v meets the goal.
func (g Goal) meets(v float64) bool {
	if g.AtLeast {
		return v >= g.Want
	}
	return v <= g.Want
}

// values returns the goal's metric in each run: the ratio of Numerator's
// to Denominator's in each report of Workload, or for an absolute goal
// Numerator's value in each report (of Workload, when set).
func (g Goal) values(reports []*Report) []float64 {
	var vals []float64
	for _, rep := range reports {
		if g.Workload != "" && rep.Workload.Name != g.Workload {
			continue
		}
		num, ok := rep.Result(g.Numerator)
		if !ok {
			continue
		}
		n, ok := g.metric(num)
		if !ok {
			continue
		}
		if g.Denominator == "" {
			vals = append(vals, n)
			continue
		}
		denRep := rep
		if g.DenominatorWorkload != "" {
			denRep = nil
			for _, r := range reports {
				if r.Workload.Name == g.DenominatorWorkload && r.Run == rep.Run {
					denRep = r
					break
				}
			}
			if denRep == nil {
				continue
			}
		}
		den, ok := denRep.Result(g.Denominator)
		if !ok {
			continue
		}
		if d, ok := g.metric(den); ok && d != 0 {
			vals = append(vals, n/d)
		}
	}
	return vals
}

// median returns the median of xs (not empty); it sorts xs.
func median(xs []float64) float64 {
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}
