package testenv

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// killProcess ends cmd with SIGKILL unless exited (closed once cmd has
// been waited for) says it is gone, and waits up to 30 s for it to go.
// Used by cleanups and failures of every starter here.
func killProcess(cmd *exec.Cmd, exited <-chan struct{}) {
	if cmd == nil {
		return
	}
	select {
	case <-exited:
		return
	default:
	}
	_ = cmd.Process.Kill()
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
	}
}

// processRunning reports whether a started process has not exited:
// exited is closed once it has been waited for (nil: never started).
func processRunning(exited <-chan struct{}) bool {
	if exited == nil {
		return false
	}
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

// signalProcess sends sig to cmd unless it has already exited (done) or
// was never started (cmd nil, done too). err is a failed signal.
func signalProcess(cmd *exec.Cmd, exited <-chan struct{}, sig syscall.Signal) (done bool, err error) {
	if cmd == nil {
		return true, nil
	}
	select {
	case <-exited:
		return true, nil
	default:
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return false, err
	}
	return false, nil
}

// waitExit reports whether exited is closed within d.
func waitExit(exited <-chan struct{}, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-exited:
		return true
	case <-timer.C:
		return false
	}
}
