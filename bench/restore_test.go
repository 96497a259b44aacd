package bench

import (
	"strings"
	"testing"
	"time"
)

func TestRestoreWorkload(t *testing.T) {
	w, err := Preset("move")
	if err != nil {
		t.Fatal(err)
	}
	w = w.WithDefaults()
	rw := w.Move.Restore
	if rw.Partitions != 100 || rw.Topics != 1 || rw.GB != 2 || rw.SegmentBytes != 4<<20 || rw.TailBytes != 8<<20 || rw.SamplePartitions != 10 || rw.SkipZooKeeperLost {
		t.Errorf("restore defaults %+v", rw)
	}
	if n := rw.brokers(2); n != 3 {
		t.Errorf("%d brokers at RF 2, want 3", n)
	}
	if n := rw.brokers(4); n != 4 {
		t.Errorf("%d brokers at RF 4, want 4", n)
	}
	if err := w.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]func(*RestoreWorkload){
		"no partitions":     func(r *RestoreWorkload) { r.Partitions = -1 },
		"topics > parts":    func(r *RestoreWorkload) { r.Topics = 101 },
		"negative GB":       func(r *RestoreWorkload) { r.GB = -1 },
		"brokers < RF":      func(r *RestoreWorkload) { r.Brokers = 1 },
		"tail < segment":    func(r *RestoreWorkload) { r.TailBytes = 1 << 20 },
		"record > segment4": func(r *RestoreWorkload) { r.SegmentBytes, r.TailBytes = 64<<10, 64<<10 },
	} {
		b := w
		m := *w.Move
		bad(&m.Restore)
		b.Move = &m
		if err := b.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// 2 GB over 100 partitions of 32 KiB records: 611 records each.
	if n := restoreRecords(2, 100, 32<<10); n != 611 {
		t.Errorf("%d records a partition", n)
	}
	if n := restoreRecords(1e-9, 100, 1000); n != 1 {
		t.Errorf("a tiny size gets %d records, want 1", n)
	}
	if l := restoreLayout(100, 3); len(l) != 3 || l[0] != 34 || l[1] != 33 || l[2] != 33 {
		t.Errorf("layout %v", l)
	}
	var all []tp
	for p := range int32(100) {
		all = append(all, tp{"t", p})
	}
	s := restoreSample(all, 10)
	if len(s) != 10 || s[0].partition != 0 || s[1].partition != 10 || s[9].partition != 90 {
		t.Errorf("sample %v", s)
	}
	if s := restoreSample(all[:3], 10); len(s) != 3 {
		t.Errorf("sample of 3 %v", s)
	}
	if need := restoreDiskNeed(rw, 2); need < 6e9 || need > 8e9 {
		t.Errorf("disk need %.1f GB", float64(need)/1e9)
	}
	// A workload file runs the restore alone.
	f, err := ParseWorkload([]byte(`{"name":"move","partitions":1,"replication_factor":2,"record_size":32768,"move":{"restore_only":true,"restore":{"partitions":100,"gb":2,"skip_zookeeper_lost":true}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if f = f.WithDefaults(); f.Validate() != nil || !f.Move.RestoreOnly || !f.Move.Restore.SkipZooKeeperLost || f.Move.Restore.SegmentBytes != 4<<20 {
		t.Errorf("workload file: %+v (%v)", f.Move, f.Validate())
	}
	if d := f.Describe(); !strings.Contains(d, "restore from zero alone") || strings.Contains(d, "fresh ZooKeeper chroot") {
		t.Errorf("description: %s", d)
	}
}

func TestParseCLIDuration(t *testing.T) {
	d, ok := parseCLIDuration(drainLine, "drained: all 100 partitions of tiered topics are in the bucket (1.234s); the brokers may stop\n")
	if !ok || d != 1234*time.Millisecond {
		t.Errorf("drain: %v %v", d, ok)
	}
	out := "restored 1 topics from the snapshot of 2026-12-05T06:00:00Z (0 already there)\nevery partition serves (850ms after the restore began)\ncommitted the offsets of 0 consumer groups\n"
	if d, ok := parseCLIDuration(servesLine, out); !ok || d != 850*time.Millisecond {
		t.Errorf("restore: %v %v", d, ok)
	}
	if _, ok := parseCLIDuration(servesLine, "restore: not every partition serves within 3m0s"); ok {
		t.Error("parsed a failure")
	}
}

// restoreFixture is a restore result as a default run would fill it.
func restoreFixture() *RestoreResult {
	return &RestoreResult{
		Topics: []string{"strata-bench-restore-1-0"}, Partitions: 100, Brokers: 3, Replication: 2, HistoryBytes: 2.002e9, Records: 61100,
		SegmentBytes: 4 << 20, TailBytes: 8 << 20, FillSeconds: 30, UploadSeconds: 5, DrainSeconds: 3.5, StopSeconds: 1.2,
		Restarts: []RestoreRestart{
			{ZooKeeperKept: true, BrokersReadyMs: 900, ListOffsetsMs: 12000, ServesMs: 12500, Sampled: 10,
				ErrorsSeen: map[string]int{"LEADER_NOT_AVAILABLE": 40}, BucketRequests: map[string]int64{"ListObjectsV2": 30, "GetObject": 500}, LoadAvg: "1.50 1.20 1.00"},
			{BrokersReadyMs: 800, ListOffsetsMs: 15000, ServesMs: 15200, Sampled: 10, RestoreCLISeconds: 14.8, RestoreCLIServesMs: 14000},
		},
		SecondDrainSeconds: 0.8,
	}
}

func TestRestoreReport(t *testing.T) {
	m := &MoveResult{Restore: restoreFixture(), NotMeasured: []string{"the moves (a restore-only run)"}}
	md := m.Markdown()
	for _, s := range []string{
		"### Restore from zero", "100 partitions (1 topics, RF 2) holding 2.00 GB", "`strata admin cluster drain` took 3.50 s",
		"| ZooKeeper kept | 0.90 | 12.00 | 12.50 (10 sampled) | — | LEADER_NOT_AVAILABLE 40 | GetObject 500, ListObjectsV2 30 | 1.50 1.20 1.00 |",
		"| ZooKeeper lost (fresh chroot, `strata admin restore`) | 0.80 | 15.00 | 15.20 (10 sampled) | 14.00 s after it began (14.80 s in all) |",
		"drained again: 0.80 s", "Not measured in this run: the moves",
	} {
		if !strings.Contains(md, s) {
			t.Errorf("markdown lacks %q:\n%s", s, md)
		}
	}
	if strings.Contains(md, "### Moves") {
		t.Error("a restore-only report has a moves table")
	}
	if s, ok := m.RestoreSeconds(); !ok || s != 12.5 {
		t.Errorf("restore seconds %v %v", s, ok)
	}
	rep := &Report{Workload: Workload{Name: "move"}, Results: []Result{{Target: TargetMove, Move: m}}}
	g := EvaluateGoals(Issue16Goals[5:], []*Report{rep})[0]
	if !g.Evaluated || !g.Pass || g.Measured != 12.5 {
		t.Errorf("goal %+v", g)
	}
	m.Restore.Restarts[0].ServesMs = 31000
	if g := EvaluateGoals(Issue16Goals[5:], []*Report{rep})[0]; g.Pass {
		t.Errorf("31 s passed: %+v", g)
	}
	// Not reached: no figure.
	m.Restore.Restarts[0].ServesMs = 0
	if _, ok := m.RestoreSeconds(); ok {
		t.Error("a restart that never served has a figure")
	}
	if md := (&MoveResult{}).Markdown(); strings.Contains(md, "Restore from zero") {
		t.Error("a run without a restore reports one")
	}
}

// checkRestore checks that a restore result is whole.
func checkRestore(t *testing.T, rr *RestoreResult, parts int, lost bool) {
	t.Helper()
	if rr == nil {
		t.Fatal("no restore result")
	}
	want := 1
	if lost {
		want = 2
	}
	if rr.Partitions != parts || rr.Records <= 0 || rr.FillSeconds <= 0 || rr.DrainSeconds <= 0 || rr.StopSeconds <= 0 || len(rr.Restarts) != want {
		t.Fatalf("restore %+v", rr)
	}
	for _, x := range rr.Restarts {
		if x.ServesMs <= 0 || x.ListOffsetsMs <= 0 || x.ServesMs < x.ListOffsetsMs || x.BrokersReadyMs <= 0 || x.Sampled <= 0 {
			t.Errorf("restart %+v", x)
		}
		if !x.ZooKeeperKept && (x.RestoreCLIServesMs <= 0 || x.RestoreCLISeconds <= 0) {
			t.Errorf("restore CLI figures missing: %+v", x)
		}
	}
}

// TestRestoreOnlySmall runs the restore from zero alone, with a few MB,
// on real ZooKeeper, MinIO and Strata processes.
func TestRestoreOnlySmall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts ZooKeeper, MinIO and brokers")
	}
	w := smokeWorkload(t, "move")
	w.Move.RestoreOnly = true
	w.Move.Restore = RestoreWorkload{Partitions: 8, Topics: 2, GB: 0.008, Brokers: 2, SegmentBytes: 256 << 10, TailBytes: 512 << 10, SamplePartitions: 4}
	rep := runMoveSmall(t, w, 4*time.Minute)
	res, ok := rep.Result(TargetMove)
	if !ok || res.Move == nil || res.Error != "" {
		t.Fatalf("no move result: %+v", rep.Results)
	}
	if len(res.Move.Cases) != 0 {
		t.Errorf("a restore-only run moved: %+v", res.Move.Cases)
	}
	checkRestore(t, res.Move.Restore, 8, true)
	g := EvaluateGoals(Issue16Goals[5:], []*Report{rep})[0]
	if !g.Evaluated {
		t.Errorf("restore goal not evaluated: %s", g.Note)
	}
	t.Logf("%s: %.2f%s (want %s)\n%s", g.Name, g.Measured, g.Unit, g.Want, res.Move.Markdown())
}
