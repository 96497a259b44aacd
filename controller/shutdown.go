package controller

import "slices"

// TopicPartition names one partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// ShutdownMove is the controlled-shutdown change of one partition when
// broker id is leaving (Kafka's ControlledShutdown): a partition it leads
// gets the first other live ISR member, in replica order, as leader, and
// the broker leaves the ISR; a partition it follows in the ISR loses it
// from the ISR. Each change bumps the leader epoch. changed is false when
// the partition does not involve id; stuck is true when id leads it and no
// other live ISR member can take over (the partition is left as it was).
func ShutdownMove(p Partition, id int32, alive func(int32) bool) (np Partition, changed, stuck bool) {
	if p.Leader != id && !slices.Contains(p.ISR, id) {
		return p, false, false
	}
	rest := slices.DeleteFunc(slices.Clone(p.ISR), func(r int32) bool { return r == id })
	np = p
	np.ISR = rest
	np.LeaderEpoch = p.LeaderEpoch + 1
	if p.Leader != id {
		if p.Leader < 0 || len(rest) == 0 {
			return p, false, false // offline or last member: nothing to gain
		}
		return np, true, false
	}
	for _, r := range p.Replicas {
		if r != id && slices.Contains(rest, r) && (alive == nil || alive(r)) {
			np.Leader = r
			return np, true, false
		}
	}
	return p, false, true
}
