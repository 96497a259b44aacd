package e2e

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// kafkajsDir returns a node project with kafkajs installed, installing it
// from the npm registry the first time. The test fails (not skips) when it
// cannot: the issue asks for a kafkajs client in `make test`.
func kafkajsDir(t *testing.T) string {
	t.Helper()
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	dir := filepath.Join(cache, "strata-test-kafkajs")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "kafkajs", "package.json")); err == nil {
		return dir
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "package.json")); err != nil {
		if err := os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"name":"strata-test-kafkajs","private":true}`+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "npm", "install", "--no-audit", "--no-fund", "kafkajs@2")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm install kafkajs@2 (node and npm are required): %v\n%s", err, out)
	}
	return dir
}

// TestGroupKafkajsWithFranzGo: a kafkajs consumer and franz-go consumers
// share one group; together they consume every record, the kafkajs
// member gets a share, and when it leaves the others take over.
func TestGroupKafkajsWithFranzGo(t *testing.T) {
	dir := kafkajsDir(t)
	script, err := filepath.Abs("testdata/kafkajs/consume.js")
	if err != nil {
		t.Fatal(err)
	}
	b := startGroupBroker(t)
	addr := b.Addr()
	const topic, group, n = "mixed", "mixed-group", 1200
	createTopic(t, addr, topic, 6, nil)
	led := newProcessLedger()
	rr := kgo.Balancers(kgo.RoundRobinBalancer())
	startMember(t, addr, "go-1", group, topic, led, rr)

	cmd := exec.Command("node", script, addr, group, topic)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(dir, "node_modules"))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	var mu sync.Mutex
	joined, jsCount := 0, 0
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "JOINED "):
				mu.Lock()
				joined++
				mu.Unlock()
			case strings.HasPrefix(line, "V "):
				v := strings.TrimPrefix(line, "V ")
				led.mu.Lock()
				led.processed[v] = append(led.processed[v], "kafkajs")
				led.mu.Unlock()
				mu.Lock()
				jsCount++
				mu.Unlock()
			}
		}
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		if t.Failed() {
			t.Logf("kafkajs stderr:\n%s", stderr.String())
		}
	})
	waitFor(t, 60*time.Second, "the kafkajs member to join", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return joined > 0
	})
	startMember(t, addr, "go-2", group, topic, led, rr)
	if err := <-produceValues(t, addr, topic, 0, n); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "every record", func() bool { return led.count() >= n })

	adm := kadm.NewClient(newClient(t, addr))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	dg, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	clients := map[string]int{}
	for _, m := range dg[group].Members {
		clients[m.ClientID]++
	}
	if dg[group].Protocol != "roundrobin" || clients["kafkajs-member"] != 1 || clients["go-1"] != 1 || clients["go-2"] != 1 {
		t.Fatalf("group %s protocol %q members by client: %v", dg[group].State, dg[group].Protocol, clients)
	}
	mu.Lock()
	if jsCount == 0 {
		t.Errorf("the kafkajs member processed no record")
	}
	mu.Unlock()

	// kafkajs leaves; the franz-go members consume what follows.
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("kafkajs exited: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("kafkajs did not exit on SIGTERM")
	}
	if err := <-produceValues(t, addr, topic, n, n+300); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 60*time.Second, "records after kafkajs left", func() bool { return led.count() >= n+300 })
	led.mu.Lock()
	defer led.mu.Unlock()
	for v, by := range led.processed {
		if len(by) > 1 {
			t.Errorf("record %s processed by %v", v, by)
		}
	}
}
