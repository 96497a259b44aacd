package broker

import (
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/config"
	"strata/controller"
	"strata/tier"
)

// The cluster snapshot written to the bucket carries no sensitive config:
// passwords (per-listener ones included) and configs of a type Strata
// does not know are left out of the broker and topic configs, the others
// kept, and the metadata it was built from is left as it was.
func TestClusterSnapshotHoldsNoSensitiveConfig(t *testing.T) {
	md := &controller.Metadata{
		ClusterID: "c1",
		BrokerConfigs: map[string]map[string]string{
			"0": {"log.retention.ms": "1000", "listener.name.ssl.ssl.keystore.password": "pw-secret-0"},
			"":  {"listener.name.sasl_plaintext.plain.sasl.jaas.config": `org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="pw-secret-1";`},
			"1": {"num.io.threads": "4"},
		},
		Topics: map[string]*controller.Topic{
			"orders": {Name: "orders", ID: [16]byte{1}, Configs: map[string]string{"retention.ms": "5", "unknown.secret.holder": "pw-secret-2"}},
		},
	}
	snap := (*Server)(nil).clusterSnapshot(md)
	b, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "pw-secret") {
		t.Fatalf("the snapshot holds a secret: %s", b)
	}
	if snap.BrokerConfigs["0"]["log.retention.ms"] != "1000" || snap.BrokerConfigs["1"]["num.io.threads"] != "4" {
		t.Errorf("broker configs that are not sensitive were dropped: %v", snap.BrokerConfigs)
	}
	if _, ok := snap.BrokerConfigs[""]; ok {
		t.Errorf("the cluster default held only a secret, yet is in the snapshot: %v", snap.BrokerConfigs[""])
	}
	if len(snap.Topics) != 1 || snap.Topics[0].Configs["retention.ms"] != "5" || len(snap.Topics[0].Configs) != 1 {
		t.Errorf("topic configs: %+v", snap.Topics)
	}
	if md.BrokerConfigs["0"]["listener.name.ssl.ssl.keystore.password"] != "pw-secret-0" || len(md.Topics["orders"].Configs) != 2 {
		t.Errorf("the metadata was changed: %v %v", md.BrokerConfigs, md.Topics["orders"].Configs)
	}
}

// A password config (password.encoder.secret, set in server.properties)
// is answered by DescribeConfigs with a null value and is_sensitive, in
// its synonyms too, and is in none of the bucket's objects nor the logs.
func TestSensitiveConfigNotDescribedNorInTheBucket(t *testing.T) {
	const secret = "pw-static-never-shown"
	store := tier.NewMemStore()
	var logs syncBuffer
	cfg, err := config.Load(map[string]string{
		"broker.id": "0", "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": t.TempDir(),
		"remote.log.storage.system.enable": "true", "remote.log.manager.task.interval.ms": "50",
		"offsets.topic.num.partitions": "1", "password.encoder.secret": secret,
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Options{Config: cfg, Listen: cfg.ListenAddr(), TierStore: store, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ctx := testCtx(t)

	rc := dialRaw(t, srv.Addr().String())
	code, cfgs := describeConfigs(t, rc, kmsg.ConfigResourceTypeBroker, "0")
	wantCode(t, "describe broker 0", code, nil)
	c, ok := cfgs["password.encoder.secret"]
	if !ok {
		t.Fatal("password.encoder.secret not described")
	}
	if c.Value != nil || !c.IsSensitive || c.Source != kmsg.ConfigSourceStaticBrokerConfig {
		t.Errorf("password.encoder.secret: value %s, sensitive %v, source %v; want null, true, STATIC_BROKER_CONFIG", strOrNull(c.Value), c.IsSensitive, c.Source)
	}
	for _, s := range c.ConfigSynonyms {
		if s.Value != nil {
			t.Errorf("synonym %s shows value %q", s.Name, *s.Value)
		}
	}
	for name, c := range cfgs {
		if c.Value != nil && strings.Contains(*c.Value, secret) {
			t.Errorf("%s shows the secret", name)
		}
	}

	waitFor(t, "the cluster snapshot in the bucket", 10*time.Second, func() bool {
		_, err := tier.ReadClusterSnapshot(ctx, store)
		return err == nil
	})
	n := 0
	for info, err := range store.List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		r, err := store.Get(ctx, info.Key, 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(r)
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		n++
		if strings.Contains(string(b), secret) {
			t.Errorf("bucket object %s holds the secret", info.Key)
		}
	}
	if n == 0 {
		t.Fatal("the bucket holds nothing")
	}
	if strings.Contains(logs.String(), secret) {
		t.Error("the logs show the secret")
	}
}
