package testenv

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BrokerOptions configures StartBroker. The zero value starts broker 0 on a
// free loopback port with a fresh data directory.
type BrokerOptions struct {
	ID      int      // --broker-id
	DataDir string   // --data-dir; empty: a new directory under t.TempDir()
	Listen  string   // --listen; empty: 127.0.0.1:0 (a free port)
	Sets    []string // --set items, "key=value"
	Metrics string   // --metrics HOST:PORT; empty: none
	Args    []string // further flags, appended after the others
	// Env is added to the test's environment (KEY=VALUE items; a later
	// one wins), e.g. STRATA_ variables that set broker configs.
	Env []string
	// NoFile, when > 0, starts the broker with RLIMIT_NOFILE set to it
	// (soft and hard), as `ulimit -n NoFile` does.
	NoFile int

	// ReadyTimeout bounds the wait for the ready line; zero means 30s.
	ReadyTimeout time.Duration
}

// Broker is a running (or stopped) strata broker process. Its methods are
// meant for the test goroutine; Addr, DataDir, Pid and Logs may be called
// from any goroutine.
type Broker struct {
	t       testing.TB
	bin     string
	opts    BrokerOptions
	dataDir string
	stderr  string // path of the file stderr goes to (across restarts)
	stdout  string // path of the file stdout lines are copied to

	mu     sync.Mutex
	addr   string // bound address from the ready line; kept across restarts
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been waited for
	state  *os.ProcessState
	starts int
}

// readyPrefix starts the one stdout line strata prints once it accepts
// requests: "ready broker_id=N listen=HOST:PORT".
const readyPrefix = "ready "

// StartBroker builds strata if needed, starts `strata serve` and waits for
// its ready line. The process is killed when the test ends, and its stderr
// tail is printed if the test failed.
func StartBroker(t testing.TB, opts BrokerOptions) *Broker {
	t.Helper()
	bin := BuildStrata(t)
	logDir := t.TempDir() // registered before the kill below, so removed after it
	b := &Broker{
		t:       t,
		bin:     bin,
		opts:    opts,
		dataDir: opts.DataDir,
		stderr:  filepath.Join(logDir, "stderr.log"),
		stdout:  filepath.Join(logDir, "stdout.log"),
		addr:    opts.Listen,
	}
	if b.dataDir == "" {
		b.dataDir = filepath.Join(logDir, "data")
	}
	if b.addr == "" {
		b.addr = "127.0.0.1:0"
	}
	t.Cleanup(func() {
		b.kill()
		if t.Failed() {
			t.Logf("strata broker %d (data %s) stderr, last lines:\n%s", opts.ID, b.dataDir, b.tail(60))
		}
	})
	b.start()
	return b
}

// Addr is the broker's listen address, HOST:PORT.
func (b *Broker) Addr() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.addr
}

// DataDir is the broker's data directory.
func (b *Broker) DataDir() string { return b.dataDir }

// Pid is the process id of the current (or last) broker process.
func (b *Broker) Pid() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.cmd == nil || b.cmd.Process == nil {
		return 0
	}
	return b.cmd.Process.Pid
}

// Running reports whether the broker process has not exited.
func (b *Broker) Running() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return processRunning(b.exited)
}

// Logs returns everything the broker wrote to stderr so far, across
// restarts (each start is preceded by a "=== testenv:" marker line).
func (b *Broker) Logs() string {
	data, _ := os.ReadFile(b.stderr)
	return string(data)
}

// Kill9 sends SIGKILL and waits for the process to be gone.
func (b *Broker) Kill9() {
	b.t.Helper()
	b.signalAndWait(syscall.SIGKILL, 30*time.Second)
}

// Stop sends SIGTERM and waits for the process to exit; the test fails if
// it does not exit with status 0 within 30 seconds (it is then killed).
func (b *Broker) Stop() {
	b.t.Helper()
	st := b.signalAndWait(syscall.SIGTERM, 30*time.Second)
	if st == nil {
		b.t.Errorf("broker %d did not stop within 30s of SIGTERM; killed it", b.opts.ID)
		b.Kill9()
		return
	}
	if !st.Success() {
		b.t.Errorf("broker %d stopped on SIGTERM with %v, want exit status 0; stderr tail:\n%s", b.opts.ID, st, b.tail(20))
	}
}

// Restart starts the broker again on the same data directory and the same
// address it bound before. A running broker is stopped with SIGTERM first.
func (b *Broker) Restart() {
	b.t.Helper()
	if b.Running() {
		b.Stop()
	}
	b.start()
}

// RSS returns the broker process's resident set size and its peak so far
// (VmRSS, VmHWM), in bytes.
func (b *Broker) RSS() (rss, peak int64, err error) {
	return ProcRSS(b.Pid())
}

func (b *Broker) start() {
	b.t.Helper()
	args := []string{"serve",
		"--broker-id", strconv.Itoa(b.opts.ID),
		"--listen", b.Addr(),
		"--data-dir", b.dataDir,
	}
	for _, s := range b.opts.Sets {
		args = append(args, "--set", s)
	}
	if b.opts.Metrics != "" {
		args = append(args, "--metrics", b.opts.Metrics)
	}
	args = append(args, b.opts.Args...)

	errf, err := os.OpenFile(b.stderr, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		b.t.Fatalf("open broker stderr file: %v", err)
	}
	defer errf.Close()
	b.starts++
	fmt.Fprintf(errf, "=== testenv: start %d: strata %s\n", b.starts, strings.Join(args, " "))
	pr, pw, err := os.Pipe()
	if err != nil {
		b.t.Fatalf("stdout pipe: %v", err)
	}
	cmd := exec.Command(b.bin, args...)
	if b.opts.NoFile > 0 {
		// The shell sets the limit and becomes strata (same pid).
		cmd = exec.Command("/bin/sh", append([]string{"-c", fmt.Sprintf(`ulimit -n %d && exec "$0" "$@"`, b.opts.NoFile), b.bin}, args...)...)
	}
	if len(b.opts.Env) > 0 {
		cmd.Env = append(os.Environ(), b.opts.Env...)
	}
	cmd.Stdout = pw
	cmd.Stderr = errf
	// Do not outlive the test binary if it dies without running cleanups.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		pw.Close()
		pr.Close()
		b.t.Fatalf("start strata: %v", err)
	}
	pw.Close()
	exited := make(chan struct{})
	b.mu.Lock()
	b.cmd, b.exited, b.state = cmd, exited, nil
	b.mu.Unlock()
	go func() {
		st, _ := cmd.Process.Wait()
		b.mu.Lock()
		b.state = st
		b.mu.Unlock()
		close(exited)
	}()

	ready := make(chan string, 1)
	go b.readStdout(pr, ready)

	timeout := b.opts.ReadyTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case line := <-ready:
		addr, err := parseReady(line)
		if err != nil {
			b.kill()
			b.t.Fatalf("broker %d: %v; stderr tail:\n%s", b.opts.ID, err, b.tail(30))
		}
		b.mu.Lock()
		b.addr = addr
		b.mu.Unlock()
	case <-exited:
		b.mu.Lock()
		st := b.state
		b.mu.Unlock()
		b.t.Fatalf("broker %d exited before ready (%v); stderr tail:\n%s", b.opts.ID, st, b.tail(30))
	case <-timer.C:
		b.kill()
		b.t.Fatalf("broker %d not ready within %v; stderr tail:\n%s", b.opts.ID, timeout, b.tail(30))
	}
}

// readStdout copies the broker's stdout to a file and hands the first ready
// line to ready.
func (b *Broker) readStdout(pr *os.File, ready chan<- string) {
	defer pr.Close()
	out, err := os.OpenFile(b.stdout, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err == nil {
		defer out.Close()
	}
	sent := false
	sc := bufio.NewScanner(pr)
	for sc.Scan() {
		line := sc.Text()
		if out != nil {
			fmt.Fprintln(out, line)
		}
		if !sent && strings.HasPrefix(line, readyPrefix) {
			ready <- line
			sent = true
		}
	}
}

// parseReady returns the listen address of a ready line.
func parseReady(line string) (string, error) {
	for _, f := range strings.Fields(strings.TrimPrefix(line, readyPrefix)) {
		if v, ok := strings.CutPrefix(f, "listen="); ok && v != "" {
			return v, nil
		}
	}
	return "", fmt.Errorf("ready line %q has no listen=HOST:PORT", line)
}

// signalAndWait signals the process and waits up to d for it to exit. It
// returns the exit state, or nil on timeout. A process that already exited
// returns its state.
func (b *Broker) signalAndWait(sig syscall.Signal, d time.Duration) *os.ProcessState {
	b.mu.Lock()
	cmd, exited := b.cmd, b.exited
	b.mu.Unlock()
	if cmd == nil {
		return nil
	}
	if _, err := signalProcess(cmd, exited, sig); err != nil {
		b.t.Errorf("signal broker %d (pid %d): %v", b.opts.ID, cmd.Process.Pid, err)
	}
	if !waitExit(exited, d) {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// kill ends the process if it still runs; used by cleanups and failures.
func (b *Broker) kill() {
	b.mu.Lock()
	cmd, exited := b.cmd, b.exited
	b.mu.Unlock()
	killProcess(cmd, exited)
}

// tail returns the last n lines of the broker's stderr.
func (b *Broker) tail(n int) string {
	return tailLines(b.Logs(), n)
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// MetricsAddr returns the address the current broker process serves
// /metrics on, read from its "metrics" log line, or "" when there is none.
// It needs BrokerOptions.Metrics.
func (b *Broker) MetricsAddr() string {
	logs := b.Logs()
	if i := strings.LastIndex(logs, "=== testenv: start"); i >= 0 {
		logs = logs[i:]
	}
	addr := ""
	for line := range strings.Lines(logs) {
		if !strings.Contains(line, "msg=metrics ") {
			continue
		}
		for _, f := range strings.Fields(line) {
			if v, ok := strings.CutPrefix(f, "listen="); ok {
				addr = v
			}
		}
	}
	return addr
}

// Signal sends sig to the running broker process (for SIGSTOP/SIGCONT
// pauses).
func (b *Broker) Signal(sig syscall.Signal) error {
	pid := b.Pid()
	if pid <= 0 {
		return fmt.Errorf("broker %d is not running", b.opts.ID)
	}
	return syscall.Kill(pid, sig)
}
