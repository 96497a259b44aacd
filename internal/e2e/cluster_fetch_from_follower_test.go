package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/testenv"
)

// TestClusterFetchFromFollowerInRack: three broker processes on ZooKeeper,
// each in its own rack (broker.rack), with the rack-aware replica
// selector. A franz-go consumer in a follower's rack is sent there by the
// leader (KIP-392) and reads every record from it, as the follower's
// metrics show. When the follower stops, its replication-offset-checkpoint
// holds the high watermark.
func TestClusterFetchFromFollowerInRack(t *testing.T) {
	zk := testenv.StartZooKeeper(t)
	connect := zk.Addr() + "/racks"
	bs := map[int32]*testenv.Broker{}
	var seeds []string
	for id := 1; id <= 3; id++ {
		b := testenv.StartBroker(t, testenv.BrokerOptions{ID: id, Metrics: "127.0.0.1:0", Args: []string{"--zookeeper", connect},
			Sets: []string{"broker.rack=rack" + strconv.Itoa(id), "min.insync.replicas=2",
				"replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector"}})
		bs[int32(id)] = b
		seeds = append(seeds, b.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const topic, total = "racks", 200
	createReplicatedTopic(t, ctx, seeds, topic, 1)
	var leader, follower int32 = -1, -1
	waitFor(t, 60*time.Second, "a leader and a full ISR", func() bool {
		md, err := clusterMetadata(ctx, seeds, topic)
		if err != nil {
			return false
		}
		p, ok := md.Topics[topic].Partitions[0]
		if !ok || p.Err != nil || p.Leader < 0 || len(p.ISR) != 3 {
			return false
		}
		leader = p.Leader
		for _, r := range p.Replicas {
			if r != leader {
				follower = r
				break
			}
		}
		return true
	})
	t.Logf("leader %d; the consumer is in the rack of follower %d", leader, follower)

	prod := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()))
	produce := func(from, to int) {
		for i := from; i < to; i++ {
			if err := prod.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
				t.Errorf("produce %d: %v", i, err)
				return
			}
		}
	}
	produce(0, total/2)
	cons := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic), kgo.Rack("rack"+strconv.Itoa(int(follower))),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(250*time.Millisecond))
	done := make(chan struct{})
	go func() { defer close(done); produce(total/2, total) }()
	next := 0
	for next < total {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records", next, total)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("consume: %v", err) })
		for _, r := range fs.Records() {
			if r.Offset != int64(next) || string(r.Value) != strconv.Itoa(next) {
				t.Fatalf("record %d: offset %d value %q", next, r.Offset, r.Value)
			}
			next++
		}
	}
	<-done

	const served = "strata_server_fetch_from_follower_partitions_total"
	if n := metricValue(t, bs[follower], served); n < 1 {
		t.Fatalf("follower %d: %s = %v; the consumer did not fetch from it", follower, served, n)
	}
	for id, b := range bs {
		if id != follower {
			if n := metricValue(t, b, served); n != 0 {
				t.Fatalf("broker %d outside the consumer's rack: %s = %v", id, served, n)
			}
		}
	}

	bs[follower].Stop()
	b, err := os.ReadFile(filepath.Join(bs[follower].DataDir(), "replication-offset-checkpoint"))
	if err != nil {
		t.Fatalf("follower's checkpoint: %v", err)
	}
	if want := fmt.Sprintf("\n%s 0 %d\n", topic, total); !strings.Contains(string(b), want) {
		t.Fatalf("follower's replication-offset-checkpoint:\n%s\nwant the line %q", b, strings.TrimSpace(want))
	}
}

// metricValue reads one unlabelled sample from b's /metrics.
func metricValue(t *testing.T, b *testenv.Broker, name string) float64 {
	t.Helper()
	addr := b.MetricsAddr()
	if addr == "" {
		t.Fatalf("broker did not log its metrics address")
	}
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("get metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metrics: %s %q: %v", name, v, err)
			}
			return f
		}
	}
	t.Fatalf("metrics: no %s (scan error %v)", name, sc.Err())
	return 0
}
