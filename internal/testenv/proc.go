package testenv

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// ProcRSS returns the resident set size of a process and its peak so far
// (VmRSS and VmHWM of /proc/<pid>/status), in bytes.
func ProcRSS(pid int) (rss, peak int64, err error) {
	if pid <= 0 {
		return 0, 0, fmt.Errorf("read rss: no process (pid %d)", pid)
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, fmt.Errorf("read rss of pid %d: %w", pid, err)
	}
	var found int
	for line := range strings.Lines(string(data)) {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		f := strings.Fields(v) // "1234 kB"
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("read rss of pid %d: malformed %s line %q", pid, k, line)
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("read rss of pid %d: %s: %w", pid, k, err)
		}
		if k == "VmRSS" {
			rss = n * 1024
		} else {
			peak = n * 1024
		}
		found++
	}
	if found != 2 {
		return 0, 0, fmt.Errorf("read rss of pid %d: no VmRSS/VmHWM in status", pid)
	}
	return rss, peak, nil
}
