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
	metric      func(Result) (float64, bool)
}

// GoalResult is a Goal evaluated.
type GoalResult struct {
	Name      string  `json:"name"`
	Want      string  `json:"want"`
	Measured  float64 `json:"measured"`
	Unit      string  `json:"unit"`
	Evaluated bool    `json:"evaluated"` // false when the needed results are missing
	Pass      bool    `json:"pass"`
	Note      string  `json:"note,omitempty"`
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

// Goals are every issue's goals, as `strata bench` evaluates them.
var Goals = slices.Concat(Issue2Goals, Issue5Goals, Issue6Goals)

// Evaluate checks g against the reports.
func (g Goal) Evaluate(reports []*Report) GoalResult {
	op := "≤"
	if g.AtLeast {
		op = "≥"
	}
	gr := GoalResult{Name: g.Name, Want: fmt.Sprintf("%s %g%s", op, g.Want, g.Unit), Unit: g.Unit}
	pass := func(v float64) bool {
		if g.AtLeast {
			return v >= g.Want
		}
		return v <= g.Want
	}
	if g.Denominator == "" {
		found := false
		for _, rep := range reports {
			if g.Workload != "" && rep.Workload.Name != g.Workload {
				continue
			}
			res, ok := rep.Result(g.Numerator)
			if !ok {
				continue
			}
			v, ok := g.metric(res)
			if !ok {
				continue
			}
			if !found || (g.AtLeast && v < gr.Measured) || (!g.AtLeast && v > gr.Measured) {
				gr.Measured = v
			}
			found = true
		}
		if !found {
			gr.Note = "no " + g.Numerator + " result"
			return gr
		}
		gr.Evaluated, gr.Pass = true, pass(gr.Measured)
		return gr
	}
	// Ratio goal: the median ratio over the runs of the workload, so that
	// repeated runs (--count) damp a noisy machine.
	var ratios []float64
	for _, rep := range reports {
		if rep.Workload.Name != g.Workload {
			continue
		}
		num, ok1 := rep.Result(g.Numerator)
		den, ok2 := rep.Result(g.Denominator)
		if !ok1 || !ok2 {
			continue
		}
		n, ok1 := g.metric(num)
		d, ok2 := g.metric(den)
		if ok1 && ok2 && d != 0 {
			ratios = append(ratios, n/d)
		}
	}
	if len(ratios) == 0 {
		gr.Note = fmt.Sprintf("workload %s has no successful run against both %s and %s", g.Workload, g.Numerator, g.Denominator)
		return gr
	}
	gr.Measured = median(ratios)
	gr.Evaluated, gr.Pass = true, pass(gr.Measured)
	if len(ratios) > 1 {
		gr.Note = fmt.Sprintf("median of %d runs", len(ratios))
	}
	return gr
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
