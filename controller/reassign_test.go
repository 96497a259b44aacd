package controller

import (
	"errors"
	"slices"
	"testing"
)

func TestReassignStates(t *testing.T) {
	all := func(int32) bool { return true }
	p := Partition{Leader: 1, LeaderEpoch: 5, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}

	// Start: target first, then the original replicas being removed.
	s, changed := ReassignStart(p, []int32{4, 2, 3})
	if !changed || !slices.Equal(s.Replicas, []int32{4, 2, 3, 1}) || !slices.Equal(s.AddingReplicas, []int32{4}) ||
		!slices.Equal(s.RemovingReplicas, []int32{1}) || s.LeaderEpoch != 6 || s.Leader != 1 {
		t.Fatalf("start: %+v", s)
	}
	if _, again := ReassignStart(s, []int32{4, 2, 3}); again {
		t.Fatal("starting the same reassignment again changed it")
	}
	// Not complete until every target replica is in the ISR.
	if _, done := ReassignProgress(s, all); done {
		t.Fatal("completed before broker 4 joined the ISR")
	}
	s.ISR = []int32{1, 2, 3, 4}
	d, done := ReassignProgress(s, all)
	if !done || !slices.Equal(d.Replicas, []int32{4, 2, 3}) || d.Reassigning() || d.Leader != 4 ||
		!slices.Equal(d.ISR, []int32{2, 3, 4}) || d.LeaderEpoch != 7 {
		t.Fatalf("complete: %+v", d)
	}
	// A removed leader gives way to the first live target in the ISR.
	d, done = ReassignProgress(s, func(id int32) bool { return id != 4 })
	if !done || d.Leader != 2 {
		t.Fatalf("complete with broker 4 down: %+v", d)
	}

	// Replacing the target keeps the original replicas.
	r, _ := ReassignStart(s, []int32{5, 2, 3})
	if !slices.Equal(r.Replicas, []int32{5, 2, 3, 1}) || !slices.Equal(r.ISR, []int32{1, 2, 3}) || r.Leader != 1 {
		t.Fatalf("replace: %+v", r)
	}
	if !slices.Equal(r.AddingReplicas, []int32{5}) || !slices.Equal(r.RemovingReplicas, []int32{1}) {
		t.Fatalf("replace: %+v", r)
	}

	// Cancel: back to the original replicas, the adding one out of the ISR.
	c, err := ReassignCancel(s, all)
	if err != nil || !slices.Equal(c.Replicas, []int32{2, 3, 1}) || c.Reassigning() || slices.Contains(c.ISR, 4) || c.Leader != 1 {
		t.Fatalf("cancel: %+v %v", c, err)
	}
	if _, err := ReassignCancel(p, all); !errors.Is(err, ErrNoReassignmentInProgress) {
		t.Fatalf("cancel with none in progress: %v", err)
	}

	// A target equal to the replicas in another order completes at once.
	o, changed := ReassignStart(p, []int32{3, 2, 1})
	if !changed || !slices.Equal(o.Replicas, []int32{3, 2, 1}) || o.Reassigning() {
		t.Fatalf("reorder: %+v", o)
	}
}

func TestCheckTarget(t *testing.T) {
	reg := func(id int32) bool { return id <= 3 }
	for _, c := range []struct {
		target []int32
		ok     bool
	}{{[]int32{1, 2}, true}, {nil, false}, {[]int32{1, 1}, false}, {[]int32{-1}, false}, {[]int32{1, 9}, false}} {
		if err := CheckTarget(c.target, reg); (err == nil) != c.ok || err != nil && !errors.Is(err, ErrInvalidReplicaAssignment) {
			t.Errorf("CheckTarget(%v) = %v", c.target, err)
		}
	}
}

func TestMemoryReassignment(t *testing.T) {
	m := NewMemory()
	ctx := t.Context()
	for id := int32(1); id <= 3; id++ {
		m.RegisterBroker(ctx, Broker{ID: id})
	}
	if _, err := m.CreateTopic(ctx, CreateTopicRequest{Name: "t", NumPartitions: 1, Assignments: [][]int32{{1, 2}}}); err != nil {
		t.Fatal(err)
	}
	tp := TopicPartition{Topic: "t", Partition: 0}
	res, err := m.AlterPartitionReassignments(ctx, map[TopicPartition][]int32{tp: {3, 2}, {Topic: "x"}: {1}})
	if err != nil || res[tp] != nil || !errors.Is(res[TopicPartition{Topic: "x"}], ErrUnknownTopic) {
		t.Fatalf("alter: %v %v", res, err)
	}
	if ra := Reassignments(m.Metadata(), nil); len(ra) != 1 || !slices.Equal(ra[tp].Adding, []int32{3}) {
		t.Fatalf("list: %+v", ra)
	}
	p := m.Metadata().Topics["t"].Partitions[0]
	np, err := m.AlterPartition(ctx, AlterPartitionRequest{Topic: "t", Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
		PartitionEpoch: p.PartitionEpoch, ISR: append(slices.Clone(p.ISR), 3)})
	if err != nil || np.Reassigning() || !slices.Equal(np.Replicas, []int32{3, 2}) || np.Leader != 3 {
		t.Fatalf("ISR expansion did not complete the reassignment: %+v %v", np, err)
	}
}
