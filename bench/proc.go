package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// clockTicks is USER_HZ, the unit of utime/stime in /proc/<pid>/stat; it is
// 100 on every Linux architecture Go supports.
const clockTicks = 100

// procSample is one reading of a process's resource counters.
type procSample struct {
	RSSBytes     int64   // VmRSS
	HWMBytes     int64   // VmHWM, peak RSS so far
	CPUSeconds   float64 // utime + stime
	WrittenBytes int64   // write_bytes from /proc/<pid>/io; -1 if unreadable
}

// readProc reads the counters of pid from /proc.
func readProc(pid int) (procSample, error) {
	var s procSample
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, fmt.Errorf("read status of pid %d: %w", pid, err)
	}
	s.RSSBytes, s.HWMBytes = parseStatus(status)
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, fmt.Errorf("read stat of pid %d: %w", pid, err)
	}
	if s.CPUSeconds, err = parseStatCPU(stat); err != nil {
		return s, fmt.Errorf("pid %d: %w", pid, err)
	}
	s.WrittenBytes = -1
	if io, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid)); err == nil {
		s.WrittenBytes = parseIOWriteBytes(io)
	}
	return s, nil
}

// parseStatus returns VmRSS and VmHWM in bytes from /proc/<pid>/status.
func parseStatus(b []byte) (rss, hwm int64) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmRSS":
			rss = n * 1024
		case "VmHWM":
			hwm = n * 1024
		}
	}
	return rss, hwm
}

// parseStatCPU returns utime+stime in seconds from /proc/<pid>/stat. The
// command name (field 2) may hold spaces and parentheses, so fields are
// counted from the last ')'.
func parseStatCPU(b []byte) (float64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed stat %q", b)
	}
	f := strings.Fields(string(b[i+1:]))
	// After ')': state(3) ppid(4) ... utime(14) stime(15): indexes 11, 12.
	if len(f) < 13 {
		return 0, fmt.Errorf("short stat %q", b)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("malformed stat times %q %q", f[11], f[12])
	}
	return float64(ut+st) / clockTicks, nil
}

// parseIOWriteBytes returns write_bytes from /proc/<pid>/io, or -1.
func parseIOWriteBytes(b []byte) int64 {
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "write_bytes:"); ok {
			if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
				return n
			}
		}
	}
	return -1
}
