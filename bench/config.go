package bench

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"
)

// Target names understood besides HOST:PORT.
const (
	TargetStrata = "strata"
	TargetKfake  = "kfake"
)

// Config is one workload and the targets to run it against.
type Config struct {
	// Name labels the workload in reports (a preset's name by default).
	Name string `json:"name"`

	Records           int64         `json:"records"`            // records to produce (Rate*Duration when both set)
	RecordSize        int           `json:"record_size"`        // value bytes per record
	Partitions        int32         `json:"partitions"`         // partitions of the benchmark topic
	ReplicationFactor int16         `json:"replication_factor"` // of the benchmark topic
	Acks              string        `json:"acks"`               // "all" (-1), "1" or "0"; empty means all
	Compression       string        `json:"compression"`        // none, gzip, snappy, lz4, zstd
	Linger            time.Duration `json:"linger_ns"`          // producer linger
	Producers         int           `json:"producers"`          // producer clients
	Rate              float64       `json:"rate"`               // records/s over all producers; 0 = as fast as possible
	Duration          time.Duration `json:"duration_ns"`        // with Rate: sets Records; without: caps the produce phase
	NoIdempotence     bool          `json:"no_idempotence"`     // disable the idempotent producer (always off for acks 0/1)
	// SampleInterval is the period of the throughput timeline and of the
	// resource samples.
	SampleInterval time.Duration `json:"sample_interval_ns"`
	// PhaseTimeout bounds each of produce and consume.
	PhaseTimeout time.Duration `json:"phase_timeout_ns"`

	// Targets: TargetStrata, TargetKfake or HOST:PORT (a seed broker).
	Targets []string `json:"targets"`
	// StrataBin is the strata binary to start; empty means this executable
	// (set it when the caller is not the strata binary, e.g. a testing.B).
	StrataBin string `json:"-"`
	// StrataArgs are extra arguments to `strata serve`.
	StrataArgs []string `json:"-"`
	// BrokerLog receives the Strata process's stdout and stderr (optional).
	BrokerLog io.Writer `json:"-"`

	// Progress receives a live progress line (optional; usually os.Stderr).
	Progress io.Writer `json:"-"`
	// Logger logs lifecycle events; nil discards.
	Logger *slog.Logger `json:"-"`
}

// Presets are the named workloads. Issue 2's goals use both.
var Presets = map[string]Config{
	// throughput: as fast as possible, 1 KB records, 6 partitions, acks=-1.
	"throughput": {
		Name: "throughput", Records: 500_000, RecordSize: 1024, Partitions: 6,
		Acks: "all", Compression: "none", Linger: 5 * time.Millisecond, Producers: 1,
	},
	// latency: open loop at 2,000 records/s with linger 0 for 20 s.
	"latency": {
		Name: "latency", RecordSize: 1024, Partitions: 6, Acks: "all",
		Compression: "none", Linger: 0, Producers: 1,
		Rate: 2000, Duration: 20 * time.Second,
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
func Preset(name string) (Config, error) {
	c, ok := Presets[name]
	if !ok {
		return Config{}, fmt.Errorf("unknown preset %q (have %s)", name, strings.Join(PresetNames(), ", "))
	}
	return c, nil
}

// withDefaults fills zero fields.
func (c Config) withDefaults() Config {
	if c.Name == "" {
		c.Name = "custom"
	}
	if c.RecordSize == 0 {
		c.RecordSize = 1024
	}
	if c.Partitions == 0 {
		c.Partitions = 6
	}
	if c.ReplicationFactor == 0 {
		c.ReplicationFactor = 1
	}
	if c.Acks == "" || c.Acks == "-1" {
		c.Acks = "all"
	}
	if c.Compression == "" {
		c.Compression = "none"
	}
	if c.Producers == 0 {
		c.Producers = 1
	}
	if c.Rate > 0 && c.Duration > 0 {
		c.Records = int64(c.Rate * c.Duration.Seconds())
	}
	if c.Records == 0 && c.Duration == 0 {
		c.Records = 100_000
	}
	if c.Records == 0 {
		c.Records = 1 << 62 // bounded by Duration
	}
	if c.SampleInterval == 0 {
		c.SampleInterval = 500 * time.Millisecond
	}
	if c.PhaseTimeout == 0 {
		c.PhaseTimeout = 5 * time.Minute
	}
	if len(c.Targets) == 0 {
		c.Targets = []string{TargetStrata, TargetKfake}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports the first invalid field of a defaulted Config.
func (c Config) Validate() error {
	switch {
	case c.Records <= 0:
		return errors.New("records must be positive")
	case c.RecordSize <= 0:
		return errors.New("record size must be positive")
	case c.Partitions <= 0:
		return errors.New("partitions must be positive")
	case c.ReplicationFactor <= 0:
		return errors.New("replication factor must be positive")
	case c.Acks != "all" && c.Acks != "0" && c.Acks != "1":
		return fmt.Errorf("acks must be all (-1), 1 or 0, not %q", c.Acks)
	case c.Linger < 0:
		return errors.New("linger must not be negative")
	case c.Producers <= 0:
		return errors.New("producers must be positive")
	case c.Rate < 0:
		return errors.New("rate must not be negative")
	case c.Duration < 0:
		return errors.New("duration must not be negative")
	}
	if _, err := compressionCodec(c.Compression); err != nil {
		return err
	}
	for _, t := range c.Targets {
		if t != TargetStrata && t != TargetKfake && !strings.Contains(t, ":") {
			return fmt.Errorf("target %q: want strata, kfake or HOST:PORT", t)
		}
	}
	return nil
}
