package bench

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
)

// TargetMove is a Strata cluster the harness starts for the move
// workload: ZooKeeper, MinIO and ReplicationFactor brokers with --tier s3,
// plus one fresh broker per move (move_run.go).
const TargetMove = "strata-zk-s3"

// MoveWorkload configures the partition-move benchmark (issue 16's
// "Benchmark" section; see move_run.go for the phases).
type MoveWorkload struct {
	// SizesGB are the history sizes of the moved partition, in GB (10^9
	// bytes); default 0.1, 1 and 4. Each size is moved twice: tiered
	// (only the local tail is copied) and untiered (the whole history).
	SizesGB []float64 `json:"sizes_gb"`
	// TailBytes is local.retention.bytes of the tiered topics (default 64
	// MiB): the local tail every tiered partition keeps whatever its size.
	TailBytes int64 `json:"tail_bytes"`
	// SegmentBytes is segment.bytes of every topic (default 16 MiB).
	SegmentBytes int64 `json:"segment_bytes"`
	// ColdReadGB bounds the cold read that counts GETs per GB (default 1).
	ColdReadGB float64 `json:"cold_read_gb"`
	// StartupRestarts is how many times the brokers holding the smallest
	// and the largest tiered partition are restarted to time start-up
	// (default 9, the two in turn, the first of each pair alternating; the
	// median counts: a start is tens of milliseconds, mostly the
	// ZooKeeper registration, so a few milliseconds of noise move one
	// sample by 10-30%).
	StartupRestarts int `json:"startup_restarts"`
	// Restore is the restore from zero, run after the moves on a cluster
	// of its own (restore.go, restore_run.go).
	Restore RestoreWorkload `json:"restore"`
	// RestoreOnly skips the moves, the start-up restarts and the cold
	// read: the run measures the restore from zero alone.
	RestoreOnly bool `json:"restore_only"`
}

// S3 Standard list prices used for the bucket bill (us-east-1): PUT, COPY,
// POST and LIST requests, and GET, HEAD and the other requests, per 1,000.
// DELETE and AbortMultipartUpload are free.
const (
	S3PutClassUSDPer1000 = 0.005
	S3GetClassUSDPer1000 = 0.0004
)

func (m MoveWorkload) withDefaults() MoveWorkload {
	if len(m.SizesGB) == 0 {
		m.SizesGB = []float64{0.1, 1, 4}
	}
	m.SizesGB = slices.Clone(m.SizesGB)
	slices.Sort(m.SizesGB)
	m.SizesGB = slices.Compact(m.SizesGB)
	if m.TailBytes == 0 {
		m.TailBytes = 64 << 20
	}
	if m.SegmentBytes == 0 {
		m.SegmentBytes = 16 << 20
	}
	if m.ColdReadGB == 0 {
		m.ColdReadGB = 1
	}
	if m.StartupRestarts == 0 {
		m.StartupRestarts = 9
	}
	m.Restore = m.Restore.withDefaults()
	return m
}

// maxMoveGB bounds one history size.
const maxMoveGB = 1024

func (m MoveWorkload) validate(w Workload) error {
	for _, s := range m.SizesGB {
		if !(s > 0) || s > maxMoveGB {
			return fmt.Errorf("move: sizes must be in (0, %d] GB, not %g", maxMoveGB, s)
		}
	}
	switch {
	case len(m.SizesGB) > 10:
		return errors.New("move: at most 10 sizes")
	case m.SegmentBytes < 1<<14 || m.SegmentBytes > 1<<30:
		return errors.New("move: segment bytes must be 16 KiB..1 GiB")
	case m.TailBytes < m.SegmentBytes:
		return errors.New("move: the tail (local.retention.bytes) must hold at least one segment")
	case !(m.ColdReadGB > 0):
		return errors.New("move: cold read GB must be positive")
	case m.StartupRestarts < 1 || m.StartupRestarts > 20:
		return errors.New("move: startup restarts must be 1..20")
	case w.ReplicationFactor < 2 || w.ReplicationFactor > 5:
		return errors.New("move: replication factor must be 2..5 (one follower is replaced)")
	case int64(w.RecordSize) > m.SegmentBytes/4 || w.RecordSize > 1<<19:
		return errors.New("move: record size must be at most a quarter segment and 512 KiB")
	case w.Partitions != 1 || w.Topics != 1:
		return errors.New("move: one topic of one partition per case")
	case len(w.Faults) > 0 || w.Rebalances > 0 || w.Backlog > 0 || w.Tier != nil:
		return errors.New("move: no faults, rebalances, backlog or tier")
	}
	return m.Restore.validate(w)
}

func (w Workload) describeMove() string {
	m := w.Move
	sizes := make([]string, len(m.SizesGB))
	for i, s := range m.SizesGB {
		sizes[i] = fmt.Sprintf("%g", s)
	}
	rs := m.Restore
	restore := fmt.Sprintf("; then restore from zero on a cluster of its own (%d brokers, a ZooKeeper chroot and bucket prefix of its own): "+
		"%d partitions in %d tiered topics (RF %d, segment.bytes %d, local.retention.bytes %d) filled with %g GB, uploaded, `strata admin cluster drain`, "+
		"every broker stopped and its data directory wiped, all started again at once on empty disks with ZooKeeper kept, timed until every partition "+
		"answers ListOffsets -1 and a Fetch at offset 0 of %d of them returns a record",
		rs.brokers(int(w.ReplicationFactor)), rs.Partitions, rs.Topics, w.ReplicationFactor, rs.SegmentBytes, rs.TailBytes, rs.GB, rs.SamplePartitions)
	if !rs.SkipZooKeeperLost {
		restore += "; then drained and stopped again, and started on empty disks and a fresh ZooKeeper chroot, with `strata admin restore` bringing the metadata back from the bucket, timed likewise"
	}
	if m.RestoreOnly {
		return "restore from zero alone (no moves)" + restore
	}
	return fmt.Sprintf("one partition (RF %d) moved to a fresh, empty broker, on ZooKeeper with brokers on --tier s3 on a MinIO started by the harness: "+
		"for each history size of %s GB (10^9 bytes of %d B incompressible records), a tiered topic (remote.storage.enable, local.retention.bytes %d, "+
		"segment.bytes %d: the history uploaded and only the tail local) and an untiered one (the whole history local: Kafka's full copy); "+
		"AlterPartitionReassignments replaces a follower with the fresh broker, timed until ListPartitionReassignments is empty and the new broker is in the ISR. "+
		"Then the new broker is made leader of the largest tiered partition and serves offset 0 from the bucket; the brokers holding the smallest "+
		"and the largest tiered partition are restarted %d times each; bucket requests are counted by MinIO%s",
		w.ReplicationFactor, strings.Join(sizes, ", "), w.RecordSize, m.TailBytes, m.SegmentBytes, m.StartupRestarts, restore)
}

// movePlan is one history size of the run.
type movePlan struct {
	SizeGB  float64
	Bytes   int64 // record values
	Records int64
}

// planMove turns sizes into record counts of recordSize bytes (at least
// one record each).
func planMove(sizesGB []float64, recordSize int) []movePlan {
	var out []movePlan
	for _, s := range sizesGB {
		b := int64(math.Round(s * 1e9))
		n := max(1, (b+int64(recordSize)-1)/int64(recordSize))
		out = append(out, movePlan{SizeGB: s, Bytes: n * int64(recordSize), Records: n})
	}
	return out
}

// moveDiskNeed estimates the disk the run needs at most: every tiered
// history in MinIO and a tail with two segments per tiered replica (rf
// and the new one), plus, at the largest size, the untiered history on rf
// brokers and its full copy on the new one (each untiered topic is
// deleted after its move) and the tiered history once more (the
// leader's local copy, until the uploads catch up); with 10% and 1 GiB
// to spare.
func moveDiskNeed(plan []movePlan, rf int, tail, seg int64) int64 {
	var need, largest int64
	for _, p := range plan {
		need += p.Bytes + int64(rf+1)*min(p.Bytes, tail+2*seg)
		largest = max(largest, p.Bytes)
	}
	need += int64(rf+2) * largest
	return need + need/10 + 1<<30
}

// MoveCase is one move: a partition of one history size, tiered or not.
type MoveCase struct {
	SizeGB       float64 `json:"size_gb"`
	Tiered       bool    `json:"tiered"`
	Topic        string  `json:"topic"`
	HistoryBytes int64   `json:"history_bytes"` // record values produced
	Records      int64   `json:"records"`
	// FillSeconds: producing the history (acks=1); ReadySeconds: then
	// waiting until the tiered history was uploaded and the replicas'
	// local logs were cut to the tail (tiered) or the ISR was full.
	FillSeconds  float64 `json:"fill_s"`
	ReadySeconds float64 `json:"ready_s"`
	// LocalBytes is the leader's local log before the move; ActiveBytes
	// its active segment, the part not yet in the bucket.
	LocalBytes  int64 `json:"local_bytes"`
	ActiveBytes int64 `json:"active_bytes"`
	From        int32 `json:"from_broker"` // the follower replaced
	To          int32 `json:"to_broker"`   // the new broker
	// Seconds is the move: from sending AlterPartitionReassignments until
	// ListPartitionReassignments listed nothing and the new broker was in
	// the ISR with the target replicas.
	Seconds float64 `json:"seconds"`
	// AnsweredMs: of Seconds, until AlterPartitionReassignments was
	// answered (the controller had started the reassignment).
	AnsweredMs float64 `json:"answered_ms"`
	// ReplicationBytesIn: what the new broker fetched from leaders
	// (kafka_server_brokertopicmetrics_replicationbytesin_total).
	ReplicationBytesIn float64 `json:"replication_bytes_in"`
	// NewLocalBytes is the new broker's partition directory after the move.
	NewLocalBytes int64 `json:"new_local_bytes"`
	// BucketRequests made during the move (MinIO's count, by API).
	BucketRequests map[string]int64 `json:"bucket_requests,omitempty"`
}

// BucketRequests counts S3 requests as MinIO served them (one per HTTP
// request, from /minio/metrics/v3/api/requests) over a phase.
type BucketRequests struct {
	ByAPI    map[string]int64 `json:"by_api"`
	PutClass int64            `json:"put_class"` // PUT, COPY, POST, LIST
	GetClass int64            `json:"get_class"` // GET, HEAD, others
	Free     int64            `json:"free"`      // DELETE, AbortMultipartUpload
	Bytes    float64          `json:"bytes"`     // what the broker counted: remotecopybytes or remotefetchbytes
	// BrokerRequests is the broker's own counter over the phase:
	// remotecopyrequests_total (segments uploaded) or
	// remotefetchrequests_total (partition reads served from the bucket).
	BrokerRequests float64 `json:"broker_requests"`
}

// s3Class sorts a MinIO API name into S3's price classes.
func s3Class(api string) string {
	switch {
	case strings.HasPrefix(api, "Delete"), api == "AbortMultipartUpload":
		return "free"
	case strings.HasPrefix(api, "Put"), strings.HasPrefix(api, "List"), strings.HasPrefix(api, "Copy"),
		api == "NewMultipartUpload", api == "CompleteMultipartUpload", strings.HasPrefix(api, "Post"):
		return "put"
	}
	return "get"
}

// bucketDelta is the requests of after less those of before, classified.
func bucketDelta(before, after map[string]int64) BucketRequests {
	br := BucketRequests{ByAPI: map[string]int64{}}
	for api, n := range after {
		d := n - before[api]
		if d <= 0 {
			continue
		}
		br.ByAPI[api] = d
		switch s3Class(api) {
		case "put":
			br.PutClass += d
		case "get":
			br.GetClass += d
		default:
			br.Free += d
		}
	}
	return br
}

// PerGB is requests of the class per GB (10^9 bytes) of Bytes.
func (b BucketRequests) PerGB(n int64) float64 {
	if b.Bytes <= 0 {
		return 0
	}
	return float64(n) / (b.Bytes / 1e9)
}

// MoveResult holds the figures of the move benchmark.
type MoveResult struct {
	TailBytes    int64      `json:"tail_bytes"`
	SegmentBytes int64      `json:"segment_bytes"`
	Cases        []MoveCase `json:"cases"`
	// FirstRecordMs: the new broker of the largest tiered move, made
	// leader (replicas reordered, preferred election), from sending
	// ElectLeaders to its first Fetch response at offset 0
	// holding a record (earlier answers, NOT_LEADER among them, are
	// fetched again at once). FirstFetchMs is that last Fetch alone.
	FirstRecordMs float64 `json:"first_record_ms"`
	FirstFetchMs  float64 `json:"first_fetch_ms"`
	// StartupSmallMs and StartupLargeMs: the brokers holding the
	// smallest and the largest tiered partition (the same local tail),
	// restarted: process start to ready line, each restart.
	StartupSmallMs []float64 `json:"startup_small_ms"`
	StartupLargeMs []float64 `json:"startup_large_ms"`
	StartupSmall   Spread    `json:"startup_small"`
	StartupLarge   Spread    `json:"startup_large"`
	// Upload: every tiered history filled and uploaded; ColdRead: the
	// first-record probe and a cold read from offset 0 of at most
	// ColdReadGB of the largest tiered partition.
	Upload   BucketRequests `json:"upload"`
	ColdRead BucketRequests `json:"cold_read"`
	// ColdReadPass is the raw Fetch pass of the cold read.
	ColdReadPass RawPass `json:"cold_read_pass"`
	// Restore is the restore from zero (restore.go).
	Restore *RestoreResult `json:"restore,omitempty"`
	// NotMeasured names figures of issue 16 this run has no number for.
	NotMeasured []string `json:"not_measured,omitempty"`
}

// moveCase returns the case of size s, tiered or not.
func (m *MoveResult) moveCase(s float64, tiered bool) (MoveCase, bool) {
	for _, c := range m.Cases {
		if c.SizeGB == s && c.Tiered == tiered && c.Seconds > 0 {
			return c, true
		}
	}
	return MoveCase{}, false
}

// sizes returns the sizes with a finished tiered move, ascending.
func (m *MoveResult) sizes() []float64 {
	var out []float64
	for _, c := range m.Cases {
		if c.Tiered && c.Seconds > 0 && !slices.Contains(out, c.SizeGB) {
			out = append(out, c.SizeGB)
		}
	}
	slices.Sort(out)
	return out
}

// Largest is the tiered move of the largest size; Smallest of the smallest.
func (m *MoveResult) Largest() (MoveCase, bool) {
	s := m.sizes()
	if len(s) == 0 {
		return MoveCase{}, false
	}
	return m.moveCase(s[len(s)-1], true)
}

func (m *MoveResult) Smallest() (MoveCase, bool) {
	s := m.sizes()
	if len(s) == 0 {
		return MoveCase{}, false
	}
	return m.moveCase(s[0], true)
}

// FullCopyRatio is the full copy's time over the tail-only move's at the
// largest size.
func (m *MoveResult) FullCopyRatio() (float64, bool) {
	t, ok := m.Largest()
	if !ok {
		return 0, false
	}
	f, ok := m.moveCase(t.SizeGB, false)
	if !ok || t.Seconds <= 0 {
		return 0, false
	}
	return f.Seconds / t.Seconds, true
}

// GrowthRatio is the tail-only move's time at the largest size over that
// at the smallest.
func (m *MoveResult) GrowthRatio() (float64, bool) {
	l, ok1 := m.Largest()
	s, ok2 := m.Smallest()
	if !ok1 || !ok2 || s.Seconds <= 0 || l.SizeGB == s.SizeGB {
		return 0, false
	}
	return l.Seconds / s.Seconds, true
}

// StartupRatio is the median start-up with the largest tiered history
// over that with the smallest.
func (m *MoveResult) StartupRatio() (float64, bool) {
	if m.StartupSmall.N == 0 || m.StartupLarge.N == 0 || m.StartupSmall.P50Ms <= 0 {
		return 0, false
	}
	return m.StartupLarge.P50Ms / m.StartupSmall.P50Ms, true
}

// moveMetric is a figure of the move benchmark.
func moveMetric(f func(*MoveResult) (float64, bool)) func(Result) (float64, bool) {
	return func(r Result) (float64, bool) {
		if r.Move == nil {
			return 0, false
		}
		return f(r.Move)
	}
}

// Issue16Goals are the move benchmark's targets (the move preset). They
// are judged at the run's largest and smallest sizes: 4 GB and 0.1 GB by
// default; the report names the sizes run.
var Issue16Goals = []Goal{
	{Name: "tail-only move of one partition at the largest history size (4 GB by default; move preset)", Workload: "move", Numerator: TargetMove, AtLeast: false, Want: 5, Unit: "s",
		metric: moveMetric(func(m *MoveResult) (float64, bool) { c, ok := m.Largest(); return c.Seconds, ok })},
	{Name: "full copy (tiering off) vs tail-only move, time, at the largest size (move preset)", Workload: "move", Numerator: TargetMove, AtLeast: true, Want: 20, Unit: "x",
		metric: moveMetric((*MoveResult).FullCopyRatio)},
	{Name: "tail-only move time, largest vs smallest history size (4 vs 0.1 GB by default; move preset)", Workload: "move", Numerator: TargetMove, AtLeast: false, Want: 2, Unit: "x",
		RatioInRun: true, metric: moveMetric((*MoveResult).GrowthRatio)},
	{Name: "an empty broker's time from leadership to the first historical record served from the bucket (move preset)", Workload: "move", Numerator: TargetMove, AtLeast: false, Want: 100, Unit: "ms",
		metric: moveMetric(func(m *MoveResult) (float64, bool) { return m.FirstRecordMs, m.FirstRecordMs > 0 })},
	{Name: "broker start-up, largest vs smallest tiered history, same local tail (median restarts; move preset)", Workload: "move", Numerator: TargetMove, AtLeast: false, Want: 1.2, Unit: "x",
		RatioInRun: true, metric: moveMetric((*MoveResult).StartupRatio)},
	{Name: "restore from zero: brokers on empty disks (ZooKeeper kept), from their start until every partition serves; 100 partitions with 2 GB in all by default (move preset)", Workload: "move", Numerator: TargetMove, AtLeast: false, Want: 30, Unit: "s",
		metric: moveMetric((*MoveResult).RestoreSeconds)},
}

// moveSummary renders the move figures of a report (empty without them).
func (r *Report) moveSummary() string {
	var m *MoveResult
	for _, res := range r.Results {
		if res.Move != nil {
			m = res.Move
		}
	}
	if m == nil {
		return ""
	}
	return m.Markdown()
}

// Markdown renders the move figures: the moves by size, then the probes
// and the bucket requests with their bill.
func (m *MoveResult) Markdown() string {
	var b strings.Builder
	if len(m.Cases) == 0 { // restore only
		b.WriteString(m.Restore.Markdown())
		if len(m.NotMeasured) > 0 {
			b.WriteString("\nNot measured in this run: " + strings.Join(m.NotMeasured, "; ") + ".\n")
		}
		return b.String()
	}
	b.WriteString("\n### Moves\n\n| history GB | tail-only move s | full copy s | full ÷ tail-only | the new broker fetched from brokers (tail-only / full) | leader's local MB before (tail-only / full) | of it not yet in the bucket MB (tail-only) | fill s (tail-only / full) | upload wait s |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	var sizes []float64
	for _, c := range m.Cases {
		if !slices.Contains(sizes, c.SizeGB) {
			sizes = append(sizes, c.SizeGB)
		}
	}
	slices.Sort(sizes)
	cell := func(ok bool, v float64, f string) string {
		if !ok {
			return "—"
		}
		return fmt.Sprintf(f, v)
	}
	for _, s := range sizes {
		t, okT := m.moveCase(s, true)
		f, okF := m.moveCase(s, false)
		ratio := "—"
		if okT && okF && t.Seconds > 0 {
			ratio = fmt.Sprintf("%.1fx", f.Seconds/t.Seconds)
		}
		fmt.Fprintf(&b, "| %g | %s | %s | %s | %s / %s | %s / %s | %s | %s / %s | %s |\n", s,
			cell(okT, t.Seconds, "%.2f"), cell(okF, f.Seconds, "%.2f"), ratio,
			cell(okT, t.ReplicationBytesIn/1e6, "%.1f MB"), cell(okF, f.ReplicationBytesIn/1e6, "%.1f MB"),
			cell(okT, float64(t.LocalBytes)/1e6, "%.0f"), cell(okF, float64(f.LocalBytes)/1e6, "%.0f"),
			cell(okT, float64(t.ActiveBytes)/1e6, "%.1f"),
			cell(okT, t.FillSeconds, "%.1f"), cell(okF, f.FillSeconds, "%.1f"), cell(okT, t.ReadySeconds, "%.1f"))
	}
	b.WriteString("\n### Probes\n\n")
	if m.FirstRecordMs > 0 {
		fmt.Fprintf(&b, "- first historical record from a new leader: %.1f ms from sending ElectLeaders to a Fetch response at offset 0 with a record (that Fetch alone: %.1f ms)\n", m.FirstRecordMs, m.FirstFetchMs)
	}
	if m.StartupSmall.N > 0 && m.StartupLarge.N > 0 {
		sm, _ := m.Smallest()
		lg, _ := m.Largest()
		ratio, _ := m.StartupRatio()
		fmt.Fprintf(&b, "- start-up (process start to ready line), same local tail: %g GB tiered median %.0f ms (max %.0f), %g GB tiered median %.0f ms (max %.0f): %.2fx\n",
			sm.SizeGB, m.StartupSmall.P50Ms, m.StartupSmall.MaxMs, lg.SizeGB, m.StartupLarge.P50Ms, m.StartupLarge.MaxMs, ratio)
	}
	if p := m.ColdReadPass; p.Records > 0 {
		fmt.Fprintf(&b, "- cold read for the GET count: %d records, %.0f MB of batches in %.2f s (%.1f MB/s) from offset 0 of the largest tiered partition on its new leader\n",
			p.Records, float64(p.Bytes)/1e6, p.Seconds, p.MBPerSec)
	}
	b.WriteString("\n### Bucket requests\n\n")
	fmt.Fprintf(&b, "Counted by MinIO, one per HTTP request (its /minio/metrics/v3/api/requests), and priced at S3 Standard list prices: $%g per 1,000 PUT, COPY, POST or LIST requests, $%g per 1,000 GET, HEAD and other requests; DELETE is free. "+
		"Bytes are the brokers' own counts (remotecopybytes_total: segments with their indexes; remotefetchbytes_total: record bytes served from the bucket).\n\n",
		S3PutClassUSDPer1000, S3GetClassUSDPer1000)
	b.WriteString("| phase | GB | PUT-class | GET-class | free | PUT-class per GB | GET-class per GB | $ per GB (requests) | broker's own count | by API |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n")
	for _, ph := range []struct {
		name, own string
		br        BucketRequests
	}{{"upload (every tiered history)", "segments copied (remotecopyrequests_total)", m.Upload}, {"cold read", "partition reads (remotefetchrequests_total)", m.ColdRead}} {
		br := ph.br
		usd := (float64(br.PutClass)*S3PutClassUSDPer1000 + float64(br.GetClass)*S3GetClassUSDPer1000) / 1000
		perGB := "—"
		if br.Bytes > 0 {
			perGB = fmt.Sprintf("$%.5f", usd/(br.Bytes/1e9))
		}
		fmt.Fprintf(&b, "| %s | %.2f | %d | %d | %d | %.1f | %.1f | %s | %.0f %s | %s |\n", ph.name, br.Bytes/1e9, br.PutClass, br.GetClass, br.Free,
			br.PerGB(br.PutClass), br.PerGB(br.GetClass), perGB, br.BrokerRequests, ph.own, apiList(br.ByAPI))
	}
	for _, c := range m.Cases {
		if len(c.BucketRequests) > 0 && c.Tiered {
			fmt.Fprintf(&b, "\nDuring the tail-only move at %g GB the bucket served: %s.\n", c.SizeGB, apiList(c.BucketRequests))
			break
		}
	}
	b.WriteString(m.Restore.Markdown())
	if len(m.NotMeasured) > 0 {
		b.WriteString("\nNot measured yet: " + strings.Join(m.NotMeasured, "; ") + ".\n")
	}
	return b.String()
}

// apiList renders requests by API, the most first.
func apiList(by map[string]int64) string {
	type kv struct {
		k string
		v int64
	}
	var kvs []kv
	for k, v := range by {
		kvs = append(kvs, kv{k, v})
	}
	slices.SortFunc(kvs, func(a, b kv) int {
		if a.v != b.v {
			return int(b.v - a.v)
		}
		return strings.Compare(a.k, b.k)
	})
	parts := make([]string, len(kvs))
	for i, e := range kvs {
		parts[i] = fmt.Sprintf("%s %d", e.k, e.v)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// moveBenchstat renders one benchstat line per move.
func (m *MoveResult) benchstat(name string) string {
	var b strings.Builder
	for _, c := range m.Cases {
		if c.Seconds <= 0 {
			continue
		}
		mode := "full-copy"
		if c.Tiered {
			mode = "tail-only"
		}
		fmt.Fprintf(&b, "BenchmarkMove/%s/size=%gGB/mode=%s 1 %.0f ns/op %.0f replication-bytes-in\n", name, c.SizeGB, mode, c.Seconds*1e9, c.ReplicationBytesIn)
	}
	if m.FirstRecordMs > 0 {
		fmt.Fprintf(&b, "BenchmarkMoveFirstRecord/%s 1 %.0f ns/op\n", name, m.FirstRecordMs*1e6)
	}
	return b.String()
}

// isMove: the move plot, for a run with moves (not a restore-only one).
func isMove(rep *Report) bool { return rep.Workload.Move != nil && !rep.Workload.Move.RestoreOnly }

// plotMove draws the move time against the history size, tail-only and
// full copy.
func plotMove(rep *Report, path string) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: time to move one partition to a new broker", rep.Label())
	p.X.Label.Text = "history GB (10^9 bytes)"
	p.Y.Label.Text = "seconds, request to new broker in ISR"
	p.Add(plotter.NewGrid())
	var lines []any
	for _, res := range rep.Results {
		if res.Move == nil {
			continue
		}
		for _, tiered := range []bool{true, false} {
			var xys plotter.XYs
			for _, c := range res.Move.Cases {
				if c.Tiered == tiered && c.Seconds > 0 {
					xys = append(xys, plotter.XY{X: c.SizeGB, Y: c.Seconds})
				}
			}
			slices.SortFunc(xys, func(a, b plotter.XY) int { return int(math.Copysign(1, a.X-b.X)) })
			name := "full copy (tiering off)"
			if tiered {
				name = "tail-only (tiered)"
			}
			if len(xys) > 0 {
				lines = append(lines, name, xys)
			}
		}
	}
	if err := plotutil.AddLinePoints(p, lines...); err != nil {
		return fmt.Errorf("move plot: %w", err)
	}
	p.Y.Min = 0
	p.X.Min = 0
	p.Legend.Top = true
	p.Legend.Left = true
	return save(p, path)
}
