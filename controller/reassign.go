package controller

import (
	"errors"
	"fmt"
	"slices"
)

// Partition reassignment (KIP-455), with the semantics of Kafka's
// ZooKeeper-mode controller. A reassignment of a partition from its
// original replicas (ORS) to target replicas (TRS) goes through these
// states, each a change of the partition's replicas and a new leader
// epoch:
//
//  1. Start: replicas = TRS followed by the ORS members not in TRS;
//     adding = TRS - ORS, removing = ORS - TRS. The adding replicas are
//     told to follow (LeaderAndIsr), copy the log and join the ISR.
//  2. Complete, once every TRS member is in the ISR: leadership moves to
//     the first live TRS member in the ISR if the leader is being removed
//     (or is not alive), the ISR loses the removing replicas, replicas =
//     TRS, and the removed brokers are told to delete the partition
//     (StopReplica with Delete).
//
// A reassignment may be replaced by another target (the original replicas
// stay those before the first) or cancelled, which reverts to the
// original replicas: the adding replicas leave the ISR and are deleted.

// Reassignment errors (Kafka's error names).
var (
	ErrNoReassignmentInProgress = errors.New("no partition reassignment is in progress") // NO_REASSIGNMENT_IN_PROGRESS
	ErrInvalidReplicaAssignment = errors.New("invalid replica assignment")               // INVALID_REPLICA_ASSIGNMENT
)

// Reassignment is an ongoing reassignment as ListPartitionReassignments
// shows it.
type Reassignment struct {
	Replicas []int32 // the current replica set (original and target)
	Adding   []int32
	Removing []int32
}

// Reassigning tells whether a reassignment of p is in progress.
func (p Partition) Reassigning() bool {
	return len(p.AddingReplicas) > 0 || len(p.RemovingReplicas) > 0
}

// OriginalReplicas are the replicas before the reassignment in progress.
func (p Partition) OriginalReplicas() []int32 {
	return without(p.Replicas, p.AddingReplicas)
}

// TargetReplicas are the replicas the reassignment in progress moves to.
func (p Partition) TargetReplicas() []int32 {
	return without(p.Replicas, p.RemovingReplicas)
}

// without returns a's members not in b, in a's order.
func without(a, b []int32) []int32 {
	out := make([]int32, 0, len(a))
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// CheckTarget validates a reassignment's target replicas: not empty, no
// duplicates, every broker known (registered is nil: any id >= 0).
func CheckTarget(target []int32, registered func(int32) bool) error {
	if len(target) == 0 {
		return fmt.Errorf("%w: empty replica list", ErrInvalidReplicaAssignment)
	}
	seen := map[int32]bool{}
	for _, id := range target {
		if id < 0 || seen[id] {
			return fmt.Errorf("%w: replicas %v", ErrInvalidReplicaAssignment, target)
		}
		seen[id] = true
		if registered != nil && !registered(id) {
			return fmt.Errorf("%w: broker %d is not registered", ErrInvalidReplicaAssignment, id)
		}
	}
	return nil
}

// ReassignStart returns p with a reassignment to target begun (state 1
// above), replacing any in progress. A target equal to the original
// replicas of a partition not being reassigned completes at once (the
// replicas take the target's order). changed is false when p already is
// in that state.
func ReassignStart(p Partition, target []int32) (np Partition, changed bool) {
	orig := p.OriginalReplicas()
	np = p
	np.Replicas = slices.Clone(target)
	for _, r := range orig {
		if !slices.Contains(target, r) {
			np.Replicas = append(np.Replicas, r)
		}
	}
	np.AddingReplicas = without(target, orig)
	np.RemovingReplicas = without(orig, target)
	if len(np.AddingReplicas) == 0 && len(np.RemovingReplicas) == 0 {
		np.AddingReplicas, np.RemovingReplicas = nil, nil
	}
	if slices.Equal(np.Replicas, p.Replicas) && slices.Equal(np.AddingReplicas, p.AddingReplicas) &&
		slices.Equal(np.RemovingReplicas, p.RemovingReplicas) {
		return p, false
	}
	// Replicas added by a reassignment this one replaces leave the ISR
	// (and, once told, their brokers), as a cancellation's do.
	np.ISR = slices.DeleteFunc(slices.Clone(p.ISR), func(id int32) bool { return !slices.Contains(np.Replicas, id) })
	if !slices.Contains(np.Replicas, p.Leader) {
		np.Leader = firstEligible(np.Replicas, np.ISR, nil)
	}
	np.LeaderEpoch = p.LeaderEpoch + 1
	return np, true
}

// reassignIn carries out reassignment requests (target nil: cancel) on
// md, a copy being edited, for the in-process controllers: each starts
// and, when its targets are already in the ISR, completes at once.
func reassignIn(md *Metadata, reqs map[TopicPartition][]int32, registered, alive func(int32) bool) map[TopicPartition]error {
	out := make(map[TopicPartition]error, len(reqs))
	for tp, target := range reqs {
		t, ok := md.Topics[tp.Topic]
		if !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
			out[tp] = ErrUnknownTopic
			continue
		}
		cur := t.Partitions[tp.Partition]
		var np Partition
		if target == nil {
			var err error
			if np, err = ReassignCancel(cur, alive); err != nil {
				out[tp] = err
				continue
			}
		} else {
			if err := CheckTarget(target, registered); err != nil {
				out[tp] = err
				continue
			}
			np, _ = ReassignStart(cur, target)
		}
		if done, ok := ReassignProgress(np, alive); ok {
			np = done
		}
		out[tp] = nil
		if np.LeaderEpoch == cur.LeaderEpoch && slices.Equal(np.Replicas, cur.Replicas) {
			continue
		}
		np.PartitionEpoch = cur.PartitionEpoch + 1
		nt := *t
		nt.Partitions = slices.Clone(t.Partitions)
		nt.Partitions[tp.Partition] = np
		md.Topics[tp.Topic] = &nt
	}
	return out
}

// ReassignCancel reverts a reassignment in progress to the original
// replicas: the adding replicas leave the replicas and the ISR; a leader
// among them (it can only have become leader through an election while
// the reassignment ran) gives way to the first live original replica in
// the ISR.
func ReassignCancel(p Partition, alive func(int32) bool) (Partition, error) {
	if !p.Reassigning() {
		return p, ErrNoReassignmentInProgress
	}
	orig := p.OriginalReplicas()
	np := p
	np.Replicas = orig
	np.AddingReplicas, np.RemovingReplicas = nil, nil
	np.ISR = slices.DeleteFunc(slices.Clone(p.ISR), func(id int32) bool { return !slices.Contains(orig, id) })
	np.LeaderEpoch = p.LeaderEpoch + 1
	if !slices.Contains(orig, p.Leader) {
		np.Leader = firstEligible(orig, np.ISR, alive)
	}
	return np, nil
}

// ReassignProgress completes a reassignment whose target replicas are all
// in the ISR (state 2 above). changed is false while it must wait.
func ReassignProgress(p Partition, alive func(int32) bool) (np Partition, changed bool) {
	if !p.Reassigning() {
		return p, false
	}
	target := p.TargetReplicas()
	for _, r := range target {
		if !slices.Contains(p.ISR, r) {
			return p, false
		}
	}
	np = p
	np.Replicas = target
	np.AddingReplicas, np.RemovingReplicas = nil, nil
	np.ISR = slices.DeleteFunc(slices.Clone(p.ISR), func(id int32) bool { return !slices.Contains(target, id) })
	if !slices.Contains(target, p.Leader) || (alive != nil && !alive(p.Leader)) {
		np.Leader = firstEligible(target, np.ISR, alive)
		if np.Leader < 0 {
			return p, false // no target replica can lead yet: wait
		}
	}
	np.LeaderEpoch = p.LeaderEpoch + 1
	return np, true
}

// firstEligible is the first of replicas that is alive and in isr, or -1.
func firstEligible(replicas, isr []int32, alive func(int32) bool) int32 {
	for _, r := range replicas {
		if slices.Contains(isr, r) && (alive == nil || alive(r)) {
			return r
		}
	}
	return -1
}

// Reassignments returns the reassignments in progress among parts (all
// partitions when nil); unknown partitions are left out, as Kafka does.
func Reassignments(md *Metadata, parts []TopicPartition) map[TopicPartition]Reassignment {
	if parts == nil {
		parts = allPartitions(md)
	}
	out := map[TopicPartition]Reassignment{}
	for _, tp := range parts {
		t, ok := md.Topics[tp.Topic]
		if !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
			continue
		}
		p := t.Partitions[tp.Partition]
		if p.Reassigning() {
			out[tp] = Reassignment{Replicas: slices.Clone(p.Replicas),
				Adding: slices.Clone(p.AddingReplicas), Removing: slices.Clone(p.RemovingReplicas)}
		}
	}
	return out
}
