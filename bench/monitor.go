package bench

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// RatePoint is the throughput over one sample interval ending at T seconds
// after the phase started.
type RatePoint struct {
	T             float64 `json:"t_s"`
	RecordsPerSec float64 `json:"records_per_s"`
	MBPerSec      float64 `json:"mb_per_s"`
}

// ResourcePoint is one sample of the broker process.
type ResourcePoint struct {
	T          float64 `json:"t_s"` // seconds since the broker was started
	RSSBytes   int64   `json:"rss_bytes"`
	CPUSeconds float64 `json:"cpu_s"`
}

// monitor samples a phase's counters and the broker's resources every
// interval, and prints the progress line.
type monitor struct {
	cfg    Config
	label  string // "target workload"
	tg     target
	origin time.Time

	mu         sync.Mutex
	resources  []ResourcePoint
	peakRSS    int64
	produceCPU float64
	consumeCPU float64
}

func newMonitor(cfg Config, tg target, label string) *monitor {
	m := &monitor{cfg: cfg, tg: tg, label: label, origin: time.Now()}
	m.sampleResources()
	return m
}

func (m *monitor) sampleResources() (procSample, bool) {
	s, ok := m.tg.Sample()
	if !ok {
		return s, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.resources = append(m.resources, ResourcePoint{
		T: time.Since(m.origin).Seconds(), RSSBytes: s.RSSBytes, CPUSeconds: s.CPUSeconds,
	})
	m.peakRSS = max(m.peakRSS, s.RSSBytes, s.HWMBytes)
	return s, true
}

// phase samples ctr until stop is closed and returns the timeline. total
// is the number of records the phase expects, for the progress line; hist
// is shown when not nil.
func (m *monitor) phase(name string, ctr *counters, total int64, hist *latencyHist, stop <-chan struct{}) []RatePoint {
	start := time.Now()
	tick := time.NewTicker(m.cfg.SampleInterval)
	defer tick.Stop()
	var points []RatePoint
	var lastRecs, lastBytes int64
	last := start
	sample := func(now time.Time, final bool) {
		recs, bytes := ctr.records.Load(), ctr.bytes.Load()
		dt := now.Sub(last).Seconds()
		// A short last interval gives a noisy rate: fold it away unless
		// it is all there is.
		if dt <= 0 || (final && len(points) > 0 && dt < m.cfg.SampleInterval.Seconds()/2) {
			if len(points) > 0 {
				m.progress(name, now.Sub(start), recs, total, points[len(points)-1], ctr.errors.Load(), hist)
			}
			return
		}
		points = append(points, RatePoint{
			T:             now.Sub(start).Seconds(),
			RecordsPerSec: float64(recs-lastRecs) / dt,
			MBPerSec:      float64(bytes-lastBytes) / dt / 1e6,
		})
		lastRecs, lastBytes, last = recs, bytes, now
		m.progress(name, now.Sub(start), recs, total, points[len(points)-1], ctr.errors.Load(), hist)
	}
	for {
		select {
		case now := <-tick.C:
			m.sampleResources()
			sample(now, false)
		case <-stop:
			sample(time.Now(), true)
			return points
		}
	}
}

func (m *monitor) progress(phase string, el time.Duration, recs, total int64, p RatePoint, errs int64, hist *latencyHist) {
	w := m.cfg.Progress
	if w == nil {
		return
	}
	line := fmt.Sprintf("%s %s %5.1fs %d/%d rec %8.0f rec/s %7.1f MB/s", m.label, phase, el.Seconds(), recs, total, p.RecordsPerSec, p.MBPerSec)
	if hist != nil {
		line += fmt.Sprintf(" p99 %.2fms", hist.quantile(99))
	}
	if errs > 0 {
		line += fmt.Sprintf(" errors %d", errs)
	}
	m.mu.Lock()
	if n := len(m.resources); n > 0 {
		line += fmt.Sprintf(" rss %dMB", m.resources[n-1].RSSBytes>>20)
	}
	m.mu.Unlock()
	// \r and clear-to-end-of-line keep one live line on a terminal.
	_, _ = io.WriteString(w, "\r\x1b[K"+line)
}

// endProgress finishes the live line.
func (m *monitor) endProgress() {
	if m.cfg.Progress != nil {
		_, _ = io.WriteString(m.cfg.Progress, "\n")
	}
}

// cpu returns the broker's CPU seconds now, or 0 when not sampled.
func (m *monitor) cpu() float64 {
	s, ok := m.sampleResources()
	if !ok {
		return 0
	}
	return s.CPUSeconds
}

func (m *monitor) addPhaseCPU(dst *float64, d float64) {
	m.mu.Lock()
	*dst += d
	m.mu.Unlock()
}

// finish takes a last sample and returns the broker's figures.
func (m *monitor) finish() *Resources {
	last, _ := m.sampleResources()
	m.mu.Lock()
	defer m.mu.Unlock()
	return &Resources{
		PeakRSSBytes:      m.peakRSS,
		CPUSeconds:        last.CPUSeconds,
		ProduceCPUSeconds: m.produceCPU,
		ConsumeCPUSeconds: m.consumeCPU,
		WrittenBytes:      last.WrittenBytes,
		Samples:           m.resources,
	}
}
