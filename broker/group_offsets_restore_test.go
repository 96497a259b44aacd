package broker

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"strata/broker/group"
	"strata/controller"
	"strata/tier"
)

// A group that has members while the bucket is another cluster's still
// gets the offsets the bucket keeps of it once the bucket becomes this
// cluster's (as after strata admin restore), and the snapshot written
// back keeps them.
func TestBucketOffsetsMergeIntoAGroupWithMembers(t *testing.T) {
	store := tier.NewMemStore()
	ctx := testCtx(t)
	if _, err := tier.UpdateClusterSnapshot(ctx, store, "old-cluster", func(*tier.ClusterSnapshot) (tier.ClusterSnapshot, error) {
		return tier.ClusterSnapshot{WrittenMs: time.Now().UnixMilli()}, nil
	}); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	b := startSnapshotServer(t, t.TempDir(), store, &logs)
	adm := b.admin(t)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	cons := b.client(t, kgo.ConsumerGroup("g"), kgo.ConsumeTopics("orders"), kgo.DisableAutoCommit(),
		kgo.FetchMaxWait(100*time.Millisecond))
	go func() {
		for ctx.Err() == nil {
			if cons.PollFetches(ctx).IsClientClosed() {
				return
			}
		}
	}()
	waitFor(t, "the group's member", 15*time.Second, func() bool {
		gs, err := adm.DescribeGroups(ctx, "g")
		return err == nil && len(gs["g"].Members) == 1 && gs["g"].State == "Stable"
	})

	// The bucket becomes this cluster's, holding offsets of g.
	id := b.ctrl.Metadata().ClusterID
	if _, err := tier.DiscardClusterSnapshot(ctx, store, id, time.Now(), 0); err != nil {
		t.Fatal(err)
	}
	idx := group.PartitionFor("g", 4)
	if err := tier.WriteGroupOffsets(ctx, store, tier.GroupOffsetsSnapshot{ClusterID: id, Partition: idx, Partitions: 4,
		Groups: map[string]map[string]map[int32]tier.SnapshotOffset{"g": {"orders": {0: {Offset: 17, LeaderEpoch: -1}, 1: {Offset: 42, LeaderEpoch: -1, Metadata: "m"}}}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the merged offsets", 15*time.Second, func() bool {
		got, err := adm.FetchOffsets(ctx, "g")
		if err != nil || got.Error() != nil {
			return false
		}
		o, ok := got.Lookup("orders", 1)
		return ok && o.At == 42 && o.Metadata == "m"
	})
	time.Sleep(3 * snapshotCheck)
	snap, err := tier.ReadGroupOffsetsPartition(ctx, store, idx)
	if err != nil || snap.Groups["g"]["orders"][0].Offset != 17 || snap.Groups["g"]["orders"][1].Offset != 42 {
		t.Fatalf("the bucket's object lost the offsets: %+v, %v\n%s", snap, err, logs.String())
	}
	if strings.Contains(logs.String(), "unmerged") {
		t.Fatalf("offsets left unmerged:\n%s", logs.String())
	}
}

// Close writes the group offsets committed since the snapshot loop's
// last check to the bucket.
func TestCloseWritesTheLastGroupOffsets(t *testing.T) {
	store := tier.NewMemStore()
	ctx := testCtx(t)
	var logs syncBuffer
	a := startSnapshotServer(t, t.TempDir(), store, &logs)
	adm := a.admin(t)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	commit := func(at int64) {
		t.Helper()
		var offs kadm.Offsets
		offs.Add(kadm.Offset{Topic: "orders", Partition: 0, At: at, LeaderEpoch: -1})
		if rs, err := adm.CommitOffsets(ctx, "g", offs); err != nil || rs.Error() != nil {
			t.Fatalf("commit: %v %v", err, rs.Error())
		}
	}
	idx := group.PartitionFor("g", 4)
	inBucket := func() int64 {
		snap, err := tier.ReadGroupOffsetsPartition(ctx, store, idx)
		if err != nil {
			return -1
		}
		if o, ok := snap.Groups["g"]["orders"][0]; ok {
			return o.Offset
		}
		return -1
	}
	commit(17)
	waitFor(t, "the first commit in the bucket", 10*time.Second, func() bool { return inBucket() == 17 })
	// Right after a check of the snapshot loop, the loop's next one being
	// a second away.
	w := a.groups.snapshotAsOf.Load()
	waitFor(t, "a snapshot check", 5*time.Second, func() bool { return a.groups.snapshotAsOf.Load() != w })
	commit(42)
	a.Close()
	if got := inBucket(); got != 42 {
		t.Fatalf("the bucket holds offset %d after Close, want 42", got)
	}
}

// A load of the bucket's offsets cut short after its first batch (the
// broker stopped leading, crashed) is loaded again, whole, by the next
// load, and the bucket's object is not written over with fewer.
func TestACutLoadFromTheBucketIsCompleted(t *testing.T) {
	store := tier.NewMemStore()
	ctx := testCtx(t)
	var logsA syncBuffer
	dirA := t.TempDir()
	a := startSnapshotServer(t, dirA, store, &logsA)
	id := a.ctrl.Metadata().ClusterID
	if _, err := a.admin(t).CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	var other kadm.Offsets // creates __consumer_offsets
	other.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 1, LeaderEpoch: -1})
	if rs, err := a.admin(t).CommitOffsets(ctx, "other", other); err != nil || rs.Error() != nil {
		t.Fatalf("commit: %v %v", err, rs.Error())
	}
	waitFor(t, "the cluster snapshot", 10*time.Second, func() bool {
		s, err := tier.ReadClusterSnapshot(ctx, store)
		return err == nil && s.ClusterID == id
	})
	a.Close()
	const n = 2500 // three batches
	idx := group.PartitionFor("g", 4)
	parts := map[int32]tier.SnapshotOffset{}
	for p := range int32(n) {
		parts[p] = tier.SnapshotOffset{Offset: int64(p) + 1, LeaderEpoch: -1}
	}
	if err := tier.WriteGroupOffsets(ctx, store, tier.GroupOffsetsSnapshot{ClusterID: id, Partition: idx, Partitions: 4,
		Groups: map[string]map[string]map[int32]tier.SnapshotOffset{"g": {"orders": parts}}}); err != nil {
		t.Fatal(err)
	}
	dirB := t.TempDir()
	md, err := os.ReadFile(filepath.Join(dirA, controller.MetadataFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dirB, controller.MetadataFile), md, 0o644); err != nil {
		t.Fatal(err)
	}
	cut := make(chan struct{})
	var once sync.Once
	seedCut = func(batch int) error {
		if batch == 0 {
			return nil
		}
		once.Do(func() { close(cut) })
		return kerr.NotLeaderForPartition
	}
	t.Cleanup(func() { seedCut = nil })
	var logsB syncBuffer
	b := startSnapshotServer(t, dirB, store, &logsB)
	select {
	case <-cut:
	case <-time.After(10 * time.Second):
		t.Fatal("the load did not start")
	}
	b.Close()
	seedCut = nil

	var logsB2 syncBuffer
	b2 := startSnapshotServer(t, dirB, store, &logsB2)
	got, err := b2.admin(t).FetchOffsets(ctx, "g")
	if err != nil || got.Error() != nil {
		t.Fatalf("fetch offsets: %v %v", err, got.Error())
	}
	if c := len(got["orders"]); c != n {
		t.Fatalf("%d offsets after the load, want %d\n%s", c, n, logsB2.String())
	}
	time.Sleep(3 * snapshotCheck)
	snap, err := tier.ReadGroupOffsetsPartition(ctx, store, idx)
	if err != nil || len(snap.Groups["g"]["orders"]) != n {
		t.Fatalf("the bucket's object holds %d offsets, want %d: %v", len(snap.Groups["g"]["orders"]), n, err)
	}
}
