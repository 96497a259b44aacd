package controller

import (
	"context"
	"slices"
	"testing"
)

func TestShutdownMove(t *testing.T) {
	alive := func(id int32) bool { return id != 9 }
	p := Partition{Leader: 1, LeaderEpoch: 4, Replicas: []int32{1, 2, 3}, ISR: []int32{3, 1, 2}}
	np, changed, stuck := ShutdownMove(p, 1, alive)
	if !changed || stuck || np.Leader != 2 || np.LeaderEpoch != 5 || !slices.Equal(np.ISR, []int32{3, 2}) {
		t.Errorf("leader moves to the first other ISR member in replica order: got %+v changed %v stuck %v", np, changed, stuck)
	}
	np, changed, stuck = ShutdownMove(p, 3, alive)
	if !changed || stuck || np.Leader != 1 || np.LeaderEpoch != 5 || !slices.Equal(np.ISR, []int32{1, 2}) {
		t.Errorf("follower leaves the ISR: got %+v changed %v stuck %v", np, changed, stuck)
	}
	if _, changed, stuck = ShutdownMove(p, 7, alive); changed || stuck {
		t.Errorf("uninvolved broker: changed %v stuck %v", changed, stuck)
	}
	alone := Partition{Leader: 1, Replicas: []int32{1, 2, 9}, ISR: []int32{1, 9}}
	if np, changed, stuck = ShutdownMove(alone, 1, alive); changed || !stuck || np.Leader != 1 {
		t.Errorf("no other live ISR member: got %+v changed %v stuck %v", np, changed, stuck)
	}
}

func TestMemoryControlledShutdown(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	for id := int32(1); id <= 3; id++ {
		if err := m.RegisterBroker(ctx, Broker{ID: id, Host: "h", Port: 9000 + id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.CreateTopic(ctx, CreateTopicRequest{Name: "t", NumPartitions: 3, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	remaining, err := m.ControlledShutdown(ctx, 1, -1)
	if err != nil || len(remaining) != 0 {
		t.Fatalf("ControlledShutdown: remaining %v, err %v", remaining, err)
	}
	for _, p := range m.Metadata().Topics["t"].Partitions {
		if p.Leader == 1 || slices.Contains(p.ISR, 1) || p.Leader < 0 || !slices.Contains(p.ISR, p.Leader) {
			t.Errorf("partition %d after shutdown of 1: leader %d isr %v", p.Index, p.Leader, p.ISR)
		}
	}
}
