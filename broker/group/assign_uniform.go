package group

// The "uniform" assignor (Kafka's UniformAssignor): spreads partitions as
// evenly as possible over the members, keeping each member's current
// partitions where balance allows (balance first, then stickiness).
//
// Homogeneous groups (every member subscribed to the same topics) use
// quotas: total/members each, the remainder handed out one by one to the
// members that already hold the most, so that as few partitions as
// possible move. Heterogeneous groups keep every still-valid partition,
// give the rest to the least-loaded subscribed member, then move
// partitions from a member to another subscribed one while their counts
// differ by more than one.

import (
	"slices"
	"sort"
)

// UniformAssignor is the "uniform" server-side assignor.
type UniformAssignor struct{}

// Name implements Assignor.
func (UniformAssignor) Name() string { return AssignorUniform }

// Assign implements Assignor.
func (UniformAssignor) Assign(spec AssignSpec) map[string]TopicPartitions {
	out := make(map[string]TopicPartitions, len(spec.Members))
	for _, m := range spec.Members {
		out[m.ID] = TopicPartitions{}
	}
	if len(spec.Members) == 0 {
		return out
	}
	if homogeneous(spec) {
		uniformHomogeneous(spec, out)
	} else {
		uniformHeterogeneous(spec, out)
	}
	for _, tp := range out {
		tp.normalize()
	}
	return out
}

// homogeneous reports whether every member subscribes to the same topics.
func homogeneous(spec AssignSpec) bool {
	first := sortedSet(spec.Members[0].Topics)
	for i := 1; i < len(spec.Members); i++ {
		if !slices.Equal(first, sortedSet(spec.Members[i].Topics)) {
			return false
		}
	}
	return true
}

func sortedSet(ids [][16]byte) [][16]byte {
	s := slices.Clone(ids)
	sort.Slice(s, func(i, j int) bool { return lessID(s[i], s[j]) })
	return slices.Compact(s)
}

// allPartitions lists every partition of topics, in (topic, partition) order.
func allPartitions(topics [][16]byte, parts map[[16]byte]int32) []topicPartition {
	var out []topicPartition
	for _, id := range sortedSet(topics) {
		for p := int32(0); p < parts[id]; p++ {
			out = append(out, topicPartition{id, p})
		}
	}
	return out
}

func uniformHomogeneous(spec AssignSpec, out map[string]TopicPartitions) {
	all := allPartitions(spec.Members[0].Topics, spec.Partitions)
	if len(all) == 0 {
		return
	}
	type cand struct {
		m     *AssignMember
		valid []topicPartition
	}
	cands := make([]cand, len(spec.Members))
	for i := range spec.Members {
		m := &spec.Members[i]
		cands[i] = cand{m, validCurrent(m, spec.Partitions)}
	}
	// Members holding the most get the extra slots first.
	sort.SliceStable(cands, func(i, j int) bool {
		if len(cands[i].valid) != len(cands[j].valid) {
			return len(cands[i].valid) > len(cands[j].valid)
		}
		return assignKey(cands[i].m) < assignKey(cands[j].m)
	})
	minQuota := len(all) / len(cands)
	extra := len(all) % len(cands)
	taken := make(map[topicPartition]bool, len(all))
	remaining := make([]int, len(cands))
	for i, c := range cands {
		quota := minQuota
		if extra > 0 {
			quota++
			extra--
		}
		for _, tp := range c.valid {
			if quota == 0 {
				break
			}
			if taken[tp] {
				continue
			}
			taken[tp] = true
			out[c.m.ID].add(tp.topic, tp.part)
			quota--
		}
		remaining[i] = quota
	}
	// Hand out the rest in member order.
	order := make([]int, len(cands))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		return assignKey(cands[order[a]].m) < assignKey(cands[order[b]].m)
	})
	next := 0
	for _, tp := range all {
		if taken[tp] {
			continue
		}
		for next < len(order) && remaining[order[next]] == 0 {
			next++
		}
		if next == len(order) {
			return // cannot happen: quotas sum to len(all)
		}
		i := order[next]
		out[cands[i].m.ID].add(tp.topic, tp.part)
		remaining[i]--
	}
}

func uniformHeterogeneous(spec AssignSpec, out map[string]TopicPartitions) {
	members := make([]*AssignMember, len(spec.Members))
	for i := range spec.Members {
		members[i] = &spec.Members[i]
	}
	sort.SliceStable(members, func(i, j int) bool { return assignKey(members[i]) < assignKey(members[j]) })

	subscribers := map[[16]byte][]*AssignMember{}
	load := map[string]int{}
	for _, m := range members {
		for _, id := range sortedSet(m.Topics) {
			if spec.Partitions[id] > 0 {
				subscribers[id] = append(subscribers[id], m)
			}
		}
	}
	// Keep what is still valid.
	taken := map[topicPartition]bool{}
	for _, m := range members {
		for _, tp := range validCurrent(m, spec.Partitions) {
			if taken[tp] {
				continue
			}
			taken[tp] = true
			out[m.ID].add(tp.topic, tp.part)
			load[m.ID]++
		}
	}
	// Unassigned partitions, topics with the fewest subscribers first.
	topics := sortedTopicIDs(subscribers)
	sort.SliceStable(topics, func(i, j int) bool {
		return len(subscribers[topics[i]]) < len(subscribers[topics[j]])
	})
	for _, id := range topics {
		for p := int32(0); p < spec.Partitions[id]; p++ {
			tp := topicPartition{id, p}
			if taken[tp] {
				continue
			}
			best := leastLoaded(subscribers[id], load)
			out[best.ID].add(id, p)
			load[best.ID]++
		}
	}
	// Balance: move a partition from a member to a less loaded member
	// subscribed to its topic while their counts differ by more than one.
	// Each move lowers the sum of squared loads, so this ends; the bound
	// is a guard.
	total := 0
	for _, id := range topics {
		total += int(spec.Partitions[id])
	}
	for moves := 0; moves < total*len(members)+1; moves++ {
		if !balanceOnce(topics, subscribers, load, out) {
			return
		}
	}
}

func leastLoaded(ms []*AssignMember, load map[string]int) *AssignMember {
	best := ms[0]
	for _, m := range ms[1:] {
		if load[m.ID] < load[best.ID] {
			best = m
		}
	}
	return best
}

// balanceOnce makes the single most useful move, if any.
func balanceOnce(topics [][16]byte, subscribers map[[16]byte][]*AssignMember, load map[string]int, out map[string]TopicPartitions) bool {
	var (
		bestGap   int
		bestTopic [16]byte
		from, to  *AssignMember
	)
	for _, id := range topics {
		subs := subscribers[id]
		lo := leastLoaded(subs, load)
		for _, m := range subs {
			if len(out[m.ID][id]) == 0 {
				continue
			}
			if gap := load[m.ID] - load[lo.ID]; gap > 1 && gap > bestGap {
				bestGap, bestTopic, from, to = gap, id, m, lo
			}
		}
	}
	if from == nil {
		return false
	}
	ps := out[from.ID][bestTopic]
	p := ps[len(ps)-1]
	out[from.ID][bestTopic] = ps[:len(ps)-1]
	out[to.ID].add(bestTopic, p)
	load[from.ID]--
	load[to.ID]++
	return true
}
