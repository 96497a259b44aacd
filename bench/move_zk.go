package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// ZooKeeper from Debian's zookeeper package (deploy/install-deps.sh
// zookeeper), run as deploy/local/cluster.sh and internal/testenv run it.
const (
	zkServerJar = "/usr/share/java/zookeeper.jar"
	zkSLF4JJar  = "/usr/share/java/slf4j-simple.jar"
	zkTickMs    = 200
)

// benchZK is a standalone ZooKeeper server the harness started on a free
// loopback port with a data directory of its own.
type benchZK struct {
	cmd  *exec.Cmd
	done chan struct{}
	dir  string
	addr string
}

// startZooKeeper starts ZooKeeper and waits until it serves requests.
func startZooKeeper(ctx context.Context) (*benchZK, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("java not found: run deploy/install-deps.sh zookeeper")
	}
	if _, err := os.Stat(zkServerJar); err != nil {
		return nil, fmt.Errorf("%s missing: run deploy/install-deps.sh zookeeper", zkServerJar)
	}
	addr, err := freeLoopbackPort()
	if err != nil {
		return nil, err
	}
	_, port, _ := net.SplitHostPort(addr)
	dir, err := os.MkdirTemp("", "strata-bench-zk-")
	if err != nil {
		return nil, err
	}
	cfg := fmt.Sprintf("tickTime=%d\ninitLimit=10\nsyncLimit=5\ndataDir=%s\nclientPort=%s\nclientPortAddress=127.0.0.1\n"+
		"maxClientCnxns=0\nadmin.enableServer=false\n4lw.commands.whitelist=srvr,ruok\n", zkTickMs, filepath.Join(dir, "data"), port)
	if err := os.WriteFile(filepath.Join(dir, "zoo.cfg"), []byte(cfg), 0o644); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	logf, err := os.Create(filepath.Join(dir, "zookeeper.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer logf.Close()
	cp := []string{dir, zkServerJar}
	if _, err := os.Stat(zkSLF4JJar); err == nil {
		cp = append(cp, zkSLF4JJar)
	}
	z := &benchZK{dir: dir, addr: addr, done: make(chan struct{})}
	z.cmd = exec.Command(java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Dzookeeper.jmx.log4j.disable=true",
		"-cp", strings.Join(cp, ":"), "org.apache.zookeeper.server.quorum.QuorumPeerMain", filepath.Join(dir, "zoo.cfg"))
	z.cmd.Dir = dir
	z.cmd.Stdout, z.cmd.Stderr = logf, logf
	z.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := z.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start zookeeper: %w", err)
	}
	go func() { _ = z.cmd.Wait(); close(z.done) }()
	ready := func() bool {
		out, _ := zkFourLetter(addr, "srvr")
		return strings.Contains(out, "Mode:")
	}
	if err := awaitReady(ctx, "zookeeper", filepath.Join(dir, "zookeeper.log"), z.done, ready); err != nil {
		z.close()
		return nil, err
	}
	return z, nil
}

// zkFourLetter sends a four-letter command and returns the answer.
func zkFourLetter(addr, cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(cmd)); err != nil {
		return "", err
	}
	var sb strings.Builder
	buf := make([]byte, 512)
	for {
		n, err := c.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			return sb.String(), nil
		}
	}
}

// close stops ZooKeeper and removes its data.
func (z *benchZK) close() {
	_ = z.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-z.done:
	case <-time.After(stopTimeout):
		_ = z.cmd.Process.Kill()
		<-z.done
	}
	os.RemoveAll(z.dir)
}
