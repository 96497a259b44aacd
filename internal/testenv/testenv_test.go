package testenv

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParseReady(t *testing.T) {
	for _, c := range []struct {
		line, addr string
		ok         bool
	}{
		{"ready broker_id=0 listen=127.0.0.1:40123", "127.0.0.1:40123", true},
		{"ready broker_id=7 listen=[::1]:9092", "[::1]:9092", true},
		{"ready broker_id=0", "", false},
		{"ready broker_id=0 listen=", "", false},
	} {
		addr, err := parseReady(c.line)
		if (err == nil) != c.ok || addr != c.addr {
			t.Errorf("parseReady(%q) = %q, %v; want %q, ok %v", c.line, addr, err, c.addr, c.ok)
		}
	}
}

func TestTailLines(t *testing.T) {
	if got := tailLines("a\nb\nc\n", 2); got != "b\nc" {
		t.Errorf("tailLines = %q, want %q", got, "b\nc")
	}
	if got := tailLines("a\n", 5); got != "a" {
		t.Errorf("tailLines = %q, want %q", got, "a")
	}
}

func TestProcRSS(t *testing.T) {
	rss, peak, err := ProcRSS(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if rss <= 0 || peak < rss {
		t.Errorf("rss %d, peak %d: want 0 < rss <= peak", rss, peak)
	}
	if _, _, err := ProcRSS(0); err == nil {
		t.Error("ProcRSS(0): want an error")
	}
}

func TestModuleRoot(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "cmd", "strata")); err != nil {
		t.Errorf("module root %s has no cmd/strata: %v", root, err)
	}
}
