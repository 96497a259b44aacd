package obs

import (
	"bytes"
	"fmt"
	"strings"
)

// Markdown renders docs/metrics.md from the catalog: every metric with its
// type, labels and help, by name.
func Markdown(defs []Def) []byte {
	var b bytes.Buffer
	b.WriteString(`# Metrics

<!-- Generated from the code by ` + "`make metrics-doc`" + ` (go run ./internal/obs/metricsdoc);
do not edit: a test fails when this file differs from what the code declares. -->

A broker started with ` + "`--metrics HOST:PORT`" + ` serves these on ` + "`/metrics`" + ` in
the Prometheus text format, beside Go's runtime and process metrics
(` + "`go_*`" + `, ` + "`process_*`" + `). Names follow Kafka's JMX metrics as the Prometheus
JMX exporter's Kafka rules name them (` + "`kafka.server:type=BrokerTopicMetrics,name=BytesInPerSec`" + `
becomes ` + "`kafka_server_brokertopicmetrics_bytesin_total`" + `), so that dashboards and
alerts written for Kafka carry over; metrics Kafka has no equivalent of are
named ` + "`strata_*`" + `. A histogram also exports ` + "`_bucket`" + `, ` + "`_sum`" + ` and
` + "`_count`" + ` series. The tier's metrics exist only on a broker with tiered storage
on (` + "`--tier`" + `), the bucket request metrics only with an S3 tier, and the
controller's election metrics only in ZooKeeper mode.

See [observability.md](observability.md) for the dashboard and the alerts
built on them.

| name | type | labels | help |
|---|---|---|---|
`)
	for _, d := range defs {
		labels := "-"
		if len(d.Labels) > 0 {
			labels = "`" + strings.Join(d.Labels, "`, `") + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", d.Name, d.Kind, labels, strings.ReplaceAll(d.Help, "|", `\|`))
	}
	return b.Bytes()
}
