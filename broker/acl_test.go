package broker

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/controller"
)

// aclBroker is a single broker with the authorizer on, an mTLS listener
// (SSL, the principal is the certificate's CN) and a PLAINTEXT one
// (User:ANONYMOUS); User:admin is a super user.
type aclBroker struct {
	*testServer
	f *tlsFiles
}

func startACLBroker(t *testing.T, sets map[string]string) *aclBroker {
	f := newTLSFiles(t)
	props := map[string]string{
		"listeners":                   "SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0",
		"ssl.keystore.location":       f.keystore,
		"ssl.truststore.location":     f.truststore,
		"ssl.client.auth":             "required",
		"ssl.principal.mapping.rules": "RULE:^CN=([^,]*),.*$/$1/,DEFAULT",
		"authorizer.class.name":       "kafka.security.authorizer.AclAuthorizer",
		"super.users":                 "User:admin",
	}
	for k, v := range sets {
		props[k] = v
	}
	return &aclBroker{testServer: startTestServer(t, props), f: f}
}

// as is a client authenticated as User:<cn> on the SSL listener.
func (b *aclBroker) as(t *testing.T, cn string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	addr, _ := b.ListenerAddr("SSL")
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr.String()), kgo.DialTLSConfig(b.f.clientTLS(t, cn))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// anonymous is a client on the PLAINTEXT listener: User:ANONYMOUS.
func (b *aclBroker) anonymous(t *testing.T) *kgo.Client {
	addr, _ := b.ListenerAddr("PLAINTEXT")
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr.String()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func mustACLs(t *testing.T, ctx context.Context, adm *kadm.Client, b *kadm.ACLBuilder) {
	t.Helper()
	res, err := adm.CreateACLs(ctx, b)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatalf("create ACL %+v: %v", r, r.Err)
		}
	}
}

func wantACLCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	if got != want.Code {
		t.Errorf("%s: error %v, want %s", what, kerr.ErrorForCode(got), want.Message)
	}
}

// TestACLsRoundTrip: CreateAcls, DescribeAcls and DeleteAcls with kadm,
// the ALTER/DESCRIBE on the cluster they need, and the store surviving a
// restart (the embedded controller's metadata file).
func TestACLsRoundTrip(t *testing.T) {
	b := startACLBroker(t, nil)
	ctx := testCtx(t)
	adm := kadm.NewClient(b.as(t, "admin"))
	mustACLs(t, ctx, adm, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpRead, kadm.OpWrite))
	mustACLs(t, ctx, adm, kadm.NewACLs().Deny("User:*").AllowHosts().DenyHosts("*").Topics("logs-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpAll))

	desc, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny).Allow().Deny().AllowHosts().DenyHosts())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range desc {
		if d.Err != nil {
			t.Fatal(d.Err)
		}
		for _, a := range d.Described {
			got = append(got, fmt.Sprintf("%v %s %v %s %v %v", a.Type, a.Name, a.Pattern, a.Principal, a.Operation, a.Permission))
		}
	}
	slices.Sort(got)
	want := []string{"TOPIC logs- PREFIXED User:* ALL DENY", "TOPIC orders LITERAL User:alice READ ALLOW", "TOPIC orders LITERAL User:alice WRITE ALLOW"}
	if !slices.Equal(got, want) {
		t.Fatalf("described %q, want %q", got, want)
	}

	// alice may not list or change ACLs: CLUSTER_AUTHORIZATION_FAILED.
	alice := b.as(t, "alice")
	dr := kmsg.NewPtrDescribeACLsRequest()
	dr.ResourceType, dr.ResourcePatternType, dr.Operation, dr.PermissionType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny, kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
	dresp, err := dr.RequestWith(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	wantACLCode(t, "alice DescribeAcls", dresp.ErrorCode, kerr.ClusterAuthorizationFailed)
	cr := kmsg.NewPtrCreateACLsRequest()
	c := kmsg.NewCreateACLsRequestCreation()
	c.ResourceType, c.ResourceName, c.ResourcePatternType = kmsg.ACLResourceTypeTopic, "x", kmsg.ACLResourcePatternTypeLiteral
	c.Principal, c.Host, c.Operation, c.PermissionType = "User:alice", "*", kmsg.ACLOperationRead, kmsg.ACLPermissionTypeAllow
	cr.Creations = append(cr.Creations, c)
	cresp, err := cr.RequestWith(ctx, alice)
	if err != nil {
		t.Fatal(err)
	}
	wantACLCode(t, "alice CreateAcls", cresp.Results[0].ErrorCode, kerr.ClusterAuthorizationFailed)

	del, err := adm.DeleteACLs(ctx, kadm.NewACLs().Allow("User:alice").AllowHosts().Topics("orders").ResourcePatternType(kadm.ACLPatternLiteral).Operations(kadm.OpWrite))
	if err != nil {
		t.Fatal(err)
	}
	if len(del) != 1 || del[0].Err != nil || len(del[0].Deleted) != 1 || del[0].Deleted[0].Operation != kadm.OpWrite {
		t.Fatalf("deleted %+v", del)
	}

	// The store survives a restart.
	b.Close()
	e, err := controller.OpenEmbedded(b.dir, controller.Broker{ID: 0})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(e.ACLs()); n != 2 {
		t.Fatalf("after restart the metadata file holds %d resources' ACLs, want 2: %v", n, e.ACLs())
	}
}

// TestACLsDenials: each API family answers a refusal with its code.
func TestACLsDenials(t *testing.T) {
	b := startACLBroker(t, nil)
	ctx := testCtx(t)
	adm := kadm.NewClient(b.as(t, "admin"))
	for _, topic := range []string{"orders", "secret"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	mustACLs(t, ctx, adm, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpRead, kadm.OpWrite))
	mustACLs(t, ctx, adm, kadm.NewACLs().Allow("User:alice").Groups("g1").Operations(kadm.OpRead))
	mustACLs(t, ctx, adm, kadm.NewACLs().Allow("User:ANONYMOUS").Topics("orders").Operations(kadm.OpDescribe))

	alice := b.as(t, "alice")
	req := func(r kmsg.Request) kmsg.Response {
		t.Helper()
		resp, err := alice.Broker(0).Request(ctx, r) // as sent: no client-side splitting by leader
		if err != nil {
			t.Fatalf("%s: %v", kmsg.NameForKey(r.Key()), err)
		}
		return resp
	}

	// Produce: Write on the topic.
	if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("ok")}).FirstErr(); err != nil {
		t.Fatalf("alice produce to orders: %v", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err := alice.ProduceSync(pctx, &kgo.Record{Topic: "secret", Value: []byte("no")}).FirstErr()
	cancel()
	if err != kerr.TopicAuthorizationFailed {
		t.Errorf("alice produce to secret: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}

	// Metadata: all topics shows only the describable; a named one is refused.
	md := req(kmsg.NewPtrMetadataRequest()).(*kmsg.MetadataResponse)
	var names []string
	for _, mt := range md.Topics {
		names = append(names, *mt.Topic)
	}
	if !slices.Equal(names, []string{"orders"}) {
		t.Errorf("alice sees topics %v, want [orders]", names)
	}
	mreq := kmsg.NewPtrMetadataRequest()
	mreq.Topics = []kmsg.MetadataRequestTopic{{Topic: kmsg.StringPtr("secret")}, {Topic: kmsg.StringPtr("newtopic")}}
	mreq.AllowAutoTopicCreation = true
	md = req(mreq).(*kmsg.MetadataResponse)
	for _, mt := range md.Topics {
		wantACLCode(t, "alice Metadata "+*mt.Topic, mt.ErrorCode, kerr.TopicAuthorizationFailed)
	}
	if _, ok := b.ctrl.Metadata().Topics["newtopic"]; ok {
		t.Error("Metadata auto-created a topic without Create")
	}

	// Fetch and ListOffsets.
	fr := kmsg.NewPtrFetchRequest()
	fr.MaxWaitMillis, fr.MaxBytes = 10, 1<<20
	for _, topic := range []string{"orders", "secret"} {
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = topic
		ft.TopicID = b.ctrl.Metadata().Topics[topic].ID
		fp := kmsg.NewFetchRequestTopicPartition()
		ft.Partitions = append(ft.Partitions, fp)
		fr.Topics = append(fr.Topics, ft)
	}
	fresp := req(fr).(*kmsg.FetchResponse)
	for _, ft := range fresp.Topics {
		want := kerr.TopicAuthorizationFailed
		if ft.TopicID == b.ctrl.Metadata().Topics["orders"].ID {
			if ft.Partitions[0].ErrorCode != 0 {
				t.Errorf("alice fetch orders: %v", kerr.ErrorForCode(ft.Partitions[0].ErrorCode))
			}
			continue
		}
		wantACLCode(t, "alice fetch secret", ft.Partitions[0].ErrorCode, want)
	}
	// A topic that does not exist, or a partition past the end of one
	// the principal may not read, is answered as any refused topic:
	// existence and size are not told before authorization (Fetch v12,
	// which names topics, as User:ANONYMOUS on the PLAINTEXT listener).
	fr12 := kmsg.NewPtrFetchRequest()
	fr12.MaxWaitMillis, fr12.MaxBytes = 10, 1<<20
	for _, tp := range []struct {
		topic string
		part  int32
	}{{"no-such-topic", 0}, {"secret", 7}} {
		ft := kmsg.NewFetchRequestTopic()
		ft.Topic = tp.topic
		fp := kmsg.NewFetchRequestTopicPartition()
		fp.Partition = tp.part
		ft.Partitions = append(ft.Partitions, fp)
		fr12.Topics = append(fr12.Topics, ft)
	}
	plain, _ := b.ListenerAddr("PLAINTEXT")
	for _, ft := range dialRaw(t, plain.String()).do(fr12, 12).(*kmsg.FetchResponse).Topics {
		wantACLCode(t, "anonymous fetch "+ft.Topic, ft.Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)
	}
	lo := kmsg.NewPtrListOffsetsRequest()
	lt := kmsg.NewListOffsetsRequestTopic()
	lt.Topic = "secret"
	lt.Partitions = append(lt.Partitions, kmsg.NewListOffsetsRequestTopicPartition())
	lo.Topics = append(lo.Topics, lt)
	wantACLCode(t, "alice ListOffsets secret", req(lo).(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode, kerr.TopicAuthorizationFailed)

	// Groups: Read on the group, Read on the topic.
	findCoordinator := func(g string) int16 {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey, fc.CoordinatorKeys = g, []string{g}
		r := req(fc).(*kmsg.FindCoordinatorResponse)
		if len(r.Coordinators) > 0 {
			return r.Coordinators[0].ErrorCode
		}
		return r.ErrorCode
	}
	wantACLCode(t, "alice FindCoordinator g2", findCoordinator("g2"), kerr.GroupAuthorizationFailed)
	if code := findCoordinator("g1"); code != 0 {
		t.Fatalf("alice FindCoordinator g1: %v", kerr.ErrorForCode(code))
	}
	jg := kmsg.NewPtrJoinGroupRequest()
	jg.Group, jg.ProtocolType, jg.SessionTimeoutMillis, jg.RebalanceTimeoutMillis = "g2", "consumer", 10000, 10000
	jg.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{}}}
	wantACLCode(t, "alice JoinGroup g2", req(jg).(*kmsg.JoinGroupResponse).ErrorCode, kerr.GroupAuthorizationFailed)
	oc := kmsg.NewPtrOffsetCommitRequest()
	oc.Group, oc.Generation = "g1", -1
	for _, topic := range []string{"orders", "secret"} {
		ot := kmsg.NewOffsetCommitRequestTopic()
		ot.Topic = topic
		op := kmsg.NewOffsetCommitRequestTopicPartition()
		op.Offset = 1
		ot.Partitions = append(ot.Partitions, op)
		oc.Topics = append(oc.Topics, ot)
	}
	for _, ot := range req(oc).(*kmsg.OffsetCommitResponse).Topics {
		want := kerr.TopicAuthorizationFailed
		if ot.Topic == "orders" {
			if ot.Partitions[0].ErrorCode != 0 {
				t.Errorf("alice commit g1 orders: %v", kerr.ErrorForCode(ot.Partitions[0].ErrorCode))
			}
			continue
		}
		wantACLCode(t, "alice commit g1 secret", ot.Partitions[0].ErrorCode, want)
	}
	oc.Group = "g2"
	for _, ot := range req(oc).(*kmsg.OffsetCommitResponse).Topics {
		wantACLCode(t, "alice commit g2 "+ot.Topic, ot.Partitions[0].ErrorCode, kerr.GroupAuthorizationFailed)
	}
	dg := kmsg.NewPtrDeleteGroupsRequest()
	dg.Groups = []string{"g1"}
	wantACLCode(t, "alice DeleteGroups g1", req(dg).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode, kerr.GroupAuthorizationFailed)

	// Cluster: DescribeCluster (served to anyone, as by Kafka's brokers,
	// with no authorized operations without Describe on the cluster),
	// ElectLeaders, DescribeConfigs of the broker, ControlledShutdown
	// (ClusterAction).
	dcl := kmsg.NewPtrDescribeClusterRequest()
	dcl.IncludeClusterAuthorizedOperations = true
	if r := req(dcl).(*kmsg.DescribeClusterResponse); r.ErrorCode != 0 || r.ClusterAuthorizedOperations != 0 || len(r.Brokers) == 0 {
		t.Errorf("alice DescribeCluster: error %d, authorized operations %d, %d brokers; want 0, 0 and the brokers", r.ErrorCode, r.ClusterAuthorizedOperations, len(r.Brokers))
	}
	dc := kmsg.NewPtrDescribeConfigsRequest()
	dc.Resources = []kmsg.DescribeConfigsRequestResource{{ResourceType: kmsg.ConfigResourceTypeBroker, ResourceName: "0"}, {ResourceType: kmsg.ConfigResourceTypeTopic, ResourceName: "secret"}}
	dcr := req(dc).(*kmsg.DescribeConfigsResponse)
	wantACLCode(t, "alice DescribeConfigs broker", dcr.Resources[0].ErrorCode, kerr.ClusterAuthorizationFailed)
	wantACLCode(t, "alice DescribeConfigs secret", dcr.Resources[1].ErrorCode, kerr.TopicAuthorizationFailed)
	cs := kmsg.NewPtrControlledShutdownRequest()
	cs.BrokerID, cs.BrokerEpoch = 0, 1
	wantACLCode(t, "alice ControlledShutdown", req(cs).(*kmsg.ControlledShutdownResponse).ErrorCode, kerr.ClusterAuthorizationFailed)

	// Admin on topics: CreateTopics needs Create, DeleteTopics Delete.
	ct := kmsg.NewPtrCreateTopicsRequest()
	ctt := kmsg.NewCreateTopicsRequestTopic()
	ctt.Topic, ctt.NumPartitions, ctt.ReplicationFactor = "alices", 1, 1
	ct.Topics = append(ct.Topics, ctt)
	wantACLCode(t, "alice CreateTopics", req(ct).(*kmsg.CreateTopicsResponse).Topics[0].ErrorCode, kerr.TopicAuthorizationFailed)
	dt := kmsg.NewPtrDeleteTopicsRequest()
	dt.TopicNames = []string{"orders"}
	dt.Topics = []kmsg.DeleteTopicsRequestTopic{{Topic: kmsg.StringPtr("orders")}}
	wantACLCode(t, "alice DeleteTopics", req(dt).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode, kerr.TopicAuthorizationFailed)

	// InitProducerId: alice writes to a topic (KIP-679); bob nowhere.
	ip := kmsg.NewPtrInitProducerIDRequest()
	if r := req(ip).(*kmsg.InitProducerIDResponse); r.ErrorCode != 0 {
		t.Errorf("alice InitProducerId: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	bresp, err := kmsg.NewPtrInitProducerIDRequest().RequestWith(ctx, b.as(t, "bob"))
	if err != nil {
		t.Fatal(err)
	}
	wantACLCode(t, "bob InitProducerId", bresp.ErrorCode, kerr.ClusterAuthorizationFailed)
	txn := kmsg.NewPtrInitProducerIDRequest()
	txn.TransactionalID = kmsg.StringPtr("tx")
	wantACLCode(t, "alice transactional InitProducerId", req(txn).(*kmsg.InitProducerIDResponse).ErrorCode, kerr.TransactionalIDAuthorizationFailed)

	// User:ANONYMOUS on the PLAINTEXT listener may describe orders only.
	amd, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, b.anonymous(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(amd.Topics) != 1 || *amd.Topics[0].Topic != "orders" {
		t.Errorf("anonymous sees %d topics, want orders only", len(amd.Topics))
	}

	// A consumer group of alice's (g1 on orders) joins, consumes and
	// commits: JoinGroup, SyncGroup, Heartbeat, OffsetFetch and
	// OffsetCommit all pass with Read on the group and the topic. (g1
	// committed offset 1 above: a second record is there to read.)
	if err := alice.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte("second")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	consumer := b.as(t, "alice", kgo.ConsumerGroup("g1"), kgo.ConsumeTopics("orders"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.DisableAutoCommit())
	fs := consumer.PollFetches(ctx)
	if err := fs.Err0(); err != nil || fs.NumRecords() == 0 {
		t.Fatalf("alice's group consumer: %d records, %v", fs.NumRecords(), err)
	}
	if err := consumer.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("alice's group commit: %v", err)
	}

	// The super user sees everything.
	all, err := adm.ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !all.Has("secret") || !all.Has("orders") {
		t.Errorf("admin sees %v", all.Names())
	}
}

// TestACLsAllowEveryoneIfNoACLFound: with it on, a topic no ACL names is
// open; without an authorizer, the ACL APIs answer SECURITY_DISABLED.
func TestACLsAllowEveryoneIfNoACLFound(t *testing.T) {
	b := startACLBroker(t, map[string]string{"allow.everyone.if.no.acl.found": "true"})
	ctx := testCtx(t)
	if err := b.as(t, "carol", kgo.AllowAutoTopicCreation()).ProduceSync(ctx, &kgo.Record{Topic: "open", Value: []byte("v")}).FirstErr(); err != nil {
		t.Fatalf("produce with no ACLs and allow.everyone.if.no.acl.found=true: %v", err)
	}

	plain := startTestServer(t, nil)
	res, err := kadm.NewClient(plain.client(t)).CreateACLs(ctx, kadm.NewACLs().Allow("User:a").Topics("t").Operations(kadm.OpRead))
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Err != kerr.SecurityDisabled {
		t.Fatalf("CreateAcls without an authorizer: %+v, want SECURITY_DISABLED", res)
	}
}

// TestACLsScramCredentials: with an authorizer, DescribeUserScramCredentials
// needs Describe on the cluster and AlterUserScramCredentials Alter on
// it (CLUSTER_AUTHORIZATION_FAILED otherwise, for every user named), as
// Kafka's KafkaApis checks; a super user manages them.
func TestACLsScramCredentials(t *testing.T) {
	b := startACLBroker(t, nil)
	ctx := testCtx(t)
	alice := b.as(t, "alice")
	alter := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
	up.Name, up.Mechanism, up.Iterations = "bob", 1, 4096
	up.Salt, up.SaltedPassword = []byte("salt"), make([]byte, 32)
	alter.Upsertions = append(alter.Upsertions, up)
	resp, err := alice.Broker(0).Request(ctx, alter)
	if err != nil {
		t.Fatal(err)
	}
	ar := resp.(*kmsg.AlterUserSCRAMCredentialsResponse)
	if len(ar.Results) != 1 || ar.Results[0].User != "bob" {
		t.Fatalf("AlterUserScramCredentials as alice: results %+v", ar.Results)
	}
	wantACLCode(t, "AlterUserScramCredentials as alice", ar.Results[0].ErrorCode, kerr.ClusterAuthorizationFailed)
	resp, err = alice.Broker(0).Request(ctx, kmsg.NewPtrDescribeUserSCRAMCredentialsRequest())
	if err != nil {
		t.Fatal(err)
	}
	wantACLCode(t, "DescribeUserScramCredentials as alice", resp.(*kmsg.DescribeUserSCRAMCredentialsResponse).ErrorCode, kerr.ClusterAuthorizationFailed)

	admin := b.as(t, "admin")
	if resp, err = admin.Broker(0).Request(ctx, alter); err != nil {
		t.Fatal(err)
	}
	wantACLCode(t, "AlterUserScramCredentials as the super user", resp.(*kmsg.AlterUserSCRAMCredentialsResponse).Results[0].ErrorCode, &kerr.Error{Code: 0, Message: "no error"})
	if resp, err = admin.Broker(0).Request(ctx, kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()); err != nil {
		t.Fatal(err)
	}
	dr := resp.(*kmsg.DescribeUserSCRAMCredentialsResponse)
	if dr.ErrorCode != 0 || len(dr.Results) != 1 || dr.Results[0].User != "bob" {
		t.Fatalf("DescribeUserScramCredentials as the super user: error %v, results %+v", kerr.ErrorForCode(dr.ErrorCode), dr.Results)
	}
}

// TestACLsRegexSubscriptionSeesOnlyDescribableTopics: a KIP-848 member
// subscribed by regular expression is assigned only topics its principal
// may describe (Kafka 4's regex resolution); a topic it may not know of
// is neither named nor given by id.
func TestACLsRegexSubscriptionSeesOnlyDescribableTopics(t *testing.T) {
	sets := map[string]string{}
	for k, v := range kip848Sets {
		sets[k] = v
	}
	b := startACLBroker(t, sets)
	ctx := testCtx(t)
	adm := kadm.NewClient(b.as(t, "admin"))
	for _, topic := range []string{"orders", "secret"} {
		if _, err := adm.CreateTopic(ctx, 1, 1, nil, topic); err != nil {
			t.Fatal(err)
		}
	}
	mustACLs(t, ctx, adm, kadm.NewACLs().Allow("User:alice").Topics("orders").Operations(kadm.OpRead))
	mustACLs(t, ctx, adm, kadm.NewACLs().Allow("User:alice").Groups("rx").Operations(kadm.OpRead))
	alice := b.as(t, "alice")
	md := b.ctrl.Metadata()
	orders, secret := md.Topics["orders"].ID, md.Topics["secret"].ID
	req := hb848("rx", "alice-member-1", 0)
	req.RebalanceTimeoutMillis = 30000
	req.SubscribedTopicRegex = kmsg.StringPtr(".*")
	req.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	var assigned [][16]byte
	waitFor(t, "an assignment", 15*time.Second, func() bool {
		resp, err := alice.Request(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		hr := resp.(*kmsg.ConsumerGroupHeartbeatResponse)
		if hr.ErrorCode != 0 {
			msg := ""
			if hr.ErrorMessage != nil {
				msg = *hr.ErrorMessage
			}
			t.Fatalf("heartbeat: %v %s", kerr.ErrorForCode(hr.ErrorCode), msg)
		}
		if hr.MemberID != nil {
			req.MemberID, req.MemberEpoch = *hr.MemberID, hr.MemberEpoch
		}
		if hr.Assignment == nil || len(hr.Assignment.Topics) == 0 {
			return false
		}
		assigned = assigned[:0]
		for _, at := range hr.Assignment.Topics {
			assigned = append(assigned, at.TopicID)
		}
		return true
	})
	if !slices.Contains(assigned, orders) || slices.Contains(assigned, secret) {
		t.Fatalf("assigned topic ids %x; want orders (%x) and not secret (%x)", assigned, orders, secret)
	}
}
