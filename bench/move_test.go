package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"strata/internal/testenv"
)

func TestPlanMove(t *testing.T) {
	p := planMove([]float64{0.1, 1, 4}, 32<<10)
	if len(p) != 3 {
		t.Fatalf("plan %+v", p)
	}
	for i, want := range []int64{1e8, 1e9, 4e9} {
		if p[i].Bytes < want || p[i].Bytes >= want+32<<10 || p[i].Records*(32<<10) != p[i].Bytes {
			t.Errorf("size %g: %d records, %d bytes, want about %d", p[i].SizeGB, p[i].Records, p[i].Bytes, want)
		}
	}
	if p := planMove([]float64{1e-9}, 1000); p[0].Records != 1 {
		t.Errorf("a tiny size gets %d records, want 1", p[0].Records)
	}
	// 4 GB at RF 2: the bucket and the tails, and at the largest size the
	// untiered history three times over and the tiered one once more.
	need := moveDiskNeed(planMove([]float64{0.1, 1, 4}, 32<<10), 2, 64<<20, 16<<20)
	if need < 5.1e9+4*4e9 || need > 30e9 {
		t.Errorf("disk need %.1f GB", float64(need)/1e9)
	}
}

func TestMoveWorkloadValidate(t *testing.T) {
	w, err := Preset("move")
	if err != nil {
		t.Fatal(err)
	}
	w = w.WithDefaults()
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := DefaultTargets(w); len(got) != 1 || got[0] != TargetMove {
		t.Errorf("default targets %v", got)
	}
	if err := (Config{Workload: w, Targets: []string{TargetStrata}}).withDefaults().Validate(); err == nil {
		t.Error("accepted the move workload on the strata target")
	}
	m := MoveWorkload{SizesGB: []float64{4, 0.1, 1, 1}}.withDefaults()
	if len(m.SizesGB) != 3 || m.SizesGB[0] != 0.1 || m.SizesGB[2] != 4 || m.TailBytes != 64<<20 || m.SegmentBytes != 16<<20 {
		t.Errorf("defaults %+v", m)
	}
	for name, bad := range map[string]func(*Workload){
		"zero size":      func(w *Workload) { w.Move.SizesGB = []float64{0} },
		"rf 1":           func(w *Workload) { w.ReplicationFactor = 1 },
		"tail < segment": func(w *Workload) { w.Move.TailBytes = 1 << 20 },
		"huge record":    func(w *Workload) { w.RecordSize = 8 << 20 },
		"partitions":     func(w *Workload) { w.Partitions = 3 },
	} {
		b := w
		m := *w.Move
		b.Move = &m
		bad(&b)
		if err := b.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// A workload file sets the sizes.
	f, err := ParseWorkload([]byte(`{"name":"move","partitions":1,"replication_factor":2,"record_size":4096,"move":{"sizes_gb":[0.01,0.05]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if f = f.WithDefaults(); f.Validate() != nil || len(f.Move.SizesGB) != 2 || f.Move.TailBytes != 64<<20 {
		t.Errorf("workload file: %+v (%v)", f.Move, f.Validate())
	}
}

func TestS3Class(t *testing.T) {
	for api, want := range map[string]string{
		"PutObject": "put", "PutObjectPart": "put", "NewMultipartUpload": "put", "CompleteMultipartUpload": "put",
		"ListObjectsV2": "put", "CopyObject": "put", "GetObject": "get", "HeadObject": "get", "HeadBucket": "get",
		"DeleteObject": "free", "DeleteMultipleObjects": "free", "AbortMultipartUpload": "free",
	} {
		if got := s3Class(api); got != want {
			t.Errorf("%s: %s, want %s", api, got, want)
		}
	}
	d := bucketDelta(map[string]int64{"PutObject": 10, "GetObject": 5}, map[string]int64{"PutObject": 30, "GetObject": 5, "HeadObject": 2, "DeleteObject": 1})
	d.Bytes = 2e9
	if d.PutClass != 20 || d.GetClass != 2 || d.Free != 1 || len(d.ByAPI) != 3 || d.PerGB(d.PutClass) != 10 {
		t.Errorf("delta %+v", d)
	}
}

func TestParseMinIORequests(t *testing.T) {
	page := `# HELP minio_api_requests_total Total number of requests
# TYPE minio_api_requests_total counter
minio_api_requests_incoming_total{server="127.0.0.1:9000",type="s3"} 5
minio_api_requests_total{name="GetObject",server="127.0.0.1:9000",type="s3"} 1
minio_api_requests_total{name="PutObject",server="127.0.0.1:9000",type="s3"} 3
minio_api_requests_total{name="PutObject",server="127.0.0.1:9001",type="s3"} 2
minio_api_requests_total{name="admin",server="127.0.0.1:9000",type="admin"} 7
minio_api_requests_ttfb_seconds_distribution{le="+Inf",name="GetObject",server="127.0.0.1:9000",type="s3"} 1
`
	got, err := parseMinIORequests(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["GetObject"] != 1 || got["PutObject"] != 5 {
		t.Errorf("parsed %v", got)
	}
	// The token is a three-part JWT.
	if tok := minioMetricsToken("k", "s", time.Unix(0, 0)); strings.Count(tok, ".") != 2 {
		t.Errorf("token %q", tok)
	}
}

// moveFixture is a move result as a 0.1/1/4 GB run would fill it.
func moveFixture() *MoveResult {
	return &MoveResult{
		TailBytes: 64 << 20, SegmentBytes: 16 << 20,
		Cases: []MoveCase{
			{SizeGB: 0.1, Tiered: true, Seconds: 1.5, ReplicationBytesIn: 60e6},
			{SizeGB: 0.1, Seconds: 2, ReplicationBytesIn: 1e8},
			{SizeGB: 1, Tiered: true, Seconds: 1.8},
			{SizeGB: 1, Seconds: 12},
			{SizeGB: 4, Tiered: true, Seconds: 2.5, ReplicationBytesIn: 60e6, BucketRequests: map[string]int64{"GetObject": 4}},
			{SizeGB: 4, Seconds: 60, ReplicationBytesIn: 4e9},
		},
		FirstRecordMs: 40, FirstFetchMs: 12,
		StartupSmall: Spread{N: 3, P50Ms: 500, MaxMs: 600}, StartupLarge: Spread{N: 3, P50Ms: 550, MaxMs: 650},
		Upload:      BucketRequests{ByAPI: map[string]int64{"PutObjectPart": 500}, PutClass: 800, Bytes: 5.1e9, BrokerRequests: 310},
		ColdRead:    BucketRequests{ByAPI: map[string]int64{"GetObject": 250}, GetClass: 250, Bytes: 1e9, BrokerRequests: 900},
		NotMeasured: []string{"restore from zero"},
		Restore:     restoreFixture(),
	}
}

func TestMoveGoals(t *testing.T) {
	rep := &Report{Workload: Workload{Name: "move"}, Results: []Result{{Target: TargetMove, Move: moveFixture()}}}
	want := map[string]struct {
		v    float64
		pass bool
	}{
		Issue16Goals[0].Name: {2.5, true}, // 2.5 s ≤ 5 s
		Issue16Goals[1].Name: {24, true},  // 60 / 2.5 ≥ 20
		Issue16Goals[2].Name: {2.5 / 1.5, true},
		Issue16Goals[3].Name: {40, true},
		Issue16Goals[4].Name: {1.1, true},
		Issue16Goals[5].Name: {12.5, true}, // 12.5 s ≤ 30 s
	}
	for _, g := range EvaluateGoals(Issue16Goals, []*Report{rep}) {
		w := want[g.Name]
		if !g.Evaluated || g.Pass != w.pass || g.Measured < w.v-1e-9 || g.Measured > w.v+1e-9 {
			t.Errorf("%s: %+v, want %g pass %v", g.Name, g, w.v, w.pass)
		}
	}
	// A slow tail-only move fails the time and the ratio goals.
	m := moveFixture()
	m.Cases[4].Seconds = 6
	rep.Results[0].Move = m
	gs := EvaluateGoals(Issue16Goals, []*Report{rep})
	if gs[0].Pass || gs[1].Pass || gs[2].Pass {
		t.Errorf("a 6 s move passed: %+v", gs[:3])
	}
	// One size: no growth or start-up ratio.
	one := &MoveResult{Cases: []MoveCase{{SizeGB: 1, Tiered: true, Seconds: 1}}}
	if _, ok := one.GrowthRatio(); ok {
		t.Error("growth ratio from one size")
	}
	if _, ok := one.FullCopyRatio(); ok {
		t.Error("full-copy ratio without a full copy")
	}
}

func TestMoveReport(t *testing.T) {
	rep := &Report{Workload: Workload{Name: "move", ReplicationFactor: 2, RecordSize: 32 << 10, Partitions: 1, Topics: 1,
		Move: &MoveWorkload{SizesGB: []float64{0.1, 1, 4}, TailBytes: 64 << 20, SegmentBytes: 16 << 20, StartupRestarts: 3}},
		Results: []Result{{Target: TargetMove, Move: moveFixture()}}}
	md := rep.Markdown("")
	for _, s := range []string{
		"| 4 | 2.50 | 60.00 | 24.0x |", "| 0.1 | 1.50 | 2.00 | 1.3x |", "4000.0 MB",
		"first historical record from a new leader: 40.0 ms from sending ElectLeaders", "1.10x", "$0.005 per 1,000 PUT",
		"| upload (every tiered history) | 5.10 | 800 | 0 | 0 | 156.9 | 0.0 | $0.00078 |", "| cold read | 1.00 | 0 | 250 | 0 | 0.0 | 250.0 | $0.00010 |",
		"GetObject 4", "Not measured yet: restore from zero", "move-move.png",
	} {
		if !strings.Contains(md, s) {
			t.Errorf("markdown lacks %q:\n%s", s, md)
		}
	}
	if strings.Contains(md, "-latency.png") {
		t.Error("the move report links a latency plot")
	}
	s := &Suite{Reports: []*Report{rep}}
	if bs := s.Benchstat(); !strings.Contains(bs, "BenchmarkMove/workload=move/target=strata-zk-s3/size=4GB/mode=tail-only 1 2500000000 ns/op") {
		t.Errorf("benchstat:\n%s", bs)
	}
	dir := t.TempDir()
	if err := s.Write(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir + "/move-move.png"); err != nil {
		t.Error(err)
	}
}

// TestMovePresetSmall runs the move preset with a few MB of history on
// real ZooKeeper, MinIO and Strata processes and checks the figures are
// whole (not how fast they are).
func TestMovePresetSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ZooKeeper, MinIO and brokers")
	}
	w := smokeWorkload(t, "move")
	w.Move.Restore = RestoreWorkload{Partitions: 6, Topics: 2, GB: 0.006, Brokers: 2, SegmentBytes: 256 << 10, TailBytes: 512 << 10, SamplePartitions: 3}
	rep := runMoveSmall(t, w, 5*time.Minute)
	res, ok := rep.Result(TargetMove)
	if !ok || res.Move == nil {
		t.Fatalf("no move result: %+v", rep.Results)
	}
	m := res.Move
	if len(m.Cases) != 4 {
		t.Fatalf("%d moves, want 4: %+v", len(m.Cases), m.Cases)
	}
	for _, c := range m.Cases {
		if c.Seconds <= 0 || c.To < moveNewBrokers || c.From < 1 || c.FillSeconds <= 0 {
			t.Errorf("move %+v", c)
		}
		// The full copy fetches the whole history; the tail-only move
		// about the tail.
		if !c.Tiered && c.ReplicationBytesIn < float64(c.HistoryBytes) {
			t.Errorf("full copy of %d bytes fetched %.0f", c.HistoryBytes, c.ReplicationBytesIn)
		}
		if c.Tiered && c.ReplicationBytesIn > float64(m.TailBytes+3*m.SegmentBytes) {
			t.Errorf("tail-only move of %d bytes fetched %.0f from brokers", c.HistoryBytes, c.ReplicationBytesIn)
		}
	}
	if m.FirstRecordMs <= 0 || m.FirstFetchMs <= 0 || m.FirstFetchMs > m.FirstRecordMs {
		t.Errorf("first record %g ms, last fetch %g ms", m.FirstRecordMs, m.FirstFetchMs)
	}
	if m.StartupSmall.N != 1 || m.StartupLarge.N != 1 {
		t.Errorf("start-up %+v %+v", m.StartupSmall, m.StartupLarge)
	}
	if m.Upload.PutClass <= 0 || m.Upload.Bytes <= 0 || m.Upload.BrokerRequests <= 0 {
		t.Errorf("upload requests %+v", m.Upload)
	}
	if m.ColdRead.GetClass <= 0 || m.ColdRead.Bytes <= 0 || m.ColdReadPass.Records <= 0 {
		t.Errorf("cold read requests %+v, pass %+v", m.ColdRead, m.ColdReadPass)
	}
	checkRestore(t, m.Restore, 6, true)
	for _, g := range EvaluateGoals(Issue16Goals, []*Report{rep}) {
		if !g.Evaluated {
			t.Errorf("goal %q not evaluated: %s", g.Name, g.Note)
		}
		t.Logf("%s: %.2f%s (want %s)", g.Name, g.Measured, g.Unit, g.Want)
	}
	s := &Suite{Reports: []*Report{rep}, Goals: EvaluateGoals(Issue16Goals, []*Report{rep})}
	if err := s.Write(t.TempDir()); err != nil {
		t.Fatal(err)
	}
}

// runMoveSmall runs a small move preset workload on real ZooKeeper, MinIO
// and Strata processes, and fails the test with the progress and the
// brokers' log tail when the run fails.
func runMoveSmall(t *testing.T, w Workload, timeout time.Duration) *Report {
	t.Helper()
	if _, err := os.Stat(must(minioBinary())); err != nil {
		t.Fatalf("MinIO missing (deploy/install-deps.sh minio): %v", err)
	}
	bin := testenv.BuildStrata(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var progress strings.Builder
	var brokerLog syncBuffer
	rep, err := Run(ctx, Config{Workload: w, StrataBin: bin, PhaseTimeout: time.Minute, Progress: &progress, BrokerLog: &brokerLog})
	t.Log(progress.String())
	if err != nil {
		all := brokerLog.String()
		if dir := os.Getenv("STRATA_BENCH_LOG_DIR"); dir != "" {
			f := filepath.Join(dir, fmt.Sprintf("%s-%d.log", t.Name(), time.Now().UnixNano()))
			if werr := os.WriteFile(f, []byte(all), 0o644); werr == nil {
				t.Logf("the brokers' whole log: %s", f)
			}
		}
		t.Fatalf("%v\nthe brokers' log tail:\n%s\ngoroutines blocked a minute or more:\n%s", err,
			strings.Join(tailLines(all, 200), "\n"), strings.Join(longBlocked(all, 400), "\n"))
	}
	return rep
}

// longBlocked picks, from a log holding goroutine dumps, the stanzas of
// goroutines blocked for a minute or more (the runtime's header says
// "[semacquire, 2 minutes]"), at most max lines.
func longBlocked(log string, max int) []string {
	var out []string
	in := false
	for _, line := range strings.Split(log, "\n") {
		body := line
		if i := strings.Index(line, "] "); strings.HasPrefix(line, "[strata pid ") && i > 0 {
			body = line[i+2:]
		}
		if strings.HasPrefix(body, "goroutine ") {
			in = strings.Contains(body, " minutes]:") || strings.Contains(body, " minutes, locked to thread]:")
		} else if body == "" {
			in = false
		}
		if in {
			out = append(out, line)
			if len(out) >= max {
				break
			}
		}
	}
	return out
}

func TestLongBlocked(t *testing.T) {
	log := strings.Join([]string{
		"[strata pid 7] level=INFO msg=ready",
		"[strata pid 7] goroutine 1 [chan receive, 3 minutes]:",
		"[strata pid 7] main.main()",
		"[strata pid 7] ",
		"[strata pid 7] goroutine 9 [running]:",
		"[strata pid 7] main.spin()",
		"[strata pid 7] ",
		"[strata pid 7] goroutine 12 [sync.Mutex.Lock, 1 minutes]:",
		"[strata pid 7] strata/broker.(*Server).x()",
	}, "\n")
	got := strings.Join(longBlocked(log, 100), "|")
	want := "[strata pid 7] goroutine 1 [chan receive, 3 minutes]:|[strata pid 7] main.main()|" +
		"[strata pid 7] goroutine 12 [sync.Mutex.Lock, 1 minutes]:|[strata pid 7] strata/broker.(*Server).x()"
	if got != want {
		t.Fatalf("longBlocked:\n got %s\nwant %s", got, want)
	}
}
