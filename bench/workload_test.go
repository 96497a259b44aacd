package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseWorkload(t *testing.T) {
	w, err := ParseWorkload([]byte(`{
		"name": "w", "topics": 2, "partitions": 3, "record_size": 100,
		"key_distribution": "zipf", "key_space": 50, "producers": 2, "rate": 1500.5,
		"acks": "1", "compression": "zstd", "linger": "2ms", "consumers": 1,
		"consume_mode": "group", "warmup": "1s", "duration": "1m30s", "backlog": 7,
		"read_back": true, "sample_interval": 0
	}`))
	if err != nil {
		t.Fatal(err)
	}
	want := Workload{Name: "w", Topics: 2, Partitions: 3, RecordSize: 100, KeyDistribution: KeysZipf, KeySpace: 50,
		Producers: 2, Rate: 1500.5, Acks: "1", Compression: "zstd", Linger: Duration(2 * time.Millisecond),
		Consumers: 1, ConsumeMode: ConsumeGroup, Warmup: Duration(time.Second), Duration: Duration(90 * time.Second),
		Backlog: 7, ReadBack: true}
	if !reflect.DeepEqual(w, want) {
		t.Fatalf("parsed %+v\nwant   %+v", w, want)
	}
	d := w.WithDefaults()
	if err := d.Validate(); err != nil {
		t.Fatalf("validate: %v", err)
	}
	if d.ReplicationFactor != 1 || d.SampleInterval != Duration(500*time.Millisecond) {
		t.Errorf("defaults %+v", d)
	}
	// A written workload reads back the same.
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if back, err := ParseWorkload(b); err != nil || !reflect.DeepEqual(back, d) {
		t.Fatalf("round trip %s: %+v %v", b, back, err)
	}
	for name, bad := range map[string]string{
		"unknown field":   `{"partitons": 3}`,
		"trailing data":   `{"partitions": 3} {}`,
		"bare duration":   `{"duration": 30}`,
		"bad duration":    `{"duration": "thirty seconds"}`,
		"wrong type":      `{"partitions": "3"}`,
		"not an object":   `[1]`,
		"empty":           ``,
		"overflowing int": `{"partitions": 99999999999}`,
	} {
		if _, err := ParseWorkload([]byte(bad)); err == nil {
			t.Errorf("%s: %s parsed", name, bad)
		}
	}
}

func TestWorkloadValidate(t *testing.T) {
	for _, bad := range []Workload{
		{Acks: "2"}, {Compression: "brotli"}, {Rate: -1}, {RecordSize: -1}, {KeyDistribution: "gauss"},
		{Backlog: 10}, // no consumers to catch up
		{ConsumeMode: "share"}, {Topics: -1}, {Partitions: maxPartitions + 1}, {Warmup: -1},
		{Rebalances: 1, Consumers: 2}, {Balancer: BalancerRange, Consumers: 2}, // need group mode
		{ConsumeMode: ConsumeGroup, Balancer: "uniform", Consumers: 2},
		{ConsumeMode: ConsumeGroup, Rebalances: -1, Consumers: 2}, {ConsumeMode: ConsumeGroup, Rebalances: 1},
	} {
		if err := bad.WithDefaults().Validate(); err == nil {
			t.Errorf("%+v validated", bad)
		}
	}
	for _, n := range PresetNames() {
		if err := Presets[n].WithDefaults().Validate(); err != nil {
			t.Errorf("preset %s: %v", n, err)
		}
	}
	if _, err := Preset("nope"); err == nil || !strings.Contains(err.Error(), "catch-up") {
		t.Errorf("unknown preset error %v", err)
	}
	// Example workload files stay valid.
	files, _ := filepath.Glob("workloads/*.json")
	if len(files) == 0 {
		t.Fatal("no example workloads")
	}
	for _, f := range files {
		w, err := LoadWorkload(f)
		if err == nil {
			err = w.WithDefaults().Validate()
		}
		if err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

func TestConfigDefaults(t *testing.T) {
	c := Config{}.withDefaults()
	if err := c.Validate(); err != nil {
		t.Fatalf("defaults invalid: %v", err)
	}
	if c.Acks != "all" || c.Partitions != 6 || !slices.Equal(c.Targets, []string{TargetStrata, TargetKafka, TargetKfake}) || c.Topics != 1 || c.ConsumeMode != ConsumeAssign {
		t.Fatalf("defaults %+v", c)
	}
	if err := (Config{Targets: []string{"nowhere"}}).withDefaults().Validate(); err == nil {
		t.Error("target without a port validated")
	}
}

// FuzzParseWorkload: no input panics the parser, and whatever parses and
// validates survives a write and a second parse unchanged.
func FuzzParseWorkload(f *testing.F) {
	files, _ := filepath.Glob("workloads/*.json")
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	for _, w := range Presets {
		b, _ := json.Marshal(w)
		f.Add(b)
	}
	f.Add([]byte(`{"duration": "1h", "rate": 1e308}`))
	f.Add([]byte(`{"linger": "-5s"}`))
	f.Add([]byte(`{"duration": 0}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		w, err := ParseWorkload(b)
		if err != nil {
			return
		}
		d := w.WithDefaults()
		if d.Validate() != nil {
			return
		}
		out, err := json.Marshal(d)
		if err != nil {
			t.Fatalf("marshal %+v: %v", d, err)
		}
		back, err := ParseWorkload(out)
		if err != nil || !reflect.DeepEqual(back, d) {
			t.Fatalf("round trip of %q: %+v %v, want %+v", b, back, err, d)
		}
		_ = d.Describe()
	})
}

func TestKeyGen(t *testing.T) {
	base := Workload{KeySpace: 100}.WithDefaults()
	gen := func(dist string) *keyGen { w := base; w.KeyDistribution = dist; return newKeyGen(w, 1) }
	if k := gen(KeysNone).key(); k != nil {
		t.Errorf("none gave key %q", k)
	}
	rr := gen(KeysRoundRobin)
	first := string(rr.key())
	for range 99 {
		if string(rr.key()) == first {
			t.Fatal("round-robin repeated a key within the key space")
		}
	}
	if string(rr.key()) != first {
		t.Error("round-robin did not wrap around")
	}
	for _, dist := range []string{KeysRandom, KeysZipf} {
		g := gen(dist)
		seen := map[string]int{}
		for range 10_000 {
			seen[string(g.key())]++
		}
		top := 0
		for _, n := range seen {
			top = max(top, n)
		}
		switch {
		case len(seen) > 100:
			t.Errorf("%s: %d distinct keys from a space of 100", dist, len(seen))
		case dist == KeysRandom && (len(seen) < 95 || top > 200):
			t.Errorf("random: %d distinct keys, hottest %d of 10000: not uniform", len(seen), top)
		case dist == KeysZipf && top < 1000:
			t.Errorf("zipf: hottest key %d of 10000: not skewed", top)
		}
	}
	// A key space of one works for every distribution.
	one := Workload{KeySpace: 1, KeyDistribution: KeysZipf}.WithDefaults()
	if k := newKeyGen(one, 3).key(); string(k) != "key-00000000" {
		t.Errorf("zipf over one key gave %q", k)
	}
}
