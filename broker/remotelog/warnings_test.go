package remotelog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestBucketWarningsOncePerMinute(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}))
	var w BucketWarnings
	for p := range 50 {
		w.Warn(log, "copy segments to remote storage; retrying next pass", "partition", p)
	}
	w.Warn(log, "remote retention; retrying next pass", "partition", 0)
	if n := strings.Count(buf.String(), "level=WARN"); n != 2 {
		t.Fatalf("%d warnings for 51 failures of two kinds within a minute, want 2:\n%s", n, buf.String())
	}
	w.kinds["copy segments to remote storage; retrying next pass"].logged = time.Now().Add(-2 * bucketWarnEvery)
	buf.Reset()
	w.Warn(log, "copy segments to remote storage; retrying next pass", "partition", 7)
	if !strings.Contains(buf.String(), "similar_warnings_in_the_last_minute=49") {
		t.Fatalf("the next minute's warning does not count the 49 left out: %s", buf.String())
	}
}
