package bench

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"
)

// Target names understood besides HOST:PORT.
const (
	TargetStrata = "strata"
	TargetKfake  = "kfake"
	// TargetKfakeProcess is kfake in a process of its own (not a default
	// target): the in-process kfake without the process boundary's cost.
	TargetKfakeProcess = "kfake-process"
	// TargetCluster is three Strata brokers on ZooKeeper started by
	// deploy/local/cluster.sh (min.insync.replicas=2).
	TargetCluster = "cluster"
)

// DefaultTargets are the targets a workload runs against when none are
// given, Strata's first (the report's ratios are of the first target to
// each other): strata-s3 alone for the tier workload (Apache Kafka tiers
// only through a RemoteStorageManager plugin and ships none for S3); the
// cluster alone for faults (the fault driver stops and restarts the
// brokers of deploy/local/cluster.sh); for a replicated workload the
// cluster, three Kafka nodes and a single Strata broker (whose topics
// have replication factor 1); for a TLS workload Strata and one Kafka node
// over TLS, and Strata in plaintext (what TLS costs it); for a
// transactions workload (transactional producers or read_committed
// consumers) Strata and one Kafka node; otherwise Strata, one Kafka node
// and kfake.
func DefaultTargets(w Workload) []string {
	switch {
	case w.Tier != nil:
		return []string{TargetTier}
	case w.Move != nil:
		return []string{TargetMove}
	case len(w.Faults) > 0:
		return []string{TargetCluster}
	case w.ReplicationFactor > 1:
		return []string{TargetCluster, TargetKafkaCluster, TargetStrata}
	case w.TLS:
		return []string{TargetStrataTLS, TargetKafkaTLS, TargetStrata}
	case w.TxnRecords > 0 || w.ReadCommitted:
		return []string{TargetStrata, TargetKafka}
	}
	return []string{TargetStrata, TargetKafka, TargetKfake}
}

// singleBroker reports whether target is a one-broker target the harness
// starts; its topics get replication factor 1 whatever the workload says.
func singleBroker(target string) bool {
	return target == TargetStrata || target == TargetKfake || target == TargetKafka || target == TargetKfakeProcess || tlsTarget(target)
}

// harnessOwned reports whether the harness starts the target, and throws
// it away whole afterwards (its topics need no deleting).
func harnessOwned(target string) bool {
	switch target {
	case TargetStrata, TargetKfake, TargetKfakeProcess, TargetCluster, TargetKafka, TargetKafkaCluster, TargetTier, TargetMove, TargetStrataTLS, TargetKafkaTLS:
		return true
	}
	return false
}

// Config is one workload and where and how to run it.
type Config struct {
	Workload

	// Targets: TargetStrata, TargetKfake, TargetCluster, TargetKafka,
	// TargetKafkaCluster, TargetTier, TargetStrataTLS, TargetKafkaTLS or
	// HOST:PORT (a seed broker). Empty means DefaultTargets.
	Targets []string
	// StrataBin is the strata binary to start; empty means this executable
	// (set it when the caller is not the strata binary, e.g. a test).
	StrataBin string
	// StrataArgs are extra arguments to `strata serve`.
	StrataArgs []string
	// ClusterScript is deploy/local/cluster.sh for TargetCluster; empty
	// means found above the working directory or the executable.
	ClusterScript string
	// BrokerLog receives the Strata process's stdout and stderr (optional).
	BrokerLog io.Writer
	// PhaseTimeout bounds each phase beyond its planned length (setup,
	// backlog, drain, read-back).
	PhaseTimeout time.Duration

	// Progress receives a live progress line (optional; usually os.Stderr).
	Progress io.Writer
	// Logger logs lifecycle events; nil discards.
	Logger *slog.Logger

	// certs are the run's TLS certificates, made by Run when a target
	// serves TLS.
	certs *tlsCerts
}

// withDefaults fills zero fields.
func (c Config) withDefaults() Config {
	c.Workload = c.Workload.WithDefaults()
	if c.PhaseTimeout == 0 {
		c.PhaseTimeout = 5 * time.Minute
	}
	if len(c.Targets) == 0 {
		c.Targets = DefaultTargets(c.Workload)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Validate reports the first invalid field of a defaulted Config.
func (c Config) Validate() error {
	if err := c.Workload.Validate(); err != nil {
		return err
	}
	for _, t := range c.Targets {
		if !harnessOwned(t) && !strings.Contains(t, ":") {
			return fmt.Errorf("target %q: want strata, kafka, kfake, kfake-process, cluster, kafka-cluster, strata-s3, strata-tls, kafka-tls or HOST:PORT", t)
		}
		if (c.Tier != nil) != (t == TargetTier) {
			return fmt.Errorf("target %q: the tier workload runs on the %s target only, and that target runs only it", t, TargetTier)
		}
		if (c.Move != nil) != (t == TargetMove) {
			return fmt.Errorf("target %q: the move workload runs on the %s target only, and that target runs only it", t, TargetMove)
		}
		if len(c.Faults) > 0 && t != TargetCluster {
			return fmt.Errorf("target %q: faults need the cluster target, whose brokers the harness can stop", t)
		}
	}
	return nil
}
