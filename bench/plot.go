package bench

import (
	"fmt"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

const plotW, plotH = 8 * vg.Inch, 5 * vg.Inch

// nines maps a percentile to its "number of nines" (90 → 1, 99 → 2), the
// x axis of latency percentile curves.
func nines(p float64) float64 { return -math.Log10(1 - p/100) }

// plotLatency draws the produce latency percentile curve of every target.
func plotLatency(rep *Report, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: produce latency by percentile", rep.Label())
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
	for _, res := range rep.Results {
		var xys plotter.XYs
		for _, c := range res.Latency.Curve {
			if c.Ms > 0 {
				xys = append(xys, plotter.XY{X: nines(c.Percentile), Y: c.Ms})
			}
		}
		if len(xys) > 0 {
			lines = append(lines, res.Target, xys)
		}
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
	if err := p.Save(plotW, plotH, path); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	return nil
}

// plotThroughput draws MB/s over time of the produce phase followed by the
// consume phase, per target.
func plotThroughput(rep *Report, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: throughput over time (produce, then consume)", rep.Label())
	p.X.Label.Text = "seconds"
	p.Y.Label.Text = "MB/s"
	p.Add(plotter.NewGrid())
	var lines []any
	for _, res := range rep.Results {
		prod := make(plotter.XYs, 0, len(res.ProduceSeries))
		var end float64
		for _, pt := range res.ProduceSeries {
			prod = append(prod, plotter.XY{X: pt.T, Y: pt.MBPerSec})
			end = pt.T
		}
		cons := make(plotter.XYs, 0, len(res.ConsumeSeries))
		for _, pt := range res.ConsumeSeries {
			cons = append(cons, plotter.XY{X: end + pt.T, Y: pt.MBPerSec})
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
	if err := p.Save(plotW, plotH, path); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	return nil
}
