package controller

import (
	"context"
	"errors"
	"slices"
	"testing"
)

func TestMemoryElectsFromISROnKill(t *testing.T) {
	ctx := context.Background()
	m := NewMemory()
	for id := int32(0); id < 3; id++ {
		if err := m.RegisterBroker(ctx, Broker{ID: id, Host: "127.0.0.1", Port: 9092 + id}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.CreateTopic(ctx, CreateTopicRequest{Name: "t", NumPartitions: 3, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	p := m.Metadata().Topics["t"].Partitions[0]
	if p.Leader != 0 || len(p.ISR) != 3 {
		t.Fatalf("new partition %+v", p)
	}

	// The leader shrinks the ISR; a stale partition epoch is refused.
	req := AlterPartitionRequest{Topic: "t", Partition: 0, Leader: 0, LeaderEpoch: 0, PartitionEpoch: 0, ISR: []int32{0, 1}}
	np, err := m.AlterPartition(ctx, req)
	if err != nil || np.PartitionEpoch != 1 || !slices.Equal(np.ISR, []int32{0, 1}) {
		t.Fatalf("alter: %+v, %v", np, err)
	}
	if _, err := m.AlterPartition(ctx, req); !errors.Is(err, ErrInvalidUpdateVersion) {
		t.Fatalf("stale partition epoch: %v", err)
	}
	if _, err := m.AlterPartition(ctx, AlterPartitionRequest{Topic: "t", Partition: 0, Leader: 1, PartitionEpoch: 1, ISR: []int32{1}}); !errors.Is(err, ErrNotLeader) {
		t.Fatalf("non-leader: %v", err)
	}

	// Killing the leader elects the next ISR member with a new epoch; the
	// broker out of the ISR (2) is not eligible.
	ch := m.Changes()
	m.Kill(0)
	<-ch
	p = m.Metadata().Topics["t"].Partitions[0]
	if p.Leader != 1 || p.LeaderEpoch != 1 || !slices.Equal(p.ISR, []int32{1}) {
		t.Fatalf("after kill: %+v, want leader 1 epoch 1 ISR [1]", p)
	}
	m.Kill(1)
	p = m.Metadata().Topics["t"].Partitions[0]
	if p.Leader != -1 || !slices.Equal(p.ISR, []int32{1}) {
		t.Fatalf("last ISR member dead: %+v, want no leader and ISR [1]", p)
	}
	// It comes back and leads again.
	if err := m.RegisterBroker(ctx, Broker{ID: 1, Host: "127.0.0.1", Port: 9093}); err != nil {
		t.Fatal(err)
	}
	p = m.Metadata().Topics["t"].Partitions[0]
	if p.Leader != 1 || p.LeaderEpoch != 3 {
		t.Fatalf("after restart: %+v, want leader 1 epoch 3", p)
	}
}
