package bench

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TargetTier is one Strata broker with --tier s3 on a MinIO server the
// harness starts, for workloads with Tier set.
const TargetTier = "strata-s3"

// TierWorkload configures the tiered-storage benchmark (see doc.go).
type TierWorkload struct {
	// SegmentBytes is segment.bytes of the topics (default 8 MiB).
	SegmentBytes int64 `json:"segment_bytes"`
	// LatencyPartitions is the number of cold first-record probes: one per
	// partition of a tiered topic of its own, each read once (default 5).
	LatencyPartitions int32 `json:"latency_partitions"`
}

// The broker settings of the tier target: passes often enough that the
// upload time is not the wait for the next pass.
const (
	tierTaskIntervalMs      = 50
	tierRetentionIntervalMs = 100
	tierLatencySegmentBytes = 1 << 20
	tierLatencyBytes        = 5 << 19 // per latency partition: two sealed segments and a half
	tierBucket              = "strata-bench"
)

// TierResult holds the figures of the tiered-storage benchmark.
type TierResult struct {
	SegmentBytes int64 `json:"segment_bytes"`
	// Upload: every sealed segment of the tiered topic copied, timed from
	// turning remote.log.copy.disable off until the broker's
	// remotecopyrequests_total counted them all and remotecopylagsegments
	// was 0. Bytes are remotecopybytes_total (segments with their indexes).
	Upload         Throughput `json:"upload"`
	UploadSegments int        `json:"upload_segments"`
	// RawPut: the same number of objects of the segments' sizes PUT
	// through tier.S3Store, one stream per partition (the broker copies
	// that many partitions at once).
	RawPut Throughput `json:"raw_put"`
	// RawGet: those objects read back whole, as many at a time.
	RawGet Throughput `json:"raw_get"`
	// ColdRead and LocalRead: one raw Fetch pass from offset 0 over the
	// tiered topic (its local copies deleted, the broker restarted) and
	// over the untiered topic holding the same records.
	ColdRead  RawPass `json:"cold_read"`
	LocalRead RawPass `json:"local_read"`
	// RemoteRecords of the tiered topic were below its local log start
	// when it was read (the rest, the active segments, were local).
	RemoteRecords int64 `json:"remote_records"`
	// ColdFirstRecordMs: per latency partition, from sending a Fetch at
	// offset 0 (over a connection already open) to the first response
	// holding a record, right after the restart. LocalFirstRecordMs: the
	// same on the untiered topic's partitions.
	ColdFirstRecordMs  []float64 `json:"cold_first_record_ms"`
	LocalFirstRecordMs []float64 `json:"local_first_record_ms"`
	ColdFirstRecord    Spread    `json:"cold_first_record"`
	LocalFirstRecord   Spread    `json:"local_first_record"`
}

// UploadRatio is the upload throughput over raw PUT throughput.
func (t *TierResult) UploadRatio() float64 {
	if t.RawPut.MBPerSec == 0 {
		return 0
	}
	return t.Upload.MBPerSec / t.RawPut.MBPerSec
}

// ColdReadRatio is the cold read over the local read, in records/s.
func (t *TierResult) ColdReadRatio() float64 {
	if t.LocalRead.RecordsPerSec == 0 {
		return 0
	}
	return t.ColdRead.RecordsPerSec / t.LocalRead.RecordsPerSec
}

func spreadOf(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	s := slices.Clone(xs)
	return Spread{N: len(s), P50Ms: median(s), MaxMs: slices.Max(s), ValuesMs: slices.Clone(xs)}
}

// tierRun is the tiered-storage benchmark against a fresh MinIO and broker.
type tierRun struct {
	cfg     Config
	res     *Result
	tr      *TierResult
	m       *benchMinIO
	broker  *strataTarget
	metrics string // HOST:PORT of the broker's /metrics
	began   time.Time
}

func (t *tierRun) progress(format string, args ...any) {
	if t.cfg.Progress != nil {
		fmt.Fprintf(t.cfg.Progress, "[%s %s %5.1fs] %s\n", TargetTier, t.cfg.Name, time.Since(t.began).Seconds(), fmt.Sprintf(format, args...))
	}
}

// runTier runs the tiered-storage benchmark and fills res.
func runTier(ctx context.Context, cfg Config, res *Result) (err error) {
	t := &tierRun{cfg: cfg, res: res, tr: &TierResult{SegmentBytes: cfg.Tier.SegmentBytes}, began: time.Now()}
	res.Tier = t.tr
	res.ReplicationFactor = 1
	t.progress("starting MinIO")
	if t.m, err = startMinIO(ctx, tierBucket); err != nil {
		return err
	}
	defer t.m.close()
	if t.metrics, err = freeLoopbackPort(); err != nil {
		return err
	}
	args := []string{"--tier", "s3://" + tierBucket + "/strata", "--s3-endpoint", t.m.endpoint(), "--s3-region", minioRegion,
		"--metrics", t.metrics,
		"--set", "remote.log.storage.system.enable=true",
		"--set", "remote.log.manager.task.interval.ms=" + strconv.Itoa(tierTaskIntervalMs),
		"--set", "log.retention.check.interval.ms=" + strconv.Itoa(tierRetentionIntervalMs)}
	t.progress("starting strata with --tier s3 on MinIO %s", t.m.addr)
	if t.broker, err = startStrataWith(ctx, cfg, args, t.m.env()); err != nil {
		return err
	}
	defer func() {
		if cerr := t.broker.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("stop: %w", cerr))
		}
	}()
	pctx, cancel := context.WithTimeout(ctx, cfg.PhaseTimeout)
	defer cancel()
	return t.phases(pctx)
}

func (t *tierRun) phases(ctx context.Context) error {
	cfg, tr := t.cfg, t.tr
	stamp := time.Now().UnixNano()
	tiered := fmt.Sprintf("strata-bench-tier-%d-tiered", stamp)
	local := fmt.Sprintf("strata-bench-tier-%d-local", stamp)
	probes := fmt.Sprintf("strata-bench-tier-%d-latency", stamp)
	t.res.Topics = []string{tiered, local, probes}
	seg := strconv.FormatInt(cfg.Tier.SegmentBytes, 10)
	tieredCfg := func(segBytes string, copyDisable bool) map[string]*string {
		c := map[string]*string{
			"remote.storage.enable": kadm.StringPtr("true"), "remote.log.copy.disable": kadm.StringPtr(strconv.FormatBool(copyDisable)),
			"segment.bytes": kadm.StringPtr(segBytes), "file.delete.delay.ms": kadm.StringPtr("0"),
		}
		if !copyDisable {
			c["local.retention.ms"] = kadm.StringPtr("1")
		}
		return c
	}
	seeds := t.broker.Seeds()
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(5*time.Millisecond),
		// Batches well below a segment, so that segments roll near
		// segment.bytes.
		kgo.ProducerBatchMaxBytes(int32(min(1<<20, cfg.Tier.SegmentBytes/4))), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordRetries(10))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for _, tc := range []struct {
		name  string
		parts int32
		cfg   map[string]*string
	}{
		{tiered, cfg.Partitions, tieredCfg(seg, true)},
		{local, cfg.Partitions, map[string]*string{"segment.bytes": kadm.StringPtr(seg)}},
		{probes, cfg.Tier.LatencyPartitions, tieredCfg(strconv.Itoa(tierLatencySegmentBytes), false)},
	} {
		if err := createTopicConfigs(ctx, adm, tc.name, tc.parts, tc.cfg); err != nil {
			return err
		}
	}

	// The latency topic first: uploaded (and its local copies deleted)
	// while the main topics are written.
	perProbe := int64(tierLatencyBytes / cfg.RecordSize)
	t.progress("producing %d records to each of %d latency partitions", perProbe, cfg.Tier.LatencyPartitions)
	if err := t.produce(ctx, cl, []string{probes}, cfg.Tier.LatencyPartitions, perProbe*int64(cfg.Tier.LatencyPartitions)); err != nil {
		return err
	}
	if err := t.rollActive(ctx, cl, adm, probes, cfg.Tier.LatencyPartitions); err != nil {
		return err
	}
	records := cfg.Records
	if records <= 0 {
		records = 1 << 18
	}
	t.progress("producing %d records of %d B to %s and to %s (the same records)", records, cfg.RecordSize, tiered, local)
	began := time.Now()
	if err := t.produce(ctx, cl, []string{tiered, local}, cfg.Partitions, records); err != nil {
		return err
	}
	t.res.Produce = throughput(2*records, 2*records*int64(cfg.RecordSize), time.Since(began))
	t.res.Acked, t.res.Sent = 2*records+int64(cfg.Tier.LatencyPartitions), 2*records+int64(cfg.Tier.LatencyPartitions)
	for _, topic := range []string{tiered, local} {
		if err := t.rollActive(ctx, cl, adm, topic, cfg.Partitions); err != nil {
			return err
		}
	}
	t.res.Acked += 2 * int64(cfg.Partitions)
	t.res.Sent = t.res.Acked
	// Wait for the latency topic's uploads, so that what follows counts the
	// tiered topic's alone.
	probeSegs, _, err := t.sealedSegments(probes, cfg.Tier.LatencyPartitions)
	if err != nil {
		return err
	}
	if _, err := t.waitCopied(ctx, 0, len(probeSegs), "latency topic"); err != nil {
		return err
	}

	// (a) Upload: turn copying on and time it.
	segs, _, err := t.sealedSegments(tiered, cfg.Partitions)
	if err != nil {
		return err
	}
	before, err := t.scrape(ctx)
	if err != nil {
		return err
	}
	t.progress("upload: %d sealed segments of %s; turning remote.log.copy.disable off", len(segs), tiered)
	start := time.Now()
	// Kafka accepts remote.log.copy.disable=true only with local retention
	// equal to the total, so local.retention.ms drops in the same alter.
	if err := alterTopic(ctx, adm, tiered, "remote.log.copy.disable", "false", "local.retention.ms", "1"); err != nil {
		return err
	}
	after, err := t.waitCopied(ctx, before[metricCopyRequests], len(segs), tiered)
	if err != nil {
		return err
	}
	tr.UploadSegments = len(segs)
	tr.Upload = throughput(0, int64(after.vals[metricCopyBytes]-before[metricCopyBytes]), after.at.Sub(start))
	t.progress("upload: %d segments, %.1f MB in %.2fs: %.1f MB/s", len(segs), float64(tr.Upload.Bytes)/1e6, tr.Upload.Seconds, tr.Upload.MBPerSec)
	t.res.Broker = &Resources{BucketWrittenBytes: int64(after.vals[metricCopyBytes]), WrittenBytes: -1}

	// Raw PUT and GET of objects of the same sizes, a stream per partition.
	if err := t.rawPutGet(ctx, segs, int(cfg.Partitions)); err != nil {
		return err
	}

	// Local copies deleted, then a restart: nothing is cached.
	t.progress("waiting for local retention to delete the uploaded local segments")
	if err := t.waitLocalDeleted(ctx, tiered, cfg.Partitions); err != nil {
		return err
	}
	if err := t.waitLocalDeleted(ctx, probes, cfg.Tier.LatencyPartitions); err != nil {
		return err
	}
	_, localStart, err := t.sealedSegments(tiered, cfg.Partitions)
	if err != nil {
		return err
	}
	for _, s := range localStart {
		tr.RemoteRecords += s
	}
	t.progress("restarting the broker")
	var cpuBefore float64
	if s, ok := t.broker.Sample(); ok {
		cpuBefore = s.CPUSeconds
		t.res.Broker.PeakRSSBytes = max(s.HWMBytes, s.RSSBytes)
	}
	if err := t.broker.restart(ctx, cfg); err != nil {
		return err
	}
	seeds = t.broker.Seeds()

	// (c) First-record latency of cold reads, then of local reads.
	if tr.ColdFirstRecordMs, err = firstRecordProbes(ctx, seeds[0], probes, cfg.Tier.LatencyPartitions); err != nil {
		return fmt.Errorf("cold first-record probes: %w", err)
	}
	tr.ColdFirstRecord = spreadOf(tr.ColdFirstRecordMs)
	t.progress("cold first record: p50 %.1f ms, max %.1f ms over %d partitions", tr.ColdFirstRecord.P50Ms, tr.ColdFirstRecord.MaxMs, tr.ColdFirstRecord.N)
	if tr.LocalFirstRecordMs, err = firstRecordProbes(ctx, seeds[0], local, cfg.Partitions); err != nil {
		return fmt.Errorf("local first-record probes: %w", err)
	}
	tr.LocalFirstRecord = spreadOf(tr.LocalFirstRecordMs)

	// (b) Cold read of the tiered topic, then the local read of the same
	// records, one raw Fetch pass each.
	ends, err := endOffsets(ctx, plaintext(seeds...), []string{tiered, local})
	if err != nil {
		return err
	}
	for k, e := range ends {
		if k.topic == tiered {
			t.res.TopicRecords += e
		}
	}
	for _, rd := range []struct {
		topic string
		out   *RawPass
		what  string
	}{{tiered, &tr.ColdRead, "cold read (bucket)"}, {local, &tr.LocalRead, "local read"}} {
		end := map[tp]int64{}
		for k, e := range ends {
			if k.topic == rd.topic {
				end[k] = e
			}
		}
		var live counters
		p, err := rawReadPass(ctx, plaintext(seeds...), end, &live, "")
		*rd.out = p
		if err != nil {
			return fmt.Errorf("%s: %w", rd.what, err)
		}
		if p.Records != t.res.TopicRecords {
			return fmt.Errorf("%s: read %d records, the topic holds %d", rd.what, p.Records, t.res.TopicRecords)
		}
		t.progress("%s: %d records, %.1f MB in %.2fs: %.0f records/s, %.1f MB/s", rd.what, p.Records, float64(p.Bytes)/1e6, p.Seconds, p.RecordsPerSec, p.MBPerSec)
	}
	t.res.Consumed = t.res.TopicRecords
	t.progress("upload %.2fx raw PUT; cold read %.2fx local read; cold first record max %.1f ms",
		tr.UploadRatio(), tr.ColdReadRatio(), tr.ColdFirstRecord.MaxMs)
	if s, ok := t.broker.Sample(); ok {
		t.res.Broker.PeakRSSBytes = max(t.res.Broker.PeakRSSBytes, s.HWMBytes, s.RSSBytes)
		t.res.Broker.CPUSeconds = cpuBefore + s.CPUSeconds // both processes
	}
	return nil
}

// createTopicConfigs creates a topic with configs and waits for its leaders.
func createTopicConfigs(ctx context.Context, adm *kadm.Client, topic string, parts int32, configs map[string]*string) error {
	r, err := adm.CreateTopic(ctx, parts, 1, configs, topic)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w (%s)", topic, err, r.ErrMessage)
	}
	for {
		md, err := adm.Metadata(ctx, topic)
		if err == nil {
			if td, ok := md.Topics[topic]; ok && td.Err == nil && len(td.Partitions) == int(parts) && allLed(td) {
				return nil
			}
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return fmt.Errorf("wait for topic %s leaders: %w", topic, ctx.Err())
		}
	}
}

func alterTopic(ctx context.Context, adm *kadm.Client, topic string, kv ...string) error {
	var alters []kadm.AlterConfig
	for i := 0; i+1 < len(kv); i += 2 {
		alters = append(alters, kadm.AlterConfig{Op: kadm.SetConfig, Name: kv[i], Value: kadm.StringPtr(kv[i+1])})
	}
	rs, err := adm.AlterTopicConfigs(ctx, alters, topic)
	if err == nil {
		for _, r := range rs {
			if r.Err != nil {
				err = fmt.Errorf("%w (%s)", r.Err, r.ErrMessage)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("set %s on %s: %w", strings.Join(kv, "="), topic, err)
	}
	return nil
}

// produce writes n records to each topic, spread evenly over parts
// partitions, with the same values in every topic.
func (t *tierRun) produce(ctx context.Context, cl *kgo.Client, topics []string, parts int32, n int64) error {
	value := make([]byte, t.cfg.RecordSize)
	_, _ = rand.Read(value)
	var failed atomic.Pointer[error]
	var acked atomic.Int64
	last := time.Now()
	for i := range n {
		for _, topic := range topics {
			r := &kgo.Record{Topic: topic, Partition: int32(i % int64(parts)), Value: value}
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
				if err != nil {
					failed.CompareAndSwap(nil, &err)
				}
				acked.Add(1)
			})
		}
		if p := failed.Load(); p != nil {
			return fmt.Errorf("produce: %w", *p)
		}
		if time.Since(last) >= 2*time.Second {
			last = time.Now()
			t.progress("produced %d of %d records", acked.Load(), n*int64(len(topics)))
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("produce: %w", err)
	}
	if p := failed.Load(); p != nil {
		return fmt.Errorf("produce: %w", *p)
	}
	return nil
}

// rollActive seals each partition's active segment: with segment.ms=1 the
// next append rolls, so one small record per partition leaves all but
// itself in sealed segments.
func (t *tierRun) rollActive(ctx context.Context, cl *kgo.Client, adm *kadm.Client, topic string, parts int32) error {
	if err := alterTopic(ctx, adm, topic, "segment.ms", "1"); err != nil {
		return err
	}
	if !sleepCtx(ctx, 20*time.Millisecond) {
		return ctx.Err()
	}
	var recs []*kgo.Record
	for p := range parts {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: []byte("roll")})
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		return fmt.Errorf("roll %s: %w", topic, err)
	}
	return alterTopic(ctx, adm, topic, "segment.ms", strconv.Itoa(7*24*3600*1000))
}

// sealedSegments lists the sealed local segments of a topic's partitions
// from the broker's data directory (the harness owns it) by their sizes,
// and each partition's active segment base offset.
func (t *tierRun) sealedSegments(topic string, parts int32) (sizes []int64, activeBase []int64, err error) {
	for p := range parts {
		dir := filepath.Join(t.broker.dataDir, fmt.Sprintf("%s-%d", topic, p))
		ents, err := os.ReadDir(dir)
		if err != nil {
			return nil, nil, fmt.Errorf("partition dir: %w", err)
		}
		var logs []os.DirEntry
		for _, e := range ents {
			if strings.HasSuffix(e.Name(), ".log") {
				logs = append(logs, e)
			}
		}
		if len(logs) == 0 {
			return nil, nil, fmt.Errorf("%s: no segment", dir)
		}
		for _, e := range logs[:len(logs)-1] { // sorted by name: by base offset
			info, err := e.Info()
			if err != nil {
				return nil, nil, err
			}
			sizes = append(sizes, info.Size())
		}
		base, err := strconv.ParseInt(strings.TrimSuffix(logs[len(logs)-1].Name(), ".log"), 10, 64)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: segment name %s", dir, logs[len(logs)-1].Name())
		}
		activeBase = append(activeBase, base)
	}
	return sizes, activeBase, nil
}

// waitLocalDeleted waits until each partition of topic has only its active
// segment left locally.
func (t *tierRun) waitLocalDeleted(ctx context.Context, topic string, parts int32) error {
	for {
		sizes, _, err := t.sealedSegments(topic, parts)
		if err != nil {
			return err
		}
		if len(sizes) == 0 {
			return nil
		}
		if !sleepCtx(ctx, 50*time.Millisecond) {
			return fmt.Errorf("%s: %d uploaded segments still local: %w", topic, len(sizes), ctx.Err())
		}
	}
}

// Broker metrics the upload is timed by (Kafka's BrokerTopicMetrics).
const (
	metricCopyBytes    = "kafka_server_brokertopicmetrics_remotecopybytes_total"
	metricCopyRequests = "kafka_server_brokertopicmetrics_remotecopyrequests_total"
	metricCopyLag      = "kafka_server_brokertopicmetrics_remotecopylagsegments"
)

type metricsScrape struct {
	vals map[string]float64
	at   time.Time
}

// scrape reads the broker's unlabelled metrics.
func (t *tierRun) scrape(ctx context.Context) (map[string]float64, error) {
	s, err := t.scrapeAt(ctx)
	return s.vals, err
}

func (t *tierRun) scrapeAt(ctx context.Context) (metricsScrape, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+t.metrics+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return metricsScrape{}, fmt.Errorf("broker metrics: %w", err)
	}
	defer resp.Body.Close()
	at := time.Now()
	vals, err := parseMetrics(io.LimitReader(resp.Body, 16<<20))
	return metricsScrape{vals: vals, at: at}, err
}

// parseMetrics reads the unlabelled samples of a Prometheus text page.
func parseMetrics(r io.Reader) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) == 0 || line[0] == '#' || bytes.IndexByte(line, '{') >= 0 {
			continue
		}
		name, val, ok := strings.Cut(string(line), " ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.Fields(val)[0], 64)
		if err == nil {
			out[name] = v
		}
	}
	return out, sc.Err()
}

// waitCopied polls /metrics until remotecopyrequests_total has grown by
// want from base and remotecopylagsegments is 0; it returns that scrape.
func (t *tierRun) waitCopied(ctx context.Context, base float64, want int, what string) (metricsScrape, error) {
	last := time.Now()
	for {
		s, err := t.scrapeAt(ctx)
		if err != nil {
			return s, err
		}
		done := s.vals[metricCopyRequests] - base
		if done >= float64(want) && s.vals[metricCopyLag] == 0 {
			return s, nil
		}
		if time.Since(last) >= time.Second {
			last = time.Now()
			t.progress("upload of %s: %.0f of %d segments, %.1f MB copied in all", what, done, want, s.vals[metricCopyBytes]/1e6)
		}
		// Half the task interval: a fine enough clock, and rare enough
		// that rendering /metrics costs the broker little.
		if !sleepCtx(ctx, tierTaskIntervalMs/2*time.Millisecond) {
			return s, fmt.Errorf("upload of %s: %.0f of %d segments copied: %w", what, done, want, ctx.Err())
		}
	}
}

// rawPutGet PUTs one object per size through tier.S3Store, streams at a
// time (the broker copies that many partitions at once), then GETs them
// back whole, as many at a time.
func (t *tierRun) rawPutGet(ctx context.Context, sizes []int64, streams int) error {
	st, err := t.m.store("raw")
	if err != nil {
		return err
	}
	largest := slices.Max(sizes)
	data := make([]byte, largest)
	_, _ = rand.Read(data)
	var total int64
	for _, n := range sizes {
		total += n
	}
	// each runs fn for every object, streams at a time.
	each := func(fn func(i int, n int64) error) error {
		errs := make([]error, streams)
		var wg sync.WaitGroup
		for w := range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < len(sizes); i += streams {
					if err := fn(i, sizes[i]); err != nil {
						errs[w] = err
						return
					}
				}
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	start := time.Now()
	if err := each(func(i int, n int64) error {
		if err := st.Put(ctx, fmt.Sprintf("obj-%05d", i), bytes.NewReader(data[:n]), n); err != nil {
			return fmt.Errorf("raw put: %w", err)
		}
		return nil
	}); err != nil {
		return err
	}
	t.tr.RawPut = throughput(0, total, time.Since(start))
	t.progress("raw PUT: %d objects, %d at a time, %.1f MB in %.2fs: %.1f MB/s", len(sizes), streams, float64(total)/1e6, t.tr.RawPut.Seconds, t.tr.RawPut.MBPerSec)
	start = time.Now()
	if err := each(func(i int, n int64) error {
		rc, err := st.Get(ctx, fmt.Sprintf("obj-%05d", i), 0, n)
		if err != nil {
			return fmt.Errorf("raw get: %w", err)
		}
		m, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil || m != n {
			return fmt.Errorf("raw get: %d of %d bytes: %v", m, n, err)
		}
		return nil
	}); err != nil {
		return err
	}
	t.tr.RawGet = throughput(0, total, time.Since(start))
	t.progress("raw GET: %d objects, %d at a time, %.1f MB in %.2fs: %.1f MB/s", len(sizes), streams, float64(total)/1e6, t.tr.RawGet.Seconds, t.tr.RawGet.MBPerSec)
	return nil
}

// firstRecordProbes measures, for each partition of topic in turn, the
// time from sending a Fetch at offset 0 over an open connection to the
// first response that holds a record (empty responses, and retriable
// errors, are fetched again).
func firstRecordProbes(ctx context.Context, addr, topic string, parts int32) ([]float64, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	defer stop()
	rd := &rawReader{conn: c, r: bufio.NewReaderSize(c, 64<<10), fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID(rawClientID))}
	var out []float64
	for p := range parts {
		part := &rawPart{tp: tp{topic, p}, end: 1}
		start := time.Now()
		for {
			resp, err := rd.fetch([]*rawPart{part})
			if err != nil {
				return out, fmt.Errorf("partition %d: %w", p, err)
			}
			if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
				return out, fmt.Errorf("partition %d: fetch response without the partition", p)
			}
			fp := resp.Topics[0].Partitions[0]
			if fp.ErrorCode == 0 {
				w, err := walkBatches(fp.RecordBatches, 0)
				if err != nil {
					return out, fmt.Errorf("partition %d: %w", p, err)
				}
				if w.records > 0 {
					break
				}
			} else if e := kerr.ErrorForCode(fp.ErrorCode); !kerr.IsRetriable(e) {
				return out, fmt.Errorf("partition %d: fetch: %w", p, e)
			} else {
				// A broker just restarted answers REPLICA_NOT_AVAILABLE
				// until its remote index is refreshed; clients retry, and
				// the wait counts.
				time.Sleep(time.Millisecond)
			}
			if time.Since(start) > time.Minute {
				return out, fmt.Errorf("partition %d: no record within a minute", p)
			}
		}
		out = append(out, ms(time.Since(start)))
	}
	return out, nil
}
