package broker

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"strata/broker/config"
	"strata/controller"
	"strata/tier"
)

// startSnapshotServer starts a broker on dir with tiered storage on store.
func startSnapshotServer(t *testing.T, dir string, store tier.ObjectStore, logs *syncBuffer) *testServer {
	t.Helper()
	cfg, err := config.Load(map[string]string{
		"broker.id": "0", "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": dir,
		"remote.log.storage.system.enable": "true", "remote.log.manager.task.interval.ms": "50",
		"offsets.topic.num.partitions": "4",
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Options{Config: cfg, Listen: cfg.ListenAddr(), TierStore: store, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return &testServer{Server: srv, dir: dir}
}

// A broker whose __consumer_offsets partitions are empty but whose
// cluster is the bucket's (the embedded controller's metadata kept, the
// logs wiped: ZooKeeper kept, disks lost) loads the committed offsets
// from the bucket before it serves them, and writes the snapshot back
// with them. A broker of another cluster (a fresh data directory) warns
// and writes over neither snapshot.
func TestGroupOffsetsComeBackFromTheBucket(t *testing.T) {
	store := tier.NewMemStore()
	ctx := testCtx(t)
	var logsA syncBuffer
	dirA := t.TempDir()
	a := startSnapshotServer(t, dirA, store, &logsA)
	adm := a.admin(t)
	if _, err := adm.CreateTopic(ctx, 2, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: "orders", Partition: 0, At: 17, LeaderEpoch: -1})
	offs.Add(kadm.Offset{Topic: "orders", Partition: 1, At: 42, LeaderEpoch: -1, Metadata: "m"})
	if rs, err := adm.CommitOffsets(ctx, "g", offs); err != nil || rs.Error() != nil {
		t.Fatalf("commit: %v %v", err, rs.Error())
	}
	clusterA := a.ctrl.Metadata().ClusterID
	waitFor(t, "the offsets in the bucket", 10*time.Second, func() bool {
		gs, err := tier.ReadGroupOffsets(ctx, store, clusterA)
		if err != nil {
			return false
		}
		for _, g := range gs {
			if g.Groups["g"]["orders"][1].Offset == 42 {
				return true
			}
		}
		return false
	})
	snapA, err := tier.ReadClusterSnapshot(ctx, store)
	if err != nil || snapA.ClusterID != clusterA {
		t.Fatalf("cluster snapshot: %+v, %v", snapA, err)
	}
	a.Close()

	// Another cluster on the same bucket.
	var logsC syncBuffer
	c := startSnapshotServer(t, t.TempDir(), store, &logsC)
	waitFor(t, "the warning", 10*time.Second, func() bool {
		return strings.Contains(logsC.String(), "the bucket holds the metadata snapshot of another cluster")
	})
	if _, err := c.admin(t).CreateTopic(ctx, 1, 1, nil, "theirs"); err != nil {
		t.Fatal(err)
	}
	var other kadm.Offsets
	other.Add(kadm.Offset{Topic: "theirs", Partition: 0, At: 5, LeaderEpoch: -1})
	if rs, err := c.admin(t).CommitOffsets(ctx, "g", other); err != nil || rs.Error() != nil {
		t.Fatalf("commit: %v %v", err, rs.Error())
	}
	time.Sleep(3 * snapshotCheck)
	if s, err := tier.ReadClusterSnapshot(ctx, store); err != nil || s.ClusterID != clusterA || s.Generation != snapA.Generation {
		t.Fatalf("another cluster wrote the cluster snapshot: %+v, %v", s, err)
	}
	if gs, err := tier.ReadGroupOffsets(ctx, store, clusterA); err != nil || len(gs) == 0 {
		t.Fatalf("group offsets of the bucket's cluster: %+v, %v", gs, err)
	}
	if gs, err := tier.ReadGroupOffsets(ctx, store, c.ctrl.Metadata().ClusterID); err != nil || len(gs) != 0 {
		t.Fatalf("another cluster wrote group offsets: %+v, %v", gs, err)
	}
	c.Close()

	// The first cluster again, its logs gone.
	dirB := t.TempDir()
	md, err := os.ReadFile(filepath.Join(dirA, controller.MetadataFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dirB, controller.MetadataFile), md, 0o644); err != nil {
		t.Fatal(err)
	}
	var logsB syncBuffer
	b := startSnapshotServer(t, dirB, store, &logsB)
	got, err := b.admin(t).FetchOffsets(ctx, "g")
	if err != nil || got.Error() != nil {
		t.Fatalf("fetch offsets: %v %v", err, got.Error())
	}
	for _, want := range []struct {
		p    int32
		at   int64
		meta string
	}{{0, 17, ""}, {1, 42, "m"}} {
		if o, ok := got.Lookup("orders", want.p); !ok || o.At != want.at || o.Metadata != want.meta {
			t.Fatalf("offset of orders-%d: %+v, want %d %q", want.p, o, want.at, want.meta)
		}
	}
	if !strings.Contains(logsB.String(), "loaded committed offsets into an empty __consumer_offsets partition") {
		t.Fatalf("no load from the bucket logged:\n%s", logsB.String())
	}
	time.Sleep(3 * snapshotCheck)
	gs, err := tier.ReadGroupOffsets(ctx, store, clusterA)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, g := range gs {
		found = found || g.Groups["g"]["orders"][1].Offset == 42
	}
	if !found {
		t.Fatalf("the offsets snapshot lost the group: %+v", gs)
	}
}
