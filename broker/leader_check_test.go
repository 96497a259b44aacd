package broker

import (
	"testing"
	"time"

	"strata/broker/plog"
	"strata/controller"
	"strata/tier"
)

// TestCheckLeadersRestoresAMissedRestore: a leader of a tiered partition
// whose log is empty and that never restored (a role change that went by
// without MarkRestore) would serve an empty log over the bucket's
// history; the leader check restores it from the bucket.
func TestCheckLeadersRestoresAMissedRestore(t *testing.T) {
	const topic = "missed-restore"
	ts, p, tp := tieredBroker(t, tier.NewMemStore(), topic, 1, 1200)
	end, ok, err := ts.tier.idx.LogEnd(tp)
	if err != nil || !ok {
		t.Fatalf("remote log end: %d, %v, %v", end, ok, err)
	}
	ps := ts.replicas.Edit()
	if err := p.Log().ResetTo(plog.Reset{Offset: 0}); err != nil {
		ps.Done()
		t.Fatal(err)
	}
	p.StoreHW(0)
	ts.tier.ForgetRestore(tierPart{p})
	ps.Done() // the leader check may run from here on: nothing asserts the emptied state
	waitFor(t, "the leader restored from the bucket", 15*time.Second, func() bool {
		return p.Log().LogEndOffset() == end+1 && p.HW() == end+1
	})
	if off, code := listOffsets(t, ts, topic, -1); code != 0 || off != end+1 {
		t.Fatalf("restored leader: ListOffsets latest %d (error %d), want %d", off, code, end+1)
	}
}

// TestCheckLeadersAdvancesAStuckHighWatermark: a leader whose ISR is
// itself alone and whose high watermark lags its log end with no write
// coming has it advanced, as Kafka's makeLeader does.
func TestCheckLeadersAdvancesAStuckHighWatermark(t *testing.T) {
	const topic = "stuck-hw"
	ts, p, _ := tieredBroker(t, tier.NewMemStore(), topic, 1, 300)
	leo := p.Log().LogEndOffset()
	ps := ts.replicas.Edit()
	p.StoreHW(leo - 100)
	ps.Done()
	waitFor(t, "the high watermark back at the log end", 10*time.Second, func() bool { return p.HW() == leo })
}

// TestCheckLeadersReappliesAMissedRole: a partition whose applied role
// differs from the metadata a second after it changed missed a
// reconcile; the leader check applies the metadata again.
func TestCheckLeadersReappliesAMissedRole(t *testing.T) {
	const topic = "missed-role"
	ts, p, _ := tieredBroker(t, tier.NewMemStore(), topic, 1, 50)
	ps := ts.replicas.Edit()
	p.ApplyFollower(ts.cfg.ID, controller.Partition{Index: 0, Leader: ts.cfg.ID + 1, LeaderEpoch: p.LeaderEpoch(), Replicas: []int32{ts.cfg.ID}, ISR: []int32{ts.cfg.ID}})
	ps.Done()
	if _, _, leading := p.LeaderTerm(); leading {
		t.Fatal("still leading after ApplyFollower")
	}
	waitFor(t, "the leader role applied again", 10*time.Second, func() bool {
		_, _, leading := p.LeaderTerm()
		return leading
	})
}

// TestReconcileNeverAppliesAnOlderView: a caller of reconcile reads the
// metadata before it waits for the partition set's lock, so it may hold
// a view older than one another reconcile has applied meanwhile. It must
// not apply that older view over the newer one (a new leader was once
// made a follower of no one again, right after it began restoring).
func TestReconcileNeverAppliesAnOlderView(t *testing.T) {
	ts := startTestServer(t, nil)
	old := ts.ctrl.Metadata()
	ctx := testCtx(t)
	if _, err := ts.admin(t).CreateTopic(ctx, 1, 1, nil, "newer-view"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new topic's partition", 10*time.Second, func() bool { return ts.partition("newer-view", 0) != nil })
	if ts.ctrl.Metadata().Version <= old.Version {
		t.Fatalf("metadata version %d after the creation, not past %d", ts.ctrl.Metadata().Version, old.Version)
	}
	if err := ts.reconcile(old); err != nil {
		t.Fatal(err)
	}
	if ts.partition("newer-view", 0) == nil {
		t.Fatal("reconciling an older view closed a partition of the newer one")
	}
	if _, _, leading := ts.partition("newer-view", 0).LeaderTerm(); !leading {
		t.Fatal("reconciling an older view took the leader role of a partition of the newer one")
	}
}
