package zk

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"strata/controller"
	"strata/internal/testenv"
)

// lockedBuffer collects log lines from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestControllerLogsBrokerLossSummary pins the controller's one info line
// when a broker dies: before, the controller logged nothing at the
// default level (no session loss, no election, no ISR shrink) while the
// per-partition detail went to debug. It must name the broker and count
// the partitions it elected new leaders for and those whose ISR shrank.
func TestControllerLogsBrokerLossSummary(t *testing.T) {
	z := testenv.StartZooKeeper(t)
	logs := map[int32]*lockedBuffer{}
	var cs []*Controller
	for id := int32(1); id <= 3; id++ {
		logs[id] = &lockedBuffer{}
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		c, err := New(ctx, Options{
			Connect:           z.Addr() + testChroot,
			Broker:            controller.Broker{ID: id, Host: "127.0.0.1", Port: 9090 + id},
			SessionTimeout:    2 * time.Second,
			ConnectionTimeout: 5 * time.Second,
			Logger:            slog.New(slog.NewTextHandler(logs[id], &slog.HandlerOptions{Level: slog.LevelInfo})),
			Transport:         testNet,
		})
		cancel()
		if err != nil {
			t.Fatalf("start controller of broker %d: %v", id, err)
		}
		testNet.join(t, c)
		t.Cleanup(func() { c.Close() })
		cs = append(cs, c)
	}
	act := activeOf(t, cs...)
	topic, err := act.CreateTopic(context.Background(), controller.CreateTopicRequest{Name: "t", NumPartitions: 8, ReplicationFactor: 3})
	if err != nil {
		t.Fatal(err)
	}
	var victim *Controller
	for _, c := range cs {
		if c != act {
			victim = c
			break
		}
	}
	gone := victim.opts.Broker.ID
	led := 0
	for _, p := range topic.Partitions {
		if p.Leader == gone {
			led++
		}
	}
	victim.Close()
	waitUntil(t, 10*time.Second, "the ISRs to drop the closed broker", func() bool {
		for _, p := range act.Metadata().Topics["t"].Partitions {
			for _, r := range append([]int32{p.Leader}, p.ISR...) {
				if r == gone {
					return false
				}
			}
		}
		return true
	})

	want := fmt.Sprintf("broker %d lost its session", gone)
	if led > 0 {
		want += fmt.Sprintf("; elected new leaders for %s", partitions(led))
		if led < 8 {
			want += ", shrank ISR of " + partitions(8-led)
		}
	} else {
		want += "; shrank ISR of 8 partitions"
	}
	log := logs[act.opts.Broker.ID].String()
	var lines []string
	for line := range strings.Lines(log) {
		if strings.Contains(line, "lost its session") {
			lines = append(lines, line)
		}
		if strings.Contains(line, "partition state changed") {
			t.Errorf("per-partition line at info: %s", line)
		}
	}
	if len(lines) != 1 || !strings.Contains(lines[0], "level=INFO") || !strings.Contains(lines[0], `msg="`+want) {
		t.Fatalf("controller log has %d session-loss lines, want one INFO line starting %q; log:\n%s", len(lines), want, log)
	}
	for _, attr := range []string{fmt.Sprintf("leaders_elected=%d ", led), fmt.Sprintf("isr_shrunk=%d ", 8-led), "offline=0 ", fmt.Sprintf("brokers_lost=[%d]", gone)} {
		if !strings.Contains(lines[0], attr) {
			t.Errorf("summary line lacks %s: %s", attr, lines[0])
		}
	}
}

func partitions(n int) string {
	if n == 1 {
		return "1 partition"
	}
	return fmt.Sprintf("%d partitions", n)
}
