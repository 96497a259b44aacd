package bench

import (
	"strings"
	"testing"
)

// TestGoalNoise pins how a goal is judged against the run-to-run noise it
// measured (issue 14, item 10): a miss within the runs' range is
// INCONCLUSIVE, not FAIL; one run has no measured noise.
func TestGoalNoise(t *testing.T) {
	mbps := func(r Result) (float64, bool) { return r.Produce.MBPerSec, r.Produce.MBPerSec > 0 }
	faster := Goal{Name: "faster", Workload: "w", Numerator: TargetStrata, Denominator: TargetKfake, AtLeast: true, Want: 1, Unit: "x", metric: mbps}
	slower := faster
	slower.Name, slower.AtLeast = "slower", false
	bound := Goal{Name: "bound", Numerator: TargetStrata, Want: 256, Unit: "MB", metric: mbps}
	inRun := Goal{Name: "growth", Numerator: TargetStrata, Want: 200, Unit: "x", RatioInRun: true, metric: mbps}
	// runs makes a report per ratio: strata at 100*ratio MB/s, kfake at 100.
	runs := func(ratios ...float64) []*Report {
		var reps []*Report
		for i, r := range ratios {
			res := func(target string, v float64) Result {
				return Result{Target: target, Produce: Throughput{MBPerSec: v}}
			}
			reps = append(reps, &Report{Workload: Workload{Name: "w"}, Run: i + 1,
				Results: []Result{res(TargetStrata, 100*r), res(TargetKfake, 100)}})
		}
		return reps
	}
	for _, c := range []struct {
		name     string
		goal     Goal
		reports  []*Report
		verdict  string
		measured float64
		note     string
	}{
		{"clear pass", faster, runs(1.2, 1.3, 1.25), "pass", 1.25, "median of 3 runs"},
		{"clear fail", faster, runs(0.7, 0.8, 0.75), "FAIL", 0.75, "median of 3 runs"},
		{"miss within noise", faster, runs(0.9, 0.97, 1.05), "INCONCLUSIVE", 0.97, "median of 3 runs; the goal is within their range"},
		{"miss within noise of two runs", faster, runs(0.9, 1.04), "INCONCLUSIVE", 0.97, "median of 2 runs; the goal is within their range"},
		{"pass with a run below", faster, runs(0.9, 1.1, 1.2), "pass", 1.1, "median of 3 runs"},
		{"one run, miss", faster, runs(0.97), "FAIL", 0.97, "1 run, noise unknown"},
		{"one run, pass", faster, runs(1.03), "pass", 1.03, ""},
		{"at most: miss within noise", slower, runs(0.95, 1.03, 1.1), "INCONCLUSIVE", 1.03, "median of 3 runs; the goal is within their range"},
		{"at most: every run misses", slower, runs(1.02, 1.03, 1.05), "FAIL", 1.03, "median of 3 runs"},
		{"bound: the worst run decides", bound, runs(2, 3), "FAIL", 300, "worst of 2 runs"},
		{"bound held", bound, runs(2, 2.5), "pass", 250, "worst of 2 runs"},
		{"ratio in a run: the median decides", inRun, runs(1.1, 1.7, 2.2), "pass", 170, "median of 3 runs"},
		{"ratio in a run: miss within noise", inRun, runs(1.9, 2.1, 2.2), "INCONCLUSIVE", 210, "median of 3 runs; the goal is within their range"},
		{"ratio in a run: every run misses", inRun, runs(2.1, 2.2, 2.3), "FAIL", 220, "median of 3 runs"},
	} {
		g := c.goal.Evaluate(c.reports)
		if g.Verdict() != c.verdict || g.Measured < c.measured-1e-9 || g.Measured > c.measured+1e-9 || g.Note != c.note ||
			g.Runs != len(c.reports) || g.Inconclusive != (c.verdict == "INCONCLUSIVE") || g.Pass != (c.verdict == "pass") {
			t.Errorf("%s: %s %+v, want %s, measured %g, note %q", c.name, g.Verdict(), g, c.verdict, c.measured, c.note)
		}
	}
	if g := faster.Evaluate(nil); g.Verdict() != "not evaluated" || g.Pass || g.Inconclusive {
		t.Errorf("no runs: %s %+v", g.Verdict(), g)
	}

	// The report shows the runs' range, the verdict and the rule.
	s := &Suite{Goals: []GoalResult{faster.Evaluate(runs(0.9, 0.97, 1.05)), faster.Evaluate(runs(0.97))}}
	md := s.Markdown("")
	for _, want := range []string{
		"| faster | ≥ 1x | 0.97x (runs 0.90–1.05x) | INCONCLUSIVE (median of 3 runs; the goal is within their range) |",
		"| faster | ≥ 1x | 0.97x | FAIL (1 run, noise unknown) |",
		"A median that misses is INCONCLUSIVE when at least one run met the goal",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
}
