package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"strata/internal/testenv"
)

// TestServeJSONLogsAndReadyz runs `strata serve --log-format json`: every
// line on stderr is one JSON object with time, level and msg, the ready
// line among them, and /readyz answers 200 "ready" beside /healthz.
func TestServeJSONLogsAndReadyz(t *testing.T) {
	p := serveUntilReady(t, "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(),
		"--metrics", "127.0.0.1:0", "--log-format", "json")
	addr := readyField(p.ready, "metrics")
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || string(body) != "ready\n" {
		t.Errorf("GET /readyz on a ready broker: %d %q, want 200 \"ready\"", resp.StatusCode, body)
	}
	p.Stop(t)
	ready := false
	for line := range strings.Lines(p.Stderr()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatalf("--log-format json: stderr line is not JSON (%v): %s", err, line)
		}
		for _, k := range []string{"time", "level", "msg"} {
			if _, ok := rec[k]; !ok {
				t.Errorf("--log-format json: line without %q: %s", k, line)
			}
		}
		if rec["msg"] == "ready" && rec["level"] == "INFO" {
			ready = true
		}
	}
	if !ready {
		t.Errorf("--log-format json: no INFO ready record on stderr:\n%s", p.Stderr())
	}
}

// A bad --log-level or --log-format gets one line naming the valid values
// (--log-level verbose printed slog's parse error without them).
func TestServeBadLogFlagsNameValidValues(t *testing.T) {
	for _, c := range []struct{ flag, value, want string }{
		{"--log-level", "verbose", `strata: --log-level "verbose": want one of debug, info, warn, error`},
		{"--log-format", "xml", `strata: --log-format "xml": want one of text, json`},
	} {
		r := testenv.RunStrata(t, 30*time.Second, "serve", "--data-dir", t.TempDir(), c.flag, c.value)
		if r.ExitCode == 0 || strings.TrimSpace(r.Stderr) != c.want {
			t.Errorf("serve %s %s: exit %d, stderr %q; want non-zero and %q", c.flag, c.value, r.ExitCode, r.Stderr, c.want)
		}
	}
}
