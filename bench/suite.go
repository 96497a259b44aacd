package bench

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
)

// Machine describes where a suite ran.
type Machine struct {
	NumCPU        int    `json:"num_cpu"`
	CPUModel      string `json:"cpu_model"`
	MemTotalBytes int64  `json:"mem_total_bytes"`
	OS            string `json:"os"`
	Arch          string `json:"arch"`
	GoVersion     string `json:"go_version"`
	Commit        string `json:"commit,omitempty"`
	// LoadAvg is /proc/loadavg when the suite started: a busy machine
	// makes every figure noisy.
	LoadAvg string `json:"loadavg,omitempty"`
}

// Suite is several workloads run in one invocation, with the goals
// evaluated over them.
type Suite struct {
	Machine Machine      `json:"machine"`
	Command string       `json:"command,omitempty"`
	Reports []*Report    `json:"reports"`
	Goals   []GoalResult `json:"goals"`

	history string // a file of earlier measurements to link, beside RESULTS.md
}

// RunSuite runs each workload and evaluates goals over the reports. It
// runs every workload even when one fails; the error joins the failures.
func RunSuite(ctx context.Context, cfgs []Config, goals []Goal) (*Suite, error) {
	s := &Suite{Machine: ReadMachine()}
	var errs []error
	runs := map[string]int{}
	for _, c := range cfgs {
		rep, err := Run(ctx, c)
		if rep != nil {
			runs[rep.Workload.Name]++
			rep.Run = runs[rep.Workload.Name]
			s.Reports = append(s.Reports, rep)
		}
		if err != nil {
			errs = append(errs, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	s.Goals = EvaluateGoals(goals, s.Reports)
	return s, errors.Join(errs...)
}

// EvaluateGoals evaluates each goal over the reports.
func EvaluateGoals(goals []Goal, reports []*Report) []GoalResult {
	out := make([]GoalResult, 0, len(goals))
	for _, g := range goals {
		out = append(out, g.Evaluate(reports))
	}
	return out
}

// ReadMachine describes this machine from /proc and runtime, and the
// current commit when run inside a git work tree.
func ReadMachine() Machine {
	m := Machine{NumCPU: runtime.NumCPU(), OS: runtime.GOOS, Arch: runtime.GOARCH, GoVersion: runtime.Version()}
	if f, err := os.Open("/proc/cpuinfo"); err == nil {
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
		f.Close()
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				if f := strings.Fields(v); len(f) > 0 {
					kb, _ := strconv.ParseInt(f[0], 10, 64)
					m.MemTotalBytes = kb * 1024
				}
			}
		}
	}
	m.LoadAvg = readLoadAvg()
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	return m
}

// readLoadAvg returns the 1, 5 and 15 minute load averages, or "".
func readLoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// busy reports whether a load average string shows more runnable work
// than CPUs, i.e. that something else competed with the benchmark.
func busy(loadAvg string) bool {
	f := strings.Fields(loadAvg)
	if len(f) == 0 {
		return false
	}
	l, err := strconv.ParseFloat(f[0], 64)
	return err == nil && l > float64(runtime.NumCPU())
}
