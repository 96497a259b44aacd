package broker

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
	"strata/controller"
	"strata/internal/testenv"
)

// TestACLsZooKeeperCluster: two brokers on ZooKeeper with mTLS listeners
// for clients and between brokers, the brokers' principal (User:broker)
// a super user. Replication works under the authorizer; an ACL created
// through one broker is applied by the other within a second; a client
// without ClusterAction is refused the controller's requests on the
// inter-broker listener.
func TestACLsZooKeeperCluster(t *testing.T) {
	f := newTLSFiles(t)
	c := startZKCluster(t, 2, map[string]string{
		"listeners":                      "CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
		"listener.security.protocol.map": "CLIENT:SSL,INTERNAL:SSL",
		"inter.broker.listener.name":     "INTERNAL",
		"ssl.keystore.location":          f.keystore,
		"ssl.truststore.location":        f.truststore,
		"ssl.client.auth":                "required",
		"ssl.principal.mapping.rules":    "RULE:^CN=([^,]*).*$/$1/,DEFAULT",
		"authorizer.class.name":          "kafka.security.authorizer.AclAuthorizer",
		"super.users":                    "User:admin;User:broker",
	})
	c.createTopic("orders", []int32{1, 2}, nil)

	client := func(id int32, listener, cn string) *kgo.Client {
		addr, _ := c.servers[id].ListenerAddr(listener)
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr.String()), kgo.DialTLSConfig(f.clientTLS(t, cn)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The ACL is created through broker 1 …
	cr := kmsg.NewPtrCreateACLsRequest()
	cc := kmsg.NewCreateACLsRequestCreation()
	cc.ResourceType, cc.ResourceName, cc.ResourcePatternType = kmsg.ACLResourceTypeTopic, "ord", kmsg.ACLResourcePatternTypePrefixed
	cc.Principal, cc.Host, cc.Operation, cc.PermissionType = "User:alice", "*", kmsg.ACLOperationWrite, kmsg.ACLPermissionTypeAllow
	cr.Creations = append(cr.Creations, cc)
	if a := c.servers[2].authz; a.Authorize("User:alice", "127.0.0.1", acl.OpWrite, acl.ResourceTopic, "orders") {
		t.Fatal("alice may write before the ACL")
	}
	resp, err := client(1, "CLIENT", "admin").Broker(1).Request(ctx, cr)
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.CreateACLsResponse).Results[0].ErrorCode; code != 0 {
		t.Fatalf("CreateAcls: %v", kerr.ErrorForCode(code))
	}
	// … and applied by broker 2 within a second.
	created := time.Now()
	for !c.servers[2].authz.Authorize("User:alice", "127.0.0.1", acl.OpWrite, acl.ResourceTopic, "orders") {
		if time.Since(created) > time.Second {
			t.Fatal("broker 2 did not apply the ACL within a second")
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("broker 2 applied the ACL after %v", time.Since(created).Round(time.Millisecond))

	// alice produces through broker 2 (acks=all: replicated under the authorizer).
	alice := client(2, "CLIENT", "alice")
	if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("alice produce: %v", err)
	}

	// alice on the inter-broker listener has no ClusterAction.
	lai := kmsg.NewPtrLeaderAndISRRequest()
	lai.ControllerID, lai.ControllerEpoch, lai.BrokerEpoch = 1, 1, 1
	lresp, err := client(2, "INTERNAL", "alice").Broker(2).Request(ctx, lai)
	if err != nil {
		t.Fatal(err)
	}
	if code := lresp.(*kmsg.LeaderAndISRResponse).ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("alice's LeaderAndIsr: %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
}

// TestReplicaFetchRefusedIsLogged: two brokers whose controller requests
// go over an SSL control-plane listener as User:broker (a super user) but
// whose replica fetches go over a PLAINTEXT inter-broker listener as
// User:ANONYMOUS, which has no ClusterAction. The follower gets its
// LeaderAndIsr, its fetches are refused, and it says so at WARN (once,
// not at every retry) instead of backing off in silence.
func TestReplicaFetchRefusedIsLogged(t *testing.T) {
	f := newTLSFiles(t)
	c := &zkCluster{t: t, zk: testenv.StartZooKeeper(t), dirs: map[int32]string{}, servers: map[int32]*Server{}, logs: &syncBuffer{}, sets: map[string]string{
		"listeners":                      "INTERNAL://127.0.0.1:0,CONTROL://127.0.0.1:0",
		"listener.security.protocol.map": "INTERNAL:PLAINTEXT,CONTROL:SSL",
		"inter.broker.listener.name":     "INTERNAL",
		"control.plane.listener.name":    "CONTROL",
		"ssl.keystore.location":          f.keystore,
		"ssl.truststore.location":        f.truststore,
		"ssl.client.auth":                "required",
		"ssl.principal.mapping.rules":    "RULE:^CN=([^,]*).*$/$1/,DEFAULT",
		"authorizer.class.name":          "kafka.security.authorizer.AclAuthorizer",
		"super.users":                    "User:broker",
	}}
	t.Cleanup(func() {
		for _, s := range c.servers {
			s.Close()
		}
	})
	for i := int32(1); i <= 2; i++ {
		c.dirs[i] = t.TempDir()
		c.start(i)
	}
	if _, err := c.ctl(c.active()).CreateTopic(context.Background(), controller.CreateTopicRequest{Name: "refused", Assignments: [][]int32{{1, 2}}}); err != nil {
		t.Fatal(err)
	}
	const warning = "replica fetch refused by the leader's authorizer"
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the brokers' logs:\n%s", c.logs.String())
		}
	})
	waitFor(t, "broker 2 to log that broker 1 refuses its fetches", 15*time.Second, func() bool {
		return strings.Contains(c.logs.String(), warning)
	})
	time.Sleep(time.Second) // ten retries at least
	logs := c.logs.String()
	if n := strings.Count(logs, warning); n != 1 {
		t.Errorf("%d warnings in a second of refused fetches, want 1:\n%s", n, logs)
	}
	for line := range strings.Lines(logs) {
		if strings.Contains(line, warning) && (!strings.Contains(line, "broker=2") || !strings.Contains(line, "leader=1") ||
			!strings.Contains(line, "topic=refused") || !strings.Contains(line, "TOPIC_AUTHORIZATION_FAILED")) {
			t.Errorf("warning %q: want broker 2, leader 1, the topic and the error", line)
		}
	}
}
