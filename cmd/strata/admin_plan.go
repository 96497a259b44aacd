package main

// The plan of strata admin cluster rebalance and broker decommission: a
// pure function from the current assignment and the live brokers to the
// target assignment, with no I/O (admin_reassign.go carries it out).
//
// Rules, in order of precedence:
//
//  1. Every partition keeps its replication factor, and no broker holds
//     two replicas of one partition. A partition whose replication factor
//     exceeds the brokers that may hold it refuses the whole plan.
//  2. Replicas on brokers being removed (decommission) or not live move
//     to the allowed brokers; each goes to the one holding the fewest
//     replicas.
//  3. With balancing on (rebalance), replicas move from the broker with
//     the most to the broker with the fewest until no two brokers differ
//     by more than one. Each such move lowers the excess by one, so the
//     number of replicas copied is the fewest that reach balance; a
//     replica placed by this plan is moved again (free) before one that
//     exists, and among existing ones a follower before a leader, and the
//     topic most crowded on the source before others, so that topics end
//     spread too.
//  4. When every allowed broker has a rack, a move never lowers the
//     number of racks a partition spans, and a replica that must move
//     goes to a rack the partition lacks when there is one.
//  5. The preferred leader (the first replica) of a partition whose
//     leader moved is the replica with the fewest preferred leaderships;
//     with balancing on, leaderships are then handed from the broker with
//     the most to a replica's broker with fewer while they differ by more
//     than one. Reordering copies nothing.

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// planPartition is a partition and its replicas, the first the preferred
// leader.
type planPartition struct {
	Topic     string
	Partition int32
	Replicas  []int32
}

// planBroker is a live broker; Rack is "" when it has none.
type planBroker struct {
	ID   int32
	Rack string
}

// planOptions says what a plan does besides moving replicas off brokers
// that are not live.
type planOptions struct {
	Remove  []int32 // brokers to empty (decommission)
	Balance bool    // even out replicas and preferred leaders (rebalance)
}

// planMove is a partition whose replica list changes.
type planMove struct {
	Topic     string
	Partition int32
	From, To  []int32
}

// Adding are the replicas the move copies (To not in From).
func (m planMove) Adding() []int32 { return without(m.To, m.From) }

// Removing are the replicas the move deletes (From not in To).
func (m planMove) Removing() []int32 { return without(m.From, m.To) }

// brokerLoad counts a broker's replicas and preferred leaderships.
type brokerLoad struct{ Replicas, Leaders int }

// plan is the result of computePlan.
type plan struct {
	Moves         []planMove // sorted by topic and partition
	Before, After map[int32]brokerLoad
	Brokers       []int32 // every broker in Before or After, sorted
}

// Copies is the number of replicas the plan copies.
func (p plan) Copies() int {
	n := 0
	for _, m := range p.Moves {
		n += len(m.Adding())
	}
	return n
}

// LeaderChanges is the number of partitions whose preferred leader
// changes.
func (p plan) LeaderChanges() int {
	n := 0
	for _, m := range p.Moves {
		if m.From[0] != m.To[0] {
			n++
		}
	}
	return n
}

// without returns a's members not in b, in a's order.
func without(a, b []int32) []int32 {
	var out []int32
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}

// planner is computePlan's working state.
type planner struct {
	parts    []planPartition // the targets being built
	orig     [][]int32       // the replicas before, by index of parts
	allowed  []int32         // brokers that may hold replicas, sorted
	rack     map[int32]string
	useRacks bool
	numRacks int
	load     map[int32]int            // replicas per allowed broker
	topic    map[string]map[int32]int // replicas per topic per allowed broker
	on       map[int32][]int          // indexes of the partitions each allowed broker holds
}

// computePlan computes the target assignment of parts over brokers (the
// live ones) with the rules in the file comment.
func computePlan(parts []planPartition, brokers []planBroker, opt planOptions) (plan, error) {
	pl := &planner{rack: map[int32]string{}, load: map[int32]int{}, topic: map[string]map[int32]int{}, on: map[int32][]int{}}
	racks := map[string]bool{}
	pl.useRacks = len(brokers) > 0
	for _, b := range brokers {
		if slices.Contains(opt.Remove, b.ID) || slices.Contains(pl.allowed, b.ID) {
			continue
		}
		pl.allowed = append(pl.allowed, b.ID)
		pl.rack[b.ID] = b.Rack
		racks[b.Rack] = true
		if b.Rack == "" {
			pl.useRacks = false
		}
	}
	slices.Sort(pl.allowed)
	pl.numRacks = len(racks)
	if len(pl.allowed) == 0 {
		return plan{}, fmt.Errorf("no broker would remain to hold replicas")
	}
	pl.parts = make([]planPartition, len(parts))
	for i, p := range parts {
		if len(p.Replicas) == 0 {
			return plan{}, fmt.Errorf("%s-%d has no replicas", p.Topic, p.Partition)
		}
		if len(p.Replicas) > len(pl.allowed) {
			return plan{}, fmt.Errorf("%s-%d has replication factor %d but only %d brokers would hold replicas (%s)",
				p.Topic, p.Partition, len(p.Replicas), len(pl.allowed), idList(pl.allowed))
		}
		seen := map[int32]bool{}
		for _, r := range p.Replicas {
			if seen[r] {
				return plan{}, fmt.Errorf("%s-%d lists broker %d twice in its replicas %v", p.Topic, p.Partition, r, p.Replicas)
			}
			seen[r] = true
		}
		pl.parts[i] = planPartition{Topic: p.Topic, Partition: p.Partition, Replicas: slices.Clone(p.Replicas)}
	}
	slices.SortFunc(pl.parts, func(a, b planPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	pl.orig = make([][]int32, len(pl.parts))
	for i, p := range pl.parts {
		pl.orig[i] = slices.Clone(p.Replicas)
	}
	before := loads(pl.orig)

	// Rule 2: what must move leaves a hole (-1), filled below.
	for i, p := range pl.parts {
		for j, r := range p.Replicas {
			if slices.Contains(pl.allowed, r) {
				pl.add(i, r)
			} else {
				p.Replicas[j] = -1
			}
		}
	}
	for i, p := range pl.parts {
		for j, r := range p.Replicas {
			if r < 0 {
				b := pl.fillTarget(i)
				p.Replicas[j] = b
				pl.add(i, b)
			}
		}
	}
	if opt.Balance {
		pl.balance()
	}
	pl.leaders(opt.Balance)

	out := plan{Before: before, After: loads(replicasOf(pl.parts))}
	for i, p := range pl.parts {
		if !slices.Equal(p.Replicas, pl.orig[i]) {
			out.Moves = append(out.Moves, planMove{Topic: p.Topic, Partition: p.Partition, From: pl.orig[i], To: p.Replicas})
		}
	}
	for _, id := range pl.allowed {
		if _, ok := out.After[id]; !ok {
			out.After[id] = brokerLoad{}
		}
	}
	for id := range out.Before {
		out.Brokers = append(out.Brokers, id)
	}
	for id := range out.After {
		if _, ok := out.Before[id]; !ok {
			out.Brokers = append(out.Brokers, id)
		}
	}
	slices.Sort(out.Brokers)
	return out, nil
}

func replicasOf(parts []planPartition) [][]int32 {
	out := make([][]int32, len(parts))
	for i, p := range parts {
		out[i] = p.Replicas
	}
	return out
}

func loads(assign [][]int32) map[int32]brokerLoad {
	m := map[int32]brokerLoad{}
	for _, rs := range assign {
		for j, r := range rs {
			l := m[r]
			l.Replicas++
			if j == 0 {
				l.Leaders++
			}
			m[r] = l
		}
	}
	return m
}

// add records that partition i has a replica on allowed broker b.
func (pl *planner) add(i int, b int32) {
	t := pl.parts[i].Topic
	pl.load[b]++
	if pl.topic[t] == nil {
		pl.topic[t] = map[int32]int{}
	}
	pl.topic[t][b]++
	pl.on[b] = append(pl.on[b], i)
}

// remove undoes add.
func (pl *planner) remove(i int, b int32) {
	pl.load[b]--
	pl.topic[pl.parts[i].Topic][b]--
	pl.on[b] = slices.DeleteFunc(pl.on[b], func(x int) bool { return x == i })
}

// racksOf counts the distinct racks of brokers (holes left out).
func (pl *planner) racksOf(brokers []int32) int {
	seen := map[string]bool{}
	for _, b := range brokers {
		if b >= 0 {
			seen[pl.rack[b]] = true
		}
	}
	return len(seen)
}

// fillTarget picks the broker for a hole in partition i: not holding
// it, on a rack it lacks when racks count, then the fewest replicas, the
// fewest of its topic, the lowest id.
func (pl *planner) fillTarget(i int) int32 {
	p := pl.parts[i]
	best, bestKey := int32(-1), [3]int{}
	for _, b := range pl.allowed {
		if slices.Contains(p.Replicas, b) {
			continue
		}
		rackPenalty := 0
		if pl.useRacks && pl.racksOf(append(slices.Clone(p.Replicas), b)) == pl.racksOf(p.Replicas) {
			rackPenalty = 1
		}
		key := [3]int{rackPenalty, pl.load[b], pl.topic[p.Topic][b]}
		if best < 0 || slices.Compare(key[:], bestKey[:]) < 0 {
			best, bestKey = b, key
		}
	}
	return best // rule 1 checked above that one exists
}

// balance is rule 3.
func (pl *planner) balance() {
	for pl.balanceStep() {
	}
}

// balanceStep makes one move from a broker with more replicas to one
// with at least two fewer, and reports whether it found one. A move of a
// replica this plan placed (which copies nothing more) between any such
// pair goes before a move of an existing replica.
func (pl *planner) balanceStep() bool {
	byLoad := slices.Clone(pl.allowed)
	slices.SortStableFunc(byLoad, func(a, b int32) int { return cmp.Compare(pl.load[a], pl.load[b]) })
	for _, freeOnly := range []bool{true, false} {
		for si := len(byLoad) - 1; si >= 0; si-- {
			src := byLoad[si]
			for _, dst := range byLoad {
				if pl.load[src]-pl.load[dst] < 2 {
					break
				}
				if i, j, free, ok := pl.pickMove(src, dst); ok && (free || !freeOnly) {
					pl.remove(i, src)
					pl.parts[i].Replicas[j] = dst
					pl.add(i, dst)
					return true
				}
			}
		}
	}
	return false
}

// pickMove chooses the replica on src to move to dst: partition index i,
// replica position j; free when this plan placed that replica.
func (pl *planner) pickMove(src, dst int32) (i, j int, free, ok bool) {
	bi, bj := -1, -1
	var bestKey [4]int
	for _, i := range pl.on[src] {
		p := pl.parts[i]
		if slices.Contains(p.Replicas, dst) {
			continue
		}
		j := slices.Index(p.Replicas, src)
		moved := slices.Clone(p.Replicas)
		moved[j] = dst
		if pl.useRacks && pl.racksOf(moved) < pl.racksOf(p.Replicas) {
			continue
		}
		existing := 0 // a replica this plan placed moves for free
		if slices.Contains(pl.orig[i], src) {
			existing = 1
		}
		leader := 0
		if j == 0 {
			leader = 1
		}
		// Crowding of the topic: more on src, fewer on dst first.
		spread := -(pl.topic[p.Topic][src] - pl.topic[p.Topic][dst])
		key := [4]int{existing, spread, leader, i}
		if bi < 0 || slices.Compare(key[:], bestKey[:]) < 0 {
			bi, bj, bestKey = i, j, key
		}
	}
	return bi, bj, bi >= 0 && bestKey[0] == 0, bi >= 0
}

// leaders is rule 5.
func (pl *planner) leaders(balance bool) {
	lead := map[int32]int{}
	for _, p := range pl.parts {
		lead[p.Replicas[0]]++
	}
	setLeader := func(i int, b int32) {
		rs := pl.parts[i].Replicas
		lead[rs[0]]--
		lead[b]++
		j := slices.Index(rs, b)
		copy(rs[1:j+1], rs[:j])
		rs[0] = b
	}
	for i, p := range pl.parts {
		if p.Replicas[0] == pl.orig[i][0] {
			continue
		}
		// The leader moved: the replica with the fewest leaderships, an
		// existing one before a new one.
		best := p.Replicas[0]
		key := func(b int32) [2]int {
			isNew := 0
			if !slices.Contains(pl.orig[i], b) {
				isNew = 1
			}
			l := lead[b]
			if b == p.Replicas[0] {
				l-- // not counting this partition
			}
			return [2]int{l, isNew}
		}
		for _, b := range p.Replicas[1:] {
			kb, kbest := key(b), key(best)
			if slices.Compare(kb[:], kbest[:]) < 0 {
				best = b
			}
		}
		if best != p.Replicas[0] {
			setLeader(i, best)
		}
	}
	if !balance {
		return
	}
	for {
		bi, bb, bestGain := -1, int32(-1), 1
		for i, p := range pl.parts {
			for _, b := range p.Replicas[1:] {
				if g := lead[p.Replicas[0]] - lead[b]; g > bestGain {
					bi, bb, bestGain = i, b, g
				}
			}
		}
		if bi < 0 {
			return
		}
		setLeader(bi, bb)
	}
}

// idList formats broker ids as "1, 2, 3".
func idList(ids []int32) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ", ")
}
