package bench

import (
	"context"
	"fmt"

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
	case TargetStrata:
		return startStrata(ctx, cfg)
	case TargetCluster:
		return startCluster(ctx, cfg)
	case TargetKafka:
		return startKafka(ctx, cfg, 1)
	case TargetKafkaCluster:
		return startKafka(ctx, cfg, kafkaClusterNodes)
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

// addrTarget is an existing cluster at a seed address.
type addrTarget struct{ addr string }

func (a addrTarget) Seeds() []string            { return []string{a.addr} }
func (a addrTarget) Sample() (procSample, bool) { return procSample{}, false }
func (a addrTarget) Close() error               { return nil }
