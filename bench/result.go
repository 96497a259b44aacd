package bench

import (
	"fmt"
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
	PeakRSSBytes int64              `json:"peak_rss_bytes"` // max of VmHWM and sampled VmRSS
	CPUSeconds   float64            `json:"cpu_s"`          // from process start
	PhaseCPU     map[string]float64 `json:"phase_cpu_s"`    // per phase (backlog, run, drain, read-back)
	WrittenBytes int64              `json:"written_bytes"`  // write_bytes of /proc/<pid>/io; -1 if unknown
	// BucketWrittenBytes is what the broker uploaded to object storage;
	// absent until tiering exists.
	BucketWrittenBytes int64           `json:"bucket_written_bytes,omitempty"`
	Samples            []ResourcePoint `json:"samples"`
}

// ReadBackPass is one pass of the read-back: fresh consumers
// (readBackClients of them, sharing the partitions) reading every
// partition from offset 0.
type ReadBackPass struct {
	Throughput
	FirstRecordMs float64 `json:"first_record_ms"` // client creation to first record, included in Seconds
}

// ReadBack is the read-back phase: readBackPasses passes one after the
// other. Its own figures are those of the fastest pass; Passes[0] is the
// first.
type ReadBack struct {
	ReadBackPass
	Passes []ReadBackPass `json:"passes"`
}

// Result is one workload run against one target. Counts marked "all"
// include the unmeasured records (one warm-up record per producer client,
// the backlog, the warm-up period).
type Result struct {
	Target string   `json:"target"`
	Topics []string `json:"topics"`
	// ReplicationFactor of the topics (1 on single-broker targets).
	ReplicationFactor int16  `json:"replication_factor"`
	Error             string `json:"error,omitempty"`
	// TLS is the version and cipher suite a client's connection to a TLS
	// target negotiated ("TLS 1.3 TLS_AES_128_GCM_SHA256"); empty in
	// plaintext.
	TLS string `json:"tls,omitempty"`

	Sent          int64 `json:"sent"`           // all records handed to the clients
	Acked         int64 `json:"acked"`          // all records acknowledged
	ProduceErrors int64 `json:"produce_errors"` // records whose produce failed
	WarmupRecords int64 `json:"warmup_records"` // one per producer client, sent before anything else
	Backlog       int64 `json:"backlog"`        // records produced before the consumers started
	TopicRecords  int64 `json:"topic_records"`  // sum of the partitions' end offsets after the run
	// Transactions committed (transactional producers, txn.go), the warm-up
	// ones included, and the commit markers they wrote: one control record
	// per partition of each, which TopicRecords counts too.
	Transactions int64 `json:"transactions,omitempty"`
	TxnMarkers   int64 `json:"txn_markers,omitempty"`
	Consumed     int64 `json:"consumed"`   // all distinct records the run's consumers read
	Duplicates   int64 `json:"duplicates"` // records read again (group rebalances)

	// RunBytes are the record values acknowledged in the run phase (its
	// warm-up included): what the broker's CPU seconds of that phase are
	// divided by per GB produced.
	RunBytes int64 `json:"run_bytes"`

	Produce        Throughput     `json:"produce"`         // measured records acknowledged
	ProduceLatency LatencySummary `json:"produce_latency"` // intended send time to acknowledgement
	Consume        Throughput     `json:"consume"`         // measured records read during the run and drain
	EndToEnd       LatencySummary `json:"end_to_end_latency"`

	// CatchUpSeconds is, with a backlog, the time from the consumers'
	// start until they had read every partition up to where the backlog
	// ended; -1 if they had not by the end of the run.
	CatchUpSeconds float64 `json:"catch_up_s,omitempty"`
	MaxLagRecords  int64   `json:"max_lag_records"`

	ReadBack    *ReadBack    `json:"read_back,omitempty"`
	RawReadBack *RawReadBack `json:"raw_read_back,omitempty"`
	// RawReadFloor is the raw read-back of the floor server (floor.go)
	// holding a copy of the same partitions, after a Strata broker's.
	RawReadFloor *RawReadBack `json:"raw_read_floor,omitempty"`
	// RawReadFloorPageCache is the same with the floor server reading the
	// batches from files (the page cache) with pread into reused buffers.
	RawReadFloorPageCache *RawReadBack `json:"raw_read_floor_page_cache,omitempty"`
	// Group holds the consumer-group figures in consume mode group.
	Group *GroupStats `json:"group,omitempty"`
	// Failover holds the figures of the faults, when injected.
	Failover *FailoverStats `json:"failover,omitempty"`
	// Tier holds the figures of the tiered-storage benchmark.
	Tier *TierResult `json:"tier,omitempty"`
	// Move holds the figures of the partition-move benchmark.
	Move *MoveResult `json:"move,omitempty"`

	// Timeline covers every phase; MeasureStart and MeasureEnd (seconds on
	// its clock) bound the measured part of the run.
	Timeline      []TimelinePoint `json:"timeline"`
	MeasureStartS float64         `json:"measure_start_s"`
	MeasureEndS   float64         `json:"measure_end_s"`

	Broker         *Resources `json:"broker,omitempty"`
	ElapsedSeconds float64    `json:"elapsed_s"`
}

// Report is one workload run against every target.
type Report struct {
	Workload Workload  `json:"workload"`
	Targets  []string  `json:"targets"`
	Started  time.Time `json:"started"`
	Results  []Result  `json:"results"`
	LoadAvg  string    `json:"loadavg,omitempty"` // at the start of the workload
	// Run numbers repeated runs of one workload in a suite (1, 2, …).
	Run int `json:"run"`
	// CipherFloor is TLS's floor on this machine, measured before the
	// targets when one of them serves TLS (tls.go).
	CipherFloor *CipherFloor `json:"cipher_floor,omitempty"`
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
