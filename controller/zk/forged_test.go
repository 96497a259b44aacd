package zk

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/controller"
	"strata/internal/testenv"
)

// Issue 25, items 1, 3 and 5 at the receiving end: requests that claim to
// come from the controller but that ZooKeeper does not confirm, or that
// do not name the receiver's exact epoch, or that name an illegal topic,
// change nothing, and the real controller is not shut out by them.
func TestForgedControllerRequestsRefused(t *testing.T) {
	z := testenv.StartZooKeeper(t)
	cs := []*Controller{newController(t, z, 1), newController(t, z, 2)}
	act := activeOf(t, cs...)
	follower := othersOf(act, cs)[0]
	ctx := context.Background()
	if _, err := act.CreateTopic(ctx, controller.CreateTopicRequest{Name: "t", NumPartitions: 1, ReplicationFactor: 2}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the follower to learn the topic", func() bool { return follower.Metadata().Topics["t"] != nil })
	epoch, own, ctrlID := act.ControllerEpoch(), follower.ownEpoch.Load(), act.opts.Broker.ID

	um := func(ctrlID, ctrlEpoch int32, brokerEpoch int64) int16 {
		req := kmsg.NewPtrUpdateMetadataRequest() // no topics, no live brokers: "the cluster is empty"
		req.Version, req.ControllerID, req.ControllerEpoch, req.BrokerEpoch = 8, ctrlID, ctrlEpoch, brokerEpoch
		return follower.HandleUpdateMetadata(ctx, req).ErrorCode
	}
	cases := []struct {
		name        string
		ctrlID      int32
		ctrlEpoch   int32
		brokerEpoch int64
		want        int16
	}{
		{"highest controller epoch, broker epoch -1", ctrlID, math.MaxInt32, -1, kerr.StaleBrokerEpoch.Code},
		{"highest controller epoch, right broker epoch", ctrlID, math.MaxInt32, own, kerr.StaleControllerEpoch.Code},
		{"current epoch, another sender", 99, epoch, own, kerr.StaleControllerEpoch.Code},
		{"current epoch, broker epoch -1", ctrlID, epoch, -1, kerr.StaleBrokerEpoch.Code},
		{"current epoch, wrong broker epoch", ctrlID, epoch, own + 1, kerr.StaleBrokerEpoch.Code},
	}
	for _, c := range cases {
		if got := um(c.ctrlID, c.ctrlEpoch, c.brokerEpoch); got != c.want {
			t.Errorf("UpdateMetadata, %s: error %v, want %v", c.name, kerr.ErrorForCode(got), kerr.ErrorForCode(c.want))
		}
	}
	if follower.Metadata().Topics["t"] == nil {
		t.Fatal("a refused UpdateMetadata removed the topic")
	}

	stop := kmsg.NewPtrStopReplicaRequest()
	stop.Version, stop.ControllerID, stop.ControllerEpoch = 4, ctrlID, epoch
	st := kmsg.NewStopReplicaRequestTopic()
	st.Topic = "t"
	sp := kmsg.NewStopReplicaRequestTopicPartitionState()
	sp.Partition, sp.LeaderEpoch, sp.Delete = 0, -2, true
	st.PartitionStates = append(st.PartitionStates, sp)
	stop.Topics = append(stop.Topics, st)
	for _, be := range []int64{-1, own - 1} {
		stop.BrokerEpoch = be
		if got := follower.HandleStopReplica(ctx, stop).ErrorCode; got != kerr.StaleBrokerEpoch.Code {
			t.Errorf("StopReplica with delete, current controller epoch, broker epoch %d: error %v, want STALE_BROKER_EPOCH", be, kerr.ErrorForCode(got))
		}
	}
	if follower.Metadata().Topics["t"] == nil {
		t.Fatal("a refused StopReplica removed the partition")
	}

	lai := kmsg.NewPtrLeaderAndISRRequest()
	lai.Version, lai.ControllerID, lai.ControllerEpoch, lai.BrokerEpoch = 7, ctrlID, epoch, own
	for _, name := range []string{"../victim", "..", "a/b", ""} {
		ts := kmsg.NewLeaderAndISRRequestTopicState()
		ts.Topic, ts.TopicID = name, controller.NewTopicID()
		ps := kmsg.NewLeaderAndISRRequestTopicPartition()
		ps.Partition, ps.Leader, ps.LeaderEpoch = 0, follower.opts.Broker.ID, 1
		ps.Replicas, ps.ISR = []int32{follower.opts.Broker.ID}, []int32{follower.opts.Broker.ID}
		ts.PartitionStates = append(ts.PartitionStates, ps)
		lai.TopicStates = append(lai.TopicStates, ts)
	}
	resp := follower.HandleLeaderAndISR(ctx, lai)
	if resp.ErrorCode != 0 || len(resp.Topics) != 4 {
		t.Fatalf("LeaderAndIsr with illegal names: error %v, %d topics answered", kerr.ErrorForCode(resp.ErrorCode), len(resp.Topics))
	}
	for i, rt := range resp.Topics {
		if got := rt.Partitions[0].ErrorCode; got != kerr.InvalidTopicException.Code {
			t.Errorf("LeaderAndIsr for topic %q: error %v, want INVALID_TOPIC_EXCEPTION", lai.TopicStates[i].Topic, kerr.ErrorForCode(got))
		}
	}
	for name := range follower.Metadata().Topics {
		if !controller.ValidTopicName(name) {
			t.Errorf("the follower's metadata holds topic %q", name)
		}
	}

	// ControlledShutdown without the broker's epoch (v0 and v1 carry
	// none) or with another is refused; the broker stays in the ISR.
	for _, be := range []int64{-1, own + 1} {
		_, err := act.ControlledShutdown(ctx, follower.opts.Broker.ID, be)
		if !errors.Is(err, controller.ErrStaleBrokerEpoch) {
			t.Errorf("ControlledShutdown of broker %d with epoch %d: %v, want a stale broker epoch", follower.opts.Broker.ID, be, err)
		}
	}
	if p := act.Metadata().Topics["t"].Partitions[0]; len(p.ISR) != 2 {
		t.Errorf("after refused ControlledShutdowns the ISR is %v, want both brokers", p.ISR)
	}

	// The real controller is not shut out: its next change reaches the
	// follower.
	if _, err := act.CreateTopic(ctx, controller.CreateTopicRequest{Name: "after", NumPartitions: 1, ReplicationFactor: 2}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the follower to learn a topic created after the forgeries", func() bool { return follower.Metadata().Topics["after"] != nil })
}

// warnCounter is a slog handler that counts WARN records with a message.
type warnCounter struct {
	msg string
	n   *atomic.Int32
}

func (h warnCounter) Enabled(context.Context, slog.Level) bool { return true }
func (h warnCounter) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn && strings.Contains(r.Message, h.msg) {
		h.n.Add(1)
	}
	return nil
}
func (h warnCounter) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h warnCounter) WithGroup(string) slog.Handler      { return h }

// Issue 25, item 5: a topic name ZooKeeper rejects froze a broker's
// metadata updates for good, logged only at debug. A failing step is now
// logged at WARN and retried, and updates resume once the cause is gone.
func TestMetadataStepFailureWarnsAndRetries(t *testing.T) {
	z := testenv.StartZooKeeper(t)
	act := newController(t, z, 1)
	activeOf(t, act)
	warned := new(atomic.Int32)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	follower, err := New(ctx, Options{
		Connect: z.Addr() + testChroot, Broker: controller.Broker{ID: 2, Host: "127.0.0.1", Port: 9092},
		SessionTimeout: 2 * time.Second, ConnectionTimeout: 5 * time.Second,
		Logger:    slog.New(warnCounter{msg: "zookeeper metadata update failed", n: warned}),
		Transport: testNet,
	})
	if err != nil {
		t.Fatal(err)
	}
	testNet.join(t, follower)
	t.Cleanup(func() { follower.Close() })
	waitUntil(t, 10*time.Second, "the follower to be ready", func() bool {
		select {
		case <-follower.ready:
			return true
		default:
			return false
		}
	})

	// What a request naming ../victim used to leave in the pushed state
	// (requests are now refused before it gets there).
	bad := controller.NewTopicID()
	follower.pushed.mu.Lock()
	follower.pushed.upsert("../victim", bad, controller.Partition{Index: 0, Leader: 1, Replicas: []int32{1, 2}, ISR: []int32{1, 2}})
	follower.pushed.mu.Unlock()
	follower.kickRun()
	waitUntil(t, 10*time.Second, "a WARN for the failing step", func() bool { return warned.Load() > 0 })

	follower.pushed.mu.Lock()
	follower.pushed.remove("../victim", bad, 0)
	follower.pushed.mu.Unlock()
	follower.kickRun()
	if _, err := act.CreateTopic(context.Background(), controller.CreateTopicRequest{Name: "after", NumPartitions: 1, ReplicationFactor: 2}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the follower's metadata to move again", func() bool { return follower.Metadata().Topics["after"] != nil })
}
