package controller

import (
	"context"
	"errors"
	"slices"
	"testing"
)

func TestElectMove(t *testing.T) {
	alive := func(id int32) bool { return id != 9 }
	for _, tc := range []struct {
		name    string
		p       Partition
		typ     ElectionType
		leader  int32
		isr     []int32
		wantErr error
	}{
		{"preferred moves back", Partition{Leader: 2, LeaderEpoch: 3, Replicas: []int32{1, 2, 3}, ISR: []int32{2, 3, 1}}, ElectPreferred, 1, []int32{2, 3, 1}, nil},
		{"preferred already leads", Partition{Leader: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, ElectPreferred, 1, nil, ErrElectionNotNeeded},
		{"preferred not in ISR", Partition{Leader: 2, Replicas: []int32{1, 2}, ISR: []int32{2}}, ElectPreferred, 2, nil, ErrPreferredLeaderNotAvailable},
		{"preferred dead", Partition{Leader: 2, Replicas: []int32{9, 2}, ISR: []int32{2, 9}}, ElectPreferred, 2, nil, ErrPreferredLeaderNotAvailable},
		{"unclean with live leader", Partition{Leader: 2, Replicas: []int32{1, 2}, ISR: []int32{2}}, ElectUnclean, 2, nil, ErrElectionNotNeeded},
		{"unclean picks live replica", Partition{Leader: -1, LeaderEpoch: 3, Replicas: []int32{9, 2}, ISR: []int32{9}}, ElectUnclean, 2, []int32{2}, nil},
		{"unclean prefers live ISR member", Partition{Leader: 9, LeaderEpoch: 3, Replicas: []int32{1, 9, 2}, ISR: []int32{9, 2}}, ElectUnclean, 2, []int32{2}, nil},
		{"unclean nobody alive", Partition{Leader: -1, Replicas: []int32{9}, ISR: []int32{9}}, ElectUnclean, -1, nil, ErrEligibleLeadersNotAvailable},
	} {
		np, err := ElectMove(tc.p, tc.typ, alive)
		if !errors.Is(err, tc.wantErr) && !(err == nil && tc.wantErr == nil) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.wantErr)
			continue
		}
		if np.Leader != tc.leader {
			t.Errorf("%s: leader %d, want %d", tc.name, np.Leader, tc.leader)
		}
		if err == nil && (np.LeaderEpoch != tc.p.LeaderEpoch+1 || !slices.Equal(np.ISR, tc.isr)) {
			t.Errorf("%s: got %+v", tc.name, np)
		}
		if err != nil && np.LeaderEpoch != tc.p.LeaderEpoch {
			t.Errorf("%s: unchanged partition got epoch %d", tc.name, np.LeaderEpoch)
		}
	}
}

func TestImbalanced(t *testing.T) {
	md := &Metadata{Brokers: []Broker{{ID: 1}, {ID: 2}, {ID: 3}}, Topics: map[string]*Topic{
		"t": {Name: "t", Partitions: []Partition{
			{Index: 0, Leader: 2, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}},
			{Index: 1, Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}},
			{Index: 2, Leader: 2, Replicas: []int32{2, 3, 1}, ISR: []int32{1, 2, 3}},
			{Index: 3, Leader: 2, Replicas: []int32{3, 2, 1}, ISR: []int32{1, 2, 3}},
			{Index: 4, Leader: 3, Replicas: []int32{3, 2, 1}, ISR: []int32{1, 2, 3}},
		}},
	}}
	// Broker 1 misses 1 of 2 (50%), broker 3 misses 1 of 2 (50%), broker 2 none.
	got := Imbalanced(md, 50)
	if len(got) != 0 {
		t.Errorf("50%%: got %v, want nothing", got)
	}
	got = Imbalanced(md, 10)
	slices.SortFunc(got, func(a, b TopicPartition) int { return int(a.Partition - b.Partition) })
	if !slices.Equal(got, []TopicPartition{{"t", 0}, {"t", 3}}) {
		t.Errorf("10%%: got %v", got)
	}
	md.Brokers = md.Brokers[:2] // broker 3 is gone: nothing to give it
	if got = Imbalanced(md, 10); !slices.Equal(got, []TopicPartition{{"t", 0}}) {
		t.Errorf("broker 3 dead: got %v", got)
	}
}

func TestMemoryElectLeaders(t *testing.T) {
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
	if _, err := m.ControlledShutdown(ctx, 1, -1); err != nil {
		t.Fatal(err)
	}
	// Broker 1 is back in every ISR (as after it caught up).
	for _, p := range m.Metadata().Topics["t"].Partitions {
		if _, err := m.AlterPartition(ctx, AlterPartitionRequest{Topic: "t", Partition: p.Index, Leader: p.Leader,
			LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: append(slices.Clone(p.ISR), 1)}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := m.ElectLeaders(ctx, ElectPreferred, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 3 {
		t.Fatalf("all partitions: got %v", res)
	}
	for _, p := range m.Metadata().Topics["t"].Partitions {
		tp := TopicPartition{"t", p.Index}
		if p.Leader != p.Replicas[0] {
			t.Errorf("partition %d: leader %d, preferred %d (result %v)", p.Index, p.Leader, p.Replicas[0], res[tp])
		}
		if (p.Replicas[0] == 1) != (res[tp] == nil) {
			t.Errorf("partition %d preferred %d: result %v", p.Index, p.Replicas[0], res[tp])
		}
	}
	res, _ = m.ElectLeaders(ctx, ElectUnclean, []TopicPartition{{"t", 0}, {"nope", 0}})
	if !errors.Is(res[TopicPartition{"t", 0}], ErrElectionNotNeeded) || !errors.Is(res[TopicPartition{"nope", 0}], ErrUnknownTopic) {
		t.Errorf("unclean with live leaders: %v", res)
	}
}
