package main

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func brokersOf(ids ...int32) []planBroker {
	var bs []planBroker
	for _, id := range ids {
		bs = append(bs, planBroker{ID: id})
	}
	return bs
}

// checkPlan checks rule 1 on every target of p and that the partitions
// not in p.Moves keep their replicas; it returns the targets by name.
func checkPlan(t *testing.T, parts []planPartition, p plan, allowed []int32) map[string][]int32 {
	t.Helper()
	target := map[string][]int32{}
	for _, pp := range parts {
		target[fmt.Sprintf("%s-%d", pp.Topic, pp.Partition)] = pp.Replicas
	}
	for _, m := range p.Moves {
		name := fmt.Sprintf("%s-%d", m.Topic, m.Partition)
		if !slices.Equal(target[name], m.From) {
			t.Fatalf("%s: move from %v, current %v", name, m.From, target[name])
		}
		if slices.Equal(m.From, m.To) {
			t.Fatalf("%s: a move to the same replicas %v", name, m.To)
		}
		target[name] = m.To
	}
	for name, rs := range target {
		var orig []int32
		for _, pp := range parts {
			if fmt.Sprintf("%s-%d", pp.Topic, pp.Partition) == name {
				orig = pp.Replicas
			}
		}
		if len(rs) != len(orig) {
			t.Fatalf("%s: replication factor %d, was %d", name, len(rs), len(orig))
		}
		seen := map[int32]bool{}
		for _, r := range rs {
			if seen[r] {
				t.Fatalf("%s: broker %d twice in %v", name, r, rs)
			}
			seen[r] = true
			if !slices.Contains(allowed, r) {
				t.Fatalf("%s: replica on broker %d, not one of %v", name, r, allowed)
			}
		}
	}
	return target
}

// spread returns the least and most replicas and preferred leaderships
// of allowed brokers in target.
func spread(target map[string][]int32, allowed []int32) (minR, maxR, minL, maxL int) {
	reps, leads := map[int32]int{}, map[int32]int{}
	for _, rs := range target {
		for j, r := range rs {
			reps[r]++
			if j == 0 {
				leads[r]++
			}
		}
	}
	minR, minL = 1<<30, 1<<30
	for _, b := range allowed {
		minR, maxR = min(minR, reps[b]), max(maxR, reps[b])
		minL, maxL = min(minL, leads[b]), max(maxL, leads[b])
	}
	return
}

// roundRobin is Kafka's assignment of n partitions with rf replicas on
// brokers, without the random start.
func roundRobin(topic string, n, rf int, brokers []int32) []planPartition {
	var ps []planPartition
	for p := range n {
		var rs []int32
		for k := range rf {
			rs = append(rs, brokers[(p+k)%len(brokers)])
		}
		ps = append(ps, planPartition{Topic: topic, Partition: int32(p), Replicas: rs})
	}
	return ps
}

// TestPlanAddBroker is the 3 -> 4 scale-out: the new broker gets its
// share, the fewest replicas move (the excess of the old brokers), and
// preferred leaders spread.
func TestPlanAddBroker(t *testing.T) {
	parts := append(roundRobin("a", 3, 2, []int32{1, 2, 3}), roundRobin("b", 3, 2, []int32{1, 2, 3})...)
	allowed := []int32{1, 2, 3, 4}
	p, err := computePlan(parts, brokersOf(allowed...), planOptions{Balance: true})
	if err != nil {
		t.Fatal(err)
	}
	target := checkPlan(t, parts, p, allowed)
	minR, maxR, minL, maxL := spread(target, allowed)
	if minR != 3 || maxR != 3 {
		t.Errorf("replicas per broker %d..%d, want 3 each (12 over 4)", minR, maxR)
	}
	if maxL-minL > 1 {
		t.Errorf("preferred leaders per broker %d..%d", minL, maxL)
	}
	// 12 replicas, 4 each on 1-3: three must go to broker 4, no more.
	if c := p.Copies(); c != 3 {
		t.Errorf("%d replicas copied, want 3: %+v", c, p.Moves)
	}
	if p.After[4].Replicas != 3 || p.Before[4].Replicas != 0 {
		t.Errorf("broker 4 before %+v after %+v", p.Before[4], p.After[4])
	}
	// The two topics both reach broker 4.
	perTopic := map[string]int{}
	for name, rs := range target {
		if slices.Contains(rs, 4) {
			perTopic[name[:1]]++
		}
	}
	if perTopic["a"] == 0 || perTopic["b"] == 0 {
		t.Errorf("replicas on broker 4 by topic: %v", perTopic)
	}
}

// TestPlanBalancedIsNoop: a balanced cluster gets an empty plan.
func TestPlanBalancedIsNoop(t *testing.T) {
	parts := roundRobin("a", 6, 3, []int32{1, 2, 3})
	p, err := computePlan(parts, brokersOf(1, 2, 3), planOptions{Balance: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Moves) != 0 {
		t.Errorf("moves on a balanced cluster: %+v", p.Moves)
	}
}

// TestPlanDecommission empties the broker removed with only its replicas
// moving, and keeps every replication factor.
func TestPlanDecommission(t *testing.T) {
	parts := append(roundRobin("a", 3, 2, []int32{1, 2, 3, 4}), roundRobin("b", 5, 3, []int32{1, 2, 3, 4})...)
	allowed := []int32{2, 3, 4}
	p, err := computePlan(parts, brokersOf(1, 2, 3, 4), planOptions{Remove: []int32{1}})
	if err != nil {
		t.Fatal(err)
	}
	target := checkPlan(t, parts, p, allowed)
	on1 := p.Before[1].Replicas
	if on1 == 0 || p.Copies() != on1 {
		t.Errorf("%d replicas copied, broker 1 held %d", p.Copies(), on1)
	}
	if l, ok := p.After[1]; ok && l.Replicas != 0 {
		t.Errorf("broker 1 keeps %d replicas", l.Replicas)
	}
	for _, m := range p.Moves {
		if !slices.Contains(m.From, 1) {
			t.Errorf("%s-%d moves without a replica on broker 1: %v -> %v", m.Topic, m.Partition, m.From, m.To)
		}
		if m.From[0] != 1 && m.To[0] != m.From[0] {
			t.Errorf("%s-%d: preferred leader %d changed to %d", m.Topic, m.Partition, m.From[0], m.To[0])
		}
	}
	if minR, maxR, _, _ := spread(target, allowed); maxR-minR > 1 {
		t.Errorf("replicas per broker %d..%d after the decommission", minR, maxR)
	}
}

// TestPlanRefusesImpossible: a replication factor the remaining brokers
// cannot hold refuses the plan, with the partition named.
func TestPlanRefusesImpossible(t *testing.T) {
	parts := roundRobin("a", 2, 3, []int32{1, 2, 3})
	_, err := computePlan(parts, brokersOf(1, 2, 3), planOptions{Remove: []int32{3}})
	if err == nil || !strings.Contains(err.Error(), "a-0 has replication factor 3 but only 2 brokers") {
		t.Errorf("err %v", err)
	}
	_, err = computePlan(parts, brokersOf(1), planOptions{Remove: []int32{1}})
	if err == nil || !strings.Contains(err.Error(), "no broker would remain") {
		t.Errorf("err %v", err)
	}
	// A broker that is gone (not live) counts as removed.
	_, err = computePlan(parts, brokersOf(1, 2), planOptions{Balance: true})
	if err == nil {
		t.Error("RF 3 planned on 2 live brokers")
	}
}

// TestPlanDeadBroker moves the replicas of a broker that is not live.
func TestPlanDeadBroker(t *testing.T) {
	parts := roundRobin("a", 4, 2, []int32{1, 2, 3})
	allowed := []int32{1, 2, 4}
	p, err := computePlan(parts, brokersOf(allowed...), planOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkPlan(t, parts, p, allowed)
}

// TestPlanRacks: with racks on every broker, a partition of RF 2 spans
// two racks after a rebalance that moves to a new broker.
func TestPlanRacks(t *testing.T) {
	bs := []planBroker{{1, "x"}, {2, "y"}, {3, "x"}, {4, "y"}}
	parts := []planPartition{ // 1,3 are rack x; 2 rack y
		{"a", 0, []int32{1, 2}}, {"a", 1, []int32{2, 3}}, {"a", 2, []int32{3, 2}},
		{"a", 3, []int32{1, 2}}, {"a", 4, []int32{2, 1}}, {"a", 5, []int32{3, 2}},
	}
	p, err := computePlan(parts, bs, planOptions{Balance: true})
	if err != nil {
		t.Fatal(err)
	}
	target := checkPlan(t, parts, p, []int32{1, 2, 3, 4})
	rack := map[int32]string{1: "x", 2: "y", 3: "x", 4: "y"}
	for name, rs := range target {
		if rack[rs[0]] == rack[rs[1]] {
			t.Errorf("%s: %v in one rack", name, rs)
		}
	}
	if minR, maxR, _, _ := spread(target, []int32{1, 2, 3, 4}); maxR-minR > 1 {
		t.Errorf("replicas per broker %d..%d", minR, maxR)
	}
	// Decommissioning broker 2 must put its replicas on 4, the other
	// rack y broker.
	p, err = computePlan(parts, bs, planOptions{Remove: []int32{2}})
	if err != nil {
		t.Fatal(err)
	}
	for name, rs := range checkPlan(t, parts, p, []int32{1, 3, 4}) {
		if !slices.Contains(rs, 4) {
			t.Errorf("%s: %v, not on broker 4 (rack y)", name, rs)
		}
	}
}

// TestPlanRandom checks the invariants on random clusters: rule 1, the
// balance reached, and that the replicas copied are the fewest that
// reach it (the sum over brokers of what each holds above the ceiling of
// the mean, plus what must leave removed brokers).
func TestPlanRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	checked := 0
	for iter := range 3000 {
		nb := 2 + r.IntN(7)
		var all []int32
		for id := range nb {
			all = append(all, int32(id+1))
		}
		var parts []planPartition
		topics, perTopic := 1+r.IntN(4), 12
		if iter%2 == 0 { // small enough for fewestCopies
			topics, perTopic = 1+r.IntN(2), 3
		}
		for ti := range topics {
			rf := 1 + r.IntN(min(3, nb))
			for pi := range 1 + r.IntN(perTopic) {
				rs := slices.Clone(all)
				r.Shuffle(len(rs), func(i, j int) { rs[i], rs[j] = rs[j], rs[i] })
				parts = append(parts, planPartition{Topic: fmt.Sprintf("t%d", ti), Partition: int32(pi), Replicas: rs[:rf]})
			}
		}
		live := slices.Clone(all)
		if r.IntN(3) == 0 { // a new, empty broker
			live = append(live, int32(nb+1))
		}
		opt := planOptions{Balance: r.IntN(2) == 0}
		if r.IntN(3) == 0 {
			opt.Remove = []int32{live[r.IntN(len(live))]}
		}
		allowed := without(live, opt.Remove)
		p, err := computePlan(parts, brokersOf(live...), opt)
		maxRF := 0
		for _, pp := range parts {
			maxRF = max(maxRF, len(pp.Replicas))
		}
		if maxRF > len(allowed) {
			if err == nil {
				t.Fatalf("iter %d: RF %d on %d brokers planned", iter, maxRF, len(allowed))
			}
			continue
		}
		if err != nil {
			t.Fatalf("iter %d: %v", iter, err)
		}
		target := checkPlan(t, parts, p, allowed)
		forced := 0
		for _, pp := range parts {
			forced += len(without(pp.Replicas, allowed))
		}
		if !opt.Balance {
			if p.Copies() != forced {
				t.Fatalf("iter %d: %d copied, %d had to move", iter, p.Copies(), forced)
			}
			continue
		}
		minR, maxR, _, _ := spread(target, allowed)
		if maxR-minR > 1 {
			t.Fatalf("iter %d: replicas per broker %d..%d", iter, minR, maxR)
		}
		// The fewest copies that reach balance, found by search on the
		// small clusters.
		if len(parts) <= 7 && len(allowed) <= 5 {
			if c, fewest := p.Copies(), fewestCopies(parts, allowed); c != fewest {
				for _, pp := range parts {
					t.Logf("%s-%d %v", pp.Topic, pp.Partition, pp.Replicas)
				}
				for _, m := range p.Moves {
					t.Logf("move %s-%d %v -> %v", m.Topic, m.Partition, m.From, m.To)
				}
				t.Fatalf("iter %d: %d replicas copied, %d would do", iter, c, fewest)
			}
			checked++
		}
	}
	t.Logf("%d plans checked against a search for the fewest copies", checked)
}

// fewestCopies searches every assignment of parts over allowed whose
// replicas per broker differ by at most one for the fewest replicas
// copied.
func fewestCopies(parts []planPartition, allowed []int32) int {
	total := 0
	for _, p := range parts {
		total += len(p.Replicas)
	}
	floor, extra := total/len(allowed), total%len(allowed)
	load := map[int32]int{}
	best := 1 << 30
	var subsets func(k, from int, cur []int32, out *[][]int32)
	subsets = func(k, from int, cur []int32, out *[][]int32) {
		if k == 0 {
			*out = append(*out, slices.Clone(cur))
			return
		}
		for i := from; i < len(allowed); i++ {
			subsets(k-1, i+1, append(cur, allowed[i]), out)
		}
	}
	var dfs func(i, copies int)
	dfs = func(i, copies int) {
		if copies >= best {
			return
		}
		if i == len(parts) {
			ceil := 0
			for _, b := range allowed {
				if load[b] > floor {
					ceil++
				}
			}
			if ceil == extra {
				best = copies
			}
			return
		}
		var sets [][]int32
		subsets(len(parts[i].Replicas), 0, nil, &sets)
		for _, set := range sets {
			ok := true
			for _, b := range set {
				load[b]++
				if load[b] > floor+min(1, extra) {
					ok = false
				}
			}
			if ok {
				dfs(i+1, copies+len(without(set, parts[i].Replicas)))
			}
			for _, b := range set {
				load[b]--
			}
		}
	}
	dfs(0, 0)
	return best
}

// TestPlanThrottles: the leader side lists a moving partition's existing
// replicas, the follower side its adding ones, as kafka-reassign-partitions
// does; a reorder is not throttled.
func TestPlanThrottles(t *testing.T) {
	p := plan{Moves: []planMove{
		{Topic: "a", Partition: 0, From: []int32{1, 2}, To: []int32{4, 2}},
		{Topic: "a", Partition: 2, From: []int32{3, 1}, To: []int32{3, 4}},
		{Topic: "b", Partition: 1, From: []int32{2, 3}, To: []int32{3, 2}},
	}}
	th := planThrottles(p)
	if !slices.Equal(th.brokers, []int32{1, 2, 3, 4}) {
		t.Errorf("brokers %v", th.brokers)
	}
	if got := th.topics["a"]; got.leader != "0:1,0:2,2:3,2:1" || got.follower != "0:4,2:4" {
		t.Errorf("topic a: %+v", got)
	}
	if _, ok := th.topics["b"]; ok {
		t.Error("a reorder throttled")
	}
}
