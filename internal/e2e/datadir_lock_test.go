package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/testenv"
)

// TestDataDirInUse starts a second `strata serve` on the data directory of
// a running broker, with and without a tier: it must exit non-zero before
// its ready line, with one line naming the directory and the first
// broker's pid, and the first must keep serving and lose nothing of what
// it acknowledged with acks=-1, across a restart.
func TestDataDirInUse(t *testing.T) {
	for _, tier := range []bool{false, true} {
		t.Run(map[bool]string{false: "no-tier", true: "file-tier"}[tier], func(t *testing.T) {
			var args []string
			if tier {
				args = []string{"--tier", "file://" + t.TempDir()}
			}
			b := testenv.StartBroker(t, testenv.BrokerOptions{Args: args})
			const topic = "locked"
			createTopic(t, b.Addr(), topic, 3, nil)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			var want []*kgo.Record
			produce := func(what string, n int) {
				t.Helper()
				cl := newClient(t, b.Addr(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic))
				defer cl.Close()
				var rs []*kgo.Record
				for i := range n {
					rs = append(rs, &kgo.Record{Key: fmt.Appendf(nil, "%s-%d", what, i), Value: fmt.Appendf(nil, "record %d %s", i, what)})
				}
				if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
					t.Fatalf("produce %s: %v", what, err)
				}
				want = append(want, rs...)
			}
			produce("before the second broker", 300)

			res := testenv.RunStrata(t, 30*time.Second, append([]string{"serve", "--broker-id", "0", "--listen", "127.0.0.1:0", "--data-dir", b.DataDir()}, args...)...)
			if res.ExitCode == 0 {
				t.Errorf("second broker on the same data directory exited 0")
			}
			if strings.Contains(res.Stdout, "ready ") {
				t.Errorf("second broker printed a ready line: %q", res.Stdout)
			}
			reason := strings.TrimSpace(res.Stderr)
			wantReason := fmt.Sprintf("data directory %s is in use by another Strata process (pid %d); each broker needs its own --data-dir", b.DataDir(), b.Pid())
			if strings.Contains(reason, "\n") || !strings.Contains(reason, wantReason) {
				t.Errorf("second broker's stderr:\n%s\nwant one line with %q", reason, wantReason)
			}
			if !b.Running() {
				t.Fatalf("the first broker exited")
			}

			produce("after the second broker", 300)
			b.Stop()
			b.Restart()
			_, end := offsets(t, b.Addr(), topic)
			compareRecords(t, want, consumeAll(t, b.Addr(), topic, end))
			b.Stop()
		})
	}
}

// TestDataDirStaleLock: the .lock file a killed broker leaves (its pid
// inside, no lock held), or one naming any dead process, does not keep a
// broker from starting on the directory.
func TestDataDirStaleLock(t *testing.T) {
	t.Run("killed", func(t *testing.T) {
		b := testenv.StartBroker(t, testenv.BrokerOptions{})
		lockFile := filepath.Join(b.DataDir(), ".lock")
		old := b.Pid()
		if got := readPid(t, lockFile); got != old {
			t.Fatalf(".lock holds pid %d, want the broker's %d", got, old)
		}
		b.Kill9()
		if got := readPid(t, lockFile); got != old {
			t.Fatalf("after kill -9, .lock holds pid %d, want the dead broker's %d", got, old)
		}
		b.Restart()
		if got := readPid(t, lockFile); got != b.Pid() || got == old {
			t.Fatalf("after the restart .lock holds pid %d, want the new broker's %d", got, b.Pid())
		}
		b.Stop()
	})
	t.Run("dead-pid", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "data")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		dead := exec.Command("true")
		if err := dead.Run(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, ".lock"), []byte(strconv.Itoa(dead.Process.Pid)+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		b := testenv.StartBroker(t, testenv.BrokerOptions{DataDir: dir})
		createTopic(t, b.Addr(), "after-a-stale-lock", 1, nil)
		b.Stop()
	})
}

// readPid returns the pid written in a .lock file.
func readPid(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", filepath.Base(path), err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("%s holds %q, want a pid", filepath.Base(path), b)
	}
	return pid
}
