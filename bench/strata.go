package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// readyTimeout bounds how long a started broker has to print its ready line.
const readyTimeout = 60 * time.Second

// stopTimeout bounds how long a broker has to exit after SIGTERM.
const stopTimeout = 15 * time.Second

// readyLine matches the line `strata serve` logs once it accepts requests.
// It may be embedded in a structured log line.
var readyLine = regexp.MustCompile(`ready broker_id=(-?\d+) listen=([^\s"]+)`)

// parseReady returns the listen address from a ready line.
func parseReady(line string) (addr string, ok bool) {
	m := readyLine.FindStringSubmatch(line)
	if m == nil {
		return "", false
	}
	return m[2], true
}

// strataTarget is a Strata broker process started by the harness with a
// fresh data directory.
type strataTarget struct {
	cmd     *exec.Cmd
	addr    string
	dataDir string
	done    chan struct{} // closed when the process has exited
	waitErr error

	mu   sync.Mutex
	tail []string // last lines of output, for error messages
}

func startStrata(ctx context.Context, cfg Config) (*strataTarget, error) {
	bin := cfg.StrataBin
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find strata binary: %w", err)
		}
		bin = exe
	}
	dir, err := os.MkdirTemp("", "strata-bench-")
	if err != nil {
		return nil, fmt.Errorf("strata data dir: %w", err)
	}
	args := append([]string{"serve", "--broker-id", "0", "--listen", "127.0.0.1:0", "--data-dir", dir}, cfg.StrataArgs...)
	cmd := exec.Command(bin, args...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &strataTarget{cmd: cmd, dataDir: dir, done: make(chan struct{})}
	ready := make(chan string, 1)
	go func() {
		s.waitErr = cmd.Wait()
		pw.Close()
		close(s.done)
	}()
	go s.readOutput(pr, cfg.BrokerLog, ready)

	timer := time.NewTimer(readyTimeout)
	defer timer.Stop()
	select {
	case s.addr = <-ready:
		cfg.Logger.Info("strata ready", "pid", cmd.Process.Pid, "listen", s.addr, "data_dir", dir)
		return s, nil
	case <-s.done:
		err = fmt.Errorf("strata exited before ready (%v): %s", s.waitErr, s.lastOutput())
	case <-timer.C:
		err = fmt.Errorf("strata not ready after %s: %s", readyTimeout, s.lastOutput())
	case <-ctx.Done():
		err = fmt.Errorf("strata start: %w", ctx.Err())
	}
	_ = s.Close()
	return nil, err
}

// readOutput copies the broker's output to log, keeps its tail and sends
// the address of the first ready line.
func (s *strataTarget) readOutput(r io.Reader, log io.Writer, ready chan<- string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	sent := false
	for sc.Scan() {
		line := sc.Text()
		if log != nil {
			fmt.Fprintln(log, line)
		}
		s.mu.Lock()
		s.tail = append(s.tail, line)
		if len(s.tail) > 10 {
			s.tail = s.tail[1:]
		}
		s.mu.Unlock()
		if addr, ok := parseReady(line); ok && !sent {
			ready <- addr
			sent = true
		}
	}
	_, _ = io.Copy(io.Discard, r) // keep the process from blocking on a long line
}

func (s *strataTarget) lastOutput() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.tail) == 0 {
		return "no output"
	}
	return strings.Join(s.tail, " | ")
}

func (s *strataTarget) Seeds() []string { return []string{s.addr} }

func (s *strataTarget) Sample() (procSample, bool) {
	select {
	case <-s.done:
		return procSample{}, false
	default:
	}
	p, err := readProc(s.cmd.Process.Pid)
	return p, err == nil
}

// Close sends SIGTERM, waits for the exit (killing after stopTimeout) and
// removes the data directory. A non-zero exit after SIGTERM is an error.
func (s *strataTarget) Close() error {
	defer os.RemoveAll(s.dataDir)
	select {
	case <-s.done:
		return s.exitErr()
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	select {
	case <-s.done:
		return s.exitErr()
	case <-timer.C:
		_ = s.cmd.Process.Kill()
		<-s.done
		return fmt.Errorf("strata did not exit %s after SIGTERM; killed", stopTimeout)
	}
}

func (s *strataTarget) exitErr() error {
	var ee *exec.ExitError
	if errors.As(s.waitErr, &ee) {
		return fmt.Errorf("strata exited: %v: %s", ee, s.lastOutput())
	}
	return s.waitErr
}
