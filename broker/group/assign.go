package group

// Server-side partition assignors of the next-generation consumer group
// protocol (KIP-848): the coordinator computes every member's target
// assignment itself. Kafka ships two, named "uniform" and "range"; the
// first name in group.consumer.assignors ("uniform,range") is the default
// for members that do not ask for one.
//
// Assignors are pure functions of an AssignSpec; they never fail and never
// panic: subscriptions to topics missing from the spec are ignored.

import (
	"slices"
	"sort"
)

// TopicPartitions maps a topic id to a sorted list of partitions.
type TopicPartitions map[[16]byte][]int32

// Clone returns a deep copy.
func (tp TopicPartitions) Clone() TopicPartitions {
	out := make(TopicPartitions, len(tp))
	for id, ps := range tp {
		out[id] = slices.Clone(ps)
	}
	return out
}

// Len is the number of partitions.
func (tp TopicPartitions) Len() int {
	n := 0
	for _, ps := range tp {
		n += len(ps)
	}
	return n
}

// Has reports whether partition p of topic id is in tp.
func (tp TopicPartitions) Has(id [16]byte, p int32) bool {
	return slices.Contains(tp[id], p)
}

// Equal reports whether tp and o hold the same partitions.
func (tp TopicPartitions) Equal(o TopicPartitions) bool {
	if tp.Len() != o.Len() {
		return false
	}
	for id, ps := range tp {
		for _, p := range ps {
			if !o.Has(id, p) {
				return false
			}
		}
	}
	return true
}

// add inserts p keeping the list sorted and free of duplicates.
func (tp TopicPartitions) add(id [16]byte, p int32) {
	ps := tp[id]
	i, found := slices.BinarySearch(ps, p)
	if found {
		return
	}
	tp[id] = slices.Insert(ps, i, p)
}

// normalize sorts every list, drops duplicates and empty topics.
func (tp TopicPartitions) normalize() TopicPartitions {
	for id, ps := range tp {
		if len(ps) == 0 {
			delete(tp, id)
			continue
		}
		slices.Sort(ps)
		tp[id] = slices.Compact(ps)
	}
	return tp
}

// sortedTopicIDs returns the keys of m in byte order.
func sortedTopicIDs[V any](m map[[16]byte]V) [][16]byte {
	ids := make([][16]byte, 0, len(m))
	for id := range m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return lessID(ids[i], ids[j]) })
	return ids
}

func lessID(a, b [16]byte) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// AssignMember is one member as an assignor sees it.
type AssignMember struct {
	ID         string
	InstanceID string // "" for dynamic members
	Rack       string
	// Topics are the ids of the subscribed topics that exist.
	Topics [][16]byte
	// Current is the member's current target assignment (stickiness).
	Current TopicPartitions
}

// AssignSpec is the input of an assignor.
type AssignSpec struct {
	Members []AssignMember
	// Partitions is the partition count of every topic a member may be
	// subscribed to.
	Partitions map[[16]byte]int32
}

// Assignor computes a target assignment: member id to partitions. Every
// member of the spec is in the result, possibly with nothing.
type Assignor interface {
	Name() string
	Assign(spec AssignSpec) map[string]TopicPartitions
}

// Assignor names, as in Kafka's group.consumer.assignors.
const (
	AssignorUniform = "uniform"
	AssignorRange   = "range"
)

// LookupAssignor returns the built-in assignor called name.
func LookupAssignor(name string) (Assignor, bool) {
	switch name {
	case AssignorUniform:
		return UniformAssignor{}, true
	case AssignorRange:
		return RangeAssignor{}, true
	}
	return nil, false
}

// assignKey orders members deterministically: static members by instance
// id (so that a restarted member finds its old place), then member id.
func assignKey(m *AssignMember) string {
	if m.InstanceID != "" {
		return "0" + m.InstanceID
	}
	return "1" + m.ID
}

// validCurrent returns, in (topic, partition) order, the partitions of
// m.Current that exist and that m is still subscribed to.
func validCurrent(m *AssignMember, parts map[[16]byte]int32) []topicPartition {
	subscribed := make(map[[16]byte]bool, len(m.Topics))
	for _, id := range m.Topics {
		subscribed[id] = true
	}
	var out []topicPartition
	for _, id := range sortedTopicIDs(m.Current) {
		if !subscribed[id] {
			continue
		}
		n := parts[id]
		ps := slices.Clone(m.Current[id])
		slices.Sort(ps)
		for _, p := range slices.Compact(ps) {
			if p >= 0 && p < n {
				out = append(out, topicPartition{id, p})
			}
		}
	}
	return out
}

type topicPartition struct {
	topic [16]byte
	part  int32
}
