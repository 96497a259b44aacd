package bench

import (
	"errors"
	"fmt"
	"math"
	"regexp"
	"strings"
	"time"
)

// RestoreWorkload configures the restore-from-zero part of the move
// benchmark (issue 16: "100 partitions with 2 GB in all, brokers on empty
// disks, time until every partition serves"; restore_run.go has the
// phases). Zero fields take the defaults.
type RestoreWorkload struct {
	// Partitions over all the restore's topics (default 100), split as
	// evenly as may be over Topics topics (default 1).
	Partitions int `json:"partitions"`
	Topics     int `json:"topics"`
	// GB of record values over all partitions (10^9 bytes; default 2).
	GB float64 `json:"gb"`
	// Brokers of the restored cluster (0: 3, or the replication factor
	// if more); the topics have the workload's replication factor.
	Brokers int `json:"brokers"`
	// SegmentBytes and TailBytes are segment.bytes and
	// local.retention.bytes of the topics (default 4 MiB and 8 MiB): most
	// of each partition's history is uploaded before the drain.
	SegmentBytes int64 `json:"segment_bytes"`
	TailBytes    int64 `json:"tail_bytes"`
	// SamplePartitions is how many partitions, spread over all, must also
	// return a record to a Fetch at offset 0 (default 10).
	SamplePartitions int `json:"sample_partitions"`
	// SkipZooKeeperLost leaves out the second variant: ZooKeeper lost as
	// well (a fresh chroot) and `strata admin restore`.
	SkipZooKeeperLost bool `json:"skip_zookeeper_lost"`
}

func (r RestoreWorkload) withDefaults() RestoreWorkload {
	if r.Partitions == 0 {
		r.Partitions = 100
	}
	if r.Topics == 0 {
		r.Topics = 1
	}
	if r.GB == 0 {
		r.GB = 2
	}
	if r.SegmentBytes == 0 {
		r.SegmentBytes = 4 << 20
	}
	if r.TailBytes == 0 {
		r.TailBytes = 2 * r.SegmentBytes
	}
	if r.SamplePartitions == 0 {
		r.SamplePartitions = 10
	}
	r.SamplePartitions = min(r.SamplePartitions, r.Partitions)
	return r
}

func (r RestoreWorkload) validate(w Workload) error {
	switch {
	case r.Partitions < 1 || r.Partitions > 10000:
		return errors.New("move: restore partitions must be 1..10000")
	case r.Topics < 1 || r.Topics > r.Partitions:
		return errors.New("move: restore topics must be 1..the restore's partitions")
	case !(r.GB > 0) || r.GB > maxMoveGB:
		return fmt.Errorf("move: restore GB must be in (0, %d]", maxMoveGB)
	case r.Brokers != 0 && (r.Brokers < int(w.ReplicationFactor) || r.Brokers > 9):
		return errors.New("move: restore brokers must be the replication factor..9")
	case r.SegmentBytes < 1<<14 || r.SegmentBytes > 1<<30:
		return errors.New("move: restore segment bytes must be 16 KiB..1 GiB")
	case r.TailBytes < r.SegmentBytes:
		return errors.New("move: the restore's tail (local.retention.bytes) must hold at least one segment")
	case int64(w.RecordSize) > r.SegmentBytes/4:
		return errors.New("move: record size must be at most a quarter of the restore's segment")
	case r.SamplePartitions < 1:
		return errors.New("move: restore sample partitions must be at least 1")
	}
	return nil
}

// brokers is the restored cluster's size for replication factor rf.
func (r RestoreWorkload) brokers(rf int) int {
	if r.Brokers == 0 {
		return max(3, rf)
	}
	return r.Brokers
}

// restoreRecords is the records per partition of recordSize bytes that
// hold gb over parts partitions (at least one).
func restoreRecords(gb float64, parts, recordSize int) int64 {
	per := math.Round(gb*1e9) / float64(parts)
	return max(1, int64(math.Ceil(per/float64(recordSize))))
}

// restoreLayout splits parts partitions over topics: the first ones get
// one more when it does not divide.
func restoreLayout(parts, topics int) []int32 {
	out := make([]int32, topics)
	for i := range out {
		out[i] = int32(parts / topics)
		if i < parts%topics {
			out[i]++
		}
	}
	return out
}

// restoreSample picks n of the partitions, spread evenly from the first.
func restoreSample(all []tp, n int) []tp {
	n = min(n, len(all))
	out := make([]tp, 0, n)
	for i := range n {
		out = append(out, all[i*len(all)/n])
	}
	return out
}

// RestoreRestart is one scale back from zero: every broker started at once
// on an empty data directory, timed from that start.
type RestoreRestart struct {
	// ZooKeeperKept: the brokers came back on the ZooKeeper they left;
	// otherwise on a fresh chroot, and `strata admin restore` wrote the
	// metadata back from the bucket's snapshot.
	ZooKeeperKept bool `json:"zookeeper_kept"`
	// BrokersReadyMs: the slowest broker's ready line.
	BrokersReadyMs float64 `json:"brokers_ready_ms"`
	// ListOffsetsMs: every partition answered ListOffsets -1 without an
	// error (at its leader, as the metadata names it).
	ListOffsetsMs float64 `json:"list_offsets_ms"`
	// ServesMs: that, and a Fetch at offset 0 of every sampled partition
	// returned a record: the figure of the goal.
	ServesMs float64 `json:"serves_ms"`
	Sampled  int     `json:"sampled"`
	// ErrorsSeen are the partition errors met while waiting, by name, with
	// how many answers carried each.
	ErrorsSeen map[string]int `json:"errors_seen,omitempty"`
	// RestoreCLISeconds is the wall time of `strata admin restore`
	// (ZooKeeper lost only), and RestoreCLIServes its own figure: "every
	// partition serves (X after the restore began)".
	RestoreCLISeconds  float64 `json:"restore_cli_s,omitempty"`
	RestoreCLIServesMs float64 `json:"restore_cli_serves_ms,omitempty"`
	// BucketRequests made from the start until every partition served.
	BucketRequests map[string]int64 `json:"bucket_requests,omitempty"`
	// LoadAvg is /proc/loadavg's 1, 5 and 15 minute figures when every
	// partition served.
	LoadAvg string `json:"load_avg,omitempty"`
}

// RestoreResult holds the restore-from-zero figures.
type RestoreResult struct {
	Topics       []string `json:"topics"`
	Partitions   int      `json:"partitions"`
	Brokers      int      `json:"brokers"`
	Replication  int      `json:"replication_factor"`
	HistoryBytes int64    `json:"history_bytes"` // record values produced
	Records      int64    `json:"records"`
	SegmentBytes int64    `json:"segment_bytes"`
	TailBytes    int64    `json:"tail_bytes"`
	// FillSeconds: producing the history (acks=1); UploadSeconds: then
	// until every sealed segment was uploaded.
	FillSeconds   float64 `json:"fill_s"`
	UploadSeconds float64 `json:"upload_s"`
	// DrainSeconds is the wall time of `strata admin cluster drain` (the
	// active segments rolled and uploaded), DrainOutput its last line.
	DrainSeconds float64 `json:"drain_s"`
	DrainOutput  string  `json:"drain_output,omitempty"`
	// StopSeconds: every broker stopped (SIGTERM, in parallel).
	StopSeconds float64 `json:"stop_s"`
	// Restarts: ZooKeeper kept, then (unless skipped) ZooKeeper lost.
	Restarts []RestoreRestart `json:"restarts"`
	// SecondDrainSeconds is the drain before the ZooKeeper-lost variant.
	SecondDrainSeconds float64 `json:"second_drain_s,omitempty"`
}

// restart returns the restart with ZooKeeper kept or lost, if measured.
func (r *RestoreResult) restart(kept bool) (RestoreRestart, bool) {
	if r == nil {
		return RestoreRestart{}, false
	}
	for _, x := range r.Restarts {
		if x.ZooKeeperKept == kept && x.ServesMs > 0 {
			return x, true
		}
	}
	return RestoreRestart{}, false
}

// RestoreSeconds is the time from the brokers' start on empty disks
// (ZooKeeper kept) until every partition served.
func (m *MoveResult) RestoreSeconds() (float64, bool) {
	x, ok := m.Restore.restart(true)
	return x.ServesMs / 1000, ok
}

// drainLine matches the drain's last line: "drained: all 100 partitions
// of tiered topics are in the bucket (1.234s); the brokers may stop".
var drainLine = regexp.MustCompile(`drained: all (\d+) partitions.*\(([0-9.]+[a-zµ]+)\)`)

// servesLine matches restore's "every partition serves (1.234s after the
// restore began)".
var servesLine = regexp.MustCompile(`every partition serves \(([0-9.]+[a-zµ]+) after the restore began\)`)

// parseCLIDuration finds re in out and parses its last submatch as a Go
// duration.
func parseCLIDuration(re *regexp.Regexp, out string) (time.Duration, bool) {
	m := re.FindStringSubmatch(out)
	if m == nil {
		return 0, false
	}
	d, err := time.ParseDuration(m[len(m)-1])
	return d, err == nil
}

// Markdown renders the restore figures.
func (r *RestoreResult) Markdown() string {
	if r == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n### Restore from zero\n\n%d partitions (%d topics, RF %d) holding %.2f GB of record values on %d brokers (segment.bytes %d, local.retention.bytes %d): "+
		"filled in %.1f s, uploaded %.1f s later; `strata admin cluster drain` took %.2f s; every broker stopped in %.1f s and its data directory was wiped.\n\n",
		r.Partitions, len(r.Topics), r.Replication, float64(r.HistoryBytes)/1e9, r.Brokers, r.SegmentBytes, r.TailBytes,
		r.FillSeconds, r.UploadSeconds, r.DrainSeconds, r.StopSeconds)
	b.WriteString("| brokers back on empty disks | brokers ready s | every partition answers ListOffsets s | and a sample returns offset 0: every partition serves s | `strata admin restore` says | partition errors while waiting | bucket requests | load average |\n|---|---:|---:|---:|---:|---|---|---|\n")
	for _, x := range r.Restarts {
		name := "ZooKeeper kept"
		if !x.ZooKeeperKept {
			name = "ZooKeeper lost (fresh chroot, `strata admin restore`)"
		}
		cli := "—"
		if x.RestoreCLIServesMs > 0 {
			cli = fmt.Sprintf("%.2f s after it began (%.2f s in all)", x.RestoreCLIServesMs/1000, x.RestoreCLISeconds)
		}
		serves := "not reached"
		if x.ServesMs > 0 {
			serves = fmt.Sprintf("%.2f (%d sampled)", x.ServesMs/1000, x.Sampled)
		}
		errs := "none"
		if len(x.ErrorsSeen) > 0 {
			by := map[string]int64{}
			for k, v := range x.ErrorsSeen {
				by[k] = int64(v)
			}
			errs = apiList(by)
		}
		fmt.Fprintf(&b, "| %s | %.2f | %.2f | %s | %s | %s | %s | %s |\n", name, x.BrokersReadyMs/1000, x.ListOffsetsMs/1000, serves, cli, errs, apiList(x.BucketRequests), x.LoadAvg)
	}
	if r.SecondDrainSeconds > 0 {
		fmt.Fprintf(&b, "\nBefore the ZooKeeper-lost variant the restored cluster was drained again: %.2f s.\n", r.SecondDrainSeconds)
	}
	return b.String()
}
