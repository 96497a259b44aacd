package group

// The "range" assignor (Kafka's server-side RangeAssignor): per topic, the
// subscribed members in a fixed order each get a contiguous range of
// partitions, numPartitions/members each and one more for the first
// numPartitions%members. When members subscribe to the same co-partitioned
// topics, the same partition numbers of every topic go to the same member
// (joins). It is also sticky: a member keeps up to its quota of its current
// partitions of the topic, lowest numbers first, and only the rest is
// handed out in ranges.

import (
	"slices"
	"sort"
)

// RangeAssignor is the "range" server-side assignor.
type RangeAssignor struct{}

// Name implements Assignor.
func (RangeAssignor) Name() string { return AssignorRange }

// Assign implements Assignor.
func (RangeAssignor) Assign(spec AssignSpec) map[string]TopicPartitions {
	out := make(map[string]TopicPartitions, len(spec.Members))
	members := make([]*AssignMember, len(spec.Members))
	for i := range spec.Members {
		members[i] = &spec.Members[i]
		out[members[i].ID] = TopicPartitions{}
	}
	sort.SliceStable(members, func(i, j int) bool { return assignKey(members[i]) < assignKey(members[j]) })

	perTopic := map[[16]byte][]*AssignMember{}
	for _, m := range members {
		for _, id := range sortedSet(m.Topics) {
			if spec.Partitions[id] > 0 {
				perTopic[id] = append(perTopic[id], m)
			}
		}
	}
	for _, id := range sortedTopicIDs(perTopic) {
		rangeTopic(id, spec.Partitions[id], perTopic[id], out)
	}
	for _, tp := range out {
		tp.normalize()
	}
	return out
}

func rangeTopic(id [16]byte, n int32, ms []*AssignMember, out map[string]TopicPartitions) {
	minQuota := int(n) / len(ms)
	extra := int(n) % len(ms)
	taken := make([]bool, n)
	type unfilled struct {
		m    *AssignMember
		need int
	}
	var pending []unfilled
	for _, m := range ms {
		var cur []int32
		for _, p := range m.Current[id] {
			if p >= 0 && p < n && !taken[p] {
				cur = append(cur, p)
			}
		}
		slices.Sort(cur)
		cur = slices.Compact(cur)
		keep := min(len(cur), minQuota)
		for _, p := range cur[:keep] {
			taken[p] = true
			out[m.ID].add(id, p)
		}
		need := minQuota - len(cur)
		if need < 0 && extra > 0 {
			extra--
			p := cur[minQuota]
			taken[p] = true
			out[m.ID].add(id, p)
			continue
		}
		pending = append(pending, unfilled{m, max(need, 0)})
	}
	var free []int32
	for p := int32(0); p < n; p++ {
		if !taken[p] {
			free = append(free, p)
		}
	}
	for _, u := range pending {
		need := u.need
		if extra > 0 {
			need++
			extra--
		}
		need = min(need, len(free))
		for _, p := range free[:need] {
			out[u.m.ID].add(id, p)
		}
		free = free[need:]
	}
}
