package zk

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"strata/controller"
)

// assignReplicas spreads n partitions with rf replicas each over brokers,
// as Kafka's AdminUtils.assignReplicasToBrokers does: leaders round-robin
// from a random start, followers shifted so that the replicas of a broker's
// partitions spread over the others; rack-aware when every broker has a
// rack. firstPartition numbers the new partitions (for CreatePartitions).
func assignReplicas(brokers []controller.Broker, n int32, rf int16, firstPartition int32) ([][]int32, error) {
	if rf < 1 {
		return nil, fmt.Errorf("%w: %d", controller.ErrInvalidReplication, rf)
	}
	if int(rf) > len(brokers) {
		return nil, fmt.Errorf("%w: %d larger than %d available brokers", controller.ErrInvalidReplication, rf, len(brokers))
	}
	if n < 1 {
		return nil, fmt.Errorf("%w: %d", controller.ErrInvalidPartitions, n)
	}
	racks := 0
	for _, b := range brokers {
		if b.Rack != nil {
			racks++
		}
	}
	sorted := slices.Clone(brokers)
	slices.SortFunc(sorted, func(a, b controller.Broker) int { return int(a.ID - b.ID) })
	if racks == len(sorted) {
		return assignRackAware(sorted, n, rf, firstPartition), nil
	}
	ids := make([]int32, len(sorted))
	for i, b := range sorted {
		ids[i] = b.ID
	}
	return assignRoundRobin(ids, n, rf, firstPartition, rand.IntN(len(ids)), rand.IntN(len(ids))), nil
}

func assignRoundRobin(ids []int32, n int32, rf int16, firstPartition int32, start, shift int) [][]int32 {
	nb := len(ids)
	out := make([][]int32, 0, n)
	cur := int(firstPartition)
	for i := int32(0); i < n; i++ {
		if cur > 0 && cur%nb == 0 {
			shift++
		}
		first := (cur + start) % nb
		r := []int32{ids[first]}
		for j := 0; j < int(rf)-1; j++ {
			r = append(r, ids[replicaIndex(first, shift, j, nb)])
		}
		out = append(out, r)
		cur++
	}
	return out
}

func replicaIndex(first, shift, j, nb int) int {
	s := 1 + (shift+j)%(nb-1)
	return (first + s) % nb
}

// assignRackAware alternates racks in the broker list, so that leaders
// round-robin over racks, and places each follower on a rack that has no
// replica of the partition yet while such a rack remains.
func assignRackAware(brokers []controller.Broker, n int32, rf int16, firstPartition int32) [][]int32 {
	byRack := map[string][]int32{}
	var rackOrder []string
	rackOf := map[int32]string{}
	for _, b := range brokers {
		if _, ok := byRack[*b.Rack]; !ok {
			rackOrder = append(rackOrder, *b.Rack)
		}
		byRack[*b.Rack] = append(byRack[*b.Rack], b.ID)
		rackOf[b.ID] = *b.Rack
	}
	slices.Sort(rackOrder)
	var list []int32 // rack-alternated
	for i := 0; len(list) < len(brokers); i++ {
		for _, r := range rackOrder {
			if i < len(byRack[r]) {
				list = append(list, byRack[r][i])
			}
		}
	}
	nb, nr := len(list), len(rackOrder)
	start, shift := rand.IntN(nb), rand.IntN(nb)
	out := make([][]int32, 0, n)
	cur := int(firstPartition)
	for i := int32(0); i < n; i++ {
		if cur > 0 && cur%nb == 0 {
			shift++
		}
		first := (cur + start) % nb
		leader := list[first]
		r := []int32{leader}
		racksUsed := map[string]bool{rackOf[leader]: true}
		used := map[int32]bool{leader: true}
		for k := 0; len(r) < int(rf) && k < nb-1; k++ {
			b := list[replicaIndex(first, shift, k, nb)]
			if used[b] || (racksUsed[rackOf[b]] && len(racksUsed) < nr) {
				continue
			}
			r = append(r, b)
			used[b], racksUsed[rackOf[b]] = true, true
		}
		// Fill up in order once every rack has a replica.
		for k := 0; len(r) < int(rf) && k < nb-1; k++ {
			b := list[replicaIndex(first, shift, k, nb)]
			if !used[b] {
				r = append(r, b)
				used[b] = true
			}
		}
		out = append(out, r)
		cur++
	}
	return out
}
