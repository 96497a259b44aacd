package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// clusterScript is the local cluster script, relative to the repository
// root; `make cluster` and the end-to-end tests run the same one.
const clusterScript = "deploy/local/cluster.sh"

// clusterTimeout bounds `cluster.sh up` and `down`.
const clusterTimeout = 3 * time.Minute

// clusterTarget is a local three-broker Strata cluster on ZooKeeper,
// started and stopped by deploy/local/cluster.sh in a fresh state
// directory. Brokers it kills or stops are restarted by the harness with
// the command line the script gave them, and their PID files updated, so
// that `cluster.sh down` stops them.
type clusterTarget struct {
	script string
	dir    string // CLUSTER_DIR
	env    []string
	seeds  []string

	mu       sync.Mutex
	children map[int32]*exec.Cmd // brokers the harness restarted
	waited   map[int32]chan struct{}
}

// findClusterScript returns cfg.ClusterScript, or deploy/local/cluster.sh
// found above the working directory or above this executable.
func findClusterScript(cfg Config) (string, error) {
	if cfg.ClusterScript != "" {
		return cfg.ClusterScript, nil
	}
	p, err := findRepoFile(clusterScript)
	if err != nil {
		return "", fmt.Errorf("cluster target: %w (set --cluster-script)", err)
	}
	return p, nil
}

// findRepoFile returns the file at rel (a path relative to the repository
// root) found above the working directory or above this executable.
func findRepoFile(rel string) (string, error) {
	var starts []string
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	if exe, err := os.Executable(); err == nil {
		starts = append(starts, filepath.Dir(exe))
	}
	for _, dir := range starts {
		for {
			p := filepath.Join(dir, rel)
			if _, err := os.Stat(p); err == nil {
				return p, nil
			}
			parent := filepath.Dir(dir)
			if parent == dir {
				break
			}
			dir = parent
		}
	}
	return "", fmt.Errorf("%s not found above the working directory or the executable", rel)
}

func startCluster(ctx context.Context, cfg Config) (*clusterTarget, error) {
	script, err := findClusterScript(cfg)
	if err != nil {
		return nil, err
	}
	bin := cfg.StrataBin
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("find strata binary: %w", err)
		}
	}
	dir, err := os.MkdirTemp("", "strata-bench-cluster-")
	if err != nil {
		return nil, fmt.Errorf("cluster state dir: %w", err)
	}
	c := &clusterTarget{script: script, dir: dir, children: map[int32]*exec.Cmd{}, waited: map[int32]chan struct{}{},
		env: append(os.Environ(), "CLUSTER_DIR="+dir, "STRATA_BIN="+bin, "STOP_TIMEOUT=20")}
	out, err := c.run(ctx, "up")
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	for line := range strings.Lines(out) {
		if v, ok := strings.CutPrefix(line, "bootstrap: "); ok {
			c.seeds = strings.Split(strings.TrimSpace(v), ",")
		}
	}
	if len(c.seeds) == 0 || c.seeds[0] == "" {
		_ = c.Close()
		return nil, fmt.Errorf("cluster.sh up printed no bootstrap address: %s", out)
	}
	cfg.Logger.Info("cluster ready", "bootstrap", strings.Join(c.seeds, ","), "state_dir", dir)
	return c, nil
}

// run runs the cluster script with args and returns its standard output.
func (c *clusterTarget) run(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, clusterTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.script, args...)
	cmd.Dir = filepath.Dir(filepath.Dir(filepath.Dir(c.script))) // the repository root
	cmd.Env = c.env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("cluster.sh %s: %w: %s", strings.Join(args, " "), err, lastLines(stderr.String(), 8))
	}
	return stdout.String(), nil
}

// lastLines is the last n lines of s on one line, for an error.
func lastLines(s string, n int) string { return strings.Join(tailLines(s, n), " | ") }

// tailLines is the last n lines of s.
func tailLines(s string, n int) []string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return lines
}

func (c *clusterTarget) Seeds() []string            { return c.seeds }
func (c *clusterTarget) Sample() (procSample, bool) { return procSample{}, false }

// Close stops the cluster (cluster.sh down --purge) and reaps the brokers
// the harness restarted.
func (c *clusterTarget) Close() error {
	_, err := c.run(context.Background(), "down", "--purge")
	c.mu.Lock()
	waits := make([]chan struct{}, 0, len(c.waited))
	for _, w := range c.waited {
		waits = append(waits, w)
	}
	c.mu.Unlock()
	for _, w := range waits {
		<-w
	}
	os.RemoveAll(c.dir)
	return err
}

func (c *clusterTarget) pidFile(id int32) string {
	return filepath.Join(c.dir, "pids", fmt.Sprintf("broker-%d.pid", id))
}

// pid returns the PID of broker id.
func (c *clusterTarget) pid(id int32) (int, error) {
	b, err := os.ReadFile(c.pidFile(id))
	if err != nil {
		return 0, fmt.Errorf("broker %d: %w", id, err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("broker %d PID file: %w", id, err)
	}
	return pid, nil
}

// brokerCmd is how a broker of the cluster was started: its command line
// and its environment (the tier's S3 credentials among it).
type brokerCmd struct {
	args, env []string
}

// stopBroker sends sig to broker id and waits until it has exited. It
// returns the broker's command line and environment, to restart it with.
func (c *clusterTarget) stopBroker(ctx context.Context, id int32, sig syscall.Signal) (brokerCmd, error) {
	pid, err := c.pid(id)
	if err != nil {
		return brokerCmd{}, err
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return brokerCmd{}, fmt.Errorf("broker %d (pid %d) is not running: %w", id, pid, err)
	}
	rawEnv, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return brokerCmd{}, fmt.Errorf("broker %d (pid %d) environment: %w", id, pid, err)
	}
	bc := brokerCmd{
		args: strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00"),
		env:  strings.Split(strings.TrimRight(string(rawEnv), "\x00"), "\x00"),
	}
	if err := syscall.Kill(pid, sig); err != nil {
		return brokerCmd{}, fmt.Errorf("signal broker %d: %w", id, err)
	}
	c.mu.Lock()
	w := c.waited[id]
	c.mu.Unlock()
	for processRunning(pid) {
		if w != nil {
			select {
			case <-w:
				return bc, nil
			default:
			}
		}
		if !sleepCtx(ctx, 20*time.Millisecond) {
			return brokerCmd{}, fmt.Errorf("broker %d did not exit: %w", id, ctx.Err())
		}
	}
	return bc, nil
}

// restartBroker starts broker id again as bc says, its output appended to
// its log, and records its PID where cluster.sh down finds it.
func (c *clusterTarget) restartBroker(id int32, bc brokerCmd) error {
	logf, err := os.OpenFile(filepath.Join(c.dir, fmt.Sprintf("broker-%d.log", id)), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bc.args[0], bc.args[1:]...)
	cmd.Env = bc.env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("restart broker %d: %w", id, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	c.mu.Lock()
	c.children[id], c.waited[id] = cmd, done
	c.mu.Unlock()
	tmp := c.pidFile(id) + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o644); err != nil {
		return errors.Join(err, cmd.Process.Kill())
	}
	return os.Rename(tmp, c.pidFile(id))
}

// processRunning reports whether pid names a process that is not a zombie.
func processRunning(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}
