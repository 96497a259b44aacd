package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/testenv"
)

const zkACLPassword = "zk-broker-secret-42"

// TestZooKeeperSetACLCluster runs three brokers with zookeeper.set.acl and
// digest credentials from their server.properties: they form a cluster
// that creates topics and serves acks=all writes, their logs never show
// the password, and a ZooKeeper client without their credentials can
// read the cluster's znodes but change none of them.
func TestZooKeeperSetACLCluster(t *testing.T) {
	zk := testenv.StartZooKeeper(t)
	connect := zk.Addr() + "/strata"
	props := filepath.Join(t.TempDir(), "server.properties")
	if err := os.WriteFile(props, []byte("zookeeper.set.acl=true\nzookeeper.digest.user=strata\nzookeeper.digest.password="+zkACLPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var bs []*testenv.Broker
	var seeds []string
	for id := 1; id <= 3; id++ {
		b := testenv.StartBroker(t, testenv.BrokerOptions{ID: id, Args: []string{"--zookeeper", connect, "--config", props}})
		bs = append(bs, b)
		seeds = append(seeds, b.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	createReplicatedTopic(t, ctx, seeds, "secured", 3)
	cl := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic("secured"), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := range 50 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
	}
	if got := consumeN(t, ctx, seeds, "secured", 50); len(got) != 50 {
		t.Fatalf("consumed %d records, want 50", len(got))
	}

	anon, _, err := gozk.Connect([]string{zk.Addr()}, 5*time.Second, gozk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	if _, _, err := anon.Get("/strata/brokers/topics/secured"); err != nil {
		t.Errorf("read /brokers/topics/secured without credentials: %v, want it readable", err)
	}
	refused := map[string]error{}
	_, refused["set /brokers/topics/secured"] = anon.Set("/strata/brokers/topics/secured", []byte(`{"version":3,"partitions":{"0":[9]}}`), -1)
	_, refused["set partition state"] = anon.Set("/strata/brokers/topics/secured/partitions/0/state", []byte(`{"leader":9}`), -1)
	refused["delete /controller"] = anon.Delete("/strata/controller", -1)
	_, refused["create /admin/delete_topics/secured"] = anon.Create("/strata/admin/delete_topics/secured", nil, 0, gozk.WorldACL(gozk.PermAll))
	_, refused["create /brokers/ids/9"] = anon.Create("/strata/brokers/ids/9", []byte("{}"), gozk.FlagEphemeral, gozk.WorldACL(gozk.PermAll))
	_, refused["set /config/topics/secured"] = anon.Set("/strata/config/topics/secured", []byte(`{"version":1,"config":{}}`), -1)
	for what, err := range refused {
		if !errors.Is(err, gozk.ErrNoAuth) {
			t.Errorf("%s without credentials: %v, want NoAuth", what, err)
		}
	}
	// Still one cluster with the topic, led as before.
	md, err := clusterMetadata(ctx, seeds, "secured")
	if err != nil || md.Controller < 1 || len(md.Topics["secured"].Partitions) != 3 {
		t.Errorf("metadata after the refused writes: controller %d, %d partitions (%v)", md.Controller, len(md.Topics["secured"].Partitions), err)
	}
	for _, b := range bs {
		if strings.Contains(b.Logs(), zkACLPassword) {
			t.Errorf("broker log shows the ZooKeeper password")
		}
	}
}

// TestZooKeeperSetACLWithoutCredentials: zookeeper.set.acl=true without
// credentials refuses to start, with a one-line reason.
func TestZooKeeperSetACLWithoutCredentials(t *testing.T) {
	zk := testenv.StartZooKeeper(t)
	res := testenv.RunStrata(t, 30*time.Second, "serve", "--listen", "127.0.0.1:0", "--data-dir", t.TempDir(),
		"--zookeeper", zk.Addr()+"/strata", "--set", "zookeeper.set.acl=true")
	reason := strings.TrimSpace(res.Stderr)
	if res.ExitCode == 0 || strings.Contains(res.Stdout, "ready ") || strings.Contains(reason, "\n") ||
		!strings.Contains(reason, "zookeeper.set.acl=true needs ZooKeeper credentials") {
		t.Fatalf("exit %d, stdout %q, stderr %q: want a refusal in one line naming the credentials", res.ExitCode, res.Stdout, reason)
	}
}
