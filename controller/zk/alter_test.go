package zk

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"strata/controller"
	"strata/internal/testenv"
)

func TestAlterPartitionAndRegistration(t *testing.T) {
	z := testenv.StartZooKeeper(t)
	cs := []*Controller{newController(t, z, 1), newController(t, z, 2), newController(t, z, 3)}
	act := activeOf(t, cs...)
	ctx := context.Background()
	topic, err := act.CreateTopic(ctx, controller.CreateTopicRequest{Name: "a", Assignments: [][]int32{{2, 1, 3}}})
	if err != nil {
		t.Fatal(err)
	}
	p := topic.Partitions[0]
	if p.Leader != 2 || !slices.Equal(p.Replicas, []int32{2, 1, 3}) {
		t.Fatalf("explicit assignment: %+v", p)
	}
	req := controller.AlterPartitionRequest{Topic: "a", Partition: 0, Leader: 2, LeaderEpoch: 0, PartitionEpoch: 0, ISR: []int32{2, 3}}
	// A broker that is neither the controller nor the leader cannot
	// propose for the leader.
	var bystander *Controller
	for _, c := range cs {
		if c != act && c.opts.Broker.ID != 2 {
			bystander = c
		}
	}
	if _, err := bystander.AlterPartition(ctx, req); !errors.Is(err, controller.ErrNotLeader) {
		t.Errorf("AlterPartition from broker %d for leader 2: %v, want ErrNotLeader", bystander.opts.Broker.ID, err)
	}
	// The leader commits its own change, controller or not (ZooKeeper
	// mode: a conditional write of the state znode).
	act = cs[1]
	waitUntil(t, 5*time.Second, "the topic on broker 2", func() bool { return act.Metadata().Topics["a"] != nil })
	got, err := act.AlterPartition(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.ISR, []int32{2, 3}) || got.PartitionEpoch != 1 || got.LeaderEpoch != 0 {
		t.Errorf("after shrink: %+v", got)
	}
	if _, err := act.AlterPartition(ctx, req); !errors.Is(err, controller.ErrInvalidUpdateVersion) {
		t.Errorf("stale partition epoch: %v, want ErrInvalidUpdateVersion", err)
	}
	bad := req
	bad.Leader, bad.PartitionEpoch = 1, 1
	if _, err := act.AlterPartition(ctx, bad); !errors.Is(err, controller.ErrNotLeader) {
		t.Errorf("not the leader: %v, want ErrNotLeader", err)
	}
	req.PartitionEpoch, req.ISR = 1, []int32{2, 3, 1}
	if got, err = act.AlterPartition(ctx, req); err != nil || got.PartitionEpoch != 2 || len(got.ISR) != 3 {
		t.Fatalf("expand: %+v, %v", got, err)
	}
	waitUntil(t, 5*time.Second, "the ISR change everywhere", func() bool {
		for _, c := range cs {
			p := c.Metadata().Topics["a"].Partitions[0]
			if p.PartitionEpoch != 2 || len(p.ISR) != 3 {
				return false
			}
		}
		return true
	})

	// A broker id still held by another session (a killed process whose
	// session has not expired) registers once that session is gone.
	other, _, err := zk.Connect([]string{z.Addr()}, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Create(testChroot+"/brokers/ids/9", []byte(`{}`), zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	done := make(chan *Controller)
	go func() {
		c, err := New(ctx, Options{Connect: z.Addr() + testChroot, Broker: controller.Broker{ID: 9, Host: "h", Port: 1}, SessionTimeout: 2 * time.Second, Transport: testNet})
		if err != nil {
			t.Error(err)
		}
		done <- c
	}()
	waitUntil(t, 5*time.Second, "a refused registration attempt", func() bool {
		_, st, err := other.Get(testChroot + "/brokers/ids/9")
		return err == nil && st.EphemeralOwner == other.SessionID()
	})
	select {
	case <-done:
		t.Fatal("New returned while another session holds the broker id")
	case <-time.After(300 * time.Millisecond):
	}
	other.Close()
	if c := <-done; c != nil {
		defer c.Close()
		testNet.join(t, c)
		if !hasBroker(c.Metadata(), 9) {
			t.Error("broker 9 not registered")
		}
	}
}
