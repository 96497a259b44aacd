package e2e

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestGroupStaticMemberRestart: a static member (group.instance.id)
// restarts within its session timeout and gets its assignment back
// without a rebalance: same generation, consumption resumes after its
// commits.
func TestGroupStaticMemberRestart(t *testing.T) {
	b := startGroupBroker(t)
	addr := b.Addr()
	const topic, group = "static", "static-group"
	createTopic(t, addr, topic, 3, nil)
	if err := <-produceValues(t, addr, topic, 0, 300); err != nil {
		t.Fatal(err)
	}
	led := newProcessLedger()
	opts := []kgo.Opt{kgo.InstanceID("static-1"), kgo.SessionTimeout(20 * time.Second), kgo.HeartbeatInterval(500 * time.Millisecond)}
	m := startMember(t, addr, "first", group, topic, led, opts...)
	// Wait for the commits too: stopping the member cancels a commit in
	// flight, and the restarted member would rightly process those again.
	waitFor(t, 30*time.Second, "first 300 records processed and committed", func() bool {
		return led.count() >= 300 && led.uncommitted("first") == 0
	})
	memberID, gen := m.cl.GroupMetadata()
	if gen <= 0 {
		t.Fatalf("generation %d", gen)
	}
	m.leave() // a static member does not send LeaveGroup on close
	if err := <-produceValues(t, addr, topic, 300, 600); err != nil {
		t.Fatal(err)
	}
	m2 := startMember(t, addr, "second", group, topic, led, opts...)
	waitFor(t, 30*time.Second, "the rest of the records", func() bool { return led.count() >= 600 })
	memberID2, gen2 := m2.cl.GroupMetadata()
	if gen2 != gen {
		t.Fatalf("generation changed from %d to %d: the restart rebalanced", gen, gen2)
	}
	if memberID2 == memberID {
		t.Fatalf("member id %s not replaced", memberID)
	}
	led.check(t, 600, nil)
}

// TestGroupOffsetsSurviveBrokerRestart: committed offsets are served
// after a clean restart (SIGTERM) and after kill -9.
func TestGroupOffsetsSurviveBrokerRestart(t *testing.T) {
	b := startGroupBroker(t)
	addr := b.Addr()
	const topic, group = "restart", "restart-group"
	createTopic(t, addr, topic, 3, nil)
	if err := <-produceValues(t, addr, topic, 0, 300); err != nil {
		t.Fatal(err)
	}
	commitAll := func(off int64) {
		adm := kadm.NewClient(newClient(t, addr))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		os := kadm.Offsets{}
		for p := range int32(3) {
			os.Add(kadm.Offset{Topic: topic, Partition: p, At: off + int64(p), LeaderEpoch: -1, Metadata: "m"})
		}
		r, err := adm.CommitOffsets(ctx, group, os)
		if err == nil {
			err = r.Error()
		}
		if err != nil {
			t.Fatalf("commit: %v", err)
		}
	}
	check := func(when string, off int64) {
		t.Helper()
		adm := kadm.NewClient(newClient(t, addr))
		var got kadm.OffsetResponses
		waitFor(t, 30*time.Second, "offsets "+when, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			r, err := adm.FetchOffsets(ctx, group)
			if err != nil || r.Error() != nil {
				return false
			}
			got = r
			return true
		})
		for p := range int32(3) {
			o, ok := got.Lookup(topic, p)
			if !ok || o.At != off+int64(p) || o.Metadata != "m" {
				t.Fatalf("%s: partition %d: %+v (ok %v), want %d", when, p, o, ok, off+int64(p))
			}
		}
	}
	commitAll(10)
	b.Restart() // SIGTERM, start again
	check("after SIGTERM restart", 10)
	commitAll(50)
	b.Kill9()
	b.Restart()
	check("after kill -9", 50)
	// A group member resumes from the committed offsets.
	led := newProcessLedger()
	startMember(t, addr, "resumer", group, topic, led)
	waitFor(t, 30*time.Second, "records after the commits", func() bool { return led.count() >= 300-150-3 })
	led.mu.Lock()
	defer led.mu.Unlock()
	if n := len(led.processed); n != 300-150-3 {
		t.Fatalf("resumed consumer processed %d records, want %d", n, 300-150-3)
	}
}
