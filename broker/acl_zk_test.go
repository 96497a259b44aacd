package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
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
