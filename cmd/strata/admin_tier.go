package main

// strata admin tier: tiered storage per partition (offsets from
// ListOffsets with KIP-405's and KIP-1005's special timestamps, sizes from
// DescribeLogDirs) and per broker (upload lag, bucket requests and their
// cost, from each broker's /metrics, for which no Kafka API exists).

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

const tierUsage = `usage: strata admin tier [TOPIC...] [--metrics URL[,URL...]]

Tiered storage of the topics named (every topic when none), a row per
partition:
  TIERED       the topic's remote.storage.enable
  LOG_START    the first offset a consumer can read (ListOffsets -2), in
               the bucket for a tiered partition
  LOCAL_START  the first offset on the leader's disk (-4, EARLIEST_LOCAL)
  LAST_TIERED  the last offset copied to the bucket (-5, LATEST_TIERED;
               "-" when none is)
  END          the end offset (high watermark, -1)
  UPLOAD_LAG   records not yet in the bucket: END - LAST_TIERED - 1, the
               active segment's included (it is uploaded once it rolls)
  LOCAL        bytes of the log on the leader's disk
  REMOTE       bytes of the log in the bucket: the .log bytes of the
               segments fully copied, as the leader's index knows them

and, from each broker's /metrics (--metrics, else $METRICS, which
deploy/local/cluster.sh's cluster.env exports; no row without either), a
row per broker: its upload lag in bytes, segments and time, the bytes
copied to and read from the bucket since it started, its requests to the
bucket and their estimated cost. A metric the broker does not serve
shows as n/a.
`

// tierRow is a partition in the output of tier.
type tierRow struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	Leader      int32  `json:"leader"`
	Tiered      bool   `json:"tiered"`
	LogStart    *int64 `json:"log_start_offset"`
	LocalStart  *int64 `json:"local_log_start_offset"`
	LastTiered  *int64 `json:"last_tiered_offset"`
	End         *int64 `json:"end_offset"`
	UploadLag   *int64 `json:"upload_lag_records"`
	LocalBytes  *int64 `json:"local_bytes"`
	RemoteBytes *int64 `json:"remote_bytes"`
	Error       string `json:"error,omitempty"`
}

// tierBroker is a broker's tier metrics; nil is "n/a".
type tierBroker struct {
	Metrics          string             `json:"metrics_url"`
	CopyLagBytes     *float64           `json:"upload_lag_bytes"`
	CopyLagSegments  *float64           `json:"upload_lag_segments"`
	CopyLagSeconds   *float64           `json:"upload_lag_seconds"`
	CopiedBytes      *float64           `json:"copied_bytes"`
	FetchedBytes     *float64           `json:"remote_fetch_bytes"`
	RemoteLogBytes   *float64           `json:"remote_log_bytes"`
	BucketRequests   *float64           `json:"bucket_requests"`
	RequestsByOp     map[string]float64 `json:"bucket_requests_by_operation,omitempty"`
	BucketCostDollar *float64           `json:"bucket_cost_dollars"`
	Error            string             `json:"error,omitempty"`
}

// The metric names the brokers serve (broker/remotelog).
const (
	metricCopyLagBytes    = "kafka_server_brokertopicmetrics_remotecopylagbytes"
	metricCopyLagSegments = "kafka_server_brokertopicmetrics_remotecopylagsegments"
	metricCopyLagSeconds  = "strata_remote_log_copy_lag_seconds"
	metricCopyBytes       = "kafka_server_brokertopicmetrics_remotecopybytes_total"
	metricFetchBytes      = "kafka_server_brokertopicmetrics_remotefetchbytes_total"
	metricRemoteLogBytes  = "kafka_server_brokertopicmetrics_remotelogsizebytes"
	metricBucketRequests  = "strata_remote_storage_requests_total"
	metricBucketCost      = "strata_remote_storage_requests_cost_dollars_total"
)

func runTier(e *adminEnv, args []string) int {
	fs := e.newFlagSet("tier", tierUsage)
	metrics := fs.String("metrics", "", "the brokers' /metrics URLs, comma-separated (default: $"+metricsEnv+")")
	topics, code, ok := parseArgs(fs, args, 0, -1)
	if !ok {
		return code
	}
	urls := *metrics
	if urls == "" {
		urls = os.Getenv(metricsEnv)
	}
	adm, code, ok := e.adm()
	if !ok {
		return code
	}
	ctx, cancel := adminCtx()
	defer cancel()
	rows, bad, err := tierPartitions(ctx, adm, topics)
	if err != nil {
		return fail("tier: %v", err)
	}
	var brokers []tierBroker
	for u := range strings.SplitSeq(urls, ",") {
		if u = strings.TrimSpace(u); u != "" {
			brokers = append(brokers, scrapeTier(ctx, metricsURL(u)))
		}
	}
	if e.json {
		if brokers == nil {
			brokers = []tierBroker{}
		}
		e.printJSON(map[string]any{"partitions": rows, "brokers": brokers})
	} else {
		writeTier(e.stdout, rows, brokers)
	}
	if bad > 0 {
		return fail("tier: errors in %d row(s), see ERROR", bad)
	}
	return exitOK
}

// metricsURL makes HOST:PORT or http://HOST:PORT a /metrics URL.
func metricsURL(u string) string {
	if !strings.Contains(u, "://") {
		u = "http://" + u
	}
	if rest := u[strings.Index(u, "://")+3:]; !strings.Contains(rest, "/") {
		u += "/metrics"
	}
	return u
}

// tierPartitions lists the tier state of every partition of topics.
func tierPartitions(ctx context.Context, adm *kadm.Client, topics []string) ([]tierRow, int, error) {
	td, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		return nil, 0, err
	}
	tiered := map[string]bool{}
	if names := td.Names(); len(names) > 0 {
		rcs, err := adm.DescribeTopicConfigs(ctx, names...)
		if err != nil {
			return nil, 0, fmt.Errorf("describe topic configs: %w", kadmErr(err))
		}
		for _, rc := range rcs {
			for _, c := range rc.Configs {
				if c.Key == "remote.storage.enable" {
					tiered[rc.Name] = c.MaybeValue() == "true"
				}
			}
		}
	}
	list := func(ts int64) offsets {
		l, err := adm.ListOffsetsAfterMilli(ctx, ts, topics...)
		return offsets{l, err}
	}
	logStart, localStart, lastTiered, end := list(-2), list(-4), list(-5), list(-1)
	sz, szErr := logSizes(ctx, adm, td)
	if szErr != nil {
		fmt.Fprintf(os.Stderr, "warning: sizes: %v\n", szErr)
	}
	rows := []tierRow{}
	bad := 0
	for _, t := range td.Sorted() {
		if t.Err != nil {
			bad++
			rows = append(rows, tierRow{Topic: t.Topic, Partition: -1, Leader: -1, Error: errName(t.Err)})
			continue
		}
		for _, p := range t.Partitions.Sorted() {
			r := tierRow{Topic: t.Topic, Partition: p.Partition, Leader: p.Leader, Tiered: tiered[t.Topic]}
			var errs []string
			get := func(what string, l offsets) *int64 {
				o, ok := l.Lookup(t.Topic, p.Partition)
				if ok && o.Err == nil {
					if o.Offset < 0 {
						return nil // -5 with nothing tiered
					}
					return &o.Offset
				}
				_, err := l.lookup(t.Topic, p.Partition)
				errs = append(errs, what+": "+errName(err))
				return nil
			}
			r.LogStart, r.LocalStart, r.LastTiered, r.End = get("LOG_START", logStart), get("LOCAL_START", localStart), get("LAST_TIERED", lastTiered), get("END", end)
			if r.Tiered && r.End != nil {
				var lag int64
				switch {
				case r.LastTiered != nil:
					lag = *r.End - *r.LastTiered - 1
				case r.LogStart != nil:
					lag = *r.End - *r.LogStart
				}
				lag = max(0, lag)
				r.UploadLag = &lag
			}
			k := partKey{t.Topic, p.Partition}
			if n, ok := sz.local[k]; ok {
				r.LocalBytes = &n
			}
			if n, ok := sz.remote[k]; ok {
				r.RemoteBytes = &n
			}
			if len(errs) > 0 {
				bad++
				r.Error = strings.Join(errs, ", ")
			}
			rows = append(rows, r)
		}
	}
	return rows, bad, nil
}

// scrapeTier reads a broker's tier metrics from its /metrics.
func scrapeTier(ctx context.Context, url string) tierBroker {
	b := tierBroker{Metrics: url}
	m, err := scrapeMetrics(ctx, url)
	if err != nil {
		b.Error = err.Error()
		return b
	}
	b.CopyLagBytes = m.sum(metricCopyLagBytes)
	b.CopyLagSegments = m.sum(metricCopyLagSegments)
	b.CopyLagSeconds = m.sum(metricCopyLagSeconds)
	b.CopiedBytes = m.sum(metricCopyBytes)
	b.FetchedBytes = m.sum(metricFetchBytes)
	b.RemoteLogBytes = m.sum(metricRemoteLogBytes)
	b.BucketRequests = m.sum(metricBucketRequests)
	b.BucketCostDollar = m.sum(metricBucketCost)
	if b.BucketRequests != nil {
		b.RequestsByOp = map[string]float64{}
		for _, s := range m[metricBucketRequests] {
			op := s.labels["operation"]
			if op == "" {
				op = "other"
			}
			b.RequestsByOp[op] += s.value
		}
	}
	return b
}

// sample is one line of the Prometheus text format.
type sample struct {
	labels map[string]string
	value  float64
}

// metricSamples are the samples of a scrape by metric name.
type metricSamples map[string][]sample

// sum adds the samples of name, or is nil when there are none.
func (m metricSamples) sum(name string) *float64 {
	ss, ok := m[name]
	if !ok {
		return nil
	}
	var v float64
	for _, s := range ss {
		v += s.value
	}
	return &v
}

// scrapeMetrics fetches url and parses the Prometheus text format.
func scrapeMetrics(ctx context.Context, url string) (metricSamples, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return parseMetrics(resp.Body)
}

// parseMetrics reads the Prometheus text exposition format: name,
// optional {labels}, value; comments and timestamps skipped.
func parseMetrics(r io.Reader) (metricSamples, error) {
	out := metricSamples{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		labels := map[string]string{}
		if i := strings.IndexByte(line, '{'); i >= 0 {
			j := strings.LastIndexByte(line, '}')
			if j < i {
				continue
			}
			name, rest = line[:i], strings.TrimSpace(line[j+1:])
			for _, kv := range splitLabels(line[i+1 : j]) {
				k, v, ok := strings.Cut(kv, "=")
				if ok {
					if uq, err := strconv.Unquote(strings.TrimSpace(v)); err == nil {
						labels[strings.TrimSpace(k)] = uq
					}
				}
			}
		} else if i := strings.IndexAny(line, " \t"); i >= 0 {
			name, rest = line[:i], strings.TrimSpace(line[i+1:])
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			continue
		}
		out[name] = append(out[name], sample{labels: labels, value: v})
	}
	return out, sc.Err()
}

// splitLabels splits a="x",b="y" at the commas outside quotes.
func splitLabels(s string) []string {
	var out []string
	inQ, esc, start := false, false, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case esc:
			esc = false
		case c == '\\':
			esc = true
		case c == '"':
			inQ = !inQ
		case c == ',' && !inQ:
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if strings.TrimSpace(s[start:]) != "" {
		out = append(out, s[start:])
	}
	return out
}

// writeTier writes the tables of tier.
func writeTier(w io.Writer, rows []tierRow, brokers []tierBroker) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tPARTITION\tLEADER\tTIERED\tLOG_START\tLOCAL_START\tLAST_TIERED\tEND\tUPLOAD_LAG\tLOCAL\tREMOTE\tERROR")
	for _, r := range rows {
		if r.Partition < 0 {
			fmt.Fprintf(tw, "%s\t\t\t\t\t\t\t\t\t\t\t%s\n", r.Topic, r.Error)
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%t\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Topic, r.Partition, r.Leader, r.Tiered,
			num(r.LogStart), num(r.LocalStart), num(r.LastTiered), num(r.End), num(r.UploadLag), size(r.LocalBytes), size(r.RemoteBytes), r.Error)
	}
	tw.Flush()
	if len(brokers) == 0 {
		fmt.Fprintf(w, "\nper broker: n/a (give --metrics URL,... or set $%s to the brokers' /metrics)\n", metricsEnv)
		return
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "METRICS\tUPLOAD_LAG\tLAG_SEGMENTS\tLAG_TIME\tCOPIED\tREMOTE_READ\tBUCKET_REQUESTS\tCOST\tERROR")
	for _, b := range brokers {
		if b.Error != "" {
			fmt.Fprintf(tw, "%s\t\t\t\t\t\t\t\t%s\n", b.Metrics, b.Error)
			continue
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", b.Metrics, fbytes(b.CopyLagBytes), fcount(b.CopyLagSegments), fseconds(b.CopyLagSeconds),
			fbytes(b.CopiedBytes), fbytes(b.FetchedBytes), fcount(b.BucketRequests), fdollars(b.BucketCostDollar))
	}
	tw.Flush()
}

func fbytes(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return humanBytes(int64(*v))
}

func fcount(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return strconv.FormatFloat(*v, 'f', 0, 64)
}

func fseconds(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return (time.Duration(*v * float64(time.Second))).Round(time.Second).String()
}

func fdollars(v *float64) string {
	if v == nil {
		return "n/a"
	}
	return fmt.Sprintf("$%.4f", *v)
}
