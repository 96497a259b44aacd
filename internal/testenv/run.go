package testenv

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"testing"
	"time"
)

// RunResult is the outcome of a strata command run to completion.
type RunResult struct {
	Stdout, Stderr string
	ExitCode       int // -1 when killed by a signal (including the timeout)
}

// RunStrata runs the strata binary with args to completion, killing it
// after timeout (which fails the test). For commands that should exit on
// their own, such as `strata serve` with a bad configuration.
func RunStrata(t testing.TB, timeout time.Duration, args ...string) RunResult {
	t.Helper()
	bin := BuildStrata(t)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := RunResult{Stdout: stdout.String(), Stderr: stderr.String()}
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		t.Fatalf("strata %v did not exit within %v; stderr:\n%s", args, timeout, tailLines(res.Stderr, 30))
	case err == nil:
	case errors.As(err, &ee):
		res.ExitCode = ee.ExitCode()
	default:
		t.Fatalf("run strata %v: %v", args, err)
	}
	return res
}
