package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"
)

// Throughput is what one phase moved.
type Throughput struct {
	Records       int64   `json:"records"`
	Bytes         int64   `json:"bytes"`
	Seconds       float64 `json:"seconds"`
	RecordsPerSec float64 `json:"records_per_s"`
	MBPerSec      float64 `json:"mb_per_s"` // 10^6 bytes of record values per second
}

func throughput(records, bytes int64, d time.Duration) Throughput {
	t := Throughput{Records: records, Bytes: bytes, Seconds: d.Seconds()}
	if t.Seconds > 0 {
		t.RecordsPerSec = float64(records) / t.Seconds
		t.MBPerSec = float64(bytes) / t.Seconds / 1e6
	}
	return t
}

// Resources are the broker process's figures over the whole target run
// (start to stop), for targets the harness started.
type Resources struct {
	PeakRSSBytes      int64           `json:"peak_rss_bytes"` // max of VmHWM and sampled VmRSS
	CPUSeconds        float64         `json:"cpu_s"`          // from process start
	ProduceCPUSeconds float64         `json:"produce_cpu_s"`
	ConsumeCPUSeconds float64         `json:"consume_cpu_s"`
	WrittenBytes      int64           `json:"written_bytes"` // -1 if unknown
	Samples           []ResourcePoint `json:"samples"`
}

// Result is one workload run against one target.
type Result struct {
	Target string `json:"target"`
	Topic  string `json:"topic"`
	Error  string `json:"error,omitempty"`

	Sent           int64          `json:"sent"`            // measured records handed to the client
	ProduceErrors  int64          `json:"produce_errors"`  // records whose produce failed
	WarmupRecords  int64          `json:"warmup_records"`  // unmeasured records sent first
	Produce        Throughput     `json:"produce"`         // acknowledged records
	Latency        LatencySummary `json:"produce_latency"` // acknowledgement latency
	Consume        Throughput     `json:"consume"`         // records read back from offset 0
	ConsumeDups    int64          `json:"consume_duplicates"`
	ConsumeFirstMs float64        `json:"consume_first_record_ms"` // client start to first record, included in Consume
	TopicRecords   int64          `json:"topic_records"`           // end minus start offsets after producing
	ProduceSeries  []RatePoint    `json:"produce_timeline"`
	ConsumeSeries  []RatePoint    `json:"consume_timeline"`
	Broker         *Resources     `json:"broker,omitempty"`
	ElapsedSeconds float64        `json:"elapsed_s"`
}

// Report is one workload run against every target.
type Report struct {
	Workload Config    `json:"workload"`
	Started  time.Time `json:"started"`
	Results  []Result  `json:"results"`
	LoadAvg  string    `json:"loadavg,omitempty"` // at the start of the workload
	// Run numbers repeated runs of one workload in a suite (1, 2, …).
	Run int `json:"run"`
}

// Label names the report in files and headings: the workload's name, with
// the run number from the second run on.
func (r *Report) Label() string {
	if r.Run > 1 {
		return fmt.Sprintf("%s-run%d", r.Workload.Name, r.Run)
	}
	return r.Workload.Name
}

// Result returns the result for target, if any.
func (r *Report) Result(target string) (Result, bool) {
	for _, res := range r.Results {
		if res.Target == target {
			return res, true
		}
	}
	return Result{}, false
}

// Run runs the workload against each target in turn. The report holds a
// result for every target; the error joins the targets' failures.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("bench config: %w", err)
	}
	rep := &Report{Workload: cfg, Started: time.Now().UTC(), LoadAvg: readLoadAvg()}
	var errs []error
	for _, t := range cfg.Targets {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		cfg.Logger.Info("bench target", "workload", cfg.Name, "target", t)
		res := runTarget(ctx, cfg, t)
		if res.Error != "" {
			errs = append(errs, fmt.Errorf("%s on %s: %s", cfg.Name, t, res.Error))
		}
		rep.Results = append(rep.Results, res)
		runtime.GC() // free the last target's garbage (kfake keeps records in memory) before the next
	}
	return rep, errors.Join(errs...)
}

// runTarget starts (or connects to) one target, produces, consumes back
// and stops it.
func runTarget(ctx context.Context, cfg Config, name string) (res Result) {
	began := time.Now()
	res.Target = name
	defer func() { res.ElapsedSeconds = time.Since(began).Seconds() }()
	fail := func(err error) {
		if res.Error == "" {
			res.Error = err.Error()
		}
	}
	tg, err := startTarget(ctx, cfg, name)
	if err != nil {
		fail(err)
		return res
	}
	mon := newMonitor(cfg, tg, fmt.Sprintf("[%s %s]", name, cfg.Name))
	defer func() {
		if _, owned := tg.Sample(); owned {
			res.Broker = mon.finish()
		}
		if err := tg.Close(); err != nil {
			fail(fmt.Errorf("stop: %w", err))
		}
	}()
	seeds := tg.Seeds()
	res.Topic = fmt.Sprintf("strata-bench-%s-%d", cfg.Name, time.Now().UnixNano())
	setupCtx, cancel := context.WithTimeout(ctx, time.Minute)
	err = createTopic(setupCtx, seeds, res.Topic, cfg.Partitions, cfg.ReplicationFactor)
	cancel()
	if err != nil {
		fail(err)
		return res
	}
	if name != TargetKfake && name != TargetStrata { // those are thrown away whole
		defer func() {
			c, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			deleteTopic(c, seeds, res.Topic)
			cancel()
		}()
	}

	// Produce.
	hist := newLatencyHist()
	var pctr counters
	cpu0 := mon.cpu()
	stop := make(chan struct{})
	series := make(chan []RatePoint, 1)
	go func() { series <- mon.phase("produce", &pctr, cfg.Records, hist, stop) }()
	pctx, cancel := context.WithTimeout(ctx, cfg.PhaseTimeout)
	pres, err := produce(pctx, cfg, seeds, res.Topic, hist, &pctr)
	cancel()
	close(stop)
	res.ProduceSeries = <-series
	mon.endProgress()
	cpu1 := mon.cpu()
	mon.addPhaseCPU(&mon.produceCPU, cpu1-cpu0)
	res.Sent, res.ProduceErrors, res.WarmupRecords = pres.sent, pres.errors, int64(cfg.Producers)
	res.Produce = throughput(pres.acked, pres.bytes, pres.elapsed)
	res.Latency = hist.summary()
	if err != nil {
		fail(err)
		return res
	}
	if pres.firstErr != nil {
		fail(fmt.Errorf("%d of %d records failed to produce, first: %w", pres.errors, pres.sent, pres.firstErr))
	}

	// Consume everything back from offset 0.
	cctx, cancel := context.WithTimeout(ctx, cfg.PhaseTimeout)
	defer cancel()
	want, err := topicRecords(cctx, seeds, res.Topic)
	if err != nil {
		fail(err)
		return res
	}
	for _, n := range want {
		res.TopicRecords += n
	}
	var cctr counters
	stop = make(chan struct{})
	go func() { series <- mon.phase("consume", &cctr, res.TopicRecords, nil, stop) }()
	cres, err := consume(cctx, seeds, res.Topic, want, &cctr)
	close(stop)
	res.ConsumeSeries = <-series
	mon.endProgress()
	mon.addPhaseCPU(&mon.consumeCPU, mon.cpu()-cpu1)
	res.Consume = throughput(cres.records, cres.bytes, cres.elapsed)
	res.ConsumeDups = cres.duplicates
	res.ConsumeFirstMs = float64(cres.first) / float64(time.Millisecond)
	if err != nil {
		fail(err)
		return res
	}
	if got, want := res.Consume.Records, res.Produce.Records+res.WarmupRecords; got != want && cfg.Acks != "0" {
		fail(fmt.Errorf("consumed %d records, acknowledged %d (with warm-up)", got, want))
	}
	return res
}
