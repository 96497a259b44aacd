package controller

import (
	"errors"
	"slices"
)

// ElectionType is ElectLeaders' election type (KIP-460).
type ElectionType int8

const (
	// ElectPreferred moves leadership to the first replica of the
	// assignment when it is alive and in the ISR.
	ElectPreferred ElectionType = 0
	// ElectUnclean elects any live replica of a partition without a
	// live leader.
	ElectUnclean ElectionType = 1
)

// ElectLeaders outcomes per partition (Kafka's error names).
var (
	ErrElectionNotNeeded           = errors.New("election not needed")             // ELECTION_NOT_NEEDED
	ErrPreferredLeaderNotAvailable = errors.New("preferred leader not available")  // PREFERRED_LEADER_NOT_AVAILABLE
	ErrEligibleLeadersNotAvailable = errors.New("no eligible leader is available") // ELIGIBLE_LEADERS_NOT_AVAILABLE
)

// ElectMove is the change an election of type typ makes to p. A preferred
// election makes the first replica leader if it is alive and in the ISR;
// an unclean election, only when the leader is not alive, makes a live ISR
// member leader, or failing that any live replica (with an ISR of itself).
// The leader epoch is bumped. The error tells why nothing changes.
func ElectMove(p Partition, typ ElectionType, alive func(int32) bool) (Partition, error) {
	np := p
	np.LeaderEpoch = p.LeaderEpoch + 1
	if typ == ElectPreferred {
		if len(p.Replicas) == 0 {
			return p, ErrPreferredLeaderNotAvailable
		}
		pref := p.Replicas[0]
		if p.Leader == pref {
			return p, ErrElectionNotNeeded
		}
		if !alive(pref) || !slices.Contains(p.ISR, pref) {
			return p, ErrPreferredLeaderNotAvailable
		}
		np.Leader = pref
		return np, nil
	}
	if p.Leader >= 0 && alive(p.Leader) {
		return p, ErrElectionNotNeeded
	}
	for _, r := range p.Replicas {
		if alive(r) && slices.Contains(p.ISR, r) {
			np.Leader = r
			np.ISR = slices.DeleteFunc(slices.Clone(p.ISR), func(id int32) bool { return !alive(id) })
			return np, nil
		}
	}
	for _, r := range p.Replicas {
		if alive(r) {
			np.Leader, np.ISR = r, []int32{r}
			return np, nil
		}
	}
	return p, ErrEligibleLeadersNotAvailable
}

// Imbalanced returns the partitions whose preferred leader should get
// leadership back under auto.leader.rebalance.enable: for each live
// broker whose share of partitions it prefers but does not lead exceeds
// pct percent, those of its partitions where it is alive and in the ISR.
func Imbalanced(md *Metadata, pct int) []TopicPartition {
	alive := map[int32]bool{}
	for _, b := range md.Brokers {
		alive[b.ID] = true
	}
	preferred := map[int32]int{}
	notLed := map[int32][]TopicPartition{}
	for name, t := range md.Topics {
		for _, p := range t.Partitions {
			if len(p.Replicas) == 0 {
				continue
			}
			pref := p.Replicas[0]
			preferred[pref]++
			if p.Leader != pref {
				notLed[pref] = append(notLed[pref], TopicPartition{Topic: name, Partition: p.Index})
			}
		}
	}
	var out []TopicPartition
	for id, tps := range notLed {
		if !alive[id] || preferred[id] == 0 {
			continue
		}
		if len(tps)*100 > pct*preferred[id] {
			out = append(out, tps...)
		}
	}
	return out
}

// allPartitions names every partition of md.
func allPartitions(md *Metadata) []TopicPartition {
	var out []TopicPartition
	for name, t := range md.Topics {
		for _, p := range t.Partitions {
			out = append(out, TopicPartition{Topic: name, Partition: p.Index})
		}
	}
	return out
}

// AllPartitions names every partition of md (ElectLeaders with no topics).
func AllPartitions(md *Metadata) []TopicPartition { return allPartitions(md) }
