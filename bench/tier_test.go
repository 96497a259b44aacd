package bench

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"strata/internal/testenv"
)

func TestTierMinIOIsTestenvs(t *testing.T) {
	if minioVersion != testenv.MinIOVersion {
		t.Fatalf("bench runs MinIO %s, testenv (and deploy/install-deps.sh) %s", minioVersion, testenv.MinIOVersion)
	}
	t.Setenv("STRATA_MINIO", "")
	t.Setenv("XDG_CACHE_HOME", "/cache")
	a, _ := minioBinary()
	b, _ := testenv.MinIOBinary()
	if a != b {
		t.Fatalf("bench looks for MinIO at %s, testenv at %s", a, b)
	}
}

func TestParseMetrics(t *testing.T) {
	page := `# HELP kafka_server_brokertopicmetrics_remotecopybytes_total Bytes.
# TYPE kafka_server_brokertopicmetrics_remotecopybytes_total counter
kafka_server_brokertopicmetrics_remotecopybytes_total 1.2345e+06
kafka_server_brokertopicmetrics_remotecopylagsegments 3
labelled{topic="a"} 7
garbage
go_gc_duration_seconds_sum 0.5 1700000000
`
	got, err := parseMetrics(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	if got[metricCopyBytes] != 1234500 || got[metricCopyLag] != 3 || got["go_gc_duration_seconds_sum"] != 0.5 || len(got) != 3 {
		t.Fatalf("parsed %v", got)
	}
}

func TestTierWorkloadValidate(t *testing.T) {
	w, err := Preset("tier")
	if err != nil {
		t.Fatal(err)
	}
	c := Config{Workload: w}.withDefaults()
	if err := c.Validate(); err != nil || len(c.Targets) != 1 || c.Targets[0] != TargetTier {
		t.Fatalf("tier preset: targets %v, %v", c.Targets, err)
	}
	c.Targets = []string{TargetStrata}
	if err := c.Validate(); err == nil {
		t.Fatal("the tier workload accepted the strata target")
	}
	plain := Config{Workload: Presets["latency"], Targets: []string{TargetTier}}.withDefaults()
	if err := plain.Validate(); err == nil {
		t.Fatal("the strata-s3 target accepted a workload without tier")
	}
	bad := w
	bad.Tier = &TierWorkload{SegmentBytes: 100}
	if err := bad.WithDefaults().Validate(); err == nil {
		t.Fatal("accepted a 100-byte segment.bytes")
	}
}

// TestTierPresetSmall runs a small tier workload on a real MinIO and a
// Strata process and checks the figures are whole and consistent (not how
// fast they are).
func TestTierPresetSmall(t *testing.T) {
	if _, err := os.Stat(must(minioBinary())); err != nil {
		t.Fatalf("MinIO missing (deploy/install-deps.sh minio): %v", err)
	}
	bin := testenv.BuildStrata(t)
	w := smokeWorkload(t, "tier") // 2 partitions, 6000 records of 1000 B, 256 KiB segments, 3 probes
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	rep, err := Run(ctx, Config{Workload: w, StrataBin: bin, PhaseTimeout: 3 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	res, ok := rep.Result(TargetTier)
	if !ok || res.Tier == nil {
		t.Fatalf("no tier result: %+v", rep.Results)
	}
	tr := res.Tier
	// 3 MB per partition in 256 KiB segments, then one rolled record.
	if tr.UploadSegments < 2*10 || tr.Upload.Bytes < int64(tr.UploadSegments)*200<<10 || tr.Upload.Seconds <= 0 {
		t.Errorf("upload %+v of %d segments", tr.Upload, tr.UploadSegments)
	}
	if tr.RawPut.Bytes <= 0 || tr.RawPut.Bytes > tr.Upload.Bytes || tr.RawGet.Bytes != tr.RawPut.Bytes {
		t.Errorf("raw PUT %+v, GET %+v, upload %d bytes", tr.RawPut, tr.RawGet, tr.Upload.Bytes)
	}
	if res.TopicRecords != 6002 || tr.ColdRead.Records != res.TopicRecords || tr.LocalRead.Records != res.TopicRecords {
		t.Errorf("topic holds %d records; cold read %d, local read %d", res.TopicRecords, tr.ColdRead.Records, tr.LocalRead.Records)
	}
	// All but the records that rolled the active segments (one per
	// partition); those too where the broker's periodic roll (segment.ms
	// is 1 ms until the harness sets it back) sealed their segments.
	if tr.RemoteRecords < 6000 || tr.RemoteRecords > 6002 {
		t.Errorf("%d records below the local log start, want 6000 (all but the rolled ones) to 6002", tr.RemoteRecords)
	}
	if tr.ColdFirstRecord.N != 3 || tr.ColdFirstRecord.MaxMs < tr.ColdFirstRecord.P50Ms || tr.ColdFirstRecord.P50Ms <= 0 || tr.LocalFirstRecord.N != 2 {
		t.Errorf("first record: cold %+v, local %+v", tr.ColdFirstRecord, tr.LocalFirstRecord)
	}
	for _, g := range EvaluateGoals(Issue6Goals, []*Report{rep}) {
		if !g.Evaluated {
			t.Errorf("goal %q not evaluated: %s", g.Name, g.Note)
		}
		t.Logf("%s: %.2f%s (want %s)", g.Name, g.Measured, g.Unit, g.Want)
	}
	s := &Suite{Reports: []*Report{rep}, Goals: EvaluateGoals(Issue6Goals, []*Report{rep})}
	dir := t.TempDir()
	if err := s.Write(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir + "/tier-tier.png"); err != nil {
		t.Error(err)
	}
	if md := s.Markdown(""); !strings.Contains(md, "tier: cold read / local read") {
		t.Errorf("markdown lacks the tier rows:\n%s", md)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
