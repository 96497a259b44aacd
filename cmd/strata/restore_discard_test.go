package main

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	tierpkg "strata/tier"
)

// restore --discard refuses a snapshot written less than discardMinAge
// ago (its cluster may be running on the bucket) unless --force, and
// discards an older one.
func TestDiscardRefusesARecentSnapshot(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.ClusterID("B"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bootstrap := c.ListenAddrs()[0]
	ctx := t.Context()
	store := tierpkg.NewMemStore()
	written := func(ago time.Duration) {
		t.Helper()
		if _, err := tierpkg.UpdateClusterSnapshot(ctx, store, "A", func(*tierpkg.ClusterSnapshot) (tierpkg.ClusterSnapshot, error) {
			return tierpkg.ClusterSnapshot{WrittenMs: time.Now().Add(-ago).UnixMilli()}, nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	owner := func() string {
		t.Helper()
		snap, err := tierpkg.ReadClusterSnapshot(ctx, store)
		if err != nil {
			t.Fatal(err)
		}
		return snap.ClusterID
	}
	written(time.Minute)
	if rc := discardSnapshot(ctx, bootstrap, []kgo.Opt{kgo.SeedBrokers(bootstrap)}, store, "mem://", discardMinAge); rc == 0 || owner() != "A" {
		t.Fatalf("discarded a snapshot written a minute ago: exit %d, owner %s", rc, owner())
	}
	written(10 * time.Minute)
	if rc := discardSnapshot(ctx, bootstrap, []kgo.Opt{kgo.SeedBrokers(bootstrap)}, store, "mem://", discardMinAge); rc != 0 || owner() != "B" {
		t.Fatalf("an old snapshot: exit %d, owner %s", rc, owner())
	}
	// --force: a recent one goes too.
	if _, err := tierpkg.DiscardClusterSnapshot(ctx, store, "A", time.Now(), 0); err != nil {
		t.Fatal(err)
	}
	if rc := discardSnapshot(ctx, bootstrap, []kgo.Opt{kgo.SeedBrokers(bootstrap)}, store, "mem://", 0); rc != 0 || owner() != "B" {
		t.Fatalf("--force: exit %d, owner %s", rc, owner())
	}
}
