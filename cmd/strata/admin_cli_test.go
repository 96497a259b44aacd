package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

// cliResult is what a run of the strata binary did.
type cliResult struct {
	stdout, stderr string
	code           int
}

func (r cliResult) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// strataCLI runs the strata binary with args and env added to an
// environment without STRATA_BOOTSTRAP, BOOTSTRAP and METRICS.
func strataCLI(t *testing.T, env []string, args ...string) cliResult {
	t.Helper()
	bin := testenv.BuildStrata(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, bootstrapEnv+"=") && !strings.HasPrefix(kv, strataBootstrapEnv+"=") && !strings.HasPrefix(kv, metricsEnv+"=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err := cmd.Run()
	r := cliResult{stdout: so.String(), stderr: se.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("strata %v did not exit: %v", args, r)
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("strata %v: %v", args, err)
	}
	return r
}

// admin runs strata admin --bootstrap addr args.
func admin(t *testing.T, addr string, args ...string) cliResult {
	t.Helper()
	return strataCLI(t, nil, append([]string{"admin", "--bootstrap", addr}, args...)...)
}

// adminJSON runs strata admin --json and decodes its stdout into v,
// failing the test unless it exits 0.
func adminJSON(t *testing.T, addr string, v any, args ...string) {
	t.Helper()
	r := admin(t, addr, append(args, "--json")...)
	if r.code != 0 {
		t.Fatalf("admin %v: %v", args, r)
	}
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		t.Fatalf("admin %v --json: %v\n%s", args, err, r.stdout)
	}
}

// wantRun checks a run's exit code and that its stdout and stderr
// contain the strings given.
func wantRun(t *testing.T, what string, r cliResult, code int, stdout, stderr []string) {
	t.Helper()
	bad := r.code != code
	for _, s := range stdout {
		bad = bad || !strings.Contains(r.stdout, s)
	}
	for _, s := range stderr {
		bad = bad || !strings.Contains(r.stderr, s)
	}
	if bad {
		t.Errorf("%s: want exit %d, stdout with %q, stderr with %q; got %v", what, code, stdout, stderr, r)
	}
}

// TestAdminCommandLine pins the command-line faults of issue 27: help
// exits 0 everywhere and says where the bootstrap comes from, a bad
// command, flag or argument is named with exit 2, and nothing is
// silently ignored. No broker is needed: all of this is refused before
// one is contacted.
func TestAdminCommandLine(t *testing.T) {
	nobody := "127.0.0.1:1" // nothing listens; a command that got this far would fail with 1
	r := strataCLI(t, nil, "admin", "--help")
	wantRun(t, "admin --help", r, 0, []string{"STRATA_BOOTSTRAP, else BOOTSTRAP", "127.0.0.1:9092", "groups reset", "tier", "cluster check", "Exit codes"}, nil)
	wantRun(t, "strata --help", strataCLI(t, nil, "--help"), 0, []string{"version"}, nil)
	wantRun(t, "admin", strataCLI(t, nil, "admin"), 2, nil, []string{"usage: strata admin"})
	wantRun(t, "admin frob", admin(t, nobody, "frob"), 2, nil, []string{`unknown command "frob"`})
	wantRun(t, "admin --frob", strataCLI(t, nil, "admin", "--frob"), 2, nil, []string{"-frob"})
	wantRun(t, "admin broker", admin(t, nobody, "broker"), 2, nil, []string{"broker decommission ID"})
	wantRun(t, "admin broker frob", admin(t, nobody, "broker", "frob"), 2, nil, []string{`unknown command "frob" (decommission)`})
	wantRun(t, "admin groups frob", admin(t, nobody, "groups", "frob"), 2, nil, []string{`unknown command "frob" (delete, describe, list, reset)`})
	wantRun(t, "create x y", admin(t, nobody, "create", "x", "y"), 2, nil, []string{`unexpected argument "y"`})
	wantRun(t, "create x2 -p 2 extra -r 1", admin(t, nobody, "create", "x2", "-p", "2", "extra", "-r", "1"), 2, nil, []string{`unexpected argument "extra"`})
	wantRun(t, "create x -q 1", admin(t, nobody, "create", "x", "-q", "1"), 2, nil, []string{"-q"})
	wantRun(t, "create x -c k", admin(t, nobody, "create", "x", "-c", "k"), 2, nil, []string{`-c "k": want key=value`})
	wantRun(t, "topics list x", admin(t, nobody, "topics", "list", "x"), 2, nil, []string{`unexpected argument "x"`})
	wantRun(t, "cluster check x", admin(t, nobody, "cluster", "check", "x"), 2, nil, []string{`unexpected argument "x"`})
	wantRun(t, "broker decommission x", admin(t, nobody, "broker", "decommission", "x"), 2, nil, []string{`"x" is not a broker id`})
	wantRun(t, "broker decommission 1 2", admin(t, nobody, "broker", "decommission", "1", "2"), 2, nil, []string{`unexpected argument "2"`})
	wantRun(t, "configs --broker x", admin(t, nobody, "configs", "--broker", "x"), 2, nil, []string{`--broker "x" is not a broker id`})
	wantRun(t, "configs a b", admin(t, nobody, "configs", "a", "b"), 2, nil, []string{`unexpected argument "b"`})
	wantRun(t, "alter t", admin(t, nobody, "alter", "t"), 2, nil, []string{"need key=value"})
	wantRun(t, "alter t k", admin(t, nobody, "alter", "t", "k"), 2, nil, []string{`"k": want key=value`})
	wantRun(t, "groups reset g", admin(t, nobody, "groups", "reset", "g", "--topic", "t"), 2, nil, []string{"want exactly one of --to-earliest"})
	wantRun(t, "groups reset g --to-earliest", admin(t, nobody, "groups", "reset", "g", "--to-earliest"), 2, nil, []string{"--all-topics"})
	wantRun(t, "groups reset --to-datetime", admin(t, nobody, "groups", "reset", "g", "--all-topics", "--to-datetime", "yesterday"), 2, nil, []string{`--to-datetime "yesterday"`})
	wantRun(t, "groups reset --shift-by", admin(t, nobody, "groups", "reset", "g", "--all-topics", "--shift-by", "x"), 2, nil, []string{`--shift-by "x"`})
	wantRun(t, "reassign status --json", admin(t, nobody, "reassign", "status", "--json"), 2, nil, []string{"--json is not supported"})
	wantRun(t, "restore", admin(t, nobody, "restore"), 2, nil, []string{"need --tier"})
	wantRun(t, "version x", strataCLI(t, nil, "version", "x"), 2, nil, []string{`unexpected argument "x"`})

	// --help of every command: usage on stdout, exit 0.
	for _, args := range [][]string{
		{"topics", "--help"}, {"topics", "list", "--help"}, {"describe", "--help"}, {"create", "--help"}, {"delete", "-h"},
		{"configs", "--help"}, {"alter", "--help"}, {"tier", "--help"}, {"groups", "--help"}, {"groups", "list", "--help"},
		{"groups", "describe", "--help"}, {"groups", "reset", "--help"}, {"groups", "delete", "--help"}, {"cluster", "--help"},
		{"cluster", "brokers", "--help"}, {"cluster", "check", "--help"}, {"cluster", "rebalance", "--help"},
		{"cluster", "drain", "--help"}, {"cluster", "resume", "--help"}, {"broker", "--help"}, {"broker", "decommission", "--help"},
		{"reassign", "--help"}, {"reassign", "status", "--help"}, {"reassign", "cancel", "--help"}, {"restore", "--help"}, {"help"},
	} {
		r := admin(t, nobody, args...)
		if r.code != 0 || !strings.Contains(r.stdout, "usage: strata admin") || r.stderr != "" {
			t.Errorf("admin %v: %v", args, r)
		}
	}

	// Nothing listens at the bootstrap: exit 1, naming where it came from
	// is not needed, but the failure is one line.
	r = strataCLI(t, []string{bootstrapEnv + "=" + nobody}, "admin", "cluster", "brokers")
	if r.code != 1 || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
		t.Errorf("cluster brokers with nothing at $BOOTSTRAP: %v", r)
	}
}

// TestVersionStamped checks strata version with the version and commit
// stamped as the Makefile stamps them, and without.
func TestVersionStamped(t *testing.T) {
	r := strataCLI(t, nil, "version")
	if r.code != 0 || !strings.HasPrefix(r.stdout, "strata ") || !strings.Contains(r.stdout, "commit ") {
		t.Errorf("version: %v", r)
	}
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir() + "/strata"
	build := exec.Command("go", "build", "-ldflags", "-X main.version=v9.8.7 -X main.commit=abcdef123456", "-o", bin, "./cmd/strata")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "version", "--json").Output()
	var v map[string]string
	if err != nil || json.Unmarshal(out, &v) != nil || v["version"] != "v9.8.7" || v["commit"] != "abcdef123456" || !strings.HasPrefix(v["go"], "go") {
		t.Errorf("stamped version --json: %v %s", err, out)
	}
	out, err = exec.Command(bin, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "strata v9.8.7 (commit abcdef123456, go") {
		t.Errorf("stamped version: %v %s", err, out)
	}
}

// newTestClient is a franz-go client of the brokers at addrs.
func newTestClient(t *testing.T, addrs ...string) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addrs...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// waitFor polls cond until it is nil, failing after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, d, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// jsonOf is v as JSON, for messages.
func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// jsonUnmarshal decodes s into v.
func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
