// Package obs holds the catalog of the broker's metrics. Every metric the
// broker exports is declared once, at package level, with Counter, Gauge
// or Histogram; the code builds its Prometheus collectors from those
// declarations, and docs/metrics.md is generated from the catalog
// (go run ./internal/obs/metricsdoc), so that the document cannot drift
// from the code.
//
// Names follow Kafka's JMX metrics as the Prometheus JMX exporter's
// usual Kafka rules name them (lower case, kafka_<domain>_<type>_<name>,
// rates as counters ending in _total), and strata_ names where Kafka has
// no equivalent.
package obs

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// Kind is a metric's Prometheus type.
type Kind string

const (
	KindCounter   Kind = "counter"
	KindGauge     Kind = "gauge"
	KindHistogram Kind = "histogram"
)

// Def declares one metric.
type Def struct {
	Name    string
	Kind    Kind
	Help    string
	Labels  []string  // variable labels, and constant ones of a *Func metric
	Buckets []float64 // histograms only
}

var (
	mu      sync.Mutex
	catalog = map[string]Def{}
)

func declare(d Def) Def {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := catalog[d.Name]; dup {
		panic(fmt.Sprintf("obs: metric %s declared twice", d.Name))
	}
	catalog[d.Name] = d
	return d
}

// Counter declares a counter.
func Counter(name, help string, labels ...string) Def {
	return declare(Def{Name: name, Kind: KindCounter, Help: help, Labels: labels})
}

// Gauge declares a gauge.
func Gauge(name, help string, labels ...string) Def {
	return declare(Def{Name: name, Kind: KindGauge, Help: help, Labels: labels})
}

// Histogram declares a histogram.
func Histogram(name, help string, buckets []float64, labels ...string) Def {
	return declare(Def{Name: name, Kind: KindHistogram, Help: help, Buckets: buckets, Labels: labels})
}

// All returns every declared metric, by name.
func All() []Def {
	mu.Lock()
	defer mu.Unlock()
	out := make([]Def, 0, len(catalog))
	for _, d := range catalog {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Def) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Lookup returns the declaration of a metric family by name.
func Lookup(name string) (Def, bool) {
	mu.Lock()
	defer mu.Unlock()
	d, ok := catalog[name]
	return d, ok
}

func (d Def) must(k Kind) {
	if d.Kind != k {
		panic(fmt.Sprintf("obs: metric %s is a %s, used as a %s", d.Name, d.Kind, k))
	}
}

// NewCounter builds the declared counter (no labels).
func (d Def) NewCounter() prometheus.Counter {
	d.must(KindCounter)
	return prometheus.NewCounter(prometheus.CounterOpts{Name: d.Name, Help: d.Help})
}

// NewCounterVec builds the declared counter with its labels.
func (d Def) NewCounterVec() *prometheus.CounterVec {
	d.must(KindCounter)
	return prometheus.NewCounterVec(prometheus.CounterOpts{Name: d.Name, Help: d.Help}, d.Labels)
}

// NewCounterFunc builds the declared counter read from f at each scrape.
func (d Def) NewCounterFunc(f func() float64) prometheus.CounterFunc {
	d.must(KindCounter)
	return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: d.Name, Help: d.Help}, f)
}

// NewGauge builds the declared gauge (no labels).
func (d Def) NewGauge() prometheus.Gauge {
	d.must(KindGauge)
	return prometheus.NewGauge(prometheus.GaugeOpts{Name: d.Name, Help: d.Help})
}

// NewGaugeVec builds the declared gauge with its labels.
func (d Def) NewGaugeVec() *prometheus.GaugeVec {
	d.must(KindGauge)
	return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: d.Name, Help: d.Help}, d.Labels)
}

// NewGaugeFunc builds the declared gauge read from f at each scrape;
// constLabels give the values of the declared labels.
func (d Def) NewGaugeFunc(f func() float64, constLabels prometheus.Labels) prometheus.GaugeFunc {
	d.must(KindGauge)
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: d.Name, Help: d.Help, ConstLabels: constLabels}, f)
}

// NewHistogram builds the declared histogram (no labels).
func (d Def) NewHistogram() prometheus.Histogram {
	d.must(KindHistogram)
	return prometheus.NewHistogram(prometheus.HistogramOpts{Name: d.Name, Help: d.Help, Buckets: d.Buckets})
}

// NewHistogramVec builds the declared histogram with its labels.
func (d Def) NewHistogramVec() *prometheus.HistogramVec {
	d.must(KindHistogram)
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: d.Name, Help: d.Help, Buckets: d.Buckets}, d.Labels)
}

// Desc is the declared metric's descriptor, for a custom Collector.
func (d Def) Desc() *prometheus.Desc {
	return prometheus.NewDesc(d.Name, d.Help, d.Labels, nil)
}

// ValueType is the declared kind as a Prometheus value type, for a
// custom Collector (counters and gauges only).
func (d Def) ValueType() prometheus.ValueType {
	if d.Kind == KindCounter {
		return prometheus.CounterValue
	}
	return prometheus.GaugeValue
}

// MillisBuckets are the buckets of Kafka's *TimeMs histograms.
var MillisBuckets = []float64{1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000}
