package replica

import (
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

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

// TestAppendAsLeaderUsesTheAppliedEpoch: an append is refused until this
// broker has applied a leadership (the controller's metadata may name it
// leader first), is stamped with the applied epoch, which the epoch cache
// then holds, and is refused again once the broker follows. Before, the
// produce path checked the metadata's leader and stamped the partition's
// last epoch: a new leader could write its first records under the old
// epoch, and a returning replica kept its divergent tail.
func TestAppendAsLeaderUsesTheAppliedEpoch(t *testing.T) {
	m := vfs.NewCrashableMem()
	m.MkdirAll("t-0", 0o755)
	l, err := plog.Open(plog.Options{FS: m, Dir: "t-0", Config: plog.DefaultConfig(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := NewPartition("t", 0, [16]byte{}, l)
	p.SetLeaderEpoch(4) // what the metadata says, before reconcile applied it
	if _, err := p.AppendAsLeader(testBatch(1)); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("append before the leadership was applied: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	p.ApplyFollower(1, controller.Partition{Leader: 2, LeaderEpoch: 3, Replicas: []int32{1, 2}, ISR: []int32{1, 2}})
	if _, err := p.AppendAsLeader(testBatch(1)); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("append as a follower: %v", err)
	}
	p.ApplyLeader(1, controller.Partition{Leader: 1, LeaderEpoch: 4, Replicas: []int32{1, 2}, ISR: []int32{1, 2}}, time.Now())
	info, err := p.AppendAsLeader(testBatch(2))
	if err != nil || info.FirstOffset != 0 {
		t.Fatalf("append as leader: %+v, %v", info, err)
	}
	if e := l.LatestEpoch(); e != 4 {
		t.Fatalf("the epoch cache's latest epoch is %d after an append at epoch 4", e)
	}
	if e, end := l.EndOffsetForEpoch(3); e != 3 || end != 0 {
		t.Fatalf("end of epoch 3: %d/%d, want 3/0 (epoch 4 starts at 0)", e, end)
	}
	p.ApplyFollower(1, controller.Partition{Leader: 2, LeaderEpoch: 5, Replicas: []int32{1, 2}, ISR: []int32{1, 2}})
	if _, err := p.AppendAsLeader(testBatch(1)); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("append after following again: %v", err)
	}
}

// TestAppendControlAsLeader: a transaction marker, as a producer's
// append, is refused until a leadership is applied and after the broker
// follows, and is stamped with the applied leader epoch.
func TestAppendControlAsLeader(t *testing.T) {
	m := vfs.NewCrashableMem()
	m.MkdirAll("t-0", 0o755)
	l, err := plog.Open(plog.Options{FS: m, Dir: "t-0", Config: plog.DefaultConfig(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := NewPartition("t", 0, [16]byte{}, l)
	p.SetLeaderEpoch(6)
	commit := plog.EndTxnMarker{Type: plog.ControlCommit, CoordinatorEpoch: 2}
	if _, err := p.AppendControlAsLeader(7, 0, commit, 0); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("marker before the leadership was applied: %v, want NOT_LEADER_OR_FOLLOWER", err)
	}
	p.ApplyLeader(1, controller.Partition{Leader: 1, LeaderEpoch: 6, Replicas: []int32{1}, ISR: []int32{1}}, time.Now())
	info, err := p.AppendControlAsLeader(7, 0, commit, 0)
	if err != nil || info.FirstOffset != 0 || info.NumRecords != 1 {
		t.Fatalf("marker as leader: %+v, %v", info, err)
	}
	if e := l.LatestEpoch(); e != 6 {
		t.Fatalf("the epoch cache's latest epoch is %d after a marker at epoch 6", e)
	}
	p.ApplyFollower(1, controller.Partition{Leader: 2, LeaderEpoch: 7, Replicas: []int32{1, 2}, ISR: []int32{1, 2}})
	if _, err := p.AppendControlAsLeader(7, 0, commit, 0); !errors.Is(err, kerr.NotLeaderForPartition) {
		t.Fatalf("marker after following: %v", err)
	}
}
