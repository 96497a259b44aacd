package broker

// Disks that fail (issue 15), beyond fsync: a segment read failing with
// EIO, and the files the broker and the logs keep beside the segments
// failing to be written, take the log directory offline; a read that is
// merely out of range and a full disk do not. An offline directory shows
// in /healthz and in Kafka's LogManager gauges.

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"strata/broker/replica"
	"strata/internal/vfs"
)

// waitOffline waits until the log directory and every partition log are
// offline.
func waitOffline(t *testing.T, ts *testServer) {
	t.Helper()
	waitFor(t, "log directory offline", 5*time.Second, func() bool {
		if ts.logDirErr() == nil {
			return false
		}
		for _, p := range ts.allPartitions() {
			if p.Log().Err() == nil {
				return false
			}
		}
		return true
	})
}

// Before the fix a fetch whose segment read failed with EIO answered
// UNKNOWN_SERVER_ERROR and the directory stayed online: the next fetch
// read the failing disk again, produces went on.
func TestLogDirOfflineAfterReadEIO(t *testing.T) {
	dir := t.TempDir()
	ff := vfs.NewFaultFS(vfs.OS)
	ts := startServerFS(t, dir, ff, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("r", 1, nil)
	rc.createTopic("other", 1, nil)
	now := time.Now().UnixMilli()
	for _, v := range []string{"a", "b", "c"} {
		rc.produceOK("r", 0, plainBatch(now, v).build(t))
	}
	rc.produceOK("other", 0, plainBatch(now, "o").build(t))

	// Not a disk failure: an offset past the end.
	wantCode(t, "fetch past the end", rc.fetchOne("r", 0, 10, 1<<20).ErrorCode, kerr.OffsetOutOfRange)
	if err := ts.logDirErr(); err != nil {
		t.Fatalf("an out-of-range fetch took the log directory offline: %v", err)
	}

	ff.SetInjector(vfs.FailWith(vfs.OpRead, filepath.Join(dir, "r-0")+string(filepath.Separator), syscall.EIO))
	wantCode(t, "fetch whose read failed", rc.fetchOne("r", 0, 1, 1<<20).ErrorCode, kerr.KafkaStorageError)
	ff.SetInjector(nil)
	waitOffline(t, ts)
	wantOffline(t, rc, "r", 0)
	wantOffline(t, rc, "other", 0)
}

// countingInjector fails operations op on paths holding substr with err
// and counts them.
func countingInjector(op vfs.Op, substr string, err error, n *atomic.Int64) vfs.Injector {
	return func(o vfs.Op, p string) error {
		if o == op && strings.Contains(p, substr) {
			n.Add(1)
			return err
		}
		return nil
	}
}

// Kafka takes the directory offline when replication-offset-checkpoint
// cannot be written; before the fix the broker only logged a warning and
// went on serving from the disk that failed. A full disk leaves it online
// (the old file is whole; the next interval tries again).
func TestLogDirOfflineAfterHWCheckpointFails(t *testing.T) {
	for _, c := range []struct {
		name    string
		err     error
		offline bool
	}{
		{"EIO", syscall.EIO, true},
		{"disk full", syscall.ENOSPC, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			ff := vfs.NewFaultFS(vfs.OS)
			ts := startServerFS(t, dir, ff, map[string]string{"replica.high.watermark.checkpoint.interval.ms": "10"})
			rc := dialRaw(t, ts.addr())
			rc.createTopic("h", 1, nil)
			now := time.Now().UnixMilli()
			rc.produceOK("h", 0, plainBatch(now, "a").build(t))

			var tries atomic.Int64
			ff.SetInjector(countingInjector(vfs.OpWrite, replica.HWCheckpointName, c.err, &tries))
			rc.produceOK("h", 0, plainBatch(now, "b").build(t)) // the high watermark moves: the file is rewritten
			if !c.offline {
				waitFor(t, "two checkpoint rewrites tried", 5*time.Second, func() bool { return tries.Load() >= 2 })
				if err := ts.logDirErr(); err != nil {
					t.Fatalf("a full disk under the checkpoint took the log directory offline: %v", err)
				}
				ff.SetInjector(nil)
				rc.produceOK("h", 0, plainBatch(now, "c").build(t))
				return
			}
			waitOffline(t, ts)
			ff.SetInjector(nil)
			if err := ts.logDirErr(); !errors.Is(err, syscall.EIO) {
				t.Fatalf("offline because of %v, want the checkpoint's EIO", err)
			}
			wantOffline(t, rc, "h", 0)
		})
	}
}

// partition.metadata that cannot be written takes the directory offline
// (Kafka's PartitionMetadataFile); a full disk does not.
func TestLogDirOfflineAfterPartitionMetadataFails(t *testing.T) {
	dir := t.TempDir()
	ff := vfs.NewFaultFS(vfs.OS)
	ts := startServerFS(t, dir, ff, nil)
	pdir := filepath.Join(dir, "pm-0")
	if err := ff.MkdirAll(pdir, 0o755); err != nil {
		t.Fatal(err)
	}
	body := []byte("version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAA\n")

	ff.SetInjector(vfs.FailWith(vfs.OpWrite, partitionMetadataFile, syscall.ENOSPC))
	if err := ts.writePartitionMetadata(pdir, body); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write on a full disk: %v", err)
	}
	if err := ts.logDirErr(); err != nil {
		t.Fatalf("a full disk took the log directory offline: %v", err)
	}
	ff.SetInjector(vfs.FailWith(vfs.OpSync, partitionMetadataFile, syscall.EIO))
	err := ts.writePartitionMetadata(pdir, body)
	ff.SetInjector(nil)
	if !errors.Is(err, kerr.KafkaStorageError) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("write with a failing fsync: %v, want KAFKA_STORAGE_ERROR", err)
	}
	if err := ts.logDirErr(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("log directory: %v, want offline with the EIO", err)
	}
	if err := ts.writePartitionMetadata(pdir, body); err != nil {
		t.Fatalf("write once the disk answers: %v", err)
	}
}

func getHealth(t *testing.T, ts *testServer) (int, string) {
	t.Helper()
	w := httptest.NewRecorder()
	ts.HealthHandler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	b, _ := io.ReadAll(w.Result().Body)
	return w.Code, string(b)
}

// /healthz answered 200 "ok" whatever the disks did (before the fix); it
// answers 503 naming the offline directory, and Kafka's LogManager gauges
// count it.
func TestLogDirOfflineShowsInHealthzAndMetrics(t *testing.T) {
	dir := t.TempDir()
	ff := vfs.NewFaultFS(vfs.OS)
	ts := startServerFS(t, dir, ff, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("z", 1, map[string]string{"flush.messages": "1"})
	now := time.Now().UnixMilli()
	rc.produceOK("z", 0, plainBatch(now, "a").build(t))

	if code, body := getHealth(t, ts); code != http.StatusOK || body != "ok\n" {
		t.Fatalf("healthz while online: %d %q", code, body)
	}
	gauge := func(name string) float64 {
		t.Helper()
		mfs, err := ts.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == name && len(mf.GetMetric()) == 1 {
				return mf.GetMetric()[0].GetGauge().GetValue()
			}
		}
		t.Fatalf("no gauge %s", name)
		return 0
	}
	if n := gauge("kafka_log_logmanager_offlinelogdirectorycount"); n != 0 {
		t.Fatalf("offline log directory count %v while online", n)
	}
	if n := gauge("kafka_log_logmanager_logdirectoryoffline"); n != 0 {
		t.Fatalf("LogDirectoryOffline %v while online", n)
	}

	ff.SetInjector(vfs.FailWith(vfs.OpSync, filepath.Join(dir, "z-0"), syscall.EIO))
	wantCode(t, "produce whose fsync failed", rc.producePart("z", 0, plainBatch(now, "b").build(t)).ErrorCode, kerr.KafkaStorageError)
	ff.SetInjector(nil)
	waitOffline(t, ts)

	code, body := getHealth(t, ts)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, dir) || strings.Count(body, "\n") != 1 || !strings.HasSuffix(body, "\n") {
		t.Fatalf("healthz while offline: %d %q, want 503 and one line naming %s", code, body, dir)
	}
	if n := gauge("kafka_log_logmanager_offlinelogdirectorycount"); n != 1 {
		t.Fatalf("offline log directory count %v, want 1", n)
	}
	if n := gauge("kafka_log_logmanager_logdirectoryoffline"); n != 1 {
		t.Fatalf("LogDirectoryOffline %v, want 1", n)
	}
}
