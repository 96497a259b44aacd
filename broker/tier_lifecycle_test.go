package broker

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"

	"strata/broker/config"
	"strata/index"
	"strata/tier"
)

// lifecycleRecorder is a MemStore with lifecycle rules that records the
// policies it is asked to sync.
type lifecycleRecorder struct {
	*tier.MemStore
	mu       sync.Mutex
	policies []tier.LifecyclePolicy
}

func (l *lifecycleRecorder) SyncLifecycle(ctx context.Context, p tier.LifecyclePolicy) (tier.LifecycleResult, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.policies = append(l.policies, p)
	return tier.LifecycleResult{Changed: true, Rules: len(p.Topics)}, nil
}

func (l *lifecycleRecorder) last() (tier.LifecyclePolicy, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.policies) == 0 {
		return tier.LifecyclePolicy{}, 0
	}
	return l.policies[len(l.policies)-1], len(l.policies)
}

// syncBuffer is a log destination safe for the broker's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startTierServer(t *testing.T, store tier.ObjectStore, logs *syncBuffer, sets map[string]string) *testServer {
	t.Helper()
	dir := t.TempDir()
	props := map[string]string{
		"broker.id": "0", "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": dir,
		"remote.log.storage.system.enable":    "true",
		"remote.log.manager.task.interval.ms": "50",
	}
	for k, v := range sets {
		props[k] = v
	}
	cfg, err := config.Load(props)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Options{Config: cfg, Listen: cfg.ListenAddr(), TierStore: store, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return &testServer{Server: srv, dir: dir}
}

// soleMetric returns the one sample of a metric of srv's registry.
func soleMetric(t *testing.T, srv *Server, name string) *dto.Metric {
	t.Helper()
	fams, err := srv.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			return f.GetMetric()[0]
		}
	}
	t.Fatalf("no metric %s", name)
	return nil
}

// strataMetric reads a gauge or a counter of srv's registry.
func strataMetric(t *testing.T, srv *Server, name string) float64 {
	t.Helper()
	m := soleMetric(t, srv, name)
	if g := m.GetGauge(); g != nil {
		return g.GetValue()
	}
	return m.GetCounter().GetValue()
}

// TestTierLifecyclePolicy checks the rules the embedded broker (its own
// controller) asks for: tiered topics only (compacted topics cannot be
// tiered), no expiration for unlimited retention, updates on retention changes and
// deletion, and no rewrite while nothing changes. It also deletes an
// orphan planted in a partition it leads.
func TestTierLifecyclePolicy(t *testing.T) {
	store := &lifecycleRecorder{MemStore: tier.NewMemStore()}
	logs := &syncBuffer{}
	ts := startTierServer(t, store, logs, map[string]string{
		"remote.log.storage.lifecycle.rules.enable": "true", "remote.log.storage.lifecycle.margin.ms": "5",
		"remote.log.reconciliation.interval.ms": "50", "remote.log.reconciliation.grace.ms": "0",
	})
	ctx := testCtx(t)
	adm := ts.admin(t)
	str := func(s string) *string { return &s }
	for name, cfg := range map[string]map[string]*string{
		"days":    {"remote.storage.enable": str("true"), "retention.ms": str("86400000")},
		"forever": {"remote.storage.enable": str("true"), "retention.ms": str("-1")},
		"local":   {"retention.ms": str("1000")},
	} {
		if _, err := adm.CreateTopic(ctx, 1, 1, cfg, name); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	ids := map[string]index.UUID{}
	for name, tt := range ts.ctrl.Metadata().Topics {
		ids[name] = index.UUID(tt.ID)
	}
	want := func(retention map[string]int64) func() bool {
		return func() bool {
			p, _ := store.last()
			if p.MarginMs != 5 || p.AbortMultipartDays != 1 || len(p.Topics) != len(retention) {
				return false
			}
			for _, tl := range p.Topics {
				found := false
				for name, r := range retention {
					if ids[name] == tl.TopicID && r == tl.RetentionMs {
						found = true
					}
				}
				if !found {
					return false
				}
			}
			return true
		}
	}
	waitFor(t, "the policy of the two tiered topics", 20*time.Second, want(map[string]int64{"days": 86400000, "forever": -1}))

	// Passes go on (each reconciles, so lists), no rewrite.
	_, syncs := store.last()
	lists := store.Calls(tier.OpList)
	waitFor(t, "more passes", 20*time.Second, func() bool { return store.Calls(tier.OpList) >= lists+5 })
	if _, n := store.last(); n != syncs {
		t.Fatalf("%d syncs while nothing changed: %+v", n-syncs, store.policies)
	}

	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: str("172800000")}}, "days"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the policy after the retention change", 20*time.Second, want(map[string]int64{"days": 172800000, "forever": -1}))
	if _, err := adm.DeleteTopics(ctx, "forever"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the policy after the deletion", 20*time.Second, want(map[string]int64{"days": 172800000}))

	// An orphan in the partition the broker leads: objects of a segment
	// without a manifest. The grace is 10 task intervals.
	tp := index.TopicIDPartition{TopicID: ids["days"], Partition: 0}
	stem := fmt.Sprintf("%s%020d-%s", tier.PartitionPrefix(tp), 77, index.NewUUID())
	for _, suffix := range []string{".log", ".index"} {
		if err := store.Put(ctx, stem+suffix, strings.NewReader("xy"), 2); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Put(ctx, tier.PartitionPrefix(tp)+"keep-me", strings.NewReader("xy"), 2); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the orphan's deletion", 20*time.Second, func() bool {
		return !slices.ContainsFunc(store.Keys(), func(k string) bool { return strings.HasPrefix(k, stem) })
	})
	if !slices.Contains(store.Keys(), tier.PartitionPrefix(tp)+"keep-me") {
		t.Fatal("a key outside the layout was deleted")
	}
	waitFor(t, "the orphan metric", 10*time.Second, func() bool {
		return strataMetric(t, ts.Server, "strata_remote_log_orphan_objects_deleted_total") >= 2
	})
	if n := strataMetric(t, ts.Server, "strata_remote_log_lifecycle_sync_errors_total"); n != 0 {
		t.Fatalf("lifecycle sync errors %v", n)
	}
}

// TestTierLifecycleUnsupportedStore checks that a store without lifecycle
// rules says so once, however many passes run.
func TestTierLifecycleUnsupportedStore(t *testing.T) {
	store := tier.NewMemStore()
	logs := &syncBuffer{}
	startTierServer(t, store, logs, map[string]string{
		"remote.log.storage.lifecycle.rules.enable": "true", "remote.log.reconciliation.interval.ms": "50",
	})
	const line = "remote.log.storage.lifecycle.rules.enable has no effect"
	waitFor(t, "the log line", 20*time.Second, func() bool { return strings.Contains(logs.String(), line) })
	lists := store.Calls(tier.OpList)
	waitFor(t, "more passes", 20*time.Second, func() bool { return store.Calls(tier.OpList) >= lists+5 })
	if n := strings.Count(logs.String(), line); n != 1 {
		t.Fatalf("logged %d times", n)
	}
}
