package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"strata/broker/replica"
)

// TestReplicationHWCheckpointAcrossRestart: every broker of an RF=3
// partition stops (the controller keeps leader 0 and the full ISR, as
// after a whole-cluster stop); the leader comes back alone. From its
// replication-offset-checkpoint it serves every committed record at once,
// although no follower has fetched yet. A corrupt checkpoint is ignored
// (the high watermark starts from the log start, as without one) and one
// past the log end is clamped to it.
func TestReplicationHWCheckpointAcrossRestart(t *testing.T) {
	c := startCluster(t, 3, map[string]string{"replica.high.watermark.checkpoint.interval.ms": "50"})
	c.createTopic("hw", []int32{0, 1, 2}, map[string]string{"min.insync.replicas": "2"})
	const n = 20
	rc := c.rc(0)
	for i := 0; i < n; i++ {
		rc.produceOK("hw", 0, plainBatch(time.Now().UnixMilli(), "v").build(t))
	}

	// Leader and followers checkpoint the high watermark periodically; the
	// followers' is the one the leader gave them.
	for id := int32(0); id < 3; id++ {
		waitFor(t, fmt.Sprintf("checkpoint of broker %d at the high watermark", id), 10*time.Second, func() bool {
			hws, err := replica.ReadHWCheckpoint(c.servers[id].fs, c.dirs[id])
			return err == nil && hws["hw"][0] == n
		})
	}

	stop := func(id int32) {
		t.Helper()
		if err := c.servers[id].Close(); err != nil {
			t.Fatalf("close broker %d: %v", id, err)
		}
		delete(c.servers, id)
	}
	for _, id := range []int32{1, 2, 0} {
		stop(id)
	}

	c.start(0)
	rc = c.rc(0)
	fp := rc.fetchOne("hw", 0, 0, 1<<20)
	wantCode(t, "fetch after the restart", fp.ErrorCode, nil)
	if fp.HighWatermark != n || len(splitBatches(t, fp.RecordBatches)) != n {
		t.Fatalf("right after the restart: high watermark %d, %d batches; want %d and %d", fp.HighWatermark, len(splitBatches(t, fp.RecordBatches)), n, n)
	}
	if got := rc.offsetAt("hw", 0, -1); got != n {
		t.Fatalf("latest offset after the restart %d, want %d", got, n)
	}
	if recs := consumeAll(t, &testServer{Server: c.servers[0]}, "hw", n); len(recs) != n {
		t.Fatalf("consumed %d records, want %d", len(recs), n)
	}

	// A corrupt checkpoint: logged and ignored.
	restartWith := func(content string) {
		t.Helper()
		stop(0)
		if err := os.WriteFile(filepath.Join(c.dirs[0], replica.HWCheckpointName), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		c.start(0)
		rc = c.rc(0)
	}
	restartWith("0\n2\nhw 0 ")
	if hw := c.servers[0].partition("hw", 0).HW(); hw != 0 {
		t.Fatalf("high watermark %d with a corrupt checkpoint, want the log start 0", hw)
	}
	// The leader's high watermark is below the start of its epoch: Kafka
	// answers OFFSET_NOT_AVAILABLE rather than an offset that is too low.
	wantCode(t, "latest offset while the high watermark catches up", rc.listOffset("hw", 0, -1).ErrorCode, kerr.OffsetNotAvailable)

	// One past the log end is clamped to the log end.
	restartWith("0\n1\nhw 0 999\n")
	if hw := c.servers[0].partition("hw", 0).HW(); hw != n {
		t.Fatalf("high watermark %d from a checkpoint of 999, want the log end %d", hw, n)
	}

	// The followers return, start from their own checkpoints and catch up.
	c.start(1)
	c.start(2)
	for _, id := range []int32{1, 2} {
		if hw := c.servers[id].partition("hw", 0).HW(); hw != n {
			t.Fatalf("follower %d opened with high watermark %d, want its checkpointed %d", id, hw, n)
		}
	}
	rc.produceOK("hw", 0, plainBatch(time.Now().UnixMilli(), "after").build(t))
	waitFor(t, "followers at the new high watermark", 10*time.Second, func() bool {
		return c.servers[1].partition("hw", 0).HW() == n+1 && c.servers[2].partition("hw", 0).HW() == n+1
	})
}

// TestHWCheckpointWrittenAtShutdown: with a checkpoint interval longer
// than the test, only the clean shutdown writes the file.
func TestHWCheckpointWrittenAtShutdown(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, map[string]string{"replica.high.watermark.checkpoint.interval.ms": "3600000"})
	rc := dialRaw(t, ts.addr())
	rc.createTopic("shut", 2, nil)
	for i := 0; i < 3; i++ {
		rc.produceOK("shut", 1, plainBatch(time.Now().UnixMilli(), "v").build(t))
	}
	if _, err := os.Stat(filepath.Join(ts.dir, replica.HWCheckpointName)); err == nil {
		t.Fatal("checkpoint written before the interval passed")
	}
	if err := ts.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(ts.dir, replica.HWCheckpointName))
	if err != nil {
		t.Fatalf("checkpoint after a clean shutdown: %v", err)
	}
	hws, err := replica.ReadHWCheckpoint(ts.fs, ts.dir)
	if err != nil || hws["shut"][0] != 0 || hws["shut"][1] != 3 {
		t.Fatalf("checkpoint after a clean shutdown %q (%v); want shut-0 at 0 and shut-1 at 3", b, err)
	}
}

// TestHWCheckpointSecondCloseKeepsFile: closing a closed server (test
// cleanups do) leaves the checkpoint written by the first Close.
func TestHWCheckpointSecondCloseKeepsFile(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("twice", 1, nil)
	rc.produceOK("twice", 0, plainBatch(time.Now().UnixMilli(), "v").build(t))
	ts.Close()
	ts.Close()
	hws, err := replica.ReadHWCheckpoint(ts.fs, ts.dir)
	if err != nil || hws["twice"][0] != 1 {
		t.Fatalf("checkpoint after two Closes: %v, %v; want twice-0 at 1", hws, err)
	}
}
