package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"strata/internal/obs"
	"strata/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// repoFile is the path of a file of the repository.
func repoFile(t *testing.T, rel string) string {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(root, rel)
}

// TestMetricsDocUpToDate fails when docs/metrics.md differs from what the
// catalog of metrics generates: run `make metrics-doc` after adding or
// changing a metric.
func TestMetricsDocUpToDate(t *testing.T) {
	path := repoFile(t, "docs/metrics.md")
	have, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read docs/metrics.md: %v", err)
	}
	want := obs.Markdown(obs.All())
	if !bytes.Equal(have, want) {
		hl, wl := bytes.Split(have, []byte("\n")), bytes.Split(want, []byte("\n"))
		i := 0
		for i < len(hl) && i < len(wl) && bytes.Equal(hl[i], wl[i]) {
			i++
		}
		line := func(l [][]byte) string {
			if i < len(l) {
				return string(l[i])
			}
			return "(end of file)"
		}
		t.Fatalf("docs/metrics.md is not what the code declares; run `make metrics-doc`. Line %d is\n  %s\nwant\n  %s", i+1, line(hl), line(wl))
	}
	for _, name := range []string{
		// The metrics the issue names, with Kafka exporter names.
		"kafka_server_brokertopicmetrics_bytesin_total",
		"kafka_server_brokertopicmetrics_bytesout_total",
		"kafka_server_brokertopicmetrics_messagesin_total",
		"kafka_server_brokertopicmetrics_failedproducerequests_total",
		"kafka_server_brokertopicmetrics_failedfetchrequests_total",
		"kafka_server_replicamanager_underreplicatedpartitions",
		"kafka_server_replicamanager_partitioncount",
		"kafka_server_replicamanager_leadercount",
		"kafka_server_replicamanager_underminisrpartitioncount",
		"kafka_server_replicamanager_isrshrinks_total",
		"kafka_server_replicamanager_isrexpands_total",
		"kafka_controller_kafkacontroller_activecontrollercount",
		"kafka_controller_kafkacontroller_offlinepartitionscount",
		"kafka_controller_controllerstats_leaderelectionrateandtimems",
		"kafka_network_requestmetrics_requests_total",
		"kafka_network_requestmetrics_totaltimems",
		"kafka_server_groupmetadatamanager_numgroups",
		"kafka_consumergroup_lag",
		"kafka_server_brokertopicmetrics_remotecopylagbytes",
		"strata_remote_log_copy_lag_seconds",
		"kafka_log_remote_remotelogmanager_remotelogreaderfetchrateandtimems",
		"strata_remote_log_reader_cache_hits_total",
		"strata_remote_storage_requests_total",
		"strata_remote_storage_requests_cost_dollars_total",
	} {
		if _, ok := obs.Lookup(name); !ok {
			t.Errorf("metric %s is not declared", name)
		}
	}
}
