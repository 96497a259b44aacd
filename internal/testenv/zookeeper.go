package testenv

import (
	"fmt"
	"net"
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

// zkJar is the server jar of Debian's zookeeper package. Its manifest's
// Class-Path names the jars it needs (netty, jute, slf4j-api, ...).
const zkJar = "/usr/share/java/zookeeper.jar"

// zkLogJar is an slf4j binding from libslf4j-java (a dependency of the
// zookeeper package) that logs to stderr, which we keep in a file.
const zkLogJar = "/usr/share/java/slf4j-simple.jar"

// ZooKeeper is a standalone ZooKeeper server started for a test, on a free
// loopback port with its data under t.TempDir(). Its methods are meant for
// the test goroutine; Addr and Logs may be called from any goroutine.
type ZooKeeper struct {
	t       testing.TB
	java    string
	dir     string // holds zoo.cfg and the data directory
	logPath string
	addr    string

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	starts int
}

// ZooKeeperTickTime is the server's tickTime. Sessions may time out between
// 2 and 2000 ticks, so tests can use session timeouts down to 400ms.
const ZooKeeperTickTime = 200 * time.Millisecond

// StartZooKeeper starts a standalone ZooKeeper server (Debian's zookeeper
// package on the machine's java) and waits until it serves requests. The
// server is killed when the test ends; its log is printed if the test
// failed. A missing package fails the test with the command that installs
// it.
func StartZooKeeper(t testing.TB) *ZooKeeper {
	t.Helper()
	java, err := exec.LookPath("java")
	if err != nil {
		t.Fatalf("java not found on PATH: run deploy/install-deps.sh zookeeper (`make test` does)")
	}
	if _, err := os.Stat(zkJar); err != nil {
		t.Fatalf("ZooKeeper server jar %s missing: run deploy/install-deps.sh zookeeper (`make test` does)", zkJar)
	}
	dir := t.TempDir()
	port, err := freePort()
	if err != nil {
		t.Fatalf("zookeeper: %v", err)
	}
	z := &ZooKeeper{
		t:       t,
		java:    java,
		dir:     dir,
		logPath: filepath.Join(dir, "zookeeper.log"),
		addr:    net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
	}
	cfg := fmt.Sprintf(`tickTime=%d
initLimit=10
syncLimit=5
dataDir=%s
clientPort=%d
clientPortAddress=127.0.0.1
maxClientCnxns=0
minSessionTimeout=%d
maxSessionTimeout=%d
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr,stat
`, ZooKeeperTickTime.Milliseconds(), filepath.Join(dir, "data"), port,
		2*ZooKeeperTickTime.Milliseconds(), 300*ZooKeeperTickTime.Milliseconds())
	if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
		t.Fatalf("write zoo.cfg: %v", err)
	}
	t.Cleanup(func() {
		z.kill()
		if t.Failed() {
			t.Logf("zookeeper %s log, last lines:\n%s", z.addr, tailLines(z.Logs(), 40))
		}
	})
	z.Start()
	return z
}

// Addr is the client address, 127.0.0.1:PORT; it stays the same across
// restarts.
func (z *ZooKeeper) Addr() string { return z.addr }

// Logs returns the server's output so far, across restarts.
func (z *ZooKeeper) Logs() string {
	b, _ := os.ReadFile(z.logPath)
	return string(b)
}

// Start starts the server (again) on the same port and data directory and
// waits until it serves requests. It fails the test if the
// server runs already.
func (z *ZooKeeper) Start() {
	z.t.Helper()
	if z.running() {
		z.t.Fatalf("zookeeper %s: Start while running", z.addr)
	}
	logf, err := os.OpenFile(z.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		z.t.Fatalf("open zookeeper log: %v", err)
	}
	defer logf.Close()
	cp := []string{z.dir, zkJar}
	if _, err := os.Stat(zkLogJar); err == nil {
		cp = append(cp, zkLogJar)
	}
	args := []string{
		"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xshare:auto",
		"-Dzookeeper.jmx.log4j.disable=true",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=info",
		"-Dorg.slf4j.simpleLogger.showDateTime=true",
		"-cp", strings.Join(cp, ":"),
		"org.apache.zookeeper.server.quorum.QuorumPeerMain",
		filepath.Join(z.dir, "zoo.cfg"),
	}
	z.starts++
	fmt.Fprintf(logf, "=== testenv: start %d: java %s\n", z.starts, strings.Join(args, " "))
	cmd := exec.Command(z.java, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = z.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		z.t.Fatalf("start zookeeper: %v", err)
	}
	exited := make(chan struct{})
	z.mu.Lock()
	z.cmd, z.exited = cmd, exited
	z.mu.Unlock()
	go func() {
		cmd.Wait()
		close(exited)
	}()

	deadline := time.Now().Add(60 * time.Second)
	for {
		// ruok answers imok before the server takes sessions; srvr shows
		// its mode only once it serves requests.
		if out, _ := z.fourLetter("srvr"); strings.Contains(out, "Mode:") {
			return
		}
		select {
		case <-exited:
			z.t.Fatalf("zookeeper exited before ready (%v); log tail:\n%s", cmd.ProcessState, tailLines(z.Logs(), 30))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			z.kill()
			z.t.Fatalf("zookeeper %s not ready within 60s; log tail:\n%s", z.addr, tailLines(z.Logs(), 30))
		}
	}
}

// Stop sends SIGTERM and waits for the server to exit (killing it after
// 30s). Sessions survive a Stop/Start as long as clients reconnect within
// their session timeout.
func (z *ZooKeeper) Stop() {
	z.t.Helper()
	if !z.signalAndWait(syscall.SIGTERM, 30*time.Second) {
		z.t.Errorf("zookeeper %s did not stop within 30s of SIGTERM; killing it", z.addr)
		z.kill()
	}
}

// Kill9 sends SIGKILL and waits for the server to be gone.
func (z *ZooKeeper) Kill9() {
	z.t.Helper()
	if !z.signalAndWait(syscall.SIGKILL, 30*time.Second) {
		z.t.Errorf("zookeeper %s did not exit within 30s of SIGKILL", z.addr)
	}
}

// fourLetter sends a four-letter command and returns the answer.
func (z *ZooKeeper) fourLetter(cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", z.addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(cmd)); err != nil {
		return "", err
	}
	var sb strings.Builder
	buf := make([]byte, 512)
	for {
		n, err := c.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return sb.String(), nil
}

func (z *ZooKeeper) running() bool {
	z.mu.Lock()
	defer z.mu.Unlock()
	return processRunning(z.exited)
}

// signalAndWait signals the server and reports whether it exited within d.
func (z *ZooKeeper) signalAndWait(sig syscall.Signal, d time.Duration) bool {
	z.mu.Lock()
	cmd, exited := z.cmd, z.exited
	z.mu.Unlock()
	done, err := signalProcess(cmd, exited, sig)
	if done {
		return true
	}
	if err != nil {
		z.t.Errorf("signal zookeeper (pid %d): %v", cmd.Process.Pid, err)
	}
	return waitExit(exited, d)
}

func (z *ZooKeeper) kill() {
	z.mu.Lock()
	cmd, exited := z.cmd, z.exited
	z.mu.Unlock()
	killProcess(cmd, exited)
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
