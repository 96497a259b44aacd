package replica

import (
	"log/slog"
	"slices"
	"testing"
	"time"

	"strata/broker/plog"
	"strata/controller"
	"strata/internal/vfs"
)

// TestLeaderAdoptsReplicasOfTheSameEpoch: the ZooKeeper controller writes
// a reassignment's replicas (topic znode) and its new leader epoch
// (state znode) apart, so a leader may see the new epoch with the old
// replicas first, then the new replicas with the same epochs. The replica
// being added must still be tracked, and join the ISR once caught up.
func TestLeaderAdoptsReplicasOfTheSameEpoch(t *testing.T) {
	m := vfs.NewCrashableMem()
	m.MkdirAll("t-0", 0o755)
	l, err := plog.Open(plog.Options{FS: m, Dir: "t-0", Config: plog.DefaultConfig(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := NewPartition("t", 0, [16]byte{}, l)
	now := time.Now()
	p.ApplyLeader(1, controller.Partition{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 3, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}, now)
	p.ApplyLeader(1, controller.Partition{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 3, Replicas: []int32{4, 2, 3, 1}, ISR: []int32{1, 2, 3}}, now)
	if isr := p.RecordFollowerFetch(4, 0, now); !slices.Equal(isr, []int32{1, 2, 3, 4}) {
		t.Fatalf("a caught-up added replica proposed ISR %v, want [1 2 3 4]", isr)
	}
	// A replica no longer in the set is forgotten.
	p.rs.pending = nil
	p.ApplyLeader(1, controller.Partition{Leader: 1, LeaderEpoch: 1, PartitionEpoch: 3, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, now)
	if isr := p.RecordFollowerFetch(3, 0, now); isr != nil {
		t.Fatalf("a removed replica proposed ISR %v", isr)
	}
}
