package main

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// TestMoveProgressLine pins the one progress line of a rebalance or
// decommission: partitions and bytes left, the rate and the time left,
// never the partitions' names.
func TestMoveProgressLine(t *testing.T) {
	began := time.Unix(1000, 0)
	m := &moveProgress{began: began, partitions: 300, firstBytes: -1}
	text, key := m.line(300, 100<<20, began.Add(time.Second))
	if text != "300 of 300 partitions left, 100.0 MB left (1s)" || key != "300 of 300 partitions left" {
		t.Errorf("first line %q key %q", text, key)
	}
	text, _ = m.line(120, 40<<20, began.Add(11*time.Second))
	if want := "120 of 300 partitions left, 40.0 MB left, 5.5 MB/s, about 7s left (11s)"; text != want {
		t.Errorf("line %q, want %q", text, want)
	}
	if text, _ = m.line(5, -1, began.Add(12*time.Second)); text != "5 of 300 partitions left (12s)" {
		t.Errorf("unknown bytes: %q", text)
	}

	// Not on a terminal: a line when the partitions left change, else at
	// most every 10 s.
	var b strings.Builder
	p := newProgress(&b)
	p.update("a 1", "a")
	p.update("a 2", "a")
	p.update("b 1", "b")
	p.done()
	if b.String() != "a 1\nb 1\n" {
		t.Errorf("progress off a terminal: %q", b.String())
	}
}

// TestParseMetricsTolerant reads the metrics a broker serves and tells a
// missing one from a zero.
func TestParseMetricsTolerant(t *testing.T) {
	text := `# HELP kafka_server_brokertopicmetrics_remotecopylagbytes Bytes.
# TYPE kafka_server_brokertopicmetrics_remotecopylagbytes gauge
kafka_server_brokertopicmetrics_remotecopylagbytes 0
strata_remote_storage_requests_total{class="A",operation="PutObject"} 12
strata_remote_storage_requests_total{class="B",operation="GetObject"} 30
strata_remote_storage_requests_total{operation="odd,\"name\"",class="B"} 1
kafka_server_brokertopicmetrics_remotecopybytes_total 1.5e+06 1700000000000
garbage line
`
	m, err := parseMetrics(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	if v := m.sum(metricCopyLagBytes); v == nil || *v != 0 {
		t.Errorf("copy lag: %v", v)
	}
	if v := m.sum(metricCopyBytes); v == nil || *v != 1.5e6 {
		t.Errorf("copied: %v", v)
	}
	if v := m.sum(metricBucketRequests); v == nil || *v != 43 {
		t.Errorf("requests: %v", v)
	}
	if v := m.sum(metricBucketCost); v != nil {
		t.Errorf("cost of a broker without it: %v, want nil (n/a)", *v)
	}
	if got := m[metricBucketRequests][2].labels["operation"]; got != `odd,"name"` {
		t.Errorf("quoted label: %q", got)
	}
	if fdollars(nil) != "n/a" || fbytes(nil) != "n/a" || fcount(nil) != "n/a" || fseconds(nil) != "n/a" {
		t.Error("a missing metric is not n/a")
	}
	for in, want := range map[string]string{"h:1": "http://h:1/metrics", "http://h:1": "http://h:1/metrics", "https://h:1/m": "https://h:1/m"} {
		if got := metricsURL(in); got != want {
			t.Errorf("metricsURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCheckPartitions classifies offline, under-min-ISR and
// under-replicated partitions.
func TestCheckPartitions(t *testing.T) {
	td := kadm.TopicDetails{"t": {Topic: "t", Partitions: kadm.PartitionDetails{
		0: {Partition: 0, Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}},
		1: {Partition: 1, Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}},
		2: {Partition: 2, Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1}},
		3: {Partition: 3, Leader: -1, Replicas: []int32{1, 2, 3}, ISR: []int32{}},
	}}}
	rep := checkPartitions(td, map[string]int{"t": 2})
	if rep.Partitions != 4 || rep.Offline != 1 || rep.UnderMinISR != 2 || rep.UnderReplicated != 3 || len(rep.Problems) != 3 ||
		strings.Join(rep.Problems[2].Problems, ",") != "offline,under-min-isr,under-replicated" {
		t.Errorf("%s", jsonOf(rep))
	}
}
