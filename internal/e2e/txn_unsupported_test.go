package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"strata/internal/testenv"
)

// Regression: transactional producers hung until their own timeout, as
// FindCoordinator for a transaction key answered COORDINATOR_NOT_AVAILABLE.
// Until transactions exist, librdkafka and kafkajs must fail at once, and
// librdkafka shows why.
func TestTransactionalProducersFailFast(t *testing.T) {
	b := testenv.StartBroker(t, testenv.BrokerOptions{})
	check := func(t *testing.T, out []byte, wantMsg string) {
		t.Helper()
		line := strings.TrimSpace(string(out))
		f := strings.Fields(line)
		if len(f) < 2 || f[0] != "FAILED" {
			t.Fatalf("transactional producer did not fail: %s", line)
		}
		if secs, err := strconv.ParseFloat(f[1], 64); err != nil || secs > 5 {
			t.Fatalf("transactional producer failed after %s s, want at once: %s", f[1], line)
		}
		if !strings.Contains(line, wantMsg) {
			t.Fatalf("error %q does not contain %q", line, wantMsg)
		}
	}
	t.Run("librdkafka", func(t *testing.T) {
		script, _ := filepath.Abs("testdata/python/txn.py")
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, "/usr/bin/python3", script, b.Addr()).Output()
		if err != nil {
			t.Fatalf("python3-confluent-kafka (make test installs it): %v\n%s", err, out)
		}
		check(t, out, "transactions are not supported by Strata yet")
	})
	t.Run("kafkajs", func(t *testing.T) {
		dir := kafkajsDir(t)
		script, _ := filepath.Abs("testdata/kafkajs/txn.js")
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, "node", script, b.Addr())
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("kafkajs: %v\n%s", err, out)
		}
		check(t, out, "coordinator") // kafkajs says "Failed to find group coordinator", not why
	})
}
