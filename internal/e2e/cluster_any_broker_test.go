package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kafkago "github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/testenv"
)

// Regression for issue 14's first item: on a fresh ZooKeeper cluster,
// clients bootstrapped at a broker that is not the controller could not
// produce to a new topic (auto-creation answered "not the controller"),
// could not consume in a group (__consumer_offsets could not be created)
// and admin requests answered NOT_CONTROLLER. Every broker now creates
// topics through the controller and forwards admin requests to it.
func TestClusterAnyBrokerServesFreshCluster(t *testing.T) {
	kcat := testenv.RequireKcat(t)
	jsDir := kafkajsDir(t)
	zk := testenv.StartZooKeeper(t)
	bs, seeds := startZKBrokers(t, zk.Addr()+"/strata", []string{
		"default.replication.factor=3", "min.insync.replicas=2", "num.partitions=3",
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	var ctl int32 = -1
	probe := kadm.NewClient(newClient(t, seeds[0], kgo.SeedBrokers(seeds...)))
	waitFor(t, 30*time.Second, "a controller", func() bool {
		md, err := probe.BrokerMetadata(ctx)
		if err == nil {
			ctl = md.Controller
		}
		return err == nil && ctl > 0
	})
	var other *testenv.Broker
	var otherID int32
	for id, b := range bs {
		if id != ctl {
			other, otherID = b, id
			break
		}
	}
	addr := other.Addr()
	t.Logf("controller is broker %d; clients bootstrap at broker %d (%s)", ctl, otherID, addr)

	t.Run("kcat", func(t *testing.T) {
		const topic, n = "kcat-fresh", 50
		var in strings.Builder
		for i := range n {
			fmt.Fprintf(&in, "kcat-%d\n", i)
		}
		cctx, ccancel := context.WithTimeout(ctx, 60*time.Second)
		defer ccancel()
		prod := exec.CommandContext(cctx, kcat, "-P", "-b", addr, "-t", topic,
			"-X", "acks=all", "-X", "message.timeout.ms=30000")
		prod.Stdin = strings.NewReader(in.String())
		if out, err := prod.CombinedOutput(); err != nil || strings.Contains(string(out), "ERROR") {
			t.Fatalf("kcat produce to a new topic through broker %d: %v\n%s", otherID, err, out)
		}
		cons := exec.CommandContext(cctx, kcat, "-b", addr, "-G", "kcat-group", "-c", fmt.Sprint(n),
			"-X", "auto.offset.reset=earliest", "-f", "%s\n", topic)
		out, err := cons.Output()
		if err != nil {
			t.Fatalf("kcat group consume through broker %d: %v\n%s", otherID, err, out)
		}
		got := strings.Fields(string(out))
		if len(got) != n {
			t.Fatalf("kcat group consumer read %d records, want %d: %q", len(got), n, got)
		}
		checkCommitted(t, ctx, addr, "kcat-group", topic, n)
	})

	t.Run("kafka-go", func(t *testing.T) {
		const topic, n = "kafkago-fresh", 40
		w := &kafkago.Writer{
			Addr: kafkago.TCP(addr), Topic: topic, AllowAutoTopicCreation: true,
			RequiredAcks: kafkago.RequireAll, BatchTimeout: 5 * time.Millisecond,
		}
		defer w.Close()
		var msgs []kafkago.Message
		for i := range n {
			msgs = append(msgs, kafkago.Message{Key: fmt.Appendf(nil, "k%d", i), Value: fmt.Appendf(nil, "kafkago-%d", i)})
		}
		// kafka-go returns the first metadata answer for a topic being
		// created (LEADER_NOT_AVAILABLE) to the caller; retry, as its
		// documentation says to.
		var err error
		for try := 0; try < 50; try++ {
			if err = w.WriteMessages(ctx, msgs...); err == nil {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("kafka-go write to a new topic through broker %d: %v", otherID, err)
		}
		r := kafkago.NewReader(kafkago.ReaderConfig{
			Brokers: []string{addr}, GroupID: "kafkago-group", Topic: topic,
			StartOffset: kafkago.FirstOffset, MaxWait: 200 * time.Millisecond,
		})
		defer r.Close()
		seen := map[string]bool{}
		rctx, rcancel := context.WithTimeout(ctx, 60*time.Second)
		defer rcancel()
		for len(seen) < n {
			m, err := r.FetchMessage(rctx)
			if err != nil {
				t.Fatalf("kafka-go group read after %d records: %v", len(seen), err)
			}
			seen[string(m.Value)] = true
			if err := r.CommitMessages(rctx, m); err != nil {
				t.Fatalf("kafka-go commit: %v", err)
			}
		}
		checkCommitted(t, ctx, addr, "kafkago-group", topic, n)
	})

	t.Run("kafkajs", func(t *testing.T) {
		const topic, n = "kafkajs-fresh", 30
		script, err := filepath.Abs("testdata/kafkajs/anybroker.js")
		if err != nil {
			t.Fatal(err)
		}
		cctx, ccancel := context.WithTimeout(ctx, 90*time.Second)
		defer ccancel()
		cmd := exec.CommandContext(cctx, "node", script, addr, topic, "kafkajs-group", fmt.Sprint(n))
		cmd.Dir = jsDir
		cmd.Env = append(os.Environ(), "NODE_PATH="+filepath.Join(jsDir, "node_modules"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kafkajs through broker %d: %v\n%s", otherID, err, out)
		}
		var consumed bool
		sc := bufio.NewScanner(strings.NewReader(string(out)))
		for sc.Scan() {
			if sc.Text() == fmt.Sprintf("CONSUMED %d", n) {
				consumed = true
			}
		}
		if !consumed {
			t.Fatalf("kafkajs did not consume every record:\n%s", out)
		}
		checkCommitted(t, ctx, addr, "kafkajs-group", topic, n)
	})

	t.Run("kadm", func(t *testing.T) {
		// Every connection of this client goes to the non-controller, so
		// the requests kadm sends to "the controller" reach it.
		cl := newClient(t, addr, kgo.Dialer(func(ctx context.Context, network, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}))
		adm := kadm.NewClient(cl)
		const topic = "kadm-fresh"
		cr, err := adm.CreateTopic(ctx, 2, 3, map[string]*string{"retention.ms": kadmStr("3600000")}, topic)
		if err != nil || cr.Err != nil {
			t.Fatalf("CreateTopics through broker %d: %v %v", otherID, err, cr.Err)
		}
		cp, err := adm.CreatePartitions(ctx, 2, topic)
		if err != nil || cp[topic].Err != nil {
			t.Fatalf("CreatePartitions through broker %d: %v %+v", otherID, err, cp)
		}
		ac, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Op: kadm.SetConfig, Name: "retention.ms", Value: kadmStr("7200000")}}, topic)
		if err != nil || ac[0].Err != nil {
			t.Fatalf("IncrementalAlterConfigs through broker %d: %v %+v", otherID, err, ac)
		}
		sc, err := adm.AlterTopicConfigsState(ctx, []kadm.AlterConfig{{Name: "segment.bytes", Value: kadmStr("1048576")}}, topic)
		if err != nil || sc[0].Err != nil {
			t.Fatalf("AlterConfigs through broker %d: %v %+v", otherID, err, sc)
		}
		// What the controller did is what every broker reports.
		md, err := clusterMetadata(ctx, seeds, topic)
		if err != nil || len(md.Topics[topic].Partitions) != 4 {
			t.Fatalf("after CreatePartitions: %v %+v", err, md.Topics[topic])
		}
		rc, err := kadm.NewClient(newClient(t, bs[ctl].Addr())).DescribeTopicConfigs(ctx, topic)
		if err != nil {
			t.Fatal(err)
		}
		conf := map[string]string{}
		for _, c := range rc[0].Configs {
			if c.Source == 1 && c.Value != nil { // DYNAMIC_TOPIC_CONFIG
				conf[c.Key] = *c.Value
			}
		}
		if len(conf) != 1 || conf["segment.bytes"] != "1048576" {
			t.Fatalf("topic overrides after the config changes: %v, want only segment.bytes=1048576 (AlterConfigs replaces all)", conf)
		}
		dr, err := adm.DeleteTopics(ctx, topic)
		if err != nil || dr[topic].Err != nil {
			t.Fatalf("DeleteTopics through broker %d: %v %+v", otherID, err, dr)
		}
		waitFor(t, 30*time.Second, "the deleted topic to leave metadata", func() bool {
			md, err := probe.Metadata(ctx)
			_, still := md.Topics[topic]
			return err == nil && !still
		})
	})
}

func kadmStr(s string) *string { return &s }

// checkCommitted waits until group has committed n records' worth of
// offsets on topic (the sum of its committed offsets).
func checkCommitted(t *testing.T, ctx context.Context, addr, group, topic string, n int64) {
	t.Helper()
	adm := kadm.NewClient(newClient(t, addr))
	var sum int64
	waitFor(t, 30*time.Second, fmt.Sprintf("group %s to commit %d offsets", group, n), func() bool {
		oc, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return false
		}
		sum = 0
		for _, ps := range oc[topic] {
			if ps.Err == nil {
				sum += ps.At
			}
		}
		return sum == n
	})
}
