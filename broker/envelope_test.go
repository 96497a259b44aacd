package broker

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/plain"
)

// TestEnvelopePrincipalFormat: the principal an Envelope carries is
// Kafka's DefaultPrincipalData v0, byte for byte, and the decoder refuses
// what is not exactly that.
func TestEnvelopePrincipalFormat(t *testing.T) {
	// Kafka's DefaultKafkaPrincipalBuilder.serialize(new KafkaPrincipal("User", "alice")):
	// version 0, compact strings "User" and "alice", false, no tags.
	kafka := []byte{0, 0, 5, 'U', 's', 'e', 'r', 6, 'a', 'l', 'i', 'c', 'e', 0, 0}
	got, err := encodePrincipal(principalData{Type: "User", Name: "alice"})
	if err != nil || !bytes.Equal(got, kafka) {
		t.Fatalf("encode User:alice = %v %v, want %v", got, err, kafka)
	}
	p, err := decodePrincipal(kafka)
	if err != nil || p.String() != "User:alice" || p.TokenAuthenticated {
		t.Fatalf("decode = %+v %v", p, err)
	}
	withTag := append(append([]byte{}, kafka[:len(kafka)-1]...), 1, 5, 2, 'h', 'i')
	if p, err := decodePrincipal(withTag); err != nil || p.Name != "alice" {
		t.Fatalf("decode with an unknown tagged field = %+v %v", p, err)
	}
	for what, b := range map[string][]byte{
		"empty":               {},
		"version 1":           {0, 1, 5, 'U', 's', 'e', 'r', 6, 'a', 'l', 'i', 'c', 'e', 0, 0},
		"null type":           {0, 0, 0, 6, 'a', 'l', 'i', 'c', 'e', 0, 0},
		"empty type":          {0, 0, 1, 6, 'a', 'l', 'i', 'c', 'e', 0, 0},
		"type with ':'":       {0, 0, 3, 'U', ':', 6, 'a', 'l', 'i', 'c', 'e', 0, 0},
		"name past the end":   {0, 0, 5, 'U', 's', 'e', 'r', 60, 'a'},
		"huge name length":    {0, 0, 5, 'U', 's', 'e', 'r', 0xff, 0xff, 0xff, 0xff, 0x0f},
		"bool 2":              {0, 0, 5, 'U', 's', 'e', 'r', 6, 'a', 'l', 'i', 'c', 'e', 2, 0},
		"no tags":             kafka[:len(kafka)-1],
		"trailing byte":       append(append([]byte{}, kafka...), 0),
		"tag past the end":    append(append([]byte{}, kafka[:len(kafka)-1]...), 1, 5, 9, 'h'),
		"many tags":           append(append([]byte{}, kafka[:len(kafka)-1]...), 0xff, 0xff, 0xff, 0xff, 0x0f),
		"not UTF-8":           {0, 0, 5, 'U', 's', 'e', 'r', 3, 0xff, 0xfe, 0, 0},
		"control in the name": {0, 0, 5, 'U', 's', 'e', 'r', 3, 'a', '\n', 0, 0},
	} {
		if p, err := decodePrincipal(b); err == nil {
			t.Errorf("%s: decoded as %+v, want an error", what, p)
		}
	}
	if _, err := encodePrincipal(principalData{Type: "User", Name: strings.Repeat("a", maxPrincipalPart+1)}); err == nil {
		t.Error("a name over the bound was encoded")
	}
}

// FuzzEnvelopePrincipal: the decoder never panics, and what it accepts
// encodes back to bytes that decode the same.
func FuzzEnvelopePrincipal(f *testing.F) {
	f.Add([]byte{0, 0, 5, 'U', 's', 'e', 'r', 6, 'a', 'l', 'i', 'c', 'e', 0, 0})
	f.Add([]byte{0, 0, 5, 'U', 's', 'e', 'r', 1, 1, 1, 5, 2, 'h', 'i'})
	f.Add([]byte{0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := decodePrincipal(b)
		if err != nil {
			return
		}
		again, err := encodePrincipal(p)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", p, err)
		}
		if q, err := decodePrincipal(again); err != nil || q != p {
			t.Fatalf("%+v re-encoded decodes as %+v, %v", p, q, err)
		}
	})
}

// FuzzEnvelopedRequest: an Envelope's request data, from anyone, is
// decoded or refused, never a panic.
func FuzzEnvelopedRequest(f *testing.F) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = "t", 1, 1
	req.Topics = append(req.Topics, rt)
	f.Add(kmsg.NewRequestFormatter(kmsg.FormatterClientID("c")).AppendRequest(nil, req, 3)[4:])
	f.Add([]byte{0, 3, 0, 12, 0, 0, 0, 1, 0xff, 0xff, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		kreq, _, _, err := parseEnvelopedRequest(b)
		if err == nil && !forwardable[kreq.Key()] {
			t.Fatalf("accepted %s, which is not forwarded", kmsg.NameForKey(kreq.Key()))
		}
	})
}

// envelopeJAAS: the brokers log in to each other as User:broker, a super
// user; alice and bob are clients.
const envelopeJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker-secret" user_broker="broker-secret" user_alice="alice-secret" user_bob="bob-secret";`

// TestEnvelopeForwarding: on a 2-broker ZooKeeper cluster with SASL and
// the authorizer, a CreateTopics sent to the broker that is not the
// controller goes to the controller in an Envelope and is authorized as
// the client: alice's (allowed) creates the topic, bob's (no ACL)
// answers TOPIC_AUTHORIZATION_FAILED. An Envelope from a client is
// refused: on the clients' listener the connection is closed, on the
// inter-broker one it is CLUSTER_AUTHORIZATION_FAILED. The controller
// checks what the Envelope holds.
func TestEnvelopeForwarding(t *testing.T) {
	c := startZKCluster(t, 2, map[string]string{
		"listeners":                                     "CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
		"listener.security.protocol.map":                "CLIENT:SASL_PLAINTEXT,INTERNAL:SASL_PLAINTEXT",
		"inter.broker.listener.name":                    "INTERNAL",
		"sasl.enabled.mechanisms":                       "PLAIN",
		"sasl.mechanism.inter.broker.protocol":          "PLAIN",
		"listener.name.client.plain.sasl.jaas.config":   envelopeJAAS,
		"listener.name.internal.plain.sasl.jaas.config": envelopeJAAS,
		"authorizer.class.name":                         "kafka.security.authorizer.AclAuthorizer",
		"super.users":                                   "User:broker",
	})
	act := c.active()
	other := 3 - act
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := func(id int32, listener, user string) *kgo.Client {
		addr, _ := c.servers[id].ListenerAddr(listener)
		cl, err := kgo.NewClient(kgo.SeedBrokers(addr.String()), kgo.SASL(plain.Auth{User: user, Pass: user + "-secret"}.AsMechanism()))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	// alice may create topics named fw-*; bob may not create any.
	acls := kmsg.NewPtrCreateACLsRequest()
	cr := kmsg.NewCreateACLsRequestCreation()
	cr.ResourceType, cr.ResourceName, cr.ResourcePatternType = kmsg.ACLResourceTypeTopic, "fw-", kmsg.ACLResourcePatternTypePrefixed
	cr.Principal, cr.Host, cr.Operation, cr.PermissionType = "User:alice", "*", kmsg.ACLOperationCreate, kmsg.ACLPermissionTypeAllow
	acls.Creations = append(acls.Creations, cr)
	if resp, err := acls.RequestWith(ctx, client(act, "CLIENT", "broker")); err != nil || resp.Results[0].ErrorCode != 0 {
		t.Fatalf("CreateAcls: %v %+v", err, resp)
	}
	waitFor(t, "the ACL on both brokers", 5*time.Second, func() bool {
		for _, s := range c.servers {
			if !s.authz.Authorize("User:alice", "127.0.0.1", 5, 2, "fw-x") {
				return false
			}
		}
		return true
	})

	create := func(user, topic string) kmsg.CreateTopicsResponseTopic {
		t.Helper()
		req := kmsg.NewPtrCreateTopicsRequest()
		req.TimeoutMillis = 20000
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, 1, 2
		req.Topics = append(req.Topics, rt)
		resp, err := client(other, "CLIENT", user).Broker(int(other)).Request(ctx, req)
		if err != nil {
			t.Fatalf("%s's CreateTopics to broker %d: %v", user, other, err)
		}
		return resp.(*kmsg.CreateTopicsResponse).Topics[0]
	}
	if r := create("alice", "fw-orders"); r.ErrorCode != 0 {
		t.Fatalf("alice's CreateTopics through broker %d (not the controller): %v", other, kerr.ErrorForCode(r.ErrorCode))
	}
	for id, s := range c.servers {
		if top := s.ctrl.Metadata().Topics["fw-orders"]; top == nil || len(top.Partitions) != 1 {
			t.Fatalf("broker %d does not know fw-orders once alice's CreateTopics is answered", id)
		}
	}
	if r := create("bob", "fw-bob"); r.ErrorCode != kerr.TopicAuthorizationFailed.Code {
		t.Fatalf("bob's CreateTopics through broker %d: %v, want TOPIC_AUTHORIZATION_FAILED", other, kerr.ErrorForCode(r.ErrorCode))
	}
	if _, ok := c.ctl(act).Metadata().Topics["fw-bob"]; ok {
		t.Fatal("bob's topic was created")
	}

	// An Envelope from a client, claiming to be the broker.
	envelope := func(principal []byte, inner kmsg.Request) *kmsg.EnvelopeRequest {
		env := kmsg.NewPtrEnvelopeRequest()
		env.RequestPrincipal, env.ClientHostAddress = principal, []byte{127, 0, 0, 1}
		env.RequestData = kmsg.NewRequestFormatter(kmsg.FormatterClientID("forged")).AppendRequest(nil, inner, 1)[4:]
		return env
	}
	asBroker, _ := encodePrincipal(principalData{Type: "User", Name: "broker"})
	bobTopic := kmsg.NewPtrCreateTopicsRequest()
	bobTopic.Version = 7
	bt := kmsg.NewCreateTopicsRequestTopic()
	bt.Topic, bt.NumPartitions, bt.ReplicationFactor = "fw-bob", 1, 1
	bobTopic.Topics = append(bobTopic.Topics, bt)
	_, err := client(act, "CLIENT", "bob").Broker(int(act)).Request(ctx, envelope(asBroker, bobTopic))
	if err == nil {
		t.Fatal("an Envelope on the clients' listener was answered; the connection must close")
	}
	resp, err := client(act, "INTERNAL", "bob").Broker(int(act)).Request(ctx, envelope(asBroker, bobTopic))
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.EnvelopeResponse).ErrorCode; code != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("bob's Envelope on the inter-broker listener: %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(code))
	}
	if _, ok := c.ctl(act).Metadata().Topics["fw-bob"]; ok {
		t.Fatal("bob's forged Envelope created a topic")
	}

	// What an Envelope holds is checked, even from a broker.
	brokerCl := client(act, "INTERNAL", "broker")
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 12
	for what, tc := range map[string]struct {
		env  *kmsg.EnvelopeRequest
		want *kerr.Error
	}{
		"bad principal":           {envelope([]byte{0, 0, 1}, bobTopic), kerr.PrincipalDeserializationFailure},
		"no client address":       {func() *kmsg.EnvelopeRequest { e := envelope(asBroker, bobTopic); e.ClientHostAddress = nil; return e }(), kerr.InvalidRequest},
		"Metadata, not forwarded": {envelope(asBroker, md), kerr.InvalidRequest},
		"truncated request": {func() *kmsg.EnvelopeRequest {
			e := envelope(asBroker, bobTopic)
			e.RequestData = e.RequestData[:6]
			return e
		}(), kerr.InvalidRequest},
	} {
		resp, err := brokerCl.Broker(int(act)).Request(ctx, tc.env)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if code := resp.(*kmsg.EnvelopeResponse).ErrorCode; !errors.Is(kerr.ErrorForCode(code), tc.want) {
			t.Errorf("%s: %v, want %v", what, kerr.ErrorForCode(code), tc.want)
		}
	}
	// On the broker that is not the controller: NOT_CONTROLLER.
	resp, err = client(other, "INTERNAL", "broker").Broker(int(other)).Request(ctx, envelope(asBroker, bobTopic))
	if err != nil {
		t.Fatal(err)
	}
	if code := resp.(*kmsg.EnvelopeResponse).ErrorCode; code != kerr.NotController.Code {
		t.Fatalf("an Envelope to broker %d, not the controller: %v, want NOT_CONTROLLER", other, kerr.ErrorForCode(code))
	}
}
