package bench

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestReadBackHeadroom(t *testing.T) {
	pct := debug.SetGCPercent(73)
	defer debug.SetGCPercent(pct)
	limit := debug.SetMemoryLimit(math.MaxInt64)
	defer debug.SetMemoryLimit(limit)

	restore := withReadBackHeadroom()
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("GOGC during the read-back %d, want off", got)
	}
	if got := debug.SetMemoryLimit(-1); got < readBackHeadroom || got == math.MaxInt64 {
		t.Errorf("memory limit during the read-back %d, want the headroom above what the process holds", got)
	}
	restore()
	if got := debug.SetGCPercent(-1); got != 73 {
		t.Errorf("GOGC after the read-back %d, want 73 back", got)
	}
	debug.SetGCPercent(73)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("memory limit after the read-back %d, want none", got)
	}
}
