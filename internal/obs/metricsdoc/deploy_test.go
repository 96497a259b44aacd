package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/obs"
	"strata/internal/testenv"
)

// TestAlertRules checks deploy/prometheus/alerts.yml with promtool and
// runs its unit tests (alerts_test.yml), and checks that every alert has
// a unit test.
func TestAlertRules(t *testing.T) {
	promtool := testenv.RequirePromtool(t)
	dir := repoFile(t, "deploy/prometheus")
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	rules := readFile(t, "deploy/prometheus/alerts.yml")
	tests := readFile(t, "deploy/prometheus/alerts_test.yml")
	alerts := regexp.MustCompile(`(?m)^\s*- alert: (\w+)`).FindAllStringSubmatch(rules, -1)
	if len(alerts) < 10 {
		t.Fatalf("alerts.yml has %d alerts, want the cluster, broker and tier ones", len(alerts))
	}
	for _, a := range alerts {
		if !regexp.MustCompile(`alertname: ` + a[1] + `\s`).MatchString(tests) {
			t.Errorf("alert %s has no unit test in alerts_test.yml", a[1])
		}
		if !regexp.MustCompile(`exp_alerts:\s*\n\s*- exp_labels:[^\n]*\n(?s:.*)`).MatchString(tests) {
			t.Errorf("alerts_test.yml never expects an alert to fire")
		}
	}
}

func readFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(repoFile(t, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// metricRef matches the broker's metric names in PromQL.
var metricRef = regexp.MustCompile(`\b(?:kafka|strata)_[a-z0-9_]+\b`)

// usedMetrics are the metric names the dashboard and the alert rules use,
// with the file that uses each.
func usedMetrics(t *testing.T) map[string]string {
	t.Helper()
	used := map[string]string{}
	var dash map[string]any
	if err := json.Unmarshal([]byte(readFile(t, "deploy/grafana/strata.json")), &dash); err != nil {
		t.Fatalf("deploy/grafana/strata.json: %v", err)
	}
	var exprs func(v any)
	exprs = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "expr" || k == "query" || k == "definition") {
					for _, m := range metricRef.FindAllString(s, -1) {
						used[m] = "deploy/grafana/strata.json"
					}
				}
				exprs(x)
			}
		case []any:
			for _, x := range v {
				exprs(x)
			}
		}
	}
	exprs(dash)
	if len(used) < 20 {
		t.Fatalf("the dashboard uses %d metrics; its queries were not found", len(used))
	}
	for _, m := range metricRef.FindAllString(readFile(t, "deploy/prometheus/alerts.yml"), -1) {
		used[m] = "deploy/prometheus/alerts.yml"
	}
	return used
}

// TestDashboardAndAlertsUseLiveMetrics starts a broker as in production
// (ZooKeeper, an S3 tier on MinIO), produces, consumes and commits a
// group's offsets, and checks that every metric the Grafana dashboard and
// the alert rules name is on its /metrics, and that every metric on
// /metrics (beyond Go's and the process's) is declared in the catalog
// docs/metrics.md is generated from.
func TestDashboardAndAlertsUseLiveMetrics(t *testing.T) {
	used := usedMetrics(t)
	zk := testenv.StartZooKeeper(t)
	m := testenv.SharedMinIO(t)
	bucket := m.NewBucket(t)
	t.Setenv("AWS_ACCESS_KEY_ID", m.AccessKey())
	t.Setenv("AWS_SECRET_ACCESS_KEY", m.SecretKey())
	b := testenv.StartBroker(t, testenv.BrokerOptions{ID: 1, Metrics: "127.0.0.1:0",
		Sets: []string{"remote.log.manager.task.interval.ms=200", "offsets.topic.num.partitions=1", "offsets.topic.replication.factor=1"},
		Args: []string{"--zookeeper", zk.Addr() + "/obs", "--tier", "s3://" + bucket + "/strata",
			"--s3-endpoint", m.Endpoint(), "--s3-region", testenv.MinIORegion}})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{"remote.storage.enable": kadm.StringPtr("true")}, "obs"); err != nil {
		t.Fatalf("create topic: %v", err)
	}
	for i := range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "obs", Value: []byte{byte(i)}}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: "obs", Partition: 0, At: 4, LeaderEpoch: -1})
	if _, err := adm.CommitOffsets(ctx, "obs-group", offs); err != nil {
		t.Fatalf("commit offsets: %v", err)
	}

	var families map[string]string
	var lag string
	deadline := time.Now().Add(30 * time.Second)
	for {
		families, lag = scrape(t, "http://"+b.MetricsAddr()+"/metrics")
		missing := []string{}
		for name, file := range used {
			if _, ok := families[familyOf(name)]; !ok {
				missing = append(missing, name+" ("+file+")")
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			slices.Sort(missing)
			t.Fatalf("metrics the dashboard or alerts use, missing from a live broker's /metrics:\n  %s", strings.Join(missing, "\n  "))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if lag != "6" {
		t.Errorf("kafka_consumergroup_lag of obs-group on obs-0 = %q, want 6 (10 records, committed 4)", lag)
	}
	for name := range families {
		if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || strings.HasPrefix(name, "promhttp_") {
			continue
		}
		if _, ok := obs.Lookup(name); !ok {
			t.Errorf("/metrics serves %s, which the catalog (internal/obs) does not declare, so docs/metrics.md misses it", name)
		}
	}
	// One broker: the controller, leading obs-0 and __consumer_offsets-0.
	for name, want := range map[string]string{
		"kafka_controller_kafkacontroller_activecontrollercount":  "1",
		"kafka_controller_kafkacontroller_offlinepartitionscount": "0",
		"kafka_server_replicamanager_leadercount":                 "2",
		"kafka_server_replicamanager_partitioncount":              "2",
		"kafka_server_replicamanager_underreplicatedpartitions":   "0",
		"kafka_server_groupmetadatamanager_numgroups":             "1",
	} {
		if families[name] != want {
			t.Errorf("%s = %q, want %s", name, families[name], want)
		}
	}
}

// familyOf is the metric family of a series name: a histogram's
// _bucket, _sum and _count series belong to the histogram.
func familyOf(name string) string {
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok {
			if d, ok := obs.Lookup(base); ok && d.Kind == obs.KindHistogram {
				return base
			}
		}
	}
	return name
}

// scrape returns the metric families of a /metrics page with the value of
// their first unlabelled series ("" if none), and the lag of obs-group
// on obs-0.
func scrape(t *testing.T, url string) (families map[string]string, lag string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, b)
	}
	families = map[string]string{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			families[strings.Fields(f)[0]] = ""
			continue
		}
		if strings.HasPrefix(line, "#") {
			continue
		}
		name, value, _ := strings.Cut(line, " ")
		if v, ok := families[name]; ok && v == "" {
			families[name] = value
		}
		if strings.HasPrefix(name, `kafka_consumergroup_lag{`) && strings.Contains(name, `consumergroup="obs-group"`) &&
			strings.Contains(name, `topic="obs"`) && strings.Contains(name, `partition="0"`) {
			lag = value
		}
	}
	return families, lag
}
