package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/testenv"
)

// zkRead reads a znode's JSON with an independent ZooKeeper client.
func zkRead(t *testing.T, addr, path string, into any) {
	t.Helper()
	conn, _, err := gozk.Connect([]string{addr}, 5*time.Second, gozk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	b, _, err := conn.Get(path)
	if err != nil {
		t.Fatalf("read znode %s: %v", path, err)
	}
	if into != nil {
		if err := json.Unmarshal(b, into); err != nil {
			t.Fatalf("znode %s: %v: %s", path, err, b)
		}
	}
}

// One broker with --zookeeper: it registers, becomes controller, keeps
// topics in Kafka's ZooKeeper layout, serves produce and consume, and
// finds its topics again after a restart.
func TestZooKeeperSingleBroker(t *testing.T) {
	zk := testenv.StartZooKeeper(t)
	connect := zk.Addr() + "/strata"
	b := testenv.StartBroker(t, testenv.BrokerOptions{ID: 7, Args: []string{"--zookeeper", connect}})
	createTopic(t, b.Addr(), "zk-topic", 3, nil)

	var ctl struct {
		BrokerID int32 `json:"brokerid"`
	}
	zkRead(t, zk.Addr(), "/strata/controller", &ctl)
	if ctl.BrokerID != 7 {
		t.Fatalf("/controller names broker %d, want 7", ctl.BrokerID)
	}
	var reg struct {
		Endpoints []string `json:"endpoints"`
	}
	zkRead(t, zk.Addr(), "/strata/brokers/ids/7", &reg)
	if len(reg.Endpoints) != 1 || !strings.HasSuffix(reg.Endpoints[0], b.Addr()) {
		t.Fatalf("/brokers/ids/7 endpoints %v, want one ending in %s", reg.Endpoints, b.Addr())
	}
	var topic struct {
		Partitions map[string][]int32 `json:"partitions"`
	}
	zkRead(t, zk.Addr(), "/strata/brokers/topics/zk-topic", &topic)
	if len(topic.Partitions) != 3 {
		t.Fatalf("/brokers/topics/zk-topic has %d partitions, want 3", len(topic.Partitions))
	}

	cl := newClient(t, b.Addr(), kgo.DefaultProduceTopic("zk-topic"), kgo.RequiredAcks(kgo.AllISRAcks()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := 0; i < 100; i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	b.Restart()
	_, end := offsets(t, b.Addr(), "zk-topic")
	total := int64(0)
	for _, e := range end {
		total += e
	}
	if total != 100 {
		t.Fatalf("after restart the topic holds %d records, want 100", total)
	}
}

// Three brokers on one ZooKeeper: one controller, and every broker (seen
// by franz-go and by kcat) reports the same brokers and the same
// placement of a replicated topic.
func TestZooKeeperThreeBrokersMetadata(t *testing.T) {
	testenv.RequireKcat(t)
	zk := testenv.StartZooKeeper(t)
	var bs []*testenv.Broker
	for id := 1; id <= 3; id++ {
		bs = append(bs, testenv.StartBroker(t, testenv.BrokerOptions{ID: id, Args: []string{"--zookeeper", zk.Addr()}}))
	}
	adm := kadm.NewClient(newClient(t, bs[0].Addr()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r, err := adm.CreateTopic(ctx, 6, 3, nil, "replicated")
	if err == nil {
		err = r.Err
	}
	if err != nil {
		t.Fatalf("create RF=3 topic: %v", err)
	}
	describe := func(addr string) string {
		md, err := kadm.NewClient(newClient(t, addr)).Metadata(ctx, "replicated")
		if err != nil {
			return "error: " + err.Error()
		}
		var sb strings.Builder
		fmt.Fprintf(&sb, "controller %d brokers %d;", md.Controller, len(md.Brokers))
		for _, p := range md.Topics["replicated"].Partitions.Sorted() {
			fmt.Fprintf(&sb, " %d:%d%v", p.Partition, p.Leader, p.Replicas)
		}
		return sb.String()
	}
	var want string
	waitFor(t, 20*time.Second, "the same metadata on every broker", func() bool {
		want = describe(bs[0].Addr())
		for _, b := range bs[1:] {
			if describe(b.Addr()) != want {
				return false
			}
		}
		return strings.HasPrefix(want, "controller ") && strings.Contains(want, "brokers 3;")
	})
	for _, b := range bs {
		out, err := exec.Command("kcat", "-b", b.Addr(), "-L", "-t", "replicated", "-m", "10").CombinedOutput()
		if err != nil {
			t.Fatalf("kcat -L on %s: %v\n%s", b.Addr(), err, out)
		}
		if !strings.Contains(string(out), "3 brokers") || !strings.Contains(string(out), `topic "replicated" with 6 partitions`) {
			t.Fatalf("kcat -L on %s:\n%s", b.Addr(), out)
		}
	}
}
