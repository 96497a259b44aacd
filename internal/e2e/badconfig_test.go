package e2e

import (
	"strings"
	"testing"
	"time"

	"strata/internal/testenv"
)

// TestBadConfiguration checks that `strata serve` refuses a bad
// configuration: it exits non-zero, before printing its ready line, with a
// one-line reason on stderr that names what is wrong.
func TestBadConfiguration(t *testing.T) {
	cases := []struct {
		name    string
		args    []string
		mention string // the reason must contain this
	}{
		{"num.partitions=0", []string{"--set", "num.partitions=0"}, "num.partitions"},
		{"unknown-key", []string{"--set", "no.such.setting=1"}, "no.such.setting"},
		{"not-a-number", []string{"--set", "log.segment.bytes=big"}, "log.segment.bytes"},
		{"negative-message.max.bytes", []string{"--set", "message.max.bytes=-1"}, "message.max.bytes"},
		{"set-without-value", []string{"--set", "num.partitions"}, "num.partitions"},
		{"listen-without-port", []string{"--listen", "127.0.0.1"}, "listen"},
		{"pprof-without-metrics", []string{"--pprof"}, "--metrics"},
		{"metrics-without-port", []string{"--metrics", "127.0.0.1"}, "--metrics"},
		{"remote-storage-without-tier", []string{"--set", "remote.log.storage.system.enable=true"}, "--tier"},
		{"ssl-listener-without-keystore", []string{"--set", "listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"}, "listener SSL: an SSL listener needs a keystore"},
		{"ssl-keystore-missing", []string{"--set", "listeners=SSL://127.0.0.1:0", "--set", "ssl.keystore.location=/nonexistent/broker.pem"}, "listener SSL: ssl.keystore.location"},
		{"listener-not-in-protocol-map", []string{"--set", "listeners=PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0"}, "INTERNAL is not in listener.security.protocol.map"},
		{"inter-broker-listener-unknown", []string{"--set", "inter.broker.listener.name=REPLICATION"}, "inter.broker.listener.name: REPLICATION is not in listeners"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir()}, c.args...)
			res := testenv.RunStrata(t, 30*time.Second, args...)
			if res.ExitCode == 0 {
				t.Errorf("strata %v exited 0, want non-zero", c.args)
			}
			if strings.Contains(res.Stdout, "ready ") {
				t.Errorf("strata %v printed a ready line: %q", c.args, res.Stdout)
			}
			reason := strings.TrimSpace(res.Stderr)
			switch {
			case reason == "":
				t.Errorf("strata %v: nothing on stderr, want a one-line reason", c.args)
			case strings.Contains(reason, "\n"):
				t.Errorf("strata %v: reason on stderr has several lines, want one:\n%s", c.args, reason)
			case !strings.Contains(reason, c.mention):
				t.Errorf("strata %v: reason %q does not mention %q", c.args, reason, c.mention)
			}
		})
	}
}
