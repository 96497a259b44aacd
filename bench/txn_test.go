package bench

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"strata/internal/testenv"
)

// checkTxn checks the transaction figures of a result of a transactional
// workload: every producer committed its warm-up transaction, then
// transactions of TxnRecords records (each producer's last one shorter),
// and each wrote a marker per partition it touched.
func checkTxn(t *testing.T, res Result, w Workload) {
	t.Helper()
	prods := int64(w.Producers * w.Topics)
	run := res.Acked - prods // one record per warm-up transaction
	per := int64(w.TxnRecords)
	lo, hi := prods+(run+per-1)/per, prods+run/per+prods
	if res.Transactions < lo || res.Transactions > hi {
		t.Errorf("%s: %d transactions for %d records in transactions of %d, want %d..%d", res.Target, res.Transactions, res.Acked, per, lo, hi)
	}
	if res.TxnMarkers < res.Transactions || res.TxnMarkers > res.Transactions*int64(w.Partitions) {
		t.Errorf("%s: %d commit markers for %d transactions over %d partitions", res.Target, res.TxnMarkers, res.Transactions, w.Partitions)
	}
}

// TestTxnGoals pins how the transaction goals pair workloads: the
// transactional run against the idempotent one of the same run number.
func TestTxnGoals(t *testing.T) {
	rep := func(name string, run int, strata, kafka float64) *Report {
		res := func(target string, v float64) Result {
			return Result{Target: target, Produce: Throughput{Records: 1, MBPerSec: v}}
		}
		return &Report{Workload: Workload{Name: name}, Run: run, Results: []Result{res(TargetStrata, strata), res(TargetKafka, kafka)}}
	}
	g := Issue26Goals[0]
	if g.Workload != "txn" || g.DenominatorWorkload != "txn-idempotent" {
		t.Fatalf("first goal %+v", g)
	}
	reps := []*Report{
		rep("txn-idempotent", 1, 100, 50), rep("txn", 1, 90, 40),
		rep("txn-idempotent", 2, 200, 50), rep("txn", 2, 100, 40),
		rep("txn", 3, 100, 40), // no idempotent run 3: not paired
	}
	gr := g.Evaluate(reps)
	if !gr.Evaluated || gr.Runs != 2 || gr.Min != 0.5 || gr.Max != 0.9 || gr.Verdict() != "INCONCLUSIVE" {
		t.Errorf("txn vs txn-idempotent: %s %+v", gr.Verdict(), gr)
	}
	if gr := g.Evaluate(reps[1:2]); gr.Evaluated || !strings.Contains(gr.Note, "txn-idempotent") {
		t.Errorf("without the idempotent run: %+v", gr)
	}
	if gr := Issue26Goals[1].Evaluate(reps); !gr.Evaluated || gr.Runs != 3 || gr.Measured != 2.5 || !gr.Pass {
		t.Errorf("txn vs kafka: %+v", gr)
	}
}

func TestTxnWorkloadValidate(t *testing.T) {
	w := smokeWorkload(t, "txn").WithDefaults()
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		change func(*Workload)
		want   string
	}{
		{func(w *Workload) { w.Acks = "1" }, "acks=all"},
		{func(w *Workload) { w.NoIdempotence = true }, "idempotent"},
		{func(w *Workload) { w.ReadBack = true }, "read-back"},
		{func(w *Workload) { w.TxnRecords = -1 }, "txn records"},
	} {
		bad := w
		c.change(&bad)
		if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error about %s", bad, err, c.want)
		}
	}
	if got := DefaultTargets(w); len(got) != 2 || got[0] != TargetStrata || got[1] != TargetKafka {
		t.Errorf("default targets %v", got)
	}
	if !strings.Contains(w.Describe(), "committing every 1000 records") {
		t.Errorf("describe: %s", w.Describe())
	}
}

// TestTxnPresets runs the transaction presets, shrunk: txn-idempotent on
// Strata and txn on Strata and the real Apache Kafka (transactional
// producers, read_committed consumers), as `make bench-txn` does, and
// checks every result, the commit markers, the goals that pair them, the
// report and the latency plot. txn-100 and txn-latency run on Strata in
// TestPresetsSmoke.
func TestTxnPresets(t *testing.T) {
	bin := testenv.BuildStrata(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	var brokerLog syncBuffer
	var cfgs []Config
	for _, name := range []string{"txn-idempotent", "txn"} {
		c := Config{Workload: smokeWorkload(t, name), StrataBin: bin, BrokerLog: &brokerLog}
		if name == "txn-idempotent" {
			c.Targets = []string{TargetStrata}
		}
		cfgs = append(cfgs, c)
	}
	began := time.Now()
	s, err := RunSuite(ctx, cfgs, Issue26Goals)
	t.Logf("txn presets in %s", time.Since(began).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("%v\nbroker log tail: %s", err, lastLines(brokerLog.String(), 20))
	}
	if len(s.Reports) != 2 || len(s.Reports[1].Results) != 2 {
		t.Fatalf("reports %+v", s.Reports)
	}
	for _, rep := range s.Reports {
		for _, res := range rep.Results {
			checkConsistent(t, res, rep.Workload)
			if b := res.Broker; b == nil || b.CPUSeconds <= 0 || b.PhaseCPU[phaseRun] <= 0 {
				t.Errorf("%s %s: broker resources %+v", rep.Workload.Name, res.Target, b)
			}
		}
	}
	for _, g := range s.Goals[:2] {
		if !g.Evaluated || g.Measured <= 0 {
			t.Errorf("goal %q: %+v", g.Name, g)
		}
	}
	dir := t.TempDir()
	if err := s.Write(dir); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "txn-latency.png")); err != nil || fi.Size() == 0 {
		t.Errorf("latency plot: %v", err)
	}
	md := s.Markdown("")
	num := `[0-9.]+`
	for _, re := range []string{
		`\| metric \| strata \| kafka \| strata/kafka \|`,
		`\| transactions committed \(all\) \| ` + num + ` \| ` + num + ` \| ` + num + `x \|`,
		`\| commit markers in topics \| ` + num + ` \| ` + num + ` \| ` + num + `x \|`,
		`\| end-to-end latency p99 ms \| ` + num + ` \| ` + num + ` \| ` + num + `x \|`,
		`transactional producers committing every 1000 records`,
		`\| transactional produce throughput, transactions of 10,000 records, vs idempotent produce on the same broker`,
	} {
		if !regexp.MustCompile(re).MatchString(md) {
			t.Errorf("report lacks %s:\n%s", re, md)
		}
	}
}
