package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/testenv"
)

// TestClusterPreferredLeaderElection: three brokers on a real ZooKeeper,
// RF=3. The preferred leader of a partition (a broker that is not the
// controller) is killed with -9 and restarted, so leadership moves away
// and stays away; then leadership goes back to it: by kadm's ElectLeaders
// (preferred) with auto.leader.rebalance.enable=false, and by the
// controller alone with leader.imbalance.check.interval.seconds=1. The two
// clusters share one ZooKeeper under different chroots and run in
// parallel.
func TestClusterPreferredLeaderElection(t *testing.T) {
	zk := testenv.StartZooKeeper(t)
	for _, auto := range []bool{false, true} {
		t.Run(fmt.Sprintf("auto=%v", auto), func(t *testing.T) {
			t.Parallel()
			preferredLeaderBack(t, zk.Addr()+fmt.Sprintf("/elect-%v", auto), auto)
		})
	}
}

func preferredLeaderBack(t *testing.T, connect string, auto bool) {
	sets := []string{"zookeeper.session.timeout.ms=2000", "replica.lag.time.max.ms=3000",
		fmt.Sprintf("auto.leader.rebalance.enable=%v", auto), "leader.imbalance.check.interval.seconds=1"}
	bs, seeds := startZKBrokers(t, connect, sets)
	const topic, partitions = "elect", 3
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	createReplicatedTopic(t, ctx, seeds, topic, partitions)
	metadata := func() (kadm.Metadata, bool) {
		md, err := clusterMetadata(ctx, seeds, topic)
		return md, err == nil && len(md.Topics[topic].Partitions) == partitions
	}
	fullISR := func(md kadm.Metadata) bool {
		for _, p := range md.Topics[topic].Partitions {
			if p.Err != nil || p.Leader < 0 || len(p.ISR) != 3 || len(md.Brokers) != 3 {
				return false
			}
		}
		return true
	}
	var md kadm.Metadata
	waitFor(t, 20*time.Second, "a full ISR led by preferred replicas", func() bool {
		var ok bool
		md, ok = metadata()
		if !ok || !fullISR(md) {
			return false
		}
		for _, p := range md.Topics[topic].Partitions {
			if p.Leader != p.Replicas[0] {
				return false
			}
		}
		return true
	})
	// The victim is a partition's preferred leader that is not the
	// controller, so that killing it moves leadership without a
	// controller failover.
	var part, victim int32 = -1, -1
	for _, p := range md.Topics[topic].Partitions.Sorted() {
		if p.Replicas[0] != md.Controller {
			part, victim = p.Partition, p.Replicas[0]
			break
		}
	}
	if victim < 0 {
		t.Fatalf("every partition prefers the controller %d: %+v", md.Controller, md.Topics[topic].Partitions)
	}
	leaderOf := func(md kadm.Metadata) int32 { return md.Topics[topic].Partitions[part].Leader }
	t.Logf("kill -9 broker %d, preferred leader of partition %d (controller %d)", victim, part, md.Controller)
	bs[victim].Kill9()
	waitFor(t, 15*time.Second, "leadership to move away", func() bool {
		md, ok := metadata()
		return ok && leaderOf(md) >= 0 && leaderOf(md) != victim
	})
	bs[victim].Restart()
	if !auto {
		waitFor(t, 20*time.Second, "a full ISR after the restart", func() bool {
			var ok bool
			md, ok = metadata()
			return ok && fullISR(md)
		})
		if l := leaderOf(md); l == victim {
			t.Fatalf("broker %d leads partition %d again without an election", victim, part)
		}
		adm := kadm.NewClient(newClient(t, seeds[0], kgo.SeedBrokers(seeds...)))
		res, err := adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {part: {}}})
		if err != nil {
			t.Fatalf("elect leaders: %v", err)
		}
		if r, ok := res[topic][part]; !ok || r.Err != nil {
			t.Fatalf("elect leaders of partition %d: %+v (all %+v)", part, r, res)
		}
		// Electing again is not needed.
		res, err = adm.ElectLeaders(ctx, kadm.ElectPreferredReplica, kadm.TopicsSet{topic: {part: {}}})
		if err != nil || res[topic][part].Err == nil {
			t.Errorf("second election: want ELECTION_NOT_NEEDED, got %+v %v", res[topic][part], err)
		}
	}
	waitFor(t, 20*time.Second, fmt.Sprintf("broker %d to lead partition %d again", victim, part), func() bool {
		md, ok := metadata()
		return ok && leaderOf(md) == victim && fullISR(md)
	})
}
