package bench

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/twmb/franz-go/pkg/kfake"
)

// target is a cluster the workload runs against.
type target interface {
	// Seeds are the bootstrap addresses.
	Seeds() []string
	// Sample reads the broker process's counters; ok is false when the
	// broker is not a process the harness owns (kfake, HOST:PORT).
	Sample() (s procSample, ok bool)
	// Close stops what the harness started.
	Close() error
}

// startTarget starts or connects to the named target.
func startTarget(ctx context.Context, cfg Config, name string) (target, error) {
	switch name {
	case TargetKfake:
		return startKfake()
	case TargetKfakeProcess:
		return startKfakeProcess(ctx, cfg)
	case TargetStrata:
		return startStrata(ctx, cfg)
	case TargetStrataTLS:
		return startStrataWith(ctx, cfg, cfg.certs.strataArgs(), nil)
	case TargetCluster:
		return startCluster(ctx, cfg)
	case TargetKafka:
		return startKafka(ctx, cfg, 1, nil)
	case TargetKafkaTLS:
		return startKafka(ctx, cfg, 1, cfg.certs)
	case TargetKafkaCluster:
		return startKafka(ctx, cfg, kafkaClusterNodes, nil)
	default:
		return addrTarget{addr: name}, nil
	}
}

// kfakeTarget is franz-go's in-process fake cluster with one broker, the
// same shape as a single Strata node. It keeps records in memory.
type kfakeTarget struct{ c *kfake.Cluster }

func startKfake() (*kfakeTarget, error) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return nil, fmt.Errorf("start kfake: %w", err)
	}
	return &kfakeTarget{c: c}, nil
}

func (k *kfakeTarget) Seeds() []string            { return k.c.ListenAddrs() }
func (k *kfakeTarget) Sample() (procSample, bool) { return procSample{}, false }
func (k *kfakeTarget) Close() error               { k.c.Close(); return nil }

// startKfakeProcess starts kfake in a helper process of its own
// (`strata bench --serve-kfake -`), read as a Strata broker's process is:
// the same cluster as the kfake target, across the same process boundary
// as a broker. On the 2-CPU test machine a bare TCP round trip to another
// process costs about 80 µs, against 15 µs within one (RESULTS.md), and
// the in-process kfake target saves that on every request.
func startKfakeProcess(ctx context.Context, cfg Config) (*strataTarget, error) {
	bin, err := helperBin()
	if err != nil {
		return nil, err
	}
	s := &strataTarget{bin: bin, env: os.Environ(), args: []string{"bench", "--serve-kfake", "-"}}
	if err := s.launch(ctx, cfg); err != nil {
		return nil, fmt.Errorf("kfake process: %w", err)
	}
	return s, nil
}

// ServeKfake runs a one-broker kfake cluster, prints the ready line `strata
// serve` prints to out and serves until ctx ends.
func ServeKfake(ctx context.Context, out io.Writer) error {
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return fmt.Errorf("start kfake: %w", err)
	}
	defer c.Close()
	fmt.Fprintf(out, "ready broker_id=0 listen=%s\n", c.ListenAddrs()[0])
	<-ctx.Done()
	return nil
}

// addrTarget is an existing cluster at a seed address.
type addrTarget struct{ addr string }

func (a addrTarget) Seeds() []string            { return []string{a.addr} }
func (a addrTarget) Sample() (procSample, bool) { return procSample{}, false }
func (a addrTarget) Close() error               { return nil }
