package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/internal/testenv"
)

// TestClusterRebalanceAndDecommission scales a cluster of three brokers
// (ZooKeeper, tiering on MinIO) to four with strata admin cluster
// rebalance --execute --throttle, then empties broker 1 with strata admin
// broker decommission 1 --execute, on an untiered and a tiered topic of
// three partitions with replication factor 2. After the rebalance broker
// 4 holds its share of the replicas, every partition has its full ISR and
// the throttles are gone; after the decommission broker 1 holds no
// replica in metadata nor a partition directory on disk; every record
// reads back after each step.
func TestClusterRebalanceAndDecommission(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := startReassignCluster(t, ctx, "rebalance")
	adm := c.admin()
	str := func(s string) *string { return &s }
	topics := map[string]map[string]*string{
		"plain": nil,
		"tiered": {"remote.storage.enable": str("true"), "segment.bytes": str("65536"),
			"local.retention.bytes": str("131072"), "file.delete.delay.ms": str("0")},
	}
	for name, cfg := range topics {
		if r, err := adm.CreateTopic(ctx, 3, 2, cfg, name); err != nil || r.Err != nil {
			t.Fatalf("create topic %s: %v %v", name, err, r.Err)
		}
	}
	names := slices.Sorted(maps.Keys(topics))
	fullISR := func() (string, bool) {
		var bad []string
		for _, n := range names {
			md, err := clusterMetadata(ctx, c.seeds, n)
			if err != nil {
				return err.Error(), false
			}
			for _, p := range md.Topics[n].Partitions.Sorted() {
				if p.Leader < 0 || len(p.ISR) != 2 || len(p.Replicas) != 2 {
					bad = append(bad, fmt.Sprintf("%s-%d leader %d replicas %v isr %v", n, p.Partition, p.Leader, p.Replicas, p.ISR))
				}
			}
			if len(md.Topics[n].Partitions) != 3 {
				bad = append(bad, n+": not 3 partitions")
			}
		}
		return strings.Join(bad, "; "), len(bad) == 0
	}
	waitState(t, 30*time.Second, "every partition with a full ISR", fullISR)

	// About 300 kB per partition: several segments of the tiered topic
	// are uploaded, some gone from local disk.
	prod := newClient(t, c.seeds[0], kgo.SeedBrokers(c.seeds...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()))
	want := map[string]map[int32][][]byte{}
	for _, n := range names {
		want[n] = map[int32][][]byte{}
		for p := range int32(3) {
			for i := 0; i < 300; i += 50 {
				var recs []*kgo.Record
				for j := range 50 {
					recs = append(recs, &kgo.Record{Topic: n, Partition: p, Value: moveValue(int(p)*1000+i+j, 1000)})
				}
				if err := prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
					t.Fatalf("produce to %s-%d: %v", n, p, err)
				}
				for _, r := range recs {
					want[n][p] = append(want[n][p], r.Value)
				}
			}
		}
	}
	readBack := func(step string) {
		t.Helper()
		for _, n := range names {
			end := map[int32]int64{0: 300, 1: 300, 2: 300}
			recs := consumeAll(t, c.seeds[1], n, end)
			got := map[int32][][]byte{}
			for _, r := range recs {
				if r.Offset != int64(len(got[r.Partition])) {
					t.Fatalf("%s: %s-%d: offset %d after %d records", step, n, r.Partition, r.Offset, len(got[r.Partition]))
				}
				got[r.Partition] = append(got[r.Partition], r.Value)
			}
			for p := range int32(3) {
				if len(got[p]) != len(want[n][p]) {
					t.Fatalf("%s: %s-%d: %d records, want %d", step, n, p, len(got[p]), len(want[n][p]))
				}
				for i := range got[p] {
					if string(got[p][i]) != string(want[n][p][i]) {
						t.Fatalf("%s: %s-%d offset %d: %.12q, want %.12q", step, n, p, i, got[p][i], want[n][p][i])
					}
				}
			}
		}
	}
	replicasOn := func() map[int32]int {
		on := map[int32]int{}
		for _, n := range names {
			md, err := clusterMetadata(ctx, c.seeds, n)
			if err != nil {
				t.Fatalf("metadata: %v", err)
			}
			for _, p := range md.Topics[n].Partitions {
				for _, r := range p.Replicas {
					on[r]++
				}
			}
		}
		return on
	}
	strata := func(timeout time.Duration, args ...string) testenv.RunResult {
		t.Helper()
		res := testenv.RunStrata(t, timeout, append([]string{"admin", "--bootstrap", strings.Join(c.seeds, ",")}, args...)...)
		t.Logf("strata admin %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), res.ExitCode, res.Stdout, res.Stderr)
		return res
	}

	c.add(4)
	waitFor(t, 30*time.Second, "broker 4 registered", func() bool {
		bd, err := adm.ListBrokers(ctx)
		return err == nil && slices.Contains(bd.NodeIDs(), 4)
	})
	before := replicasOn()

	// The dry run prints the plan and moves nothing.
	res := strata(30*time.Second, "cluster", "rebalance")
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "dry run") || !strings.Contains(res.Stdout, "->") {
		t.Fatalf("dry run: exit %d", res.ExitCode)
	}
	if got := replicasOn(); !maps.Equal(got, before) {
		t.Fatalf("the dry run moved replicas: %v, before %v", got, before)
	}

	began := time.Now()
	res = strata(90*time.Second, "cluster", "rebalance", "--execute", "--throttle", "50000000")
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "done:") {
		t.Fatalf("cluster rebalance --execute: exit %d", res.ExitCode)
	}
	t.Logf("rebalance took %v", time.Since(began))
	on := replicasOn()
	if on[4] != 3 || on[1] != 3 || on[2] != 3 || on[3] != 3 {
		t.Fatalf("replicas per broker after the rebalance: %v, want 3 each", on)
	}
	waitState(t, 30*time.Second, "every partition with a full ISR", fullISR)
	if ra, err := c.reassigning(); err != nil || len(ra) > 0 {
		t.Fatalf("reassignments in progress after the rebalance: %v %v", ra, err)
	}
	checkNoThrottles(t, ctx, adm, names)
	readBack("after the rebalance")

	res = strata(90*time.Second, "broker", "decommission", "1", "--execute")
	if res.ExitCode != 0 || !strings.Contains(res.Stdout, "broker 1 holds no replicas") {
		t.Fatalf("broker decommission 1 --execute: exit %d", res.ExitCode)
	}
	if on := replicasOn(); on[1] != 0 || on[2]+on[3]+on[4] != 12 {
		t.Fatalf("replicas per broker after decommissioning broker 1: %v", on)
	}
	waitState(t, 30*time.Second, "every partition with a full ISR", fullISR)
	entries, err := os.ReadDir(c.bs[1].DataDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		for _, n := range names {
			if strings.HasPrefix(e.Name(), n+"-") {
				t.Errorf("broker 1 still has %s", filepath.Join("<data>", e.Name()))
			}
		}
	}
	// Decommissioning it again has nothing to move.
	if res := strata(30*time.Second, "broker", "decommission", "1"); res.ExitCode != 0 || !strings.Contains(res.Stdout, "holds no replicas") {
		t.Fatalf("second decommission: exit %d", res.ExitCode)
	}
	readBack("after the decommission")
}

// checkNoThrottles checks that no broker has a replication throttle rate
// of its own and no topic a throttled replica list.
func checkNoThrottles(t *testing.T, ctx context.Context, adm *kadm.Client, topics []string) {
	t.Helper()
	rcs, err := adm.DescribeBrokerConfigs(ctx, 1, 2, 3, 4)
	if err != nil {
		t.Fatalf("describe broker configs: %v", err)
	}
	for _, rc := range rcs {
		for _, cf := range rc.Configs {
			if strings.Contains(cf.Key, "replication.throttled") && cf.Source == kmsg.ConfigSourceDynamicBrokerConfig {
				t.Errorf("broker %s: %s=%s left set", rc.Name, cf.Key, cf.MaybeValue())
			}
		}
	}
	tcs, err := adm.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		t.Fatalf("describe topic configs: %v", err)
	}
	for _, rc := range tcs {
		for _, cf := range rc.Configs {
			if strings.Contains(cf.Key, "replication.throttled") && cf.Source == kmsg.ConfigSourceDynamicTopicConfig {
				t.Errorf("topic %s: %s=%s left set", rc.Name, cf.Key, cf.MaybeValue())
			}
		}
	}
}
