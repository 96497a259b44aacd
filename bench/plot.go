package bench

import (
	"fmt"
	"math"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

const plotW, plotH = 8 * vg.Inch, 5 * vg.Inch

// nines maps a percentile to its "number of nines" (90 → 1, 99 → 2), the
// x axis of latency percentile curves.
func nines(p float64) float64 { return -math.Log10(1 - p/100) }

// plotFiles are the plots written per report, by file suffix.
var plotFiles = []struct {
	suffix  string
	draw    func(*Report, string) error
	applies func(*Report) bool // nil: every report
}{
	{"-latency.png", plotLatency, notTier},
	{"-throughput.png", plotThroughput, notTier},
	{"-lag.png", plotLag, notTier},
	{"-rebalance.png", plotRebalance, hasRebalances},
	{"-tier.png", plotTier, isTier},
	{"-move.png", plotMove, isMove},
}

func isTier(rep *Report) bool  { return rep.Workload.Tier != nil }
func notTier(rep *Report) bool { return rep.Workload.Tier == nil && rep.Workload.Move == nil }

// plotTier draws the tier benchmark's throughputs side by side: upload
// against raw PUT, cold read against local read and raw GET (MB/s).
func plotTier(rep *Report, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: tiered storage throughput", rep.Label())
	p.Y.Label.Text = "MB/s"
	p.Add(plotter.NewGrid())
	names := []string{"upload", "raw PUT", "cold read", "local read", "raw GET"}
	var vals plotter.Values
	for _, res := range rep.Results {
		if t := res.Tier; t != nil {
			vals = plotter.Values{t.Upload.MBPerSec, t.RawPut.MBPerSec, t.ColdRead.MBPerSec, t.LocalRead.MBPerSec, t.RawGet.MBPerSec}
			break
		}
	}
	if vals == nil {
		vals = make(plotter.Values, len(names))
	}
	bars, err := plotter.NewBarChart(vals, vg.Points(40))
	if err != nil {
		return fmt.Errorf("tier plot: %w", err)
	}
	p.Add(bars)
	p.NominalX(names...)
	return save(p, path)
}

func hasRebalances(rep *Report) bool {
	for _, res := range rep.Results {
		if res.Group != nil && len(res.Group.Rebalances) > 0 {
			return true
		}
	}
	return false
}

// plotRebalance draws, per target, the delivery rate over all members
// around its first measured rebalance (100 ms moving sums of the 10 ms
// buckets), with the member's join at 0.
func plotRebalance(rep *Report, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: records delivered to the group around a member joining", rep.Label())
	p.X.Label.Text = "seconds since the member joined"
	p.Y.Label.Text = "records/s (100 ms window)"
	p.Add(plotter.NewGrid())
	const window = int(100 * time.Millisecond / rebalanceBucket)
	lead := rebalanceLead.Seconds()
	var lines []any
	for _, res := range rep.Results {
		if res.Group == nil || len(res.Group.Rebalances) == 0 {
			continue
		}
		rates := res.Group.Rebalances[0].RecordsPerSec
		var xys plotter.XYs
		var sum float64
		for i, r := range rates {
			sum += r
			if i >= window {
				sum -= rates[i-window]
			}
			xys = append(xys, plotter.XY{X: float64(i+1)*rebalanceBucket.Seconds() - lead, Y: sum / float64(min(i+1, window))})
		}
		if len(xys) > 0 {
			lines = append(lines, res.Target, xys)
		}
	}
	if err := plotutil.AddLines(p, lines...); err != nil {
		return fmt.Errorf("rebalance plot: %w", err)
	}
	p.Y.Min = 0
	p.Legend.Top = true
	return save(p, path)
}

// plotLatency draws the produce and end-to-end latency percentile curves
// of every target.
func plotLatency(rep *Report, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: latency by percentile (produce-ack and end-to-end)", rep.Label())
	p.X.Label.Text = "percentile"
	p.Y.Label.Text = "latency (ms, log scale)"
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	var ticks []plot.Tick
	for _, t := range []struct {
		p     float64
		label string
	}{{0, "0"}, {90, "90"}, {99, "99"}, {99.9, "99.9"}, {99.99, "99.99"}, {99.999, "99.999"}} {
		ticks = append(ticks, plot.Tick{Value: nines(t.p), Label: t.label})
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.Add(plotter.NewGrid())
	var lines []any
	curve := func(name string, s LatencySummary) {
		var xys plotter.XYs
		for _, c := range s.Curve {
			if c.Ms > 0 {
				xys = append(xys, plotter.XY{X: nines(c.Percentile), Y: c.Ms})
			}
		}
		if len(xys) > 0 {
			lines = append(lines, name, xys)
		}
	}
	for _, res := range rep.Results {
		curve(res.Target+" produce", res.ProduceLatency)
		curve(res.Target+" end-to-end", res.EndToEnd)
	}
	if len(lines) == 0 {
		p.Y.Scale = plot.LinearScale{}
		p.Y.Tick.Marker = plot.DefaultTicks{}
	}
	if err := plotutil.AddLines(p, lines...); err != nil {
		return fmt.Errorf("latency plot: %w", err)
	}
	p.Legend.Top = true
	p.Legend.Left = true
	return save(p, path)
}

// plotThroughput draws produce and consume MB/s over time per target,
// through every phase (the read-back phase consumes only).
func plotThroughput(rep *Report, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: throughput over time", rep.Label())
	p.X.Label.Text = "seconds since the first phase started"
	p.Y.Label.Text = "MB/s"
	p.Add(plotter.NewGrid())
	var lines []any
	for _, res := range rep.Results {
		var prod, cons plotter.XYs
		for _, pt := range res.Timeline {
			prod = append(prod, plotter.XY{X: pt.T, Y: pt.ProduceMBPerSec})
			if pt.LagRecords >= 0 {
				cons = append(cons, plotter.XY{X: pt.T, Y: pt.ConsumeMBPerSec})
			}
		}
		if len(prod) > 0 {
			lines = append(lines, res.Target+" produce", prod)
		}
		if len(cons) > 0 {
			lines = append(lines, res.Target+" consume", cons)
		}
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return fmt.Errorf("throughput plot: %w", err)
	}
	p.Legend.Top = true
	return save(p, path)
}

// plotLag draws the consumers' lag in records over time per target.
func plotLag(rep *Report, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: consumer lag over time", rep.Label())
	p.X.Label.Text = "seconds since the first phase started"
	p.Y.Label.Text = "records acknowledged but not yet consumed"
	p.Add(plotter.NewGrid())
	var lines []any
	for _, res := range rep.Results {
		var lag plotter.XYs
		for _, pt := range res.Timeline {
			if pt.LagRecords >= 0 && pt.Phase != phaseReadBack && pt.Phase != phaseRawRead && pt.Phase != phaseRawFloor {
				lag = append(lag, plotter.XY{X: pt.T, Y: float64(pt.LagRecords)})
			}
		}
		if len(lag) > 0 {
			lines = append(lines, res.Target, lag)
		}
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return fmt.Errorf("lag plot: %w", err)
	}
	p.Legend.Top = true
	return save(p, path)
}

func save(p *plot.Plot, path string) error {
	if err := p.Save(plotW, plotH, path); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	return nil
}
