package bench

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"strata/internal/testenv"
)

// fakeServeEnv makes the test binary act as `strata serve`: a kfake
// cluster that prints Strata's ready line and stops on SIGTERM. It tests
// the process target without depending on the real broker.
const fakeServeEnv = "STRATA_BENCH_FAKE_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(fakeServeEnv) == "1" {
		os.Exit(fakeServe())
	}
	// The test binary stands in for `strata bench` when the harness
	// starts a helper process (StrataBin unset: this executable).
	if len(os.Args) > 1 && os.Args[1] == "bench" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		handled, err := ChildMain(ctx, os.Args[2:], os.Stdout)
		stop()
		if !handled || err != nil {
			fmt.Fprintln(os.Stderr, "bench helper:", handled, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	testenv.Main(m)
}

func fakeServe() int {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		fmt.Fprintln(os.Stderr, "fake serve:", err)
		return 1
	}
	// Burn 50 ms of CPU, so that the harness reads CPU seconds above zero
	// even from a short run on a busy machine (utime and stime count in
	// 10 ms ticks).
	for t0 := cpuTime(); cpuTime()-t0 < 50*time.Millisecond; {
	}
	fmt.Println("level=INFO msg=starting args", os.Args[1:])
	fmt.Printf("level=INFO msg=\"ready broker_id=0 listen=%s\"\n", c.ListenAddrs()[0])
	<-sig
	c.Close()
	return 0
}

// cpuTime is this process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestStrataProcessTarget(t *testing.T) {
	t.Setenv(fakeServeEnv, "1")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := Run(ctx, Config{
		Workload: Workload{Name: "proc", Records: 1000, RecordSize: 256, Partitions: 2, Consumers: 1,
			SampleInterval: Duration(20 * time.Millisecond)},
		Targets: []string{TargetStrata}, StrataBin: os.Args[0],
	})
	if err != nil {
		t.Fatal(err)
	}
	res := rep.Results[0]
	checkConsistent(t, res, rep.Workload)
	b := res.Broker
	if b == nil || b.PeakRSSBytes <= 0 || b.CPUSeconds <= 0 || len(b.Samples) == 0 {
		t.Fatalf("broker resources %+v", b)
	}
}

// TestKfakeProcessTarget runs kfake in a helper process of its own (this
// test binary as `strata bench --serve-kfake -`), read as a broker process.
func TestKfakeProcessTarget(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	rep, err := Run(ctx, Config{
		Workload: Workload{Name: "proc", Records: 1000, RecordSize: 256, Partitions: 2, Consumers: 1, ReplicationFactor: 3,
			SampleInterval: Duration(20 * time.Millisecond)},
		Targets: []string{TargetKfakeProcess},
	})
	if err != nil {
		t.Fatal(err)
	}
	res := rep.Results[0]
	checkConsistent(t, res, rep.Workload)
	if b := res.Broker; b == nil || b.PeakRSSBytes <= 0 || len(b.Samples) == 0 || res.ReplicationFactor != 1 {
		t.Fatalf("broker resources %+v, replication factor %d", b, res.ReplicationFactor)
	}
}
