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
	"slices"
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
	bin     string
	args    []string
	env     []string
	cmd     *exec.Cmd
	addr    string
	dataDir string
	done    chan struct{} // closed when the process has exited
	waitErr error

	mu   sync.Mutex
	tail []string // last lines of output, for error messages
}

func startStrata(ctx context.Context, cfg Config) (*strataTarget, error) {
	return startStrataWith(ctx, cfg, nil, nil)
}

// startStrataWith starts `strata serve` with cfg.StrataArgs and then args,
// and env added to this process's environment.
func startStrataWith(ctx context.Context, cfg Config, args, env []string) (*strataTarget, error) {
	bin, err := strataBin(cfg)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "strata-bench-")
	if err != nil {
		return nil, fmt.Errorf("strata data dir: %w", err)
	}
	s := &strataTarget{bin: bin, dataDir: dir, env: append(os.Environ(), env...),
		args: slices.Concat([]string{"serve", "--broker-id", "0", "--listen", "127.0.0.1:0", "--data-dir", dir}, cfg.StrataArgs, args)}
	if err := s.launch(ctx, cfg); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// strataBin is the strata binary the harness starts: cfg.StrataBin, or
// this executable.
func strataBin(cfg Config) (string, error) {
	if cfg.StrataBin != "" {
		return cfg.StrataBin, nil
	}
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find strata binary: %w", err)
	}
	return exe, nil
}

// helperBin is the binary of the harness's helper processes (the floor
// server, the read-back client): this executable, whose bench code they
// run, whatever broker binary cfg.StrataBin names.
func helperBin() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find this executable: %w", err)
	}
	return exe, nil
}

// launch starts the process and waits for its ready line.
func (s *strataTarget) launch(ctx context.Context, cfg Config) error {
	cmd := exec.Command(s.bin, s.args...)
	cmd.Env = s.env
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	s.cmd, s.done, s.waitErr = cmd, done, nil
	ready := make(chan string, 1)
	go func() {
		s.waitErr = cmd.Wait()
		pw.Close()
		close(done)
	}()
	go s.readOutput(pr, cfg.BrokerLog, fmt.Sprintf("[strata pid %d] ", cmd.Process.Pid), ready)

	timer := time.NewTimer(readyTimeout)
	defer timer.Stop()
	var err error
	select {
	case s.addr = <-ready:
		cfg.Logger.Info("strata ready", "pid", cmd.Process.Pid, "listen", s.addr, "data_dir", s.dataDir)
		return nil
	case <-done:
		err = fmt.Errorf("strata exited before ready (%v): %s", s.waitErr, s.lastOutput())
	case <-timer.C:
		err = fmt.Errorf("strata not ready after %s: %s", readyTimeout, s.lastOutput())
	case <-ctx.Done():
		err = fmt.Errorf("strata start: %w", ctx.Err())
	}
	_ = s.stop()
	return err
}

// restart stops the broker with SIGTERM and starts it again on the same
// data directory, so that nothing it held in memory survives.
func (s *strataTarget) restart(ctx context.Context, cfg Config) error {
	if err := s.stop(); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	return s.launch(ctx, cfg)
}

// readOutput copies the broker's output to log, each line after prefix
// (several brokers may share log), keeps its tail and sends the address
// of the first ready line.
func (s *strataTarget) readOutput(r io.Reader, log io.Writer, prefix string, ready chan<- string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	sent := false
	for sc.Scan() {
		line := sc.Text()
		if log != nil {
			fmt.Fprintln(log, prefix+line)
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

// Close stops the broker and removes the data directory.
func (s *strataTarget) Close() error {
	defer os.RemoveAll(s.dataDir)
	return s.stop()
}

// stop sends SIGTERM and waits for the exit (killing after stopTimeout).
// A non-zero exit after SIGTERM is an error.
func (s *strataTarget) stop() error {
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

// dumpGoroutines asks a running broker for its goroutine dump (SIGQUIT:
// Go's runtime writes every goroutine's stack to stderr, which goes to
// Config.BrokerLog, and exits) and waits up to 10 s for it to exit. A
// run that finds a broker not serving calls it before stopping the
// brokers, so the log says where the broker was stuck.
func (s *strataTarget) dumpGoroutines() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
	}
}

func (s *strataTarget) exitErr() error {
	var ee *exec.ExitError
	if errors.As(s.waitErr, &ee) {
		return fmt.Errorf("strata exited: %v: %s", ee, s.lastOutput())
	}
	return s.waitErr
}
