package bench

import (
	"math"
	"sync"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Histogram range: 1 µs to 60 s with 3 significant digits.
const (
	histMinMicros = 1
	histMaxMicros = 60_000_000
	histSigFigs   = 3
)

// latencyHist is a concurrency-safe HDR histogram of durations in
// microseconds. Values below the range are recorded as the minimum, values
// above as the maximum, and negative values are counted apart so that a
// clock bug shows in the report instead of vanishing.
type latencyHist struct {
	mu       sync.Mutex
	h        *hdrhistogram.Histogram
	negative int64
}

func newLatencyHist() *latencyHist {
	return &latencyHist{h: newHDR()}
}

func (l *latencyHist) record(d time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.negative += recordInto(l.h, d)
}

// recordInto records d in h, clamped to the histogram's range, and
// returns 1 if d was negative (and not recorded), else 0.
func recordInto(h *hdrhistogram.Histogram, d time.Duration) int64 {
	us := d.Microseconds()
	if d < 0 {
		return 1
	}
	us = min(max(us, histMinMicros), histMaxMicros)
	_ = h.RecordValue(us) // in range by construction
	return 0
}

// newHDR returns an empty histogram with the harness's range, for a
// goroutine to fill alone and [latencyHist.merge] later.
func newHDR() *hdrhistogram.Histogram {
	return hdrhistogram.New(histMinMicros, histMaxMicros, histSigFigs)
}

// merge adds a histogram filled by one goroutine and its count of
// negative values.
func (l *latencyHist) merge(h *hdrhistogram.Histogram, negative int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.h.Merge(h)
	l.negative += negative
}

// quantile returns the q-th percentile (0..100) in milliseconds.
func (l *latencyHist) quantile(q float64) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return float64(l.h.ValueAtQuantile(q)) / 1000
}

// LatencySummary is a latency distribution in milliseconds.
type LatencySummary struct {
	Count    int64   `json:"count"`
	Negative int64   `json:"negative"` // latencies below zero (must be 0)
	MeanMs   float64 `json:"mean_ms"`
	P50Ms    float64 `json:"p50_ms"`
	P90Ms    float64 `json:"p90_ms"`
	P99Ms    float64 `json:"p99_ms"`
	P999Ms   float64 `json:"p999_ms"`
	MaxMs    float64 `json:"max_ms"`
	// Curve is the percentile curve for plotting: percentile (0..100) to ms.
	Curve []CurvePoint `json:"curve"`
}

// CurvePoint is one point of a latency percentile curve.
type CurvePoint struct {
	Percentile float64 `json:"percentile"`
	Ms         float64 `json:"ms"`
}

// curvePercentiles spans 0 to 99.999 evenly in "nines".
func curvePercentiles() []float64 {
	var ps []float64
	for nines := 0.0; nines <= 5.0001; nines += 0.125 {
		ps = append(ps, 100*(1-math.Pow(10, -nines)))
	}
	return ps
}

func (l *latencyHist) summary() LatencySummary {
	l.mu.Lock()
	defer l.mu.Unlock()
	h := l.h
	s := LatencySummary{
		Count:    h.TotalCount(),
		Negative: l.negative,
	}
	if s.Count == 0 {
		return s
	}
	ms := func(v int64) float64 { return float64(v) / 1000 }
	s.MeanMs = h.Mean() / 1000
	s.P50Ms = ms(h.ValueAtQuantile(50))
	s.P90Ms = ms(h.ValueAtQuantile(90))
	s.P99Ms = ms(h.ValueAtQuantile(99))
	s.P999Ms = ms(h.ValueAtQuantile(99.9))
	s.MaxMs = ms(h.Max())
	for _, p := range curvePercentiles() {
		s.Curve = append(s.Curve, CurvePoint{Percentile: p, Ms: ms(h.ValueAtQuantile(p))})
	}
	return s
}
