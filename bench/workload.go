package bench

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Key distributions of a workload (OpenMessaging Benchmark's
// keyDistributor, with shorter names).
const (
	KeysNone       = "none"        // no key: the client spreads records over partitions
	KeysRandom     = "random"      // uniform over KeySpace keys
	KeysRoundRobin = "round-robin" // key i mod KeySpace for the i-th record
	KeysZipf       = "zipf"        // Zipf (s=1.1) over KeySpace keys: a few hot keys
)

// Consume modes: how consumers get their partitions.
const (
	// ConsumeAssign gives each consumer a fixed share of the partitions
	// (kgo.ConsumePartitions); it needs no group coordinator.
	ConsumeAssign = "assign"
	// ConsumeGroup has the consumers of a topic join one Kafka consumer
	// group (kgo.ConsumerGroup) and lets the coordinator assign partitions.
	ConsumeGroup = "group"
)

// Workload is what a benchmark does, independent of where it runs, in the
// spirit of the OpenMessaging Benchmark's workload files. It is read from a
// JSON file by [ParseWorkload]; zero fields take defaults.
//
// A run has up to four phases: backlog (Backlog records produced as fast
// as possible before any consumer starts), run (producers at Rate and
// consumers together for Warmup+Duration; only records whose intended send
// time falls after the warm-up count in the figures), drain (consumers read
// what is left) and read-back (a fresh consumer reads every partition from
// offset 0, served from the page cache).
type Workload struct {
	Name string `json:"name"`

	Topics            int   `json:"topics"`             // topics, each with Partitions partitions
	Partitions        int32 `json:"partitions"`         // per topic
	ReplicationFactor int16 `json:"replication_factor"` // of every topic

	RecordSize      int    `json:"record_size"`      // value bytes per record
	KeyDistribution string `json:"key_distribution"` // none, random, round-robin or zipf
	KeySpace        int    `json:"key_space"`        // distinct keys for random, round-robin and zipf

	Producers     int      `json:"producers"`      // producer clients per topic
	Rate          float64  `json:"rate"`           // records/s over all producers, open loop; 0 = as fast as possible
	Acks          string   `json:"acks"`           // all (-1), 1 or 0
	Compression   string   `json:"compression"`    // none, gzip, snappy, lz4 or zstd
	Linger        Duration `json:"linger"`         // producer linger
	NoIdempotence bool     `json:"no_idempotence"` // disable the idempotent producer (always off for acks 0 and 1)

	Consumers   int    `json:"consumers"`    // consumer clients per topic during the run; 0 = none
	ConsumeMode string `json:"consume_mode"` // assign (default) or group
	// Balancer is the group's client-side assignor in group mode: range
	// (default, eager), round-robin, sticky or cooperative-sticky.
	Balancer string `json:"balancer"`
	// Rebalances, in group mode, is how many rebalances to measure during
	// the run: with the groups stable, one member joins each group; once
	// every partition is consumed again it leaves and the groups settle.
	// The run then ends early (Duration bounds it).
	Rebalances int `json:"rebalances"`

	Warmup   Duration `json:"warmup"`   // start of the run excluded from the figures
	Duration Duration `json:"duration"` // measured part of the run
	// Records, when set, ends the run after this many measured records
	// even if Duration has not passed (bounds max-rate runs).
	Records int64 `json:"records"`
	// Backlog is the number of records produced before the consumers
	// start (the catch-up preset); they then read from offset 0 while the
	// producers continue at Rate.
	Backlog int64 `json:"backlog"`
	// ReadBack reads every partition again from offset 0 after the run
	// with franz-go consumers (what a client application gets).
	ReadBack bool `json:"read_back"`
	// RawReadBack then reads every partition from offset 0 once more with
	// raw Fetch requests whose record batches are walked by their headers,
	// not decoded (what the broker serves).
	RawReadBack bool `json:"raw_read_back"`

	// Faults, injected one after the other during the run (cluster target
	// only): FaultKill or FaultShutdown of the broker leading the most
	// partitions, measuring how long its partitions went without an
	// acknowledgement; the broker is restarted and the preferred leaders
	// restored before the next. The run then ends early (Duration bounds
	// it).
	Faults []string `json:"faults"`

	// TLS makes the workload a comparison over TLS: its default targets
	// are strata-tls and kafka-tls (each serving only an SSL listener with
	// certificates made for the run) and strata in plaintext, for what TLS
	// costs Strata (tls.go). Any workload runs over TLS on those targets.
	TLS bool `json:"tls"`

	// TxnRecords, when positive, makes the producers transactional
	// (txn.go): each has a transactional.id and sends its records in
	// transactions of TxnRecords records (BeginTransaction, the records,
	// Flush, EndTransaction with commit). A record counts as acknowledged
	// when its transaction commits, and its produce latency runs to the
	// commit's answer. The consumers read with
	// isolation.level=read_committed.
	TxnRecords int `json:"txn_records"`
	// ReadCommitted has the consumers read with
	// isolation.level=read_committed without transactional producers (the
	// idempotent baseline of the transaction presets).
	ReadCommitted bool `json:"read_committed"`

	// SampleInterval is the period of the timelines and resource samples.
	SampleInterval Duration `json:"sample_interval"`

	// Tier, when set, makes this the tiered-storage benchmark (target
	// strata-s3) instead of the phases above: Records records of
	// RecordSize bytes, spread over Partitions, written to a tiered topic
	// and to an untiered one; upload, cold read and first-record latency
	// are measured (see the package doc). Producers, consumers, rates and
	// durations do not apply.
	Tier *TierWorkload `json:"tier,omitempty"`
	// Move, when set, makes this the partition-move benchmark (target
	// strata-zk-s3; move.go, move_run.go).
	Move *MoveWorkload `json:"move,omitempty"`
}

// Duration is a time.Duration written in JSON as a Go duration string
// ("30s", "1m30s", "500ms").
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

// MarshalJSON writes d as a duration string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a duration string; a bare 0 is accepted too.
func (d *Duration) UnmarshalJSON(b []byte) error {
	if string(b) == "0" {
		*d = 0
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"30s\": %s", b)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration %q: %w", s, err)
	}
	*d = Duration(v)
	return nil
}

// maxWorkloadFile bounds a workload file.
const maxWorkloadFile = 1 << 20

// ParseWorkload decodes a JSON workload. Unknown fields and trailing data
// are errors, so that a typo does not silently run the default. The result
// is not defaulted; [Workload.Validate] it after [Workload.WithDefaults].
func ParseWorkload(b []byte) (Workload, error) {
	var w Workload
	if len(b) > maxWorkloadFile {
		return w, fmt.Errorf("workload file is %d bytes, more than %d", len(b), maxWorkloadFile)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return Workload{}, fmt.Errorf("parse workload: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Workload{}, errors.New("parse workload: trailing data after the object")
	}
	return w, nil
}

// LoadWorkload reads and parses a workload file.
func LoadWorkload(path string) (Workload, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Workload{}, fmt.Errorf("read workload: %w", err)
	}
	w, err := ParseWorkload(b)
	if err != nil {
		return Workload{}, fmt.Errorf("%s: %w", path, err)
	}
	return w, nil
}

// Presets are the named workloads. Issue 2's goals use throughput and
// latency; issue 5's use replication and failover; issue 17's (against
// Apache Kafka) throughput, latency and replication-latency; issue 25's
// (over TLS) tls; issue 26's (transactions) txn, txn-100, txn-idempotent
// and txn-latency.
var Presets = map[string]Workload{
	// throughput: as fast as possible, 1 KB records, 6 partitions, acks=-1,
	// one consumer alongside; then every record is read back from the page
	// cache, by franz-go consumers and by raw Fetch requests.
	"throughput": {
		Name: "throughput", Partitions: 6, RecordSize: 1024, Acks: "all",
		Linger: Duration(5 * time.Millisecond), Producers: 1, Consumers: 1,
		Warmup: Duration(time.Second), Duration: Duration(60 * time.Second), Records: 500_000,
		ReadBack: true, RawReadBack: true,
	},
	// latency: open loop at 2,000 records/s with linger 0; produce and
	// end-to-end latency.
	"latency": {
		Name: "latency", Partitions: 6, RecordSize: 1024, Acks: "all",
		Linger: 0, Producers: 1, Consumers: 1, Rate: 2000,
		Warmup: Duration(5 * time.Second), Duration: Duration(20 * time.Second),
	},
	// catch-up: 200,000 records of backlog, then consumers start from
	// offset 0 while producers continue at 5,000 records/s; reports the
	// catch-up time and the consumer lag over time.
	"catch-up": {
		Name: "catch-up", Partitions: 6, RecordSize: 1024, Acks: "all",
		Linger: Duration(time.Millisecond), Producers: 1, Consumers: 1, Rate: 5000,
		Backlog: 200_000, Duration: Duration(15 * time.Second),
		SampleInterval: Duration(100 * time.Millisecond),
	},
	// replication: as fast as possible with acks=-1 on topics with
	// replication factor 3 on the three-broker cluster, against a single
	// broker with replication factor 1 in the same run.
	"replication": {
		Name: "replication", Partitions: 6, ReplicationFactor: 3, RecordSize: 1024, Acks: "all",
		Linger: Duration(5 * time.Millisecond), Producers: 1, Consumers: 1,
		Warmup: Duration(time.Second), Duration: Duration(60 * time.Second), Records: 300_000,
	},
	// replication-latency: the latency preset on topics with replication
	// factor 3 (acks=-1, min.insync.replicas=2 on both clusters): three
	// Strata brokers on ZooKeeper against three Kafka nodes in KRaft mode,
	// and one Strata broker with replication factor 1 beside them.
	"replication-latency": {
		Name: "replication-latency", Partitions: 6, ReplicationFactor: 3, RecordSize: 1024, Acks: "all",
		Linger: 0, Producers: 1, Consumers: 1, Rate: 2000,
		Warmup: Duration(5 * time.Second), Duration: Duration(20 * time.Second),
	},
	// failover: 2,000 records/s open loop (round-robin keys, so each
	// partition gets its share whatever happens) with acks=-1 and RF 3 on
	// the cluster; the leader of the most partitions is killed (-9), then
	// after healing another is stopped with SIGTERM (controlled shutdown).
	"failover": {
		Name: "failover", Partitions: 6, ReplicationFactor: 3, RecordSize: 1024, Acks: "all",
		KeyDistribution: KeysRoundRobin, KeySpace: 600,
		Linger: Duration(time.Millisecond), Producers: 1, Consumers: 1, Rate: 2000,
		Warmup: Duration(2 * time.Second), Duration: Duration(5 * time.Minute),
		Faults: []string{FaultKill, FaultShutdown},
	},
	// tier: 256 MiB of 1 KiB records in 4 partitions with 8 MiB segments on
	// one broker with --tier s3 on a MinIO the harness starts: upload
	// throughput against raw PUTs of the same sizes, cold read against
	// the local read of the same records, cold first-record latency.
	"tier": {
		Name: "tier", Partitions: 4, RecordSize: 1024, Records: 1 << 18,
		Tier: &TierWorkload{SegmentBytes: 8 << 20, LatencyPartitions: 5},
	},
	// move: one partition of 0.1, 1 and 4 GB of history moved to a fresh
	// broker, tiered (64 MiB local tail) and untiered, RF 2 (move.go).
	"move": {
		Name: "move", Partitions: 1, ReplicationFactor: 2, RecordSize: 32 << 10,
		Move: &MoveWorkload{SizesGB: []float64{0.1, 1, 4}, TailBytes: 64 << 20, SegmentBytes: 16 << 20},
	},
	// tls: the throughput preset over TLS, on Strata and Apache Kafka with
	// the same certificates, and on Strata in plaintext.
	"tls": {
		Name: "tls", Partitions: 6, RecordSize: 1024, Acks: "all",
		Linger: Duration(5 * time.Millisecond), Producers: 1, Consumers: 1,
		Warmup: Duration(time.Second), Duration: Duration(60 * time.Second), Records: 500_000,
		ReadBack: true, RawReadBack: true, TLS: true,
	},
	// tls-latency: the latency preset over TLS, the same way.
	"tls-latency": {
		Name: "tls-latency", Partitions: 6, RecordSize: 1024, Acks: "all",
		Linger: 0, Producers: 1, Consumers: 1, Rate: 2000,
		Warmup: Duration(5 * time.Second), Duration: Duration(20 * time.Second), TLS: true,
	},
	// txn-idempotent: the baseline of the transaction presets: as fast as
	// possible, 1 KB records, 6 partitions, acks=-1, linger 5 ms, the
	// idempotent producer, one read_committed consumer alongside.
	"txn-idempotent": {
		Name: "txn-idempotent", Partitions: 6, RecordSize: 1024, Acks: "all",
		Linger: Duration(5 * time.Millisecond), Producers: 1, Consumers: 1, ReadCommitted: true,
		Warmup: Duration(time.Second), Duration: Duration(60 * time.Second), Records: 300_000,
	},
	// txn: txn-idempotent with a transactional producer committing every
	// 10,000 records.
	"txn": {
		Name: "txn", Partitions: 6, RecordSize: 1024, Acks: "all",
		Linger: Duration(5 * time.Millisecond), Producers: 1, Consumers: 1, TxnRecords: 10_000,
		Warmup: Duration(time.Second), Duration: Duration(60 * time.Second), Records: 300_000,
	},
	// txn-100: the same with transactions of 100 records.
	"txn-100": {
		Name: "txn-100", Partitions: 6, RecordSize: 1024, Acks: "all",
		Linger: Duration(5 * time.Millisecond), Producers: 1, Consumers: 1, TxnRecords: 100,
		Warmup: Duration(time.Second), Duration: Duration(60 * time.Second), Records: 300_000,
	},
	// txn-latency: the latency preset (2,000 records/s open loop, linger
	// 0) in transactions of 100 records, read by a read_committed
	// consumer: the end-to-end latency includes the commit.
	"txn-latency": {
		Name: "txn-latency", Partitions: 6, RecordSize: 1024, Acks: "all",
		Linger: 0, Producers: 1, Consumers: 1, Rate: 2000, TxnRecords: 100,
		Warmup: Duration(5 * time.Second), Duration: Duration(20 * time.Second),
	},
	// groups: 6 members of one consumer group (eager range balancer) on
	// 12 partitions while records flow at 2,000 records/s; reports each
	// member's time from joining to its first record, then measures 3
	// rebalances in which a 7th member joins: the longest pause in
	// consumption and the time until every partition is consumed again.
	// The run ends after the rebalances.
	"groups": {
		Name: "groups", Partitions: 12, RecordSize: 256, Acks: "all",
		KeyDistribution: KeysRoundRobin, KeySpace: 1200,
		Linger: Duration(time.Millisecond), Producers: 1, Rate: 2000,
		Consumers: 6, ConsumeMode: ConsumeGroup, Balancer: BalancerRange, Rebalances: 3,
		Warmup: Duration(time.Second), Duration: Duration(2 * time.Minute),
		SampleInterval: Duration(100 * time.Millisecond),
	},
}

// PresetNames returns the preset names in sorted order.
func PresetNames() []string {
	names := make([]string, 0, len(Presets))
	for n := range Presets {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Preset returns the named preset.
func Preset(name string) (Workload, error) {
	w, ok := Presets[name]
	if !ok {
		return Workload{}, fmt.Errorf("unknown preset %q (have %s)", name, strings.Join(PresetNames(), ", "))
	}
	return w, nil
}

// WithDefaults fills zero fields.
func (w Workload) WithDefaults() Workload {
	if w.Name == "" {
		w.Name = "custom"
	}
	if w.Topics == 0 {
		w.Topics = 1
	}
	if w.Partitions == 0 {
		w.Partitions = 6
	}
	if w.ReplicationFactor == 0 {
		w.ReplicationFactor = 1
	}
	if w.RecordSize == 0 {
		w.RecordSize = 1024
	}
	if w.KeyDistribution == "" {
		w.KeyDistribution = KeysNone
	}
	if w.KeySpace == 0 {
		w.KeySpace = 10_000
	}
	if w.Producers == 0 {
		w.Producers = 1
	}
	if w.Acks == "" || w.Acks == "-1" {
		w.Acks = "all"
	}
	if w.Compression == "" {
		w.Compression = "none"
	}
	if w.ConsumeMode == "" {
		w.ConsumeMode = ConsumeAssign
	}
	if w.ConsumeMode == ConsumeGroup && w.Balancer == "" {
		w.Balancer = BalancerRange
	}
	if w.Duration == 0 && w.Records == 0 {
		w.Duration = Duration(10 * time.Second)
	}
	if w.Duration == 0 {
		w.Duration = Duration(10 * time.Minute) // bounded by Records
	}
	if w.SampleInterval == 0 {
		w.SampleInterval = Duration(500 * time.Millisecond)
	}
	if w.Tier != nil {
		t := *w.Tier
		if t.SegmentBytes == 0 {
			t.SegmentBytes = 8 << 20
		}
		if t.LatencyPartitions == 0 {
			t.LatencyPartitions = 5
		}
		if w.Records == 0 {
			w.Records = 1 << 18
		}
		w.Tier = &t
	}
	if w.Move != nil {
		m := w.Move.withDefaults()
		w.Move = &m
	}
	return w
}

// Limits that keep a mistyped workload from exhausting the machine.
const (
	maxTopics     = 1000
	maxPartitions = 10_000
	maxClients    = 1000
	maxRecordSize = 64 << 20
)

// Validate reports the first invalid field of a defaulted workload.
func (w Workload) Validate() error {
	switch {
	case w.Topics <= 0 || w.Topics > maxTopics:
		return fmt.Errorf("topics must be 1..%d", maxTopics)
	case w.Partitions <= 0 || w.Partitions > maxPartitions:
		return fmt.Errorf("partitions must be 1..%d", maxPartitions)
	case w.ReplicationFactor <= 0:
		return errors.New("replication factor must be positive")
	case w.RecordSize <= 0 || w.RecordSize > maxRecordSize:
		return fmt.Errorf("record size must be 1..%d", maxRecordSize)
	case !slices.Contains([]string{KeysNone, KeysRandom, KeysRoundRobin, KeysZipf}, w.KeyDistribution):
		return fmt.Errorf("key distribution %q: want none, random, round-robin or zipf", w.KeyDistribution)
	case w.KeySpace <= 0 || w.KeySpace > 10_000_000:
		return errors.New("key space must be 1..10000000")
	case w.Producers <= 0 || w.Producers*w.Topics > maxClients:
		return fmt.Errorf("producers must be positive and at most %d in all", maxClients)
	case w.Consumers < 0 || w.Consumers*w.Topics > maxClients:
		return fmt.Errorf("consumers must be 0..%d in all", maxClients)
	case w.Consumers == 0 && w.Backlog > 0:
		return errors.New("a backlog needs consumers to catch up")
	case math.IsNaN(w.Rate) || math.IsInf(w.Rate, 0) || w.Rate < 0:
		return errors.New("rate must be a non-negative number")
	case w.Acks != "all" && w.Acks != "0" && w.Acks != "1":
		return fmt.Errorf("acks must be all (-1), 1 or 0, not %q", w.Acks)
	case w.Linger < 0 || w.Warmup < 0 || w.Duration <= 0 || w.SampleInterval <= 0:
		return errors.New("linger and warmup must not be negative; duration and sample interval must be positive")
	case w.Records < 0 || w.Backlog < 0:
		return errors.New("records and backlog must not be negative")
	case w.ConsumeMode != ConsumeAssign && w.ConsumeMode != ConsumeGroup:
		return fmt.Errorf("consume mode %q: want assign or group", w.ConsumeMode)
	case w.ConsumeMode != ConsumeGroup && (w.Balancer != "" || w.Rebalances != 0):
		return errors.New("balancer and rebalances need consume mode group")
	case w.Rebalances < 0 || w.Rebalances > 100:
		return errors.New("rebalances must be 0..100")
	case w.Rebalances > 0 && w.Consumers == 0:
		return errors.New("rebalances need consumers")
	case len(w.Faults) > 10:
		return errors.New("at most 10 faults")
	case len(w.Faults) > 0 && (w.Rate <= 0 || w.ReplicationFactor < 2):
		return errors.New("faults need a rate (open loop) and a replication factor of at least 2")
	case len(w.Faults) > 0 && w.Rebalances > 0:
		return errors.New("faults and rebalances cannot be measured in one run")
	case w.TxnRecords < 0 || w.TxnRecords > 1_000_000:
		return errors.New("txn records must be 0..1000000")
	case w.TxnRecords > 0 && (w.Acks != "all" || w.NoIdempotence):
		return errors.New("transactions need acks=all and the idempotent producer")
	case w.TxnRecords > 0 && (w.Backlog > 0 || len(w.Faults) > 0 || w.Rebalances > 0 || w.ReadBack || w.RawReadBack || w.Tier != nil || w.Move != nil):
		return errors.New("transactions: no backlog, faults, rebalances, read-back, tier or move")
	}
	if t := w.Tier; t != nil {
		switch {
		case t.SegmentBytes < 1<<14 || t.SegmentBytes > 1<<30:
			return errors.New("tier: segment bytes must be 16 KiB..1 GiB")
		case t.LatencyPartitions <= 0 || t.LatencyPartitions > 100:
			return errors.New("tier: latency partitions must be 1..100")
		case w.Records > 1<<24:
			return errors.New("tier: at most 16777216 records")
		case len(w.Faults) > 0 || w.Rebalances > 0 || w.Backlog > 0:
			return errors.New("tier: no faults, rebalances or backlog")
		}
	}
	if w.Move != nil {
		if err := w.Move.validate(w); err != nil {
			return err
		}
	}
	for _, f := range w.Faults {
		if f != FaultKill && f != FaultShutdown {
			return fmt.Errorf("fault %q: want kill or shutdown", f)
		}
	}
	if w.Balancer != "" {
		if _, err := groupBalancer(w.Balancer); err != nil {
			return err
		}
	}
	if _, err := compressionCodec(w.Compression); err != nil {
		return err
	}
	return nil
}

// Describe is a one-line summary of the workload for reports.
func (w Workload) Describe() string {
	if w.Move != nil {
		return w.describeMove()
	}
	if t := w.Tier; t != nil {
		return fmt.Sprintf("tiered storage on one Strata broker with --tier s3 on a MinIO started by the harness: %d records of %d B (%.0f MiB) over %d partitions with segment.bytes %d, "+
			"written to a tiered topic (remote.storage.enable, local.retention.ms 1) and to an untiered one; upload of every sealed segment timed against "+
			"raw PUTs of the same sizes; after local retention and a broker restart, one raw Fetch pass from offset 0 over each topic; "+
			"cold first-record latency on %d partitions of a third tiered topic",
			w.Records, w.RecordSize, float64(w.Records*int64(w.RecordSize))/(1<<20), w.Partitions, t.SegmentBytes, t.LatencyPartitions)
	}
	rate := "max rate"
	if w.Rate > 0 {
		rate = fmt.Sprintf("%g records/s open loop", w.Rate)
	}
	rf := strconv.Itoa(int(w.ReplicationFactor))
	if w.ReplicationFactor > 1 {
		rf += ", 1 on single-broker targets"
	}
	s := fmt.Sprintf("%d topic(s) × %d partitions (RF %s), %d B records, keys %s, %d producer(s)/topic at %s, acks=%s, compression %s, linger %s, %d consumer(s)/topic (%s), warm-up %s, duration %s",
		w.Topics, w.Partitions, rf, w.RecordSize, w.KeyDistribution, w.Producers, rate,
		w.Acks, w.Compression, w.Linger, w.Consumers, w.ConsumeMode, w.Warmup, w.Duration)
	if w.Records > 0 {
		s += fmt.Sprintf(", at most %d measured records", w.Records)
	}
	if w.Backlog > 0 {
		s += fmt.Sprintf(", backlog %d records", w.Backlog)
	}
	if w.ConsumeMode == ConsumeGroup {
		s += ", balancer " + w.Balancer
	}
	if w.TxnRecords > 0 {
		s += fmt.Sprintf(", transactional producers committing every %d records (a record counts once committed), read_committed consumers", w.TxnRecords)
	} else if w.ReadCommitted {
		s += ", read_committed consumers"
	}
	if len(w.Faults) > 0 {
		s += fmt.Sprintf(", faults %s (each to the leader of the most partitions, healed before the next; the run ends after them)", strings.Join(w.Faults, ", "))
	}
	if w.Rebalances > 0 {
		s += fmt.Sprintf(", %d rebalance(s) measured (a member joins each group, then leaves; the run ends after them)", w.Rebalances)
	}
	switch {
	case w.ReadBack && w.RawReadBack:
		s += ", then read back from offset 0 by franz-go consumers and by raw Fetch requests"
	case w.ReadBack:
		s += ", then read back from offset 0 by franz-go consumers"
	case w.RawReadBack:
		s += ", then read back from offset 0 by raw Fetch requests"
	}
	return s
}
