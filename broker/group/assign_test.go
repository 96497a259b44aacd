package group

import (
	"fmt"
	"math/rand"
	"testing"
)

var (
	topicA = [16]byte{1}
	topicB = [16]byte{2}
	topicC = [16]byte{3}
)

func tps(kv ...any) TopicPartitions {
	out := TopicPartitions{}
	for i := 0; i+1 < len(kv); i += 2 {
		id := kv[i].([16]byte)
		out[id] = append(out[id], kv[i+1].([]int32)...)
	}
	return out.normalize()
}

func amember(id string, topics [][16]byte, cur TopicPartitions) AssignMember {
	return AssignMember{ID: id, Topics: topics, Current: cur}
}

// checkValid fails unless every partition of a subscribed topic is
// assigned exactly once, and only to a member subscribed to its topic.
func checkValid(t *testing.T, spec AssignSpec, got map[string]TopicPartitions) {
	t.Helper()
	subscribedTopics := map[[16]byte]bool{}
	for _, m := range spec.Members {
		sub := map[[16]byte]bool{}
		for _, id := range m.Topics {
			sub[id] = true
			subscribedTopics[id] = true
		}
		a, ok := got[m.ID]
		if !ok {
			t.Fatalf("member %s missing from result", m.ID)
		}
		for id := range a {
			if !sub[id] {
				t.Fatalf("member %s got topic %v it is not subscribed to", m.ID, id)
			}
		}
	}
	seen := map[topicPartition]string{}
	for mid, a := range got {
		for id, ps := range a {
			for _, p := range ps {
				tp := topicPartition{id, p}
				if prev, dup := seen[tp]; dup {
					t.Fatalf("partition %v/%d given to %s and %s", id, p, prev, mid)
				}
				if p < 0 || p >= spec.Partitions[id] {
					t.Fatalf("partition %v/%d does not exist", id, p)
				}
				seen[tp] = mid
			}
		}
	}
	for id := range subscribedTopics {
		for p := int32(0); p < spec.Partitions[id]; p++ {
			if _, ok := seen[topicPartition{id, p}]; !ok {
				t.Fatalf("partition %v/%d unassigned", id, p)
			}
		}
	}
}

func spread(got map[string]TopicPartitions) (lo, hi int) {
	lo = 1 << 30
	for _, a := range got {
		lo, hi = min(lo, a.Len()), max(hi, a.Len())
	}
	return lo, hi
}

func TestUniformHomogeneousBalanced(t *testing.T) {
	for _, tc := range []struct {
		members, partsA, partsB int
	}{{1, 6, 0}, {3, 6, 0}, {3, 7, 4}, {5, 3, 0}, {4, 0, 0}, {7, 50, 13}} {
		t.Run(fmt.Sprint(tc), func(t *testing.T) {
			spec := AssignSpec{Partitions: map[[16]byte]int32{topicA: int32(tc.partsA), topicB: int32(tc.partsB)}}
			for i := 0; i < tc.members; i++ {
				spec.Members = append(spec.Members, amember(fmt.Sprintf("m%d", i), [][16]byte{topicA, topicB}, nil))
			}
			got := UniformAssignor{}.Assign(spec)
			checkValid(t, spec, got)
			if lo, hi := spread(got); hi-lo > 1 {
				t.Fatalf("unbalanced: %d..%d: %v", lo, hi, got)
			}
		})
	}
}

func TestUniformHomogeneousSticky(t *testing.T) {
	// Three members own 2 partitions each of a 6-partition topic; a
	// fourth joins: only the two partitions it must take move.
	spec := AssignSpec{Partitions: map[[16]byte]int32{topicA: 6}}
	spec.Members = []AssignMember{
		amember("a", [][16]byte{topicA}, tps(topicA, []int32{0, 1})),
		amember("b", [][16]byte{topicA}, tps(topicA, []int32{2, 3})),
		amember("c", [][16]byte{topicA}, tps(topicA, []int32{4, 5})),
		amember("d", [][16]byte{topicA}, nil),
	}
	got := UniformAssignor{}.Assign(spec)
	checkValid(t, spec, got)
	if n := got["d"].Len(); n != 1 {
		t.Fatalf("new member got %d partitions, want 1: %v", n, got)
	}
	moved := 0
	for _, m := range spec.Members[:3] {
		for _, p := range m.Current[topicA] {
			if !got[m.ID].Has(topicA, p) {
				moved++
			}
		}
	}
	if moved != 1 {
		t.Fatalf("%d partitions moved, want 1: %v", moved, got)
	}

	// A member leaves: the survivors keep everything they had.
	spec.Members = []AssignMember{
		amember("a", [][16]byte{topicA}, tps(topicA, []int32{0, 1})),
		amember("c", [][16]byte{topicA}, tps(topicA, []int32{4, 5})),
	}
	got = UniformAssignor{}.Assign(spec)
	checkValid(t, spec, got)
	for _, m := range spec.Members {
		for _, p := range m.Current[topicA] {
			if !got[m.ID].Has(topicA, p) {
				t.Fatalf("member %s lost partition %d: %v", m.ID, p, got)
			}
		}
	}
}

func TestUniformHeterogeneous(t *testing.T) {
	// a: A,B; b: B only; c: C only. A has 4, B 4, C 2 partitions.
	spec := AssignSpec{Partitions: map[[16]byte]int32{topicA: 4, topicB: 4, topicC: 2}}
	spec.Members = []AssignMember{
		amember("a", [][16]byte{topicA, topicB}, nil),
		amember("b", [][16]byte{topicB}, nil),
		amember("c", [][16]byte{topicC}, nil),
	}
	got := UniformAssignor{}.Assign(spec)
	checkValid(t, spec, got)
	// a must take all of A (4); B is then split so that a and b end
	// within one: b gets all 4 of B (a=4, b=4), c gets C (2).
	if got["a"].Len() != 4 || got["b"].Len() != 4 || got["c"].Len() != 2 {
		t.Fatalf("unexpected loads: %v", got)
	}

	// Stickiness: b already owns B; a owned part of B: balanced keeps b's.
	spec.Members[1].Current = tps(topicB, []int32{0, 1, 2, 3})
	spec.Members[0].Current = tps(topicA, []int32{0, 1})
	got = UniformAssignor{}.Assign(spec)
	checkValid(t, spec, got)
	if got["b"].Len() != 4 {
		t.Fatalf("b should keep B: %v", got)
	}
}

func TestUniformIgnoresUnknownTopicsAndBadCurrent(t *testing.T) {
	spec := AssignSpec{Partitions: map[[16]byte]int32{topicA: 2}}
	spec.Members = []AssignMember{
		amember("a", [][16]byte{topicA, topicC}, tps(topicA, []int32{7, -1, 0}, topicB, []int32{0})),
		amember("b", [][16]byte{topicA}, tps(topicA, []int32{0})), // duplicate owner of 0
	}
	for _, as := range []Assignor{UniformAssignor{}, RangeAssignor{}} {
		got := as.Assign(spec)
		checkValid(t, spec, got)
	}
}

func TestRangeCoPartitioned(t *testing.T) {
	spec := AssignSpec{Partitions: map[[16]byte]int32{topicA: 5, topicB: 5}}
	spec.Members = []AssignMember{
		amember("m1", [][16]byte{topicA, topicB}, nil),
		amember("m0", [][16]byte{topicA, topicB}, nil),
	}
	got := RangeAssignor{}.Assign(spec)
	checkValid(t, spec, got)
	want := map[string]TopicPartitions{
		"m0": tps(topicA, []int32{0, 1, 2}, topicB, []int32{0, 1, 2}),
		"m1": tps(topicA, []int32{3, 4}, topicB, []int32{3, 4}),
	}
	for id, w := range want {
		if !got[id].Equal(w) {
			t.Fatalf("member %s: got %v want %v", id, got[id], w)
		}
	}
}

func TestRangePerTopicAndSticky(t *testing.T) {
	// Per topic: only subscribers share the topic.
	spec := AssignSpec{Partitions: map[[16]byte]int32{topicA: 3, topicB: 2}}
	spec.Members = []AssignMember{
		amember("a", [][16]byte{topicA}, nil),
		amember("b", [][16]byte{topicA, topicB}, nil),
	}
	got := RangeAssignor{}.Assign(spec)
	checkValid(t, spec, got)
	if !got["a"].Equal(tps(topicA, []int32{0, 1})) || !got["b"].Equal(tps(topicA, []int32{2}, topicB, []int32{0, 1})) {
		t.Fatalf("got %v", got)
	}

	// Sticky: b keeps partition 0 of A it already had.
	spec.Members[0].Current = nil
	spec.Members[1].Current = tps(topicA, []int32{0})
	got = RangeAssignor{}.Assign(spec)
	checkValid(t, spec, got)
	if !got["b"].Has(topicA, 0) {
		t.Fatalf("b lost A/0: %v", got)
	}
}

func TestAssignorsRandomized(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	topics := [][16]byte{topicA, topicB, topicC}
	for iter := 0; iter < 300; iter++ {
		spec := AssignSpec{Partitions: map[[16]byte]int32{}}
		for _, id := range topics {
			spec.Partitions[id] = int32(rng.Intn(9))
		}
		n := 1 + rng.Intn(6)
		for i := 0; i < n; i++ {
			var sub [][16]byte
			for _, id := range topics {
				if rng.Intn(2) == 0 {
					sub = append(sub, id)
				}
			}
			cur := TopicPartitions{}
			for _, id := range topics {
				for p := int32(0); p < 9; p++ {
					if rng.Intn(5) == 0 {
						cur[id] = append(cur[id], p)
					}
				}
			}
			spec.Members = append(spec.Members, amember(fmt.Sprintf("m%d", i), sub, cur))
		}
		for _, as := range []Assignor{UniformAssignor{}, RangeAssignor{}} {
			got := as.Assign(spec)
			checkValid(t, spec, got)
			if as.Name() == AssignorUniform && homogeneous(spec) {
				if lo, hi := spread(got); hi-lo > 1 {
					t.Fatalf("iter %d: unbalanced homogeneous uniform %d..%d", iter, lo, hi)
				}
			}
			// Stable: assigning again from the result changes nothing.
			for i := range spec.Members {
				spec.Members[i].Current = got[spec.Members[i].ID]
			}
			again := as.Assign(spec)
			for id, a := range got {
				if !again[id].Equal(a) {
					t.Fatalf("iter %d %s: not stable for %s: %v then %v", iter, as.Name(), id, a, again[id])
				}
			}
		}
	}
}

func TestLookupAssignor(t *testing.T) {
	for _, n := range []string{"uniform", "range"} {
		if a, ok := LookupAssignor(n); !ok || a.Name() != n {
			t.Fatalf("lookup %s", n)
		}
	}
	if _, ok := LookupAssignor("sticky"); ok {
		t.Fatal("unknown assignor found")
	}
}
