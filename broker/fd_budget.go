package broker

// File descriptors: the broker's budget, from RLIMIT_NOFILE (what
// `ulimit -n` sets; Go raises the soft limit to the hard one at start).
//
// Connections and partitions share the descriptors. Exhausting them
// (idle connections, or one CreateTopics with many partitions under a low
// ulimit -n) used to take the log directory offline until a restart: a
// segment or checkpoint that could not be opened looked like a failed
// disk. Now it is not a disk failure (plog.ErrNoDescriptors: the request
// is answered with a retriable error, the log stays up, and partitions
// that could not be opened are opened again a second later), and the
// broker keeps within a budget so that it does not get there:
//
//	available       = RLIMIT_NOFILE - fdReserve (128: ZooKeeper, the
//	                  index and tier cache, listeners, checkpoints'
//	                  temporary files, the runtime)
//	max.connections = available / 2, when no layer sets it (Kafka's
//	                  default is unbounded); at least 16
//	partitions      = (available - min(max.connections, available/2))
//	                  / fdsPerPartition (3: a segment's .log, .index and
//	                  .timeindex)
//
// CreateTopics and CreatePartitions that would make this broker host more
// partitions than that are refused with INVALID_PARTITIONS and a message
// naming the limit (in a cluster, a broker counts its share of the new
// replicas: replicas divided by live brokers, rounded up). With
// RLIMIT_NOFILE at 256 the broker takes 64 connections and 21 partitions;
// at 1048576 (systemd's usual) 524,224 connections and 174,741
// partitions. Each further segment
// of a partition takes three more descriptors, which the budget does not
// count: the reserve and ulimit -n must cover long local retention.
//
// The accept loop backs off when accept fails for lack of descriptors
// (network/accept_errors.go), so that connections already open are
// served while it waits.

import (
	"fmt"
	"math"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"

	"strata/broker/plog"
	"strata/controller"
)

const (
	fdReserve       = 128
	fdsPerPartition = 3
	minDefaultConns = 16
)

// nofileLimit is RLIMIT_NOFILE (soft) at start; 0 if unknown or
// unlimited.
var nofileLimit = func() int64 {
	var r syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &r); err != nil || r.Cur == math.MaxUint64 || r.Cur > math.MaxInt64 {
		return 0
	}
	return int64(r.Cur)
}()

// defaultMaxConnections is max.connections when no layer sets it.
func defaultMaxConnections() int64 {
	if nofileLimit <= 0 {
		return math.MaxInt32
	}
	return max(minDefaultConns, (nofileLimit-fdReserve)/2)
}

// partitionBudget is how many partitions the broker may host with
// max.connections at maxConns; < 0 when unbounded.
func partitionBudget(maxConns int64) int64 {
	if nofileLimit <= 0 {
		return -1
	}
	avail := max(nofileLimit-fdReserve, 0)
	return max(avail-min(max(maxConns, 0), avail/2), 0) / fdsPerPartition
}

// maxConnections is the max.connections in force: the configured value,
// or the default from the descriptor budget.
func (s *Server) maxConnections(md *controller.Metadata) int64 {
	r := s.resolver(md)
	if _, _, ok := r.Lookup("max.connections"); ok {
		return r.Int("max.connections")
	}
	return defaultMaxConnections()
}

// checkDescriptorBudget refuses adding newReplicas partition replicas to
// the cluster (CreateTopics, CreatePartitions) when this broker's share
// would take it past its partition budget; the error wraps
// INVALID_PARTITIONS.
func (s *Server) checkDescriptorBudget(md *controller.Metadata, newReplicas int64) error {
	budget := partitionBudget(s.maxConnections(md))
	if budget < 0 || newReplicas <= 0 {
		return nil
	}
	brokers := int64(1)
	if md != nil && len(md.Brokers) > 1 {
		brokers = int64(len(md.Brokers))
	}
	share := (newReplicas + brokers - 1) / brokers
	hosted := int64(len(s.allPartitions()))
	if hosted+share <= budget {
		return nil
	}
	return fmt.Errorf("%w: %d more partition replicas would make broker %d host %d partitions, past the %d its file descriptors allow "+
		"(RLIMIT_NOFILE %d, less %d reserved and the connections' share, %d per partition): raise ulimit -n",
		kerr.InvalidPartitions, share, s.cfg.ID, hosted+share, budget, nofileLimit, fdReserve, fdsPerPartition)
}

// noDescriptorsMessage is the answer for a topic whose partitions could
// not all be opened for lack of descriptors.
func noDescriptorsMessage(opened, want int) string {
	return fmt.Sprintf("the topic exists, but %d of its %d partitions on this broker could not be opened: "+
		"%v; they open when descriptors are free again", want-opened, want, plog.ErrNoDescriptors)
}
