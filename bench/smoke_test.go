package bench

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"strata/internal/testenv"
)

// checkConsistent asserts what every finished run must satisfy, whatever
// the speed: every record acknowledged is stored and consumed once, the
// measured counts agree with the histograms, and no latency is negative.
func checkConsistent(t *testing.T, res Result, w Workload) {
	t.Helper()
	if res.Error != "" {
		t.Fatalf("%s: %s", res.Target, res.Error)
	}
	// Each committed transaction adds a commit marker per partition it
	// touched to the offsets, not to the records a consumer reads.
	records := res.TopicRecords - res.TxnMarkers
	if w.TxnRecords > 0 {
		checkTxn(t, res, w)
	} else if res.Transactions != 0 || res.TxnMarkers != 0 {
		t.Errorf("%s: %d transactions and %d markers without transactions", res.Target, res.Transactions, res.TxnMarkers)
	}
	if res.Sent != res.Acked || res.Acked != records || res.ProduceErrors != 0 {
		t.Errorf("%s: sent %d acked %d in topics %d errors %d", res.Target, res.Sent, res.Acked, res.TopicRecords, res.ProduceErrors)
	}
	if want := int64(w.Producers*w.Topics) + w.Backlog; res.WarmupRecords != int64(w.Producers*w.Topics) || res.Backlog != w.Backlog || res.TopicRecords < want+res.Produce.Records {
		t.Errorf("%s: %d warm-up, %d backlog, %d measured, %d in topics", res.Target, res.WarmupRecords, res.Backlog, res.Produce.Records, res.TopicRecords)
	}
	p := res.ProduceLatency
	if res.Produce.Records <= 0 || p.Count != res.Produce.Records || p.Negative != 0 || p.P50Ms < 0 || p.P99Ms < p.P50Ms || p.MaxMs < p.P999Ms {
		t.Errorf("%s: %d measured records, produce latency %+v", res.Target, res.Produce.Records, p)
	}
	if w.Records > 0 && res.Produce.Records != w.Records {
		t.Errorf("%s: %d measured records, want %d", res.Target, res.Produce.Records, w.Records)
	}
	if w.Consumers > 0 {
		e := res.EndToEnd
		if res.Consumed != records || res.Duplicates != 0 && w.ConsumeMode == ConsumeAssign {
			t.Errorf("%s: consumed %d (%d duplicates), topics hold %d", res.Target, res.Consumed, res.Duplicates, res.TopicRecords)
		}
		if res.Consume.Records != res.Produce.Records || e.Count != res.Consume.Records || e.Negative != 0 || e.P50Ms < 0 || e.P99Ms < e.P50Ms {
			t.Errorf("%s: measured consumed %d of %d, end-to-end %+v", res.Target, res.Consume.Records, res.Produce.Records, e)
		}
		if len(res.Timeline) == 0 || res.MaxLagRecords < 0 {
			t.Errorf("%s: timeline %d points, max lag %d", res.Target, len(res.Timeline), res.MaxLagRecords)
		}
	}
	if w.Backlog > 0 && res.CatchUpSeconds <= 0 {
		t.Errorf("%s: catch-up %gs", res.Target, res.CatchUpSeconds)
	}
	if w.ConsumeMode == ConsumeGroup && w.Consumers > 0 {
		checkGroup(t, res, w)
	}
	if w.ReadBack && (res.ReadBack == nil || res.ReadBack.Records != res.TopicRecords || res.ReadBack.FirstRecordMs < 0 || res.ReadBack.Seconds <= 0 ||
		len(res.ReadBack.Passes) != readBackPasses || res.ReadBack.Passes[0].Records != res.TopicRecords) {
		t.Errorf("%s: read-back %+v of %d records", res.Target, res.ReadBack, res.TopicRecords)
	}
	if rb := res.RawReadBack; w.RawReadBack && (rb == nil || rb.Records != res.TopicRecords || rb.Batches <= 0 || rb.Requests < int64(rb.Connections) || rb.Bytes <= 0 || rb.Seconds <= 0 || rb.FirstBatchMs < 0) {
		t.Errorf("%s: raw read-back %+v of %d records", res.Target, rb, res.TopicRecords)
	}
	for _, fl := range []*RawReadBack{res.RawReadFloor, res.RawReadFloorPageCache} {
		if rb := res.RawReadBack; w.RawReadBack && res.Target == TargetStrata && rb != nil &&
			(fl == nil || fl.Records != res.TopicRecords || fl.Bytes != rb.Bytes || fl.Batches != rb.Batches || fl.Seconds <= 0) {
			t.Errorf("%s: raw read-back of a floor server %+v, of the broker %+v", res.Target, fl, rb)
		}
	}
	if len(w.Faults) > 0 {
		checkFailover(t, res, w)
	}
	if res.MeasureEndS < res.MeasureStartS {
		t.Errorf("%s: measured window %g..%g", res.Target, res.MeasureStartS, res.MeasureEndS)
	}
}

// checkFailover asserts the fault figures: one per fault, each on a
// broker that led partitions, with a window that is positive and no longer
// than the whole time until its leaders moved and acks resumed allows.
func checkFailover(t *testing.T, res Result, w Workload) {
	t.Helper()
	fo := res.Failover
	if fo == nil || len(fo.Faults) != len(w.Faults) || fo.SessionTimeoutMs <= 0 {
		t.Errorf("%s: failover %+v, want %d faults and the session timeout", res.Target, fo, len(w.Faults))
		return
	}
	for i, f := range fo.Faults {
		if f.Kind != w.Faults[i] || f.Broker < 1 || f.Partitions < 1 || f.WindowMs <= 0 || f.AnyPartitionMs < f.WindowMs ||
			f.LeadersMovedMs <= 0 || f.HealedMs <= 0 || f.AtS <= 0 {
			t.Errorf("%s: fault %+v", res.Target, f)
		}
	}
}

// checkGroup asserts the consumer-group figures: a join per member that
// consumed (the initial ones and one per topic per rebalance) and the
// requested rebalances, none negative.
func checkGroup(t *testing.T, res Result, w Workload) {
	t.Helper()
	g := res.Group
	if g == nil {
		t.Errorf("%s: no group figures", res.Target)
		return
	}
	// Without rebalances a member may join too late to get a record of a
	// short run; with them, every member has consumed before they start.
	want := (w.Consumers + w.Rebalances) * w.Topics
	if n := g.JoinToFirstRecord.N; n < 1 || n > want || w.Rebalances > 0 && n != want || g.JoinToFirstRecord.P50Ms <= 0 || g.JoinToFirstRecord.MaxMs < g.JoinToFirstRecord.P50Ms {
		t.Errorf("%s: join to first record %+v, want %d members", res.Target, g.JoinToFirstRecord, want)
	}
	if len(g.Rebalances) != w.Rebalances || g.Pause.N != w.Rebalances || g.Resume.N != w.Rebalances || g.Balancer != w.Balancer {
		t.Errorf("%s: balancer %s, %d rebalances measured, want %d", res.Target, g.Balancer, len(g.Rebalances), w.Rebalances)
	}
	for _, rb := range g.Rebalances {
		if rb.PauseMs <= 0 || rb.PartitionPauseMs < rb.PauseMs || rb.StableMs < 0 || rb.ResumeMs < rb.StableMs || len(rb.RecordsPerSec) == 0 || rb.AtS <= 0 {
			t.Errorf("%s: rebalance %+v", res.Target, rb)
		}
	}
}

// smokeWorkload shrinks a preset to a second or so. A new preset must be
// added here, so that every preset has a smoke run.
func smokeWorkload(t *testing.T, name string) Workload {
	w, err := Preset(name)
	if err != nil {
		t.Fatal(err)
	}
	w.RecordSize = 256
	w.SampleInterval = Duration(50 * time.Millisecond)
	switch name {
	case "throughput":
		w.Records, w.Warmup = 3000, Duration(100*time.Millisecond)
	case "latency":
		w.Rate, w.Warmup, w.Duration = 1000, Duration(200*time.Millisecond), Duration(800*time.Millisecond)
	case "catch-up":
		w.Backlog, w.Rate, w.Duration = 5000, 1000, Duration(time.Second)
	case "groups":
		w.Partitions, w.Consumers, w.Rebalances, w.Rate = 6, 3, 1, 1000
		w.Warmup, w.Duration = Duration(200*time.Millisecond), Duration(40*time.Second)
	case "replication":
		w.Records, w.Warmup = 3000, Duration(100*time.Millisecond)
	case "replication-latency":
		w.Rate, w.Warmup, w.Duration = 1000, Duration(200*time.Millisecond), Duration(800*time.Millisecond)
	case "failover":
		// A kill waits out zookeeper.session.timeout.ms (18 s): too long
		// for a smoke run. The controlled shutdown exercises the same
		// machinery (pick the leader, stop, measure, restart, heal);
		// TestLongestGap and TestFailoverGoals cover the figures.
		w.Faults, w.Rate = []string{FaultShutdown}, 1000
		w.Warmup, w.Duration = Duration(500*time.Millisecond), Duration(50*time.Second)
	case "tier":
		// Run by TestTierPresetSmall, which checks the tier figures.
		w.Partitions, w.RecordSize, w.Records = 2, 1000, 6000
		w.Tier = &TierWorkload{SegmentBytes: 256 << 10, LatencyPartitions: 3}
	case "tls":
		// Run by TestTLSPreset, with Apache Kafka over TLS.
		w.Records, w.Warmup = 3000, Duration(100*time.Millisecond)
	case "tls-latency":
		w.Rate, w.Warmup, w.Duration = 1000, Duration(200*time.Millisecond), Duration(800*time.Millisecond)
	case "txn", "txn-100", "txn-idempotent":
		// Run by TestTxnPresets, with Apache Kafka.
		// A few transactions each (every one is a commit round trip).
		w.Records, w.Warmup = 3000, Duration(100*time.Millisecond)
		switch name {
		case "txn":
			w.TxnRecords = 1000
		case "txn-100":
			w.Records = 400
		}
	case "txn-latency":
		w.Rate, w.Warmup, w.Duration = 1000, Duration(100*time.Millisecond), Duration(400*time.Millisecond)
	case "move":
		// Run by TestMovePresetSmall, which checks the move figures.
		w.RecordSize = 4 << 10
		w.Move = &MoveWorkload{SizesGB: []float64{0.002, 0.006}, TailBytes: 1 << 20, SegmentBytes: 256 << 10, ColdReadGB: 0.004, StartupRestarts: 1}
	default:
		t.Fatalf("preset %s has no smoke workload: add one to smokeWorkload", name)
	}
	return w
}

// TestPresetsSmoke runs every single-broker preset, shrunk, against a
// Strata broker process started by the harness, and checks that the
// report is complete and consistent.
func TestPresetsSmoke(t *testing.T) { smokePresets(t, false) }

// TestClusterPresetsSmoke does the same for the presets with replicated
// topics, on the three-broker cluster of deploy/local/cluster.sh (and one
// broker beside it where the preset compares them).
func TestClusterPresetsSmoke(t *testing.T) { smokePresets(t, true) }

func smokePresets(t *testing.T, cluster bool) {
	if testing.Short() {
		t.Skip("starts broker processes")
	}
	bin := testenv.BuildStrata(t)
	var reports []*Report
	for _, name := range PresetNames() {
		if p, _ := Preset(name); (p.ReplicationFactor > 1) != cluster {
			continue // the other test's
		} else if p.Tier != nil || p.Move != nil || name == "tls" {
			continue // TestTierPresetSmall's, TestMovePresetSmall's, TestTLSPreset's
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
			defer cancel()
			w := smokeWorkload(t, name)
			// Replicated workloads run on the cluster (and, without
			// faults, on one broker too); the rest on one broker. Apache
			// Kafka, a JVM slow to start, is TestKafkaTarget's.
			targets := []string{TargetStrata}
			if w.TLS {
				targets = []string{TargetStrataTLS}
			}
			if w.ReplicationFactor > 1 {
				targets = slices.DeleteFunc(DefaultTargets(w), func(t string) bool { return t == TargetKafkaCluster })
			}
			rep, err := Run(ctx, Config{Workload: w, Targets: targets, StrataBin: bin})
			if err != nil {
				t.Fatal(err)
			}
			for _, res := range rep.Results {
				checkConsistent(t, res, rep.Workload)
				if res.Target == TargetCluster {
					if res.ReplicationFactor != w.ReplicationFactor {
						t.Errorf("cluster: replication factor %d, want %d", res.ReplicationFactor, w.ReplicationFactor)
					}
					continue // several processes: no broker figures
				}
				if res.ReplicationFactor != 1 {
					t.Errorf("%s: replication factor %d on one broker", res.Target, res.ReplicationFactor)
				}
				if b := res.Broker; b == nil || b.PeakRSSBytes <= 0 || b.CPUSeconds <= 0 || len(b.Samples) == 0 || b.PhaseCPU[phaseRun] <= 0 {
					t.Errorf("broker resources %+v", b)
				}
			}
			reports = append(reports, rep)
		})
	}
	s := &Suite{Machine: ReadMachine(), Reports: reports}
	if err := s.Write(t.TempDir()); err != nil {
		t.Fatal(err)
	}
}

// TestSmokeKfake runs against kfake in process and against a cluster at an
// address (another kfake), with keys, several topics and consumer groups.
func TestSmokeKfake(t *testing.T) {
	peer, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(peer.Close)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	for _, c := range []Config{
		{Workload: Workload{Name: "max", Topics: 2, Records: 2000, RecordSize: 256, Partitions: 3, Producers: 2,
			Compression: "lz4", KeyDistribution: KeysZipf, Consumers: 2, ReadBack: true, RawReadBack: true,
			SampleInterval: Duration(50 * time.Millisecond)},
			Targets: []string{TargetKfake, peer.ListenAddrs()[0]}},
		{Workload: Workload{Name: "group", RecordSize: 128, Partitions: 4, Rate: 2000, Duration: Duration(500 * time.Millisecond),
			KeyDistribution: KeysRoundRobin, Consumers: 2, ConsumeMode: ConsumeGroup, Backlog: 500,
			SampleInterval: Duration(50 * time.Millisecond)},
			Targets: []string{TargetKfake}},
	} {
		rep, err := Run(ctx, c)
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		if len(rep.Results) != len(c.Targets) {
			t.Fatalf("%d results for %d targets", len(rep.Results), len(c.Targets))
		}
		for _, res := range rep.Results {
			checkConsistent(t, res, rep.Workload)
			if res.Broker != nil {
				t.Errorf("%s: broker figures for a target not started by the harness", res.Target)
			}
		}
	}
}

func TestStrataExitsBeforeReady(t *testing.T) {
	_, err := startStrata(context.Background(), Config{StrataBin: "/bin/false"}.withDefaults())
	if err == nil {
		t.Fatal("started a broker that exited")
	}
}

// BenchmarkKfakeProduce shows the library under testing.B: one small
// throughput run against kfake per iteration, reported as custom metrics.
func BenchmarkKfakeProduce(b *testing.B) {
	w, _ := Preset("throughput")
	w.Records, w.Warmup, w.ReadBack = 20_000, 0, false
	for b.Loop() {
		rep, err := Run(b.Context(), Config{Workload: w, Targets: []string{TargetKfake}})
		if err != nil {
			b.Fatal(err)
		}
		r := rep.Results[0]
		b.ReportMetric(r.Produce.MBPerSec, "MB/s")
		b.ReportMetric(r.ProduceLatency.P99Ms, "p99-ms")
		b.ReportMetric(r.EndToEnd.P99Ms, "e2e-p99-ms")
	}
}
