package zk

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"strata/controller"
	"strata/internal/testenv"
)

const testChroot = "/strata/test"

func newController(t *testing.T, z *testenv.ZooKeeper, id int32) *Controller {
	t.Helper()
	c, err := startController(t, z, id)
	if err != nil {
		t.Fatalf("start controller of broker %d: %v", id, err)
	}
	return c
}

// startController is newController for goroutines other than the test's.
func startController(t *testing.T, z *testenv.ZooKeeper, id int32) (*Controller, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := New(ctx, Options{
		Connect:           z.Addr() + testChroot,
		Broker:            controller.Broker{ID: id, Host: "127.0.0.1", Port: 9090 + id},
		SessionTimeout:    2 * time.Second,
		ConnectionTimeout: 5 * time.Second,
		Logger:            slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo})).With("broker", id),
		Transport:         testNet,
	})
	if err != nil {
		return nil, err
	}
	testNet.join(t, c)
	t.Cleanup(func() { c.Close() })
	return c, nil
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(string(b[:len(b)-1]))
	return len(b), nil
}

// waitUntil polls cond until it holds, failing the test after d.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition
	}
}

// activeOf waits for exactly one active controller among cs that every
// one of them names, and returns it.
func activeOf(t *testing.T, cs ...*Controller) *Controller {
	t.Helper()
	return activeWithin(t, 10*time.Second, cs...)
}

// activeWithin waits up to d for exactly one controller that every
// broker agrees on.
func activeWithin(t *testing.T, d time.Duration, cs ...*Controller) *Controller {
	t.Helper()
	var act *Controller
	waitUntil(t, d, "one agreed controller", func() bool {
		act = nil
		for _, c := range cs {
			if c.IsActive() {
				if act != nil {
					return false
				}
				act = c
			}
		}
		if act == nil {
			return false
		}
		for _, c := range cs {
			if c.Metadata().ControllerID != act.opts.Broker.ID {
				return false
			}
		}
		return true
	})
	return act
}

func rawClient(t *testing.T, z *testenv.ZooKeeper) *zk.Conn {
	t.Helper()
	conn, _, err := zk.Connect([]string{z.Addr()}, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	return conn
}

func readJSON(t *testing.T, conn *zk.Conn, path string, v any) *zk.Stat {
	t.Helper()
	data, st, err := conn.Get(testChroot + path)
	if err != nil {
		t.Fatalf("get %s: %v", path, err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s holds %q: %v", path, data, err)
	}
	return st
}

func TestElectionAndTopicMetadata(t *testing.T) {
	z := testenv.StartZooKeeper(t)
	cs := []*Controller{newController(t, z, 1), newController(t, z, 2), newController(t, z, 3)}
	act := activeOf(t, cs...)
	ctx := context.Background()

	for _, c := range cs {
		if c == act {
			continue
		}
		if _, err := c.CreateTopic(ctx, controller.CreateTopicRequest{Name: "x", NumPartitions: 1, ReplicationFactor: 1}); !errors.Is(err, controller.ErrNotController) {
			t.Errorf("CreateTopic on broker %d (not controller): %v, want ErrNotController", c.opts.Broker.ID, err)
		}
	}
	if _, err := act.CreateTopic(ctx, controller.CreateTopicRequest{Name: "x", NumPartitions: 1, ReplicationFactor: 4}); !errors.Is(err, controller.ErrInvalidReplication) {
		t.Errorf("CreateTopic with RF 4 on 3 brokers: %v, want ErrInvalidReplication", err)
	}
	topic, err := act.CreateTopic(ctx, controller.CreateTopicRequest{
		Name: "orders", NumPartitions: 3, ReplicationFactor: 3, Configs: map[string]string{"retention.ms": "1000"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := act.CreateTopic(ctx, controller.CreateTopicRequest{Name: "orders", NumPartitions: 1, ReplicationFactor: 1}); !errors.Is(err, controller.ErrTopicExists) {
		t.Errorf("second CreateTopic: %v, want ErrTopicExists", err)
	}
	leaders := map[int32]int{}
	for _, p := range topic.Partitions {
		if len(p.Replicas) != 3 || p.Leader != p.Replicas[0] || !sameSet(p.ISR, p.Replicas) {
			t.Errorf("partition %+v: want 3 replicas, first leads, all in ISR", p)
		}
		leaders[p.Leader]++
	}
	if len(leaders) != 3 {
		t.Errorf("leaders %v: want one partition led by each broker", leaders)
	}
	waitUntil(t, 5*time.Second, "the topic on every broker", func() bool {
		for _, c := range cs {
			got := c.Metadata().Topics["orders"]
			if got == nil || got.ID != topic.ID || !reflect.DeepEqual(got.Configs, topic.Configs) || len(got.Partitions) != 3 {
				return false
			}
			for i, p := range got.Partitions {
				want := topic.Partitions[i]
				if p.Leader != want.Leader || !slices.Equal(p.Replicas, want.Replicas) || !slices.Equal(p.ISR, want.ISR) {
					return false
				}
			}
		}
		return true
	})

	// An independent reading of Kafka's znodes.
	conn := rawClient(t, z)
	var tz struct {
		Version    int                `json:"version"`
		TopicID    string             `json:"topic_id"`
		Partitions map[string][]int32 `json:"partitions"`
		Adding     map[string][]int32 `json:"adding_replicas"`
	}
	readJSON(t, conn, "/brokers/topics/orders", &tz)
	if tz.Version != 3 || tz.TopicID != base64.RawURLEncoding.EncodeToString(topic.ID[:]) || len(tz.Partitions) != 3 || tz.Adding == nil {
		t.Errorf("/brokers/topics/orders = %+v", tz)
	}
	var sz struct {
		ControllerEpoch *int32  `json:"controller_epoch"`
		Leader          *int32  `json:"leader"`
		Version         int     `json:"version"`
		LeaderEpoch     *int32  `json:"leader_epoch"`
		ISR             []int32 `json:"isr"`
	}
	readJSON(t, conn, "/brokers/topics/orders/partitions/0/state", &sz)
	if sz.Version != 1 || sz.Leader == nil || *sz.Leader != topic.Partitions[0].Leader || *sz.LeaderEpoch != 0 ||
		*sz.ControllerEpoch != act.ControllerEpoch() || len(sz.ISR) != 3 {
		t.Errorf("partition 0 state = %+v", sz)
	}
	var cfg configZNode
	readJSON(t, conn, "/config/topics/orders", &cfg)
	if cfg.Version != 1 || cfg.Config["retention.ms"] != "1000" {
		t.Errorf("/config/topics/orders = %+v", cfg)
	}
	var bz struct {
		Endpoints []string `json:"endpoints"`
		Host      string   `json:"host"`
		Port      int      `json:"port"`
		Version   int      `json:"version"`
		JMXPort   int      `json:"jmx_port"`
	}
	st := readJSON(t, conn, "/brokers/ids/2", &bz)
	if bz.Version != 5 || !slices.Equal(bz.Endpoints, []string{"PLAINTEXT://127.0.0.1:9092"}) || bz.Host != "127.0.0.1" || bz.Port != 9092 || bz.JMXPort != -1 {
		t.Errorf("/brokers/ids/2 = %+v", bz)
	}
	if st.EphemeralOwner == 0 || act.BrokerEpoch(2) != st.Czxid {
		t.Errorf("/brokers/ids/2: ephemeral owner %#x, czxid %d; broker epoch %d", st.EphemeralOwner, st.Czxid, act.BrokerEpoch(2))
	}
	var cz controllerZNode
	readJSON(t, conn, "/controller", &cz)
	if cz.Version != 1 || cz.BrokerID != act.opts.Broker.ID || cz.Timestamp == "" {
		t.Errorf("/controller = %+v", cz)
	}
	var epoch int32
	readJSON(t, conn, "/controller_epoch", &epoch)
	if epoch != act.ControllerEpoch() || epoch < 1 {
		t.Errorf("/controller_epoch = %d, active controller has %d", epoch, act.ControllerEpoch())
	}
	var cid clusterIDZNode
	readJSON(t, conn, "/cluster/id", &cid)
	if cid.Version != "1" || cid.ID == "" || cid.ID != cs[2].Metadata().ClusterID {
		t.Errorf("/cluster/id = %+v, broker 3 sees %q", cid, cs[2].Metadata().ClusterID)
	}

	// More partitions, configs, deletion.
	if err := act.CreatePartitions(ctx, "orders", 5, false); err != nil {
		t.Fatal(err)
	}
	if err := act.SetTopicConfigs(ctx, "orders", map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	if err := act.SetBrokerConfigs(ctx, "", map[string]string{"log.retention.ms": "5"}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "new partitions and configs everywhere", func() bool {
		for _, c := range cs {
			md := c.Metadata()
			got := md.Topics["orders"]
			if got == nil || len(got.Partitions) != 5 || got.Partitions[4].Leader < 1 || got.Configs["cleanup.policy"] != "compact" ||
				len(got.Configs) != 1 || md.BrokerConfigs[""]["log.retention.ms"] != "5" {
				return false
			}
		}
		return true
	})
	if ok, _, _ := conn.Exists(testChroot + "/config/brokers/<default>"); !ok {
		t.Error("/config/brokers/<default> missing")
	}
	if kids, _, _ := conn.Children(testChroot + "/config/changes"); len(kids) != 2 {
		t.Errorf("/config/changes has %v, want two notifications", kids)
	}
	if err := act.DeleteTopic(ctx, "orders"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the topic gone everywhere", func() bool {
		for _, c := range cs {
			if len(c.Metadata().Topics) != 0 {
				return false
			}
		}
		return true
	})
	for _, p := range []string{"/brokers/topics/orders", "/config/topics/orders", "/admin/delete_topics/orders"} {
		if ok, _, _ := conn.Exists(testChroot + p); ok {
			t.Errorf("%s still exists after DeleteTopic", p)
		}
	}
}

func TestFailover(t *testing.T) {
	z := testenv.StartZooKeeper(t)
	cs := []*Controller{newController(t, z, 1), newController(t, z, 2), newController(t, z, 3)}
	act := activeOf(t, cs...)
	ctx := context.Background()
	topic, err := act.CreateTopic(ctx, controller.CreateTopicRequest{Name: "t", NumPartitions: 6, ReplicationFactor: 3})
	if err != nil {
		t.Fatal(err)
	}
	before := act.ControllerEpoch()

	// The controller goes away: another takes over with a higher epoch and
	// moves the leadership of the partitions it led.
	gone := act.opts.Broker.ID
	start := time.Now()
	act.Close()
	if id := act.Metadata().ControllerID; id != -1 {
		t.Errorf("closed controller's metadata names controller %d, want -1", id)
	}
	var rest []*Controller
	for _, c := range cs {
		if c != act {
			rest = append(rest, c)
		}
	}
	act2 := activeOf(t, rest...)
	t.Logf("broker %d took over in %v", act2.opts.Broker.ID, time.Since(start))
	if act2.ControllerEpoch() <= before {
		t.Errorf("new controller epoch %d, want > %d", act2.ControllerEpoch(), before)
	}
	checkMovedAway(t, rest, topic, gone, 1)

	// A further broker goes: its partitions move to the last one.
	var victim, last *Controller
	for _, c := range rest {
		if c == act2 {
			last = c
		} else {
			victim = c
		}
	}
	prev := last.Metadata().Topics["t"]
	victim.Close()
	checkMovedAway(t, []*Controller{last}, prev, victim.opts.Broker.ID, 1)
	if last.ControllerEpoch() != act2.ControllerEpoch() || !last.IsActive() {
		t.Errorf("controller changed when a follower left")
	}

	// The first broker returns; it is not elected leader of anything (its
	// replicas are out of the ISR until the leader lets them in).
	back := newController(t, z, gone)
	waitUntil(t, 5*time.Second, "the returning broker to see the topic", func() bool {
		t := back.Metadata().Topics["t"]
		return t != nil && t.Partitions[0].Leader == last.opts.Broker.ID
	})
	if back.IsActive() {
		t.Error("returning broker became controller while another is active")
	}
}

// checkMovedAway waits until, on every c, no partition is led by gone, and
// every partition gone led has a new leader from its old ISR with its
// leader epoch bumped by at least bump.
func checkMovedAway(t *testing.T, cs []*Controller, old *controller.Topic, gone int32, bump int32) {
	t.Helper()
	waitUntil(t, 10*time.Second, fmt.Sprintf("leadership to leave broker %d", gone), func() bool {
		for _, c := range cs {
			got := c.Metadata().Topics[old.Name]
			if got == nil {
				return false
			}
			for i, p := range got.Partitions {
				o := old.Partitions[i]
				if slices.Contains(p.ISR, gone) || p.Leader == gone {
					return false
				}
				if o.Leader == gone && (p.Leader < 0 || !slices.Contains(o.ISR, p.Leader) || p.LeaderEpoch < o.LeaderEpoch+bump) {
					t.Fatalf("partition %d after broker %d left: %+v (before %+v)", i, gone, p, o)
				}
			}
		}
		return true
	})
}

func TestProducerIDBlocksDoNotOverlap(t *testing.T) {
	z := testenv.StartZooKeeper(t)
	cs := []*Controller{newController(t, z, 1), newController(t, z, 2), newController(t, z, 3)}
	type block struct{ start, n int64 }
	var mu sync.Mutex
	var blocks []block
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Go(func() {
			for j := range 15 {
				n := int64(1 + (i*7+j*13)%50)
				start, err := c.AllocateProducerIDs(context.Background(), n)
				if err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				blocks = append(blocks, block{start, n})
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// Across a change of controller too.
	act := activeOf(t, cs...)
	act.Close()
	for _, c := range cs {
		if c == act {
			continue
		}
		start, err := c.AllocateProducerIDs(context.Background(), 10)
		if err != nil {
			t.Fatal(err)
		}
		blocks = append(blocks, block{start, 10})
	}
	sort.Slice(blocks, func(i, j int) bool { return blocks[i].start < blocks[j].start })
	for i := 1; i < len(blocks); i++ {
		if blocks[i].start < blocks[i-1].start+blocks[i-1].n {
			t.Fatalf("blocks overlap: %+v and %+v", blocks[i-1], blocks[i])
		}
	}
	if blocks[0].start != 0 || len(blocks) != 47 {
		t.Errorf("first block %+v of %d, want start 0 of 47", blocks[0], len(blocks))
	}
}

// TestSessionLoss stops ZooKeeper under the brokers: at once nobody acts
// as controller and every snapshot says so; after the restart one is
// elected again, with a higher epoch.
func TestSessionLoss(t *testing.T) {
	z := testenv.StartZooKeeper(t)
	cs := []*Controller{newController(t, z, 1), newController(t, z, 2)}
	act := activeOf(t, cs...)
	before := act.ControllerEpoch()
	z.Stop()
	waitUntil(t, 5*time.Second, "no controller after ZooKeeper stopped", func() bool {
		for _, c := range cs {
			if c.IsActive() || c.Metadata().ControllerID != -1 {
				return false
			}
		}
		return true
	})
	if _, err := act.CreateTopic(context.Background(), controller.CreateTopicRequest{Name: "x", NumPartitions: 1, ReplicationFactor: 1}); !errors.Is(err, controller.ErrNotController) {
		t.Errorf("CreateTopic without a session: %v, want ErrNotController", err)
	}
	z.Start()
	// The clients reconnect with backoff to a JVM that was just
	// restarted; on a loaded 2-core machine this once took over 10 s.
	act2 := activeWithin(t, 30*time.Second, cs...)
	if act2.ControllerEpoch() <= before {
		t.Errorf("controller epoch after session loss %d, want > %d", act2.ControllerEpoch(), before)
	}
}
