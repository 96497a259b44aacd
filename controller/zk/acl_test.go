package zk

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"strata/controller"
	"strata/internal/testenv"
)

var brokerAuth = Auth{DigestUser: "strata", DigestPassword: "broker-secret", SetACL: true}

func startControllerAuth(t *testing.T, z *testenv.ZooKeeper, id int32, auth Auth) (*Controller, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := New(ctx, Options{
		Connect:           z.Addr() + testChroot,
		Broker:            controller.Broker{ID: id, Host: "127.0.0.1", Port: 9090 + id},
		SessionTimeout:    2 * time.Second,
		ConnectionTimeout: 5 * time.Second,
		Auth:              auth,
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

// digestClient is a raw ZooKeeper client; user "" is unauthenticated.
func digestClient(t *testing.T, z *testenv.ZooKeeper, user, password string) *zk.Conn {
	t.Helper()
	conn := rawClient(t, z)
	if user != "" {
		if err := conn.AddAuth("digest", []byte(user+":"+password)); err != nil {
			t.Fatal(err)
		}
	}
	return conn
}

// wantACL is Kafka's secure ACL for a path below the chroot.
func wantACL(path string) []zk.ACL {
	acl := zk.DigestACL(zk.PermAll, brokerAuth.DigestUser, brokerAuth.DigestPassword)
	if !sensitivePath(path) {
		acl = append(acl, zk.WorldACL(zk.PermRead)...)
	}
	return acl
}

// TestSetACL runs a cluster with zookeeper.set.acl and digest credentials:
// it works, every znode below the chroot carries Kafka's secure ACLs
// (those that existed world-writable before included), and clients
// without the brokers' credentials can read but change nothing.
func TestSetACL(t *testing.T) {
	z := testenv.StartZooKeeper(t)
	anon := digestClient(t, z, "", "")
	// A cluster from before zookeeper.set.acl: open znodes.
	for _, p := range []string{"/strata", testChroot, testChroot + "/brokers", testChroot + "/brokers/seqid", testChroot + "/config", testChroot + "/config/users", testChroot + "/config/users/alice"} {
		if _, err := anon.Create(p, []byte("{}"), 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("create %s: %v", p, err)
		}
	}

	var cs []*Controller
	for id := int32(1); id <= 3; id++ {
		c, err := startControllerAuth(t, z, id, brokerAuth)
		if err != nil {
			t.Fatalf("start broker %d with zookeeper.set.acl: %v", id, err)
		}
		cs = append(cs, c)
	}
	act := activeOf(t, cs...)
	ctx := context.Background()
	topic, err := act.CreateTopic(ctx, controller.CreateTopicRequest{Name: "orders", NumPartitions: 2, ReplicationFactor: 3,
		Configs: map[string]string{"retention.ms": "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := act.SetBrokerConfigs(ctx, "", map[string]string{"log.retention.ms": "5"}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs[0].AllocateProducerIDs(ctx, 10); err != nil {
		t.Fatal(err)
	}
	if _, err := act.CreateTopic(ctx, controller.CreateTopicRequest{Name: "doomed", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	if err := act.DeleteTopic(ctx, "doomed"); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the topic and configs on every broker", func() bool {
		for _, c := range cs {
			md := c.Metadata()
			if md.Topics["orders"] == nil || md.Topics["doomed"] != nil || md.BrokerConfigs[""]["log.retention.ms"] != "5" {
				return false
			}
		}
		return true
	})

	// Every znode below the chroot has Kafka's ACL.
	ownerConn := digestClient(t, z, brokerAuth.DigestUser, brokerAuth.DigestPassword)
	var walk func(path string)
	seen := 0
	walk = func(path string) {
		acl, _, err := ownerConn.GetACL(testChroot + path)
		if err != nil {
			t.Fatalf("getacl %s: %v", path, err)
		}
		if !sameACL(acl, wantACL(path)) {
			t.Errorf("%s has ACL %v, want %v", path, acl, wantACL(path))
		}
		seen++
		kids, _, err := ownerConn.Children(testChroot + path)
		if err != nil {
			t.Fatalf("list %s: %v", path, err)
		}
		for _, k := range kids {
			walk(strings.TrimSuffix(path, "/") + "/" + k)
		}
	}
	for _, root := range []string{"/brokers", "/config", "/admin", "/cluster", "/controller", "/controller_epoch", "/latest_producer_id_block"} {
		walk(root)
	}
	if seen < 20 {
		t.Errorf("walked %d znodes; the tree is smaller than it should be", seen)
	}
	if acl, _, _ := ownerConn.GetACL(testChroot); !sameACL(acl, wantACL("")) {
		t.Errorf("the chroot %s has ACL %v, want %v", testChroot, acl, wantACL(""))
	}
	if acl, _, _ := anon.GetACL("/strata"); !sameACL(acl, zk.WorldACL(zk.PermAll)) {
		t.Errorf("/strata, above the chroot, has ACL %v: it is not the brokers' to change", acl)
	}
	if acl, _, _ := ownerConn.GetACL(testChroot + "/config/users/alice"); len(acl) != 1 {
		t.Errorf("/config/users/alice (sensitive, secured at start): %v, want the brokers' identity only", acl)
	}

	// Without the brokers' credentials: reads work, changes are refused.
	other := digestClient(t, z, "mallory", "guess")
	if _, _, err := anon.Get(testChroot + "/brokers/topics/orders"); err != nil {
		t.Errorf("an unauthenticated client cannot read /brokers/topics/orders: %v", err)
	}
	for name, conn := range map[string]*zk.Conn{"unauthenticated": anon, "other credentials": other} {
		noAuth := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, zk.ErrNoAuth) {
				t.Errorf("%s client: %s: %v, want NoAuth", name, what, err)
			}
		}
		p := func(s string) string { return testChroot + s }
		_, err := conn.Create(p("/brokers/topics/evil"), []byte(`{"version":3,"partitions":{"0":[9]}}`), 0, zk.WorldACL(zk.PermAll))
		noAuth("create /brokers/topics/evil", err)
		_, err = conn.Create(p("/brokers/ids/9"), []byte("{}"), zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		noAuth("create /brokers/ids/9", err)
		_, err = conn.Set(p("/brokers/topics/orders"), []byte("{}"), -1)
		noAuth("set /brokers/topics/orders", err)
		_, err = conn.Set(p("/brokers/topics/orders/partitions/0/state"), []byte(`{"leader":9}`), -1)
		noAuth("set partition state", err)
		noAuth("delete partition state", conn.Delete(p("/brokers/topics/orders/partitions/0/state"), -1))
		noAuth("delete /controller", conn.Delete(p("/controller"), -1))
		_, err = conn.Set(p("/controller_epoch"), []byte("2147483647"), -1)
		noAuth("set /controller_epoch", err)
		_, err = conn.Create(p("/admin/delete_topics/orders"), nil, 0, zk.WorldACL(zk.PermAll))
		noAuth("create /admin/delete_topics/orders", err)
		_, err = conn.Create(p("/admin/reassign_partitions"), []byte("{}"), 0, zk.WorldACL(zk.PermAll))
		noAuth("create /admin/reassign_partitions", err)
		_, err = conn.Set(p("/config/topics/orders"), []byte(`{"version":1,"config":{}}`), -1)
		noAuth("set /config/topics/orders", err)
		_, err = conn.Create(p("/config/changes/config_change_"), []byte("{}"), zk.FlagSequence, zk.WorldACL(zk.PermAll))
		noAuth("create a config change", err)
		_, err = conn.Create(p("/config/users/mallory"), []byte("{}"), 0, zk.WorldACL(zk.PermAll))
		noAuth("create /config/users/mallory", err)
		_, err = conn.Set(p("/latest_producer_id_block"), []byte("{}"), -1)
		noAuth("set /latest_producer_id_block", err)
		_, err = conn.SetACL(p("/brokers"), zk.WorldACL(zk.PermAll), -1)
		noAuth("setacl /brokers", err)
		_, err = conn.SetACL(p("/brokers/seqid"), zk.WorldACL(zk.PermAll), -1)
		noAuth("setacl /brokers/seqid (secured at start)", err)
		_, _, err = conn.Get(p("/config/brokers/<default>"))
		noAuth("read /config/brokers/<default> (sensitive)", err)
		_, _, err = conn.Get(p("/config/users/alice"))
		noAuth("read /config/users/alice (sensitive)", err)
	}
	if md := act.Metadata(); md.Topics["orders"].ID != topic.ID || len(md.Topics) != 1 {
		t.Errorf("metadata changed: %v", md.Topics)
	}

	// A broker with other credentials cannot join: it may not secure the
	// znodes it finds.
	if _, err := startControllerAuth(t, z, 4, Auth{DigestUser: "mallory", DigestPassword: "guess", SetACL: true}); err == nil ||
		!strings.Contains(err.Error(), "zookeeper.digest.user") || !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("broker with other credentials: %v, want a NoAuth refusal naming zookeeper.digest.user", err)
	}

	// Nor can one without credentials: it says why.
	if _, err := startControllerAuth(t, z, 5, Auth{}); err == nil || !errors.Is(err, zk.ErrNoAuth) ||
		!strings.Contains(err.Error(), "/brokers/ids/5") || !strings.Contains(err.Error(), "zookeeper.digest.user") {
		t.Errorf("broker without credentials: %v, want a NoAuth refusal naming its znode and zookeeper.digest.user", err)
	}

	// A write refused by ZooKeeper says which znode.
	state := testChroot + "/brokers/topics/orders/partitions/0/state"
	owner := digestClient(t, z, brokerAuth.DigestUser, brokerAuth.DigestPassword)
	readOnly := append(zk.DigestACL(zk.PermRead|zk.PermAdmin, brokerAuth.DigestUser, brokerAuth.DigestPassword), zk.WorldACL(zk.PermRead)...)
	if _, err := owner.SetACL(state, readOnly, -1); err != nil {
		t.Fatal(err)
	}
	p0 := act.Metadata().Topics["orders"].Partitions[0]
	var leader *Controller
	for _, c := range cs {
		if c.opts.Broker.ID == p0.Leader {
			leader = c
		}
	}
	var shrunk []int32
	for _, r := range p0.ISR {
		if r == p0.Leader || len(shrunk) == 0 {
			shrunk = append(shrunk, r)
		}
	}
	if !sameSet(shrunk, p0.ISR) {
		_, err := leader.AlterPartition(ctx, controller.AlterPartitionRequest{Topic: "orders", Partition: 0, Leader: p0.Leader,
			LeaderEpoch: p0.LeaderEpoch, PartitionEpoch: p0.PartitionEpoch, ISR: shrunk})
		if !errors.Is(err, zk.ErrNoAuth) || !strings.Contains(err.Error(), "/brokers/topics/orders/partitions/0/state") {
			t.Errorf("ISR write to a read-only state znode: %v, want NoAuth naming the znode", err)
		}
	}
	if _, err := owner.SetACL(state, wantACL("/brokers/topics/orders/partitions/0/state"), -1); err != nil {
		t.Fatal(err)
	}

	// Failover: the next controller writes as well.
	act.Close()
	var rest []*Controller
	for _, c := range cs {
		if c != act {
			rest = append(rest, c)
		}
	}
	next := activeWithin(t, 15*time.Second, rest...)
	if _, err := next.CreateTopic(ctx, controller.CreateTopicRequest{Name: "after", NumPartitions: 1, ReplicationFactor: 2}); err != nil {
		t.Fatalf("CreateTopic on the new controller: %v", err)
	}
	acl, _, err := owner.GetACL(testChroot + "/brokers/topics/after/partitions/0/state")
	if err != nil || !sameACL(acl, wantACL("/brokers/topics/after/partitions/0/state")) {
		t.Errorf("new partition state ACL %v (%v)", acl, err)
	}
}

// TestSetACLNeedsCredentials: zookeeper.set.acl=true without credentials
// refuses to start with a one-line reason, before connecting.
func TestSetACLNeedsCredentials(t *testing.T) {
	_, err := New(context.Background(), Options{Connect: "127.0.0.1:1", Auth: Auth{SetACL: true}})
	if err == nil || strings.Contains(err.Error(), "\n") ||
		!strings.Contains(err.Error(), "zookeeper.set.acl=true needs ZooKeeper credentials") {
		t.Fatalf("New with set.acl and no credentials: %v", err)
	}
	for _, a := range []Auth{{DigestUser: "u"}, {DigestPassword: "p"}, {DigestUser: "a:b", DigestPassword: "p"}} {
		if err := a.Validate(); err == nil || strings.Contains(err.Error(), "p\"") {
			t.Errorf("%v: %v", a, err)
		}
	}
	a := Auth{DigestUser: "u", DigestPassword: "hunter2", SetACL: true}
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("x", "auth", a)
	if s := buf.String() + a.String(); strings.Contains(s, "hunter2") {
		t.Errorf("password shown: %s", s)
	}
}

// TestSetACLOffKeepsOpenZnodes: without zookeeper.set.acl, znodes are
// open to everyone, as before (and credentials alone change nothing).
func TestSetACLOffKeepsOpenZnodes(t *testing.T) {
	z := testenv.StartZooKeeper(t)
	c, err := startControllerAuth(t, z, 1, Auth{DigestUser: "strata", DigestPassword: "pw"})
	if err != nil {
		t.Fatal(err)
	}
	activeOf(t, c)
	if _, err := c.CreateTopic(context.Background(), controller.CreateTopicRequest{Name: "t", NumPartitions: 1, ReplicationFactor: 1}); err != nil {
		t.Fatal(err)
	}
	anon := rawClient(t, z)
	for _, p := range []string{"/brokers", "/brokers/ids/1", "/brokers/topics/t", "/config/brokers", "/controller"} {
		acl, _, err := anon.GetACL(testChroot + p)
		if err != nil || !sameACL(acl, zk.WorldACL(zk.PermAll)) {
			t.Errorf("%s: ACL %v (%v), want world ALL", p, acl, err)
		}
	}
}

// TestRetryLogWarnsWithPath: a metadata update that keeps failing is
// logged at WARN with its error (naming the znode), not again at WARN
// within failureRepeat, and once at INFO when it recovers; passing
// session trouble stays at debug.
func TestRetryLogWarnsWithPath(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	r := retryLog{msg: "zookeeper metadata update failed"}
	now := time.Unix(1000, 0)
	noAuth := fmt.Errorf("create /brokers/topics/x: %w", zk.ErrNoAuth)
	r.failed(log, now, noAuth)
	r.failed(log, now.Add(time.Second), noAuth)
	if got := strings.Count(buf.String(), "level=WARN"); got != 1 || !strings.Contains(buf.String(), "/brokers/topics/x") {
		t.Fatalf("after two failures within %v: %s", failureRepeat, buf.String())
	}
	r.failed(log, now.Add(failureRepeat+time.Second), noAuth)
	if got := strings.Count(buf.String(), "level=WARN"); got != 2 || !strings.Contains(buf.String(), "failures=3") {
		t.Fatalf("after a failure %v later: %s", failureRepeat, buf.String())
	}
	r.succeeded(log, now.Add(failureRepeat+2*time.Second))
	if !strings.Contains(buf.String(), "level=INFO") || !strings.Contains(buf.String(), "recovered") {
		t.Fatalf("no recovery line: %s", buf.String())
	}
	buf.Reset()
	r.failed(log, now, zk.ErrConnectionClosed)
	r.succeeded(log, now.Add(time.Second))
	if buf.Len() != 0 {
		t.Fatalf("a passing connection loss was logged above debug: %s", buf.String())
	}
	r.failed(log, now, zk.ErrConnectionClosed)
	r.failed(log, now.Add(failureRepeat), zk.ErrConnectionClosed)
	if !strings.Contains(buf.String(), "level=WARN") {
		t.Fatalf("a connection loss lasting %v is not warned: %s", failureRepeat, buf.String())
	}
	r.succeeded(log, now)
	buf.Reset()
	unreachable := errors.New("UpdateMetadata to broker 2: connection refused")
	r.failed(log, now, unreachable)
	if buf.Len() != 0 {
		t.Fatalf("a first ordinary failure is warned of at once: %s", buf.String())
	}
	r.failed(log, now.Add(failureGrace), unreachable)
	if !strings.Contains(buf.String(), "level=WARN") || !strings.Contains(buf.String(), "broker 2") {
		t.Fatalf("an ordinary failure lasting %v is not warned: %s", failureGrace, buf.String())
	}
}

// TestRestoreSetACL: admin restore into a secured cluster needs the
// brokers' credentials, and what it writes gets Kafka's ACLs.
func TestRestoreSetACL(t *testing.T) {
	z := testenv.StartZooKeeper(t)
	c, err := startControllerAuth(t, z, 1, brokerAuth)
	if err != nil {
		t.Fatal(err)
	}
	activeOf(t, c)
	req := RestoreRequest{
		Topics:         []RestoreTopic{{Name: "kept", ID: controller.NewTopicID(), Replicas: [][]int32{{1}}, Configs: map[string]string{"retention.ms": "1000"}}},
		BrokerConfigs:  map[string]map[string]string{"": {"log.retention.ms": "5"}},
		NextProducerID: 5000,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := Restore(ctx, z.Addr()+testChroot, req); !errors.Is(err, zk.ErrNoAuth) {
		t.Fatalf("restore without credentials into a secured cluster: %v, want NoAuth", err)
	}
	req.Auth = brokerAuth
	if _, err := Restore(ctx, z.Addr()+testChroot, req); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the restored topic", func() bool { return c.Metadata().Topics["kept"] != nil })
	owner := digestClient(t, z, brokerAuth.DigestUser, brokerAuth.DigestPassword)
	for _, p := range []string{"/brokers/topics/kept", "/config/topics/kept", "/config/brokers/<default>", "/latest_producer_id_block"} {
		acl, _, err := owner.GetACL(testChroot + p)
		if err != nil || !sameACL(acl, wantACL(p)) {
			t.Errorf("%s: ACL %v (%v), want %v", p, acl, err, wantACL(p))
		}
	}
}
