package e2e

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/testenv"
)

// servedProcess is a `strata serve` started by serveUntilReady.
type servedProcess struct {
	ready string // the ready line, as printed on stdout

	cmd    *exec.Cmd
	mu     sync.Mutex
	stderr bytes.Buffer
	done   chan struct{} // closed once the process has been waited for
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// serveUntilReady runs `strata serve args...` and returns once it printed
// its ready line. Unlike testenv.StartBroker it keeps that line whole and
// the stderr in memory. The process is killed when the test ends.
func serveUntilReady(t *testing.T, args ...string) *servedProcess {
	t.Helper()
	bin := testenv.BuildStrata(t)
	p := &servedProcess{done: make(chan struct{})}
	p.cmd = exec.Command(bin, append([]string{"serve"}, args...)...)
	p.cmd.Stderr = lockedWriter{&p.mu, &p.stderr}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("stdout pipe: %v", err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start strata: %v", err)
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "ready ") {
				lines <- sc.Text()
				break
			}
		}
		io.Copy(io.Discard, out)
		p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.done
	})
	select {
	case p.ready = <-lines:
	case <-p.done:
		t.Fatalf("strata serve %v exited before ready; stderr:\n%s", args, p.Stderr())
	case <-time.After(30 * time.Second):
		t.Fatalf("strata serve %v: no ready line within 30s; stderr:\n%s", args, p.Stderr())
	}
	return p
}

// Stderr is what the process wrote to stderr so far.
func (p *servedProcess) Stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// Stop sends SIGTERM and waits for the process to exit with status 0.
func (p *servedProcess) Stop(t *testing.T) {
	t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("strata did not stop within 30s of SIGTERM")
	}
	if !p.cmd.ProcessState.Success() {
		t.Errorf("strata stopped with %v, want exit status 0; stderr:\n%s", p.cmd.ProcessState, p.Stderr())
	}
}

// readyField returns the value of key=value in a ready line.
func readyField(line, key string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return ""
}

// TestServeReadyLineNamesMetrics checks the ready line: it starts with
// "ready broker_id=N listen=HOST:PORT" (scripts parse that), names the
// advertised address (here the listen address), and the metrics address
// when --metrics is given, where /metrics answers.
func TestServeReadyLineNamesMetrics(t *testing.T) {
	p := serveUntilReady(t, "--broker-id", "3", "--listen", "127.0.0.1:0",
		"--data-dir", t.TempDir(), "--metrics", "127.0.0.1:0")
	if !regexp.MustCompile(`^ready broker_id=3 listen=127\.0\.0\.1:\d+ `).MatchString(p.ready) {
		t.Errorf("ready line %q does not start with \"ready broker_id=3 listen=127.0.0.1:PORT \"", p.ready)
	}
	if adv, listen := readyField(p.ready, "advertise"), readyField(p.ready, "listen"); adv != listen {
		t.Errorf("ready line %q: advertise=%q, want the listen address %q", p.ready, adv, listen)
	}
	addr := readyField(p.ready, "metrics")
	if !regexp.MustCompile(`^127\.0\.0\.1:[1-9]\d*$`).MatchString(addr) {
		t.Fatalf("ready line %q: metrics=%q, want the bound 127.0.0.1:PORT", p.ready, addr)
	}
	if code := httpStatus(t, "http://"+addr+"/metrics"); code != http.StatusOK {
		t.Errorf("GET /metrics on the ready line's address: %d, want 200", code)
	}
	p.Stop(t)

	// Without --metrics the ready line names none.
	p = serveUntilReady(t, "--listen", "127.0.0.1:0", "--data-dir", t.TempDir())
	if strings.Contains(p.ready, "metrics=") {
		t.Errorf("ready line without --metrics: %q names a metrics address", p.ready)
	}
}

// TestMetricsPortServesPprofOnlyWithFlag checks that the metrics port
// serves /metrics and /healthz, and Go's profiler only with --pprof.
func TestMetricsPortServesPprofOnlyWithFlag(t *testing.T) {
	for _, c := range []struct {
		name  string
		args  []string
		pprof int // want for /debug/pprof/ paths
	}{
		{"default", nil, http.StatusNotFound},
		{"pprof", []string{"--pprof"}, http.StatusOK},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := testenv.StartBroker(t, testenv.BrokerOptions{Metrics: "127.0.0.1:0", Args: c.args})
			addr := b.MetricsAddr()
			if addr == "" {
				t.Fatalf("broker did not log its metrics address")
			}
			for path, want := range map[string]int{
				"/metrics":             http.StatusOK,
				"/healthz":             http.StatusOK,
				"/debug/pprof/":        c.pprof,
				"/debug/pprof/cmdline": c.pprof,
				"/debug/pprof/heap":    c.pprof,
			} {
				if got := httpStatus(t, "http://"+addr+path); got != want {
					t.Errorf("GET %s: %d, want %d", path, got, want)
				}
			}
		})
	}
}

// TestWildcardListenAdvertisesReachableHost starts a broker on 0.0.0.0
// without --advertise: Metadata must name a host a client can use (not
// 0.0.0.0, :: or empty), the one the ready line's advertise= names, and
// a client that knows only that address produces and consumes through it.
func TestWildcardListenAdvertisesReachableHost(t *testing.T) {
	p := serveUntilReady(t, "--listen", "0.0.0.0:0", "--data-dir", t.TempDir())
	_, port, err := net.SplitHostPort(readyField(p.ready, "listen"))
	if err != nil {
		t.Fatalf("ready line %q: listen: %v", p.ready, err)
	}
	adv := readyField(p.ready, "advertise")
	host, advPort, err := net.SplitHostPort(adv)
	if err != nil {
		t.Fatalf("ready line %q: advertise=%q: %v", p.ready, adv, err)
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		t.Fatalf("ready line %q advertises %q, a wildcard address", p.ready, adv)
	}
	if advPort != port {
		t.Errorf("ready line %q: advertised port %s, want the bound port %s", p.ready, advPort, port)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, net.JoinHostPort("127.0.0.1", port)))
	md, err := adm.Metadata(ctx)
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	if len(md.Brokers) != 1 {
		t.Fatalf("metadata brokers: %+v, want one", md.Brokers)
	}
	b := md.Brokers[0]
	if got := net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))); got != adv {
		t.Errorf("metadata advertises %s, the ready line %s", got, adv)
	}
	t.Logf("advertised %s", adv)

	// Only the advertised address is known to this client.
	createTopic(t, adv, "advertised", 1, nil)
	cl := newClient(t, adv, kgo.DefaultProduceTopic("advertised"))
	r := &kgo.Record{Value: []byte("through the advertised address")}
	if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		t.Fatalf("produce through %s: %v", adv, err)
	}
	got := consumeAll(t, adv, "advertised", map[int32]int64{0: r.Offset + 1})
	compareRecords(t, []*kgo.Record{r}, got)
	p.Stop(t)
}

// TestStartupLogIsShort checks what a broker logs at the default level
// up to its ready line: a handful of lines an operator reads (version,
// tier, listener, controller, partitions, ready), not one per partition.
// The per-partition lines are still there at --log-level debug.
func TestStartupLogIsShort(t *testing.T) {
	data, tierDir := t.TempDir(), t.TempDir()
	args := []string{"--listen", "127.0.0.1:0", "--data-dir", data, "--tier", "file://" + tierDir}
	p := serveUntilReady(t, args...)
	addr := readyField(p.ready, "listen")
	createTopic(t, addr, "startup-a", 6, nil)
	createTopic(t, addr, "startup-b", 3, nil)
	p.Stop(t)
	checkStartupLog(t, "first start", p.Stderr(), 0)

	p = serveUntilReady(t, args...)
	p.Stop(t)
	checkStartupLog(t, "restart", p.Stderr(), 9)

	p = serveUntilReady(t, append(args, "--log-level", "debug")...)
	p.Stop(t)
	if n := strings.Count(p.Stderr(), `level=DEBUG msg="opened partition log"`); n != 9 {
		t.Errorf("at --log-level debug: %d \"opened partition log\" lines at DEBUG, want 9:\n%s", n, p.Stderr())
	}
}

// checkStartupLog checks the INFO lines of stderr up to the ready line.
func checkStartupLog(t *testing.T, what, stderr string, partitions int) {
	t.Helper()
	var info []string
	ready := false
	for line := range strings.Lines(stderr) {
		if strings.Contains(line, "level=INFO ") {
			info = append(info, strings.TrimSpace(line))
		}
		if strings.Contains(line, "msg=ready ") {
			ready = true
			break
		}
	}
	log := strings.Join(info, "\n")
	t.Logf("%s: %d INFO lines up to ready:\n%s", what, len(info), log)
	if !ready {
		t.Fatalf("%s: no ready line on stderr:\n%s", what, stderr)
	}
	if len(info) > 8 {
		t.Errorf("%s: %d INFO lines up to ready, want at most 8", what, len(info))
	}
	for _, want := range []string{
		"msg=strata version=",
		"msg=listening listen=",
		"msg=controller mode=embedded",
		`msg="tiered storage" store=file://`,
		`msg="opened partitions" partitions=` + strconv.Itoa(partitions) + " ",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("%s: no INFO line with %q", what, want)
		}
	}
}

func httpStatus(t *testing.T, url string) int {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}
