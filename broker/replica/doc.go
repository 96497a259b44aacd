// Package replica is replication, as Kafka's ReplicaManager, Partition and
// ReplicaFetcherThread are: the partitions this broker hosts (Manager),
// each partition's replication state (Partition: high watermark, leader
// epoch, min.insync.replicas, the fetches and produces waiting on it), the
// leader role (followers' log end offsets, ISR shrink and expand through
// the controller's AlterPartition, the high watermark over the ISR), the
// follower role (one fetcher per leader broker: truncation by
// OffsetForLeaderEpoch, replicated appends, the leader's log start), the
// waiting of acks=-1 produces for replication, the high-watermark
// checkpoint (replication-offset-checkpoint), replication throttles and
// the choice of a preferred read replica (KIP-392).
//
// The state machine needs no sockets and no broker: a Partition is driven
// by its methods (ApplyLeader, RecordFollowerFetch, OutOfSyncProposal,
// ...) and a Manager by the funcs and interfaces of Options, which
// package broker wires to its Server.
//
// It may import strata/broker/plog, strata/broker/config,
// strata/controller, strata/internal/*, franz-go and the standard library.
// It must not import strata/broker, strata/broker/network,
// strata/broker/remotelog, strata/broker/group, strata/tier or
// strata/index: tiered storage is reached through the Tiering interface,
// which the broker implements, and log-directory failures through the
// callbacks of Options. internal/archtest checks these rules.
package replica
