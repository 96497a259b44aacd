package bench

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// TimelinePoint is one sample interval ending T seconds after the target
// run's first phase started.
type TimelinePoint struct {
	T                    float64 `json:"t_s"`
	Phase                string  `json:"phase"`
	ProduceRecordsPerSec float64 `json:"produce_records_per_s"`
	ProduceMBPerSec      float64 `json:"produce_mb_per_s"`
	ConsumeRecordsPerSec float64 `json:"consume_records_per_s"`
	ConsumeMBPerSec      float64 `json:"consume_mb_per_s"`
	// LagRecords is records acknowledged (or, in read-back, in the topics)
	// and not yet read by the phase's consumers; -1 when nothing consumes.
	LagRecords int64 `json:"lag_records"`
}

// ResourcePoint is one sample of the broker process.
type ResourcePoint struct {
	T          float64 `json:"t_s"` // seconds since the first phase started
	RSSBytes   int64   `json:"rss_bytes"`
	CPUSeconds float64 `json:"cpu_s"`
}

// Phase names.
const (
	phaseBacklog  = "backlog"
	phaseRun      = "run"
	phaseDrain    = "drain"
	phaseReadBack = "read-back"
	phaseRawRead  = "raw-read-back"
	phaseRawFloor = "raw-read-floor" // the floor server's raw read-back (floor.go)
)

// monitor samples the live counters and the broker's resources every
// interval, keeps the timelines and prints the progress line.
type monitor struct {
	cfg    Config
	label  string
	tg     target
	origin time.Time
	hist   *latencyHist // produce latency, for the progress line

	mu         sync.Mutex
	phase      string
	phaseStart time.Time
	prod, cons *counters // cons nil when nothing consumes
	total      int64     // read-back: records to read
	lastT      time.Time
	lastProd   [2]int64 // records, bytes
	lastCons   [2]int64
	timeline   []TimelinePoint
	resources  []ResourcePoint
	peakRSS    int64
	phaseCPU   map[string]float64
	cpuMark    float64
	lastSample procSample
	sampled    bool

	stop chan struct{}
	done chan struct{}
}

func newMonitor(cfg Config, tg target, label string, prod *counters, hist *latencyHist) *monitor {
	now := time.Now()
	m := &monitor{cfg: cfg, tg: tg, label: label, origin: now, hist: hist, prod: prod,
		lastT: now, phaseCPU: map[string]float64{}, stop: make(chan struct{}), done: make(chan struct{})}
	if s, ok := m.sampleResources(now); ok {
		m.cpuMark = s.CPUSeconds
	}
	go m.loop()
	return m
}

func (m *monitor) loop() {
	defer close(m.done)
	tick := time.NewTicker(m.cfg.SampleInterval.D())
	defer tick.Stop()
	for {
		select {
		case now := <-tick.C:
			m.sampleResources(now)
			m.sample(now, false)
		case <-m.stop:
			return
		}
	}
}

// sampleResources reads the broker process, when the harness owns it.
func (m *monitor) sampleResources(now time.Time) (procSample, bool) {
	s, ok := m.tg.Sample()
	if !ok {
		return s, false
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.resources = append(m.resources, ResourcePoint{T: now.Sub(m.origin).Seconds(), RSSBytes: s.RSSBytes, CPUSeconds: s.CPUSeconds})
	m.peakRSS = max(m.peakRSS, s.RSSBytes, s.HWMBytes)
	m.lastSample, m.sampled = s, true
	return s, true
}

// setPhase closes the current phase's last interval and starts name, in
// which cons (nil: none) are the consumers' counters and total, when
// positive, fixes the lag to total minus consumed.
func (m *monitor) setPhase(name string, cons *counters, total int64) {
	now := time.Now()
	s, ok := m.sampleResources(now)
	m.sample(now, true)
	m.mu.Lock()
	defer m.mu.Unlock()
	if ok {
		if m.phase != "" {
			m.phaseCPU[m.phase] += s.CPUSeconds - m.cpuMark
		}
		m.cpuMark = s.CPUSeconds
	}
	if m.cfg.Progress != nil && m.phase != "" {
		_, _ = io.WriteString(m.cfg.Progress, "\n") // keep the finished phase's last line
	}
	m.phase, m.phaseStart, m.cons, m.total = name, now, cons, total
	m.lastCons = [2]int64{}
	if cons != nil {
		m.lastCons = [2]int64{cons.records.Load(), cons.bytes.Load()}
	}
}

// sample appends one timeline point and prints the progress line. The
// short last interval of a phase (end) is folded away unless the phase has
// no other point: its rate would be noise.
func (m *monitor) sample(now time.Time, end bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dt := now.Sub(m.lastT).Seconds()
	if m.phase == "" || dt <= 0 {
		m.lastT = now
		return
	}
	short := end && dt < m.cfg.SampleInterval.D().Seconds()/2
	if short && len(m.timeline) > 0 && m.timeline[len(m.timeline)-1].Phase == m.phase {
		m.lastT = now
		m.lastProd = [2]int64{m.prod.records.Load(), m.prod.bytes.Load()}
		return
	}
	pr, pb := m.prod.records.Load(), m.prod.bytes.Load()
	pt := TimelinePoint{
		T: now.Sub(m.origin).Seconds(), Phase: m.phase,
		ProduceRecordsPerSec: float64(pr-m.lastProd[0]) / dt,
		ProduceMBPerSec:      float64(pb-m.lastProd[1]) / dt / 1e6,
		LagRecords:           -1,
	}
	m.lastProd = [2]int64{pr, pb}
	if m.cons != nil {
		cr, cb := m.cons.records.Load(), m.cons.bytes.Load()
		pt.ConsumeRecordsPerSec = float64(cr-m.lastCons[0]) / dt
		pt.ConsumeMBPerSec = float64(cb-m.lastCons[1]) / dt / 1e6
		m.lastCons = [2]int64{cr, cb}
		if m.total > 0 {
			pt.LagRecords = max(m.total-cr, 0)
		} else {
			pt.LagRecords = max(pr-cr, 0)
		}
	}
	m.lastT = now
	m.timeline = append(m.timeline, pt)
	m.progress(now, pt)
}

// progress prints the live line; m.mu is held.
func (m *monitor) progress(now time.Time, pt TimelinePoint) {
	w := m.cfg.Progress
	if w == nil {
		return
	}
	line := fmt.Sprintf("%s %s %5.1fs produce %7.0f rec/s %6.1f MB/s", m.label, m.phase,
		now.Sub(m.phaseStart).Seconds(), pt.ProduceRecordsPerSec, pt.ProduceMBPerSec)
	if m.hist != nil && m.phase == phaseRun {
		line += fmt.Sprintf(" p99 %.2fms", m.hist.quantile(99))
	}
	if m.cons != nil {
		line += fmt.Sprintf(" | consume %7.0f rec/s %6.1f MB/s lag %d", pt.ConsumeRecordsPerSec, pt.ConsumeMBPerSec, pt.LagRecords)
	}
	if e := m.prod.errors.Load(); e > 0 {
		line += fmt.Sprintf(" errors %d", e)
	}
	if m.sampled {
		line += fmt.Sprintf(" | broker rss %dMB cpu %.1fs", m.lastSample.RSSBytes>>20, m.lastSample.CPUSeconds)
	}
	// \r and clear-to-end-of-line keep one live line on a terminal.
	_, _ = io.WriteString(w, "\r\x1b[K"+line)
}

// finish stops sampling and returns the timeline and, for a broker the
// harness owns, its resource figures.
func (m *monitor) finish() ([]TimelinePoint, *Resources) {
	m.setPhase("", nil, 0)
	close(m.stop)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.sampled {
		return m.timeline, nil
	}
	return m.timeline, &Resources{
		PeakRSSBytes: m.peakRSS,
		CPUSeconds:   m.lastSample.CPUSeconds,
		PhaseCPU:     m.phaseCPU,
		WrittenBytes: m.lastSample.WrittenBytes,
		Samples:      m.resources,
	}
}
