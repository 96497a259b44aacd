package testenv

import (
	"os/exec"
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
