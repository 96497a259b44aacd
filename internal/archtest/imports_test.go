package archtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "strata"

// rules: for each package of the module, the other packages of the
// module it may reach (transitively, non-test code). A package of the
// module with no rule fails the test, so a new room has to be given one.
var rules = map[string][]string{
	"broker/plog":      {"internal/vfs"},
	"broker/config":    {"broker/plog", "internal/vfs"},
	"broker/group":     {"broker/config", "broker/plog", "internal/vfs"},
	"broker/txn":       {"broker/config", "broker/plog", "internal/vfs"},
	"broker/network":   {"broker/config", "broker/plog", "internal/vfs"},
	"broker/acl":       {"controller"},
	"broker/replica":   {"broker/config", "broker/plog", "controller", "internal/vfs"},
	"broker/remotelog": {"broker/config", "broker/plog", "broker/replica", "controller", "tier", "index", "internal/vfs", "internal/obs"},
	"broker": {"broker/acl", "broker/config", "broker/plog", "broker/group", "broker/txn", "broker/network", "broker/replica",
		"broker/remotelog", "controller", "tier", "index", "internal/vfs", "internal/obs"},
	"tier":          {"broker/plog", "index", "internal/vfs"},
	"index":         {},
	"controller":    {},
	"controller/zk": {"controller", "internal/obs"},
	"internal/vfs":  {},
	// The catalog of metrics, and its generator of docs/metrics.md, which
	// imports the packages that declare metrics (a tool, like cmd/).
	"internal/obs": {},
	"internal/obs/metricsdoc": {"broker", "broker/acl", "broker/config", "broker/plog", "broker/group", "broker/txn", "broker/network",
		"broker/replica", "broker/remotelog", "controller", "controller/zk", "tier", "index", "internal/vfs", "internal/obs"},
	// The container image's builder (make image) and the deploy files'
	// checks: outside the broker.
	"internal/image":         {},
	"internal/image/mkimage": {"internal/image"},
	"bench":                  {"tier", "index", "broker/plog", "internal/vfs"},
	"cmd/strata": {"bench", "broker", "broker/acl", "broker/config", "broker/plog", "broker/group", "broker/txn", "broker/network",
		"broker/replica", "broker/remotelog", "controller", "controller/zk", "tier", "index", "internal/vfs", "internal/obs"},
	// Test-only packages: they may use anything but each other's tests.
	"internal/testenv":  {},
	"internal/deploy":   {},
	"deploy/helm":       {}, // the Helm chart's render tests
	"internal/e2e":      {},
	"internal/archtest": {},
	"compat":            {},
}

// pkg is what go list tells of one package.
type pkg struct {
	ImportPath string
	Deps       []string
}

// violations checks pkgs against rules and returns one line per broken
// rule: a module package reaching one it may not, or having no rule.
func violations(pkgs []pkg, rules map[string][]string) []string {
	var out []string
	for _, p := range pkgs {
		rel, ok := relative(p.ImportPath)
		if !ok {
			continue
		}
		allowed, ok := rules[rel]
		if !ok {
			out = append(out, fmt.Sprintf("%s: no import rule (add one to internal/archtest)", rel))
			continue
		}
		for _, d := range p.Deps {
			dr, ok := relative(d)
			if !ok || dr == rel || slices.Contains(allowed, dr) {
				continue
			}
			out = append(out, fmt.Sprintf("%s imports %s (directly or through another package); it may reach only %v", rel, dr, allowed))
		}
	}
	return out
}

// relative names a package of the module by its path inside it.
func relative(path string) (string, bool) {
	if path == module {
		return ".", true
	}
	rel, ok := strings.CutPrefix(path, module+"/")
	return rel, ok
}

// listPackages runs go list over the whole module.
func listPackages(t *testing.T) []pkg {
	t.Helper()
	goBin := os.Getenv("GO")
	if goBin == "" {
		goBin = "go"
	}
	cmd := exec.Command(goBin, "list", "-json=ImportPath,Deps", module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v: %s", err, stderr.String())
	}
	var pkgs []pkg
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

func TestImportRules(t *testing.T) {
	pkgs := listPackages(t)
	seen := map[string]bool{}
	for _, p := range pkgs {
		if rel, ok := relative(p.ImportPath); ok {
			seen[rel] = true
		}
	}
	// The rooms the rules are about must exist: a rule for a package
	// that is gone proves nothing.
	for _, must := range []string{"broker", "broker/plog", "broker/network", "broker/replica", "broker/remotelog", "broker/txn", "tier", "index", "controller/zk"} {
		if !seen[must] {
			t.Errorf("package %s/%s not found by go list", module, must)
		}
	}
	for _, v := range violations(pkgs, rules) {
		t.Error(v)
	}
}

// TestViolationsFound proves the checker can fail: a graph that breaks
// each kind of rule is reported.
func TestViolationsFound(t *testing.T) {
	pkgs := []pkg{
		{ImportPath: "strata/broker/plog", Deps: []string{"fmt", "strata/broker"}},
		{ImportPath: "strata/broker/network", Deps: []string{"strata/broker/plog", "strata/broker/replica"}},
		{ImportPath: "strata/broker/remotelog", Deps: []string{"strata/tier", "strata/broker"}},
		{ImportPath: "strata/broker/newroom", Deps: nil},
		{ImportPath: "strata/tier", Deps: []string{"strata/broker/plog", "strata/index"}},
	}
	got := violations(pkgs, rules)
	want := []string{
		"broker/plog imports broker ",
		"broker/network imports broker/replica ",
		"broker/remotelog imports broker ",
		"broker/newroom: no import rule",
	}
	if len(got) != len(want) {
		t.Fatalf("got %d violations, want %d: %q", len(got), len(want), got)
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("violation %d = %q, want prefix %q", i, got[i], want[i])
		}
	}
}
