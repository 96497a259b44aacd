package bench

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Write writes report.json, report.md, bench.txt (benchstat lines) and, per
// workload, <name>-latency.png and <name>-throughput.png into dir.
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
		if err := plotLatency(rep, filepath.Join(dir, rep.Label()+"-latency.png")); err != nil {
			return err
		}
		if err := plotThroughput(rep, filepath.Join(dir, rep.Label()+"-throughput.png")); err != nil {
			return err
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
			measured, result := "—", "not evaluated"
			if g.Evaluated {
				measured = fmt.Sprintf("%.2f%s", g.Measured, g.Unit)
				result = "FAIL"
				if g.Pass {
					result = "pass"
				}
			}
			if g.Note != "" {
				result += " (" + g.Note + ")"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", g.Name, g.Want, measured, result)
		}
	}
	for _, rep := range s.Reports {
		b.WriteString("\n")
		b.WriteString(rep.Markdown(plotDir))
	}
	return b.String()
}

// row is one metric of the comparison table.
type row struct {
	name  string
	value func(Result) (float64, bool)
}

var tableRows = []row{
	{"produce MB/s", func(r Result) (float64, bool) { return r.Produce.MBPerSec, r.Produce.Records > 0 }},
	{"produce records/s", func(r Result) (float64, bool) { return r.Produce.RecordsPerSec, r.Produce.Records > 0 }},
	{"produce latency p50 ms", func(r Result) (float64, bool) { return r.Latency.P50Ms, r.Latency.Count > 0 }},
	{"produce latency p99 ms", func(r Result) (float64, bool) { return r.Latency.P99Ms, r.Latency.Count > 0 }},
	{"produce latency p99.9 ms", func(r Result) (float64, bool) { return r.Latency.P999Ms, r.Latency.Count > 0 }},
	{"produce latency max ms", func(r Result) (float64, bool) { return r.Latency.MaxMs, r.Latency.Count > 0 }},
	{"consume MB/s", func(r Result) (float64, bool) { return r.Consume.MBPerSec, r.Consume.Records > 0 }},
	{"consume records/s", func(r Result) (float64, bool) { return r.Consume.RecordsPerSec, r.Consume.Records > 0 }},
	{"consume first record after ms", func(r Result) (float64, bool) { return r.ConsumeFirstMs, r.Consume.Records > 0 }},
	{"records acknowledged", func(r Result) (float64, bool) { return float64(r.Produce.Records), true }},
	{"records consumed", func(r Result) (float64, bool) { return float64(r.Consume.Records), true }},
	{"produce errors", func(r Result) (float64, bool) { return float64(r.ProduceErrors), true }},
	{"broker peak RSS MB", peakRSSMB},
	{"broker CPU s (produce)", func(r Result) (float64, bool) {
		if r.Broker == nil {
			return 0, false
		}
		return r.Broker.ProduceCPUSeconds, true
	}},
	{"broker CPU s (consume)", func(r Result) (float64, bool) {
		if r.Broker == nil {
			return 0, false
		}
		return r.Broker.ConsumeCPUSeconds, true
	}},
	{"broker disk writes MB", func(r Result) (float64, bool) {
		if r.Broker == nil || r.Broker.WrittenBytes < 0 {
			return 0, false
		}
		return float64(r.Broker.WrittenBytes) / 1e6, true
	}},
}

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
// per target and the ratio of the first target to the second.
func (r *Report) Markdown(plotDir string) string {
	var b strings.Builder
	w := r.Workload
	fmt.Fprintf(&b, "## Workload %s\n\n", r.Label())
	rate := "max"
	if w.Rate > 0 {
		rate = fmt.Sprintf("%g records/s (open loop)", w.Rate)
	}
	fmt.Fprintf(&b, "%d records of %d B, %d partitions, acks=%s, compression %s, linger %s, %d producer(s), rate %s",
		w.Records, w.RecordSize, w.Partitions, w.Acks, w.Compression, w.Linger, w.Producers, rate)
	if w.Rate == 0 && w.Duration > 0 {
		fmt.Fprintf(&b, ", at most %s", w.Duration)
	}
	b.WriteString(".\n")
	if r.LoadAvg != "" {
		fmt.Fprintf(&b, "Load average at start: %s", r.LoadAvg)
		if busy(r.LoadAvg) {
			b.WriteString(" (**busy machine: figures are noisy**)")
		}
		b.WriteString(".\n")
	}
	b.WriteString("\n")
	targets := make([]string, len(r.Results))
	for i, res := range r.Results {
		targets[i] = res.Target
	}
	ratio := len(r.Results) >= 2
	b.WriteString("| metric | " + strings.Join(targets, " | "))
	if ratio {
		fmt.Fprintf(&b, " | %s/%s", targets[0], targets[1])
	}
	b.WriteString(" |\n|---" + strings.Repeat("|---:", len(targets)))
	if ratio {
		b.WriteString("|---:")
	}
	b.WriteString("|\n")
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
		if ratio {
			rc := "—"
			if oks[0] && oks[1] && vals[1] != 0 {
				rc = fmt.Sprintf("%.2fx", vals[0]/vals[1])
			}
			b.WriteString(" | " + rc)
		}
		b.WriteString(" |\n")
	}
	for _, res := range r.Results {
		if res.Error != "" {
			fmt.Fprintf(&b, "\n**%s failed:** %s\n", res.Target, res.Error)
		}
	}
	fmt.Fprintf(&b, "\n![%[1]s latency](%[2]s%[1]s-latency.png) ![%[1]s throughput](%[2]s%[1]s-throughput.png)\n", r.Label(), plotDir)
	return b.String()
}

// Benchstat renders the suite as Go benchmark lines that benchstat reads:
// one Produce and one Consume line per workload and target, the iteration
// count being the number of records.
func (s *Suite) Benchstat() string {
	var b strings.Builder
	fmt.Fprintf(&b, "goos: %s\ngoarch: %s\npkg: strata/bench\n", s.Machine.OS, s.Machine.Arch)
	if s.Machine.CPUModel != "" {
		fmt.Fprintf(&b, "cpu: %s\n", s.Machine.CPUModel)
	}
	for _, rep := range s.Reports {
		for _, res := range rep.Results {
			if res.Error != "" {
				continue
			}
			name := fmt.Sprintf("workload=%s/target=%s", rep.Workload.Name, benchName(res.Target))
			if p := res.Produce; p.Records > 0 {
				fmt.Fprintf(&b, "BenchmarkProduce/%s %d %.0f ns/op %.2f MB/s %.0f records/s %.4g p50-ms %.4g p99-ms %.4g p999-ms",
					name, p.Records, p.Seconds*1e9/float64(p.Records), p.MBPerSec, p.RecordsPerSec,
					res.Latency.P50Ms, res.Latency.P99Ms, res.Latency.P999Ms)
				if res.Broker != nil {
					fmt.Fprintf(&b, " %d peak-rss-B %.3g broker-cpu-s", res.Broker.PeakRSSBytes, res.Broker.ProduceCPUSeconds)
				}
				b.WriteString("\n")
			}
			if c := res.Consume; c.Records > 0 {
				fmt.Fprintf(&b, "BenchmarkConsume/%s %d %.0f ns/op %.2f MB/s %.0f records/s\n",
					name, c.Records, c.Seconds*1e9/float64(c.Records), c.MBPerSec, c.RecordsPerSec)
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

// WriteMarkdown writes the markdown report to path with plot links
// pointing into plotDir (where Write put the plots).
func (s *Suite) WriteMarkdown(path, plotDir string) error {
	rel, err := filepath.Rel(filepath.Dir(path), plotDir)
	if err != nil {
		rel = plotDir
	}
	if err := os.WriteFile(path, []byte(s.Markdown(filepath.ToSlash(rel)+"/")), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
