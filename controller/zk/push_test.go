package zk

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/controller"
	"strata/internal/testenv"
)

func othersOf(act *Controller, cs []*Controller) []*Controller {
	var out []*Controller
	for _, c := range cs {
		if c != act {
			out = append(out, c)
		}
	}
	return out
}

// A broker that is not the controller learns topics only from the
// controller's requests: cut off from them it does not see a new topic,
// although it reads the same ZooKeeper; reachable again, it is brought up
// to date, and a deletion reaches it the same way.
func TestPushIsTheSourceOfTopics(t *testing.T) {
	z := testenv.StartZooKeeper(t)
	cs := []*Controller{newController(t, z, 1), newController(t, z, 2), newController(t, z, 3)}
	act := activeOf(t, cs...)
	others := othersOf(act, cs)
	cut, peer := others[0], others[1]
	ctx := context.Background()

	testNet.setCut(cut.opts.Broker.ID, true)
	topic, err := act.CreateTopic(ctx, controller.CreateTopicRequest{Name: "pushed", NumPartitions: 3, ReplicationFactor: 3})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the reachable follower to learn the topic", func() bool {
		got := peer.Metadata().Topics["pushed"]
		return got != nil && got.ID == topic.ID && len(got.Partitions) == 3
	})
	// The controller retries the cut broker every 200ms; give it a few.
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if cut.Metadata().Topics["pushed"] != nil {
			t.Fatal("a broker cut off from the controller's requests learned the topic (from ZooKeeper?)")
		}
		time.Sleep(20 * time.Millisecond) // observing that nothing happens
	}
	testNet.setCut(cut.opts.Broker.ID, false)
	waitUntil(t, 5*time.Second, "the cut broker to be brought up to date", func() bool {
		got := cut.Metadata().Topics["pushed"]
		return got != nil && got.ID == topic.ID && len(got.Partitions) == 3 &&
			slices.Equal(got.Partitions[1].Replicas, topic.Partitions[1].Replicas)
	})

	if err := act.DeleteTopic(ctx, "pushed"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "every broker to drop the deleted topic", func() bool {
		for _, c := range cs {
			if c.Metadata().Topics["pushed"] != nil {
				return false
			}
		}
		return true
	})
}

// The receiving side refuses requests of an older controller epoch or for
// an older registration of the broker, and partition states older than
// the one it holds.
func TestPushRefusesStaleRequests(t *testing.T) {
	z := testenv.StartZooKeeper(t)
	cs := []*Controller{newController(t, z, 1), newController(t, z, 2)}
	act := activeOf(t, cs...)
	follower := othersOf(act, cs)[0]
	ctx := context.Background()
	topic, err := act.CreateTopic(ctx, controller.CreateTopicRequest{Name: "t", NumPartitions: 1, ReplicationFactor: 2})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the follower to learn the topic", func() bool { return follower.Metadata().Topics["t"] != nil })
	epoch := act.ControllerEpoch()
	own := follower.ownEpoch.Load()
	p := topic.Partitions[0]

	um := kmsg.NewPtrUpdateMetadataRequest()
	um.Version, um.ControllerID, um.ControllerEpoch, um.BrokerEpoch = 8, act.opts.Broker.ID, epoch-1, own
	if got := follower.HandleUpdateMetadata(ctx, um).ErrorCode; got != kerr.StaleControllerEpoch.Code {
		t.Errorf("UpdateMetadata of an older controller epoch: error %d, want STALE_CONTROLLER_EPOCH", got)
	}
	um.ControllerEpoch, um.BrokerEpoch = epoch, own-1
	if got := follower.HandleUpdateMetadata(ctx, um).ErrorCode; got != kerr.StaleBrokerEpoch.Code {
		t.Errorf("UpdateMetadata for an older broker epoch: error %d, want STALE_BROKER_EPOCH", got)
	}

	lai := func(leaderEpoch, zkVersion int32, replicas []int32) int16 {
		req := kmsg.NewPtrLeaderAndISRRequest()
		req.Version, req.ControllerID, req.ControllerEpoch, req.BrokerEpoch = 7, act.opts.Broker.ID, epoch, own
		ts := kmsg.NewLeaderAndISRRequestTopicState()
		ts.Topic, ts.TopicID = "t", topic.ID
		ps := kmsg.NewLeaderAndISRRequestTopicPartition()
		ps.Partition, ps.Leader, ps.LeaderEpoch, ps.ZKVersion = 0, p.Leader, leaderEpoch, zkVersion
		ps.ISR, ps.Replicas = p.ISR, replicas
		ts.PartitionStates = append(ts.PartitionStates, ps)
		req.TopicStates = append(req.TopicStates, ts)
		resp := follower.HandleLeaderAndISR(ctx, req)
		if resp.ErrorCode != 0 {
			return resp.ErrorCode
		}
		return resp.Topics[0].Partitions[0].ErrorCode
	}
	if got := lai(p.LeaderEpoch-1, p.PartitionEpoch, p.Replicas); got != kerr.StaleControllerEpoch.Code {
		t.Errorf("LeaderAndIsr with an older leader epoch: error %d, want STALE_CONTROLLER_EPOCH", got)
	}
	if got := lai(p.LeaderEpoch+1, 0, []int32{act.opts.Broker.ID}); got != kerr.UnknownTopicOrPartition.Code {
		t.Errorf("LeaderAndIsr for a partition not replicated here: error %d, want UNKNOWN_TOPIC_OR_PARTITION", got)
	}
	if got := lai(p.LeaderEpoch, p.PartitionEpoch, p.Replicas); got != 0 {
		t.Errorf("LeaderAndIsr repeating the current state: error %d, want none", got)
	}
	if got := follower.Metadata().Topics["t"].Partitions[0]; got.LeaderEpoch != p.LeaderEpoch || !slices.Equal(got.Replicas, p.Replicas) {
		t.Errorf("after refused requests the follower holds %+v, want %+v", got, p)
	}
}

// A broker in controlled shutdown stays listed (as in Kafka) but leads
// nothing and may not rejoin an ISR through the controller while it
// leaves; it learns of the moves away from it.
func TestShuttingDownBrokerLeavesMetadataAndISR(t *testing.T) {
	z := testenv.StartZooKeeper(t)
	cs := []*Controller{newController(t, z, 1), newController(t, z, 2), newController(t, z, 3)}
	act := activeOf(t, cs...)
	others := othersOf(act, cs)
	leaving := others[0]
	ctx := context.Background()
	waitUntil(t, 5*time.Second, "the controller to see three brokers", func() bool { return len(act.Metadata().Brokers) == 3 })
	if _, err := act.CreateTopic(ctx, controller.CreateTopicRequest{Name: "t", NumPartitions: 3, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "every broker to learn the topic", func() bool {
		for _, c := range cs {
			if c.Metadata().Topics["t"] == nil {
				return false
			}
		}
		return true
	})
	id := leaving.opts.Broker.ID
	remaining, err := act.ControlledShutdown(ctx, id, leaving.ownEpoch.Load())
	if err != nil || len(remaining) != 0 {
		t.Fatalf("controlled shutdown of broker %d: remaining %v, err %v", id, remaining, err)
	}
	for _, c := range []*Controller{act} {
		md := c.Metadata()
		if !hasBroker(md, id) {
			t.Errorf("broker %d no longer lists the leaving broker %d", c.opts.Broker.ID, id)
		}
		for _, p := range md.Topics["t"].Partitions {
			if p.Leader == id || slices.Contains(p.ISR, id) {
				t.Errorf("broker %d: partition %+v still led by or in sync with the leaving broker", c.opts.Broker.ID, p)
			}
		}
	}
	// Its own view says it leads nothing (it was told, though leaving).
	waitUntil(t, 5*time.Second, "the leaving broker to learn it leads nothing", func() bool {
		for _, p := range leaving.Metadata().Topics["t"].Partitions {
			if p.Leader == id {
				return false
			}
		}
		return true
	})
	// The controller does not take it back into an ISR.
	var p controller.Partition
	for _, q := range act.Metadata().Topics["t"].Partitions {
		if q.Leader == act.opts.Broker.ID {
			p = q
		}
	}
	if p.Replicas == nil {
		t.Fatalf("broker %d leads no partition of t", act.opts.Broker.ID)
	}
	_, err = act.AlterPartition(ctx, controller.AlterPartitionRequest{Topic: "t", Partition: p.Index, Leader: p.Leader,
		LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, ISR: append(slices.Clone(p.ISR), id)})
	if err == nil {
		t.Errorf("the leaving broker %d was let back into the ISR of partition %d", id, p.Index)
	}
}

// Regression (review of the push change): a topic deleted and created
// again with fewer partitions while a broker could not be told reached it
// under the old topic id, and the next change of one partition then hid
// the topic, whose logs the broker would have deleted.
func TestPushRecreatedTopicWhileCut(t *testing.T) {
	z := testenv.StartZooKeeper(t)
	cs := []*Controller{newController(t, z, 1), newController(t, z, 2), newController(t, z, 3)}
	act := activeOf(t, cs...)
	waitUntil(t, 5*time.Second, "the controller to see three brokers", func() bool { return len(act.Metadata().Brokers) == 3 })
	cut := othersOf(act, cs)[0]
	ctx := context.Background()
	old, err := act.CreateTopic(ctx, controller.CreateTopicRequest{Name: "r", NumPartitions: 4, ReplicationFactor: 3})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the broker to learn r", func() bool {
		tt := cut.Metadata().Topics["r"]
		return tt != nil && tt.ID == old.ID && len(tt.Partitions) == 4
	})
	testNet.setCut(cut.opts.Broker.ID, true)
	if err := act.DeleteTopic(ctx, "r"); err != nil {
		t.Fatal(err)
	}
	nw, err := act.CreateTopic(ctx, controller.CreateTopicRequest{Name: "r", NumPartitions: 2, ReplicationFactor: 3})
	if err != nil {
		t.Fatal(err)
	}
	testNet.setCut(cut.opts.Broker.ID, false)
	holdsNew := func() bool {
		tt := cut.Metadata().Topics["r"]
		return tt != nil && tt.ID == nw.ID && len(tt.Partitions) == 2
	}
	waitUntil(t, 5*time.Second, "the broker to hold the new r", holdsNew)

	// A change of partition 1 alone reaches it and keeps the topic whole.
	p1 := act.Metadata().Topics["r"].Partitions[1]
	var ldr *Controller
	for _, c := range cs {
		if c.opts.Broker.ID == p1.Leader {
			ldr = c
		}
	}
	np, err := ldr.AlterPartition(ctx, controller.AlterPartitionRequest{Topic: "r", Partition: 1, Leader: p1.Leader,
		LeaderEpoch: p1.LeaderEpoch, PartitionEpoch: p1.PartitionEpoch, ISR: []int32{p1.Leader}})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the broker to learn the ISR change", func() bool {
		tt := cut.Metadata().Topics["r"]
		return tt != nil && len(tt.Partitions) == 2 && tt.Partitions[1].PartitionEpoch >= np.PartitionEpoch
	})
	if !holdsNew() {
		t.Fatalf("after a change of partition 1 the broker holds r as %+v", cut.Metadata().Topics["r"])
	}
}

// A LeaderAndIsr names only the partitions the broker hosts: a topic
// known from it alone is Partial (not shown to clients) until an
// UpdateMetadata describes it whole.
func TestPushTopicPartialUntilDescribed(t *testing.T) {
	z := testenv.StartZooKeeper(t)
	cs := []*Controller{newController(t, z, 1), newController(t, z, 2)}
	act := activeOf(t, cs...)
	follower := othersOf(act, cs)[0]
	self := follower.opts.Broker.ID
	ctx := context.Background()
	waitUntil(t, 5*time.Second, "the follower to know the cluster", func() bool { return follower.pushed.synced })
	epoch, own := act.ControllerEpoch(), follower.ownEpoch.Load()
	id := controller.NewTopicID()

	lai := kmsg.NewPtrLeaderAndISRRequest()
	lai.Version, lai.ControllerID, lai.ControllerEpoch, lai.BrokerEpoch = 7, act.opts.Broker.ID, epoch, own
	ts := kmsg.NewLeaderAndISRRequestTopicState()
	ts.Topic, ts.TopicID = "partial", id
	ps := kmsg.NewLeaderAndISRRequestTopicPartition()
	ps.Partition, ps.Leader, ps.ISR, ps.Replicas = 0, self, []int32{self}, []int32{self}
	ts.PartitionStates = append(ts.PartitionStates, ps)
	lai.TopicStates = append(lai.TopicStates, ts)
	if got := follower.HandleLeaderAndISR(ctx, lai).ErrorCode; got != 0 {
		t.Fatalf("LeaderAndIsr: error %d", got)
	}
	got := follower.Metadata().Topics["partial"]
	if got == nil || !got.Partial || len(got.Partitions) != 1 || got.Partitions[0].Leader != self {
		t.Fatalf("after LeaderAndIsr for partition 0: %+v, want a Partial topic with partition 0 led here", got)
	}

	um := kmsg.NewPtrUpdateMetadataRequest()
	um.Version, um.ControllerID, um.ControllerEpoch, um.BrokerEpoch = 8, act.opts.Broker.ID, epoch, own
	for _, b := range act.Metadata().Brokers {
		lb := kmsg.NewUpdateMetadataRequestLiveBroker()
		lb.ID, lb.Host, lb.Port = b.ID, b.Host, b.Port
		um.LiveBrokers = append(um.LiveBrokers, lb)
	}
	uts := kmsg.NewUpdateMetadataRequestTopicState()
	uts.Topic, uts.TopicID = "partial", id
	for i := range int32(2) {
		up := kmsg.NewUpdateMetadataRequestTopicPartition()
		up.Topic, up.Partition, up.Leader, up.ISR, up.Replicas = "partial", i, self, []int32{self}, []int32{self}
		uts.PartitionStates = append(uts.PartitionStates, up)
	}
	um.TopicStates = append(um.TopicStates, uts)
	if got := follower.HandleUpdateMetadata(ctx, um).ErrorCode; got != 0 {
		t.Fatalf("UpdateMetadata: error %d", got)
	}
	got = follower.Metadata().Topics["partial"]
	if got == nil || got.Partial || len(got.Partitions) != 2 {
		t.Fatalf("after UpdateMetadata: %+v, want the whole topic of 2 partitions", got)
	}
}
