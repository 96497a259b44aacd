package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
)

// The KIP-430 bit fields every operation of a resource type gives, by
// Kafka's operation codes: topics Read 3, Write 4, Create 5, Delete 6,
// Alter 7, Describe 8, DescribeConfigs 10, AlterConfigs 11; groups Read,
// Delete, Describe; the cluster Create, Alter, Describe, ClusterAction 9,
// DescribeConfigs, AlterConfigs, IdempotentWrite 12.
const (
	allTopicOps   = int32(1<<3 | 1<<4 | 1<<5 | 1<<6 | 1<<7 | 1<<8 | 1<<10 | 1<<11)
	allGroupOps   = int32(1<<3 | 1<<6 | 1<<8)
	allClusterOps = int32(1<<5 | 1<<7 | 1<<8 | 1<<9 | 1<<10 | 1<<11 | 1<<12)
	readDescribe  = int32(1<<3 | 1<<8)
	describeOnly  = int32(1 << 8)
)

// opsVersions caps Metadata at v10 (the last with the cluster's field)
// and DescribeGroups at v5 (an unknown group is described, as Dead).
func opsVersions() kgo.Opt {
	v := kversion.Stable()
	v.SetMaxKeyVersion(3, 10)
	v.SetMaxKeyVersion(15, 5)
	return kgo.MaxVersions(v)
}

// authorizedOps asks cl for the authorized operations of the cluster,
// topic, group (classic, none such: described as Dead) and consumer
// group (KIP-848, which must exist): with include set, and without.
type authorizedOps struct {
	metaCluster, metaTopic, describeCluster, describeGroup, consumerGroup int32
}

func askAuthorizedOps(t *testing.T, ctx context.Context, cl *kgo.Client, topic, group, cgroup string, include bool) authorizedOps {
	t.Helper()
	var got authorizedOps
	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	md.Topics = append(md.Topics, mt)
	md.IncludeClusterAuthorizedOperations, md.IncludeTopicAuthorizedOperations = include, include
	mresp, err := md.RequestWith(ctx, cl)
	if err != nil || len(mresp.Topics) != 1 {
		t.Fatalf("metadata: %v %+v", err, mresp)
	}
	if mresp.Version != 10 {
		t.Fatalf("metadata answered at v%d, want v10", mresp.Version)
	}
	got.metaCluster, got.metaTopic = mresp.AuthorizedOperations, mresp.Topics[0].AuthorizedOperations

	dc := kmsg.NewPtrDescribeClusterRequest()
	dc.IncludeClusterAuthorizedOperations = include
	dresp, err := dc.RequestWith(ctx, cl)
	if err != nil || dresp.ErrorCode != 0 {
		t.Fatalf("describe cluster: %v %+v", err, dresp)
	}
	got.describeCluster = dresp.ClusterAuthorizedOperations

	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups, dg.IncludeAuthorizedOperations = []string{group}, include
	gresp, err := dg.RequestWith(ctx, cl)
	if err != nil || len(gresp.Groups) != 1 || gresp.Groups[0].ErrorCode != 0 {
		t.Fatalf("describe groups: %v %+v", err, gresp)
	}
	got.describeGroup = gresp.Groups[0].AuthorizedOperations

	cg := kmsg.NewPtrConsumerGroupDescribeRequest()
	cg.Groups, cg.IncludeAuthorizedOperations = []string{cgroup}, include
	cresp, err := cg.RequestWith(ctx, cl)
	if err != nil || len(cresp.Groups) != 1 || cresp.Groups[0].ErrorCode != 0 {
		t.Fatalf("consumer group describe: %v %+v", err, cresp)
	}
	got.consumerGroup = cresp.Groups[0].AuthorizedOperations
	return got
}

// joinConsumerGroup makes group a KIP-848 consumer group of one member
// subscribed to topic.
func joinConsumerGroup(t *testing.T, ctx context.Context, cl *kgo.Client, group, topic string) {
	t.Helper()
	waitFor(t, "consumer group "+group, 20*time.Second, func() bool {
		resp, err := join848(group, "m1", topic).RequestWith(ctx, cl)
		return err == nil && resp.ErrorCode == 0
	})
}

func wantOps(t *testing.T, who string, got, want authorizedOps) {
	t.Helper()
	if got != want {
		t.Errorf("%s: authorized operations %+v, want %+v", who, got, want)
	}
}

const unset = authorizedOpsUnset

// TestAuthorizedOperationsWithAuthorizer: the fields hold what the
// principal may do, through the authorizer (ACLs, implied Describe,
// super users), and -2147483648 when not asked for.
func TestAuthorizedOperationsWithAuthorizer(t *testing.T) {
	b := startACLBroker(t, nil)
	ctx := testCtx(t)
	admin := b.as(t, "admin", opsVersions())
	adm := kadm.NewClient(admin)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	joinConsumerGroup(t, ctx, admin, "cg", "orders")
	mustACLs(t, ctx, adm, kadm.NewACLs().Allow("User:alice").Topics("orders").Groups("g", "cg").Operations(kadm.OpRead))
	mustACLs(t, ctx, adm, kadm.NewACLs().Allow("User:alice").Clusters().Operations(kadm.OpDescribe))
	mustACLs(t, ctx, adm, kadm.NewACLs().Allow("User:bob").Clusters().Operations(kadm.OpDescribe, kadm.OpIdempotentWrite))
	mustACLs(t, ctx, adm, kadm.NewACLs().Allow("User:bob").Topics("orders").Groups("g", "cg").Operations(kadm.OpAll))
	mustACLs(t, ctx, adm, kadm.NewACLs().Deny("User:bob").Topics("orders").Operations(kadm.OpDelete))
	mustACLs(t, ctx, adm, kadm.NewACLs().Deny("User:bob").Groups("cg").Operations(kadm.OpRead))

	wantOps(t, "admin (a super user)", askAuthorizedOps(t, ctx, admin, "orders", "g", "cg", true),
		authorizedOps{allClusterOps, allTopicOps, allClusterOps, allGroupOps, allGroupOps})
	alice := b.as(t, "alice", opsVersions())
	wantOps(t, "alice", askAuthorizedOps(t, ctx, alice, "orders", "g", "cg", true),
		authorizedOps{describeOnly, readDescribe, describeOnly, readDescribe, readDescribe})
	bob := b.as(t, "bob", opsVersions())
	wantOps(t, "bob", askAuthorizedOps(t, ctx, bob, "orders", "g", "cg", true),
		authorizedOps{describeOnly | 1<<12, allTopicOps &^ (1 << 6), describeOnly | 1<<12, allGroupOps, allGroupOps &^ (1 << 3)})
	wantOps(t, "alice, not asking", askAuthorizedOps(t, ctx, alice, "orders", "g", "cg", false),
		authorizedOps{unset, unset, unset, unset, unset})

	// Without Describe on the cluster, Metadata's cluster field is 0;
	// an unauthorized topic's is 0 too.
	mustACLs(t, ctx, adm, kadm.NewACLs().Allow("User:carol").Topics("other").Operations(kadm.OpRead))
	carol := b.as(t, "carol", opsVersions())
	md := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr("orders")
	md.Topics = append(md.Topics, mt)
	md.IncludeClusterAuthorizedOperations, md.IncludeTopicAuthorizedOperations = true, true
	mresp, err := md.RequestWith(ctx, carol)
	if err != nil || len(mresp.Topics) != 1 {
		t.Fatalf("carol's metadata: %v %+v", err, mresp)
	}
	if mresp.AuthorizedOperations != 0 || mresp.Topics[0].AuthorizedOperations != 0 {
		t.Errorf("carol's cluster and topic operations = %d, %d, want 0, 0", mresp.AuthorizedOperations, mresp.Topics[0].AuthorizedOperations)
	}
}

// TestAuthorizedOperationsWithoutAuthorizer: with no authorizer, every
// operation the resource type has, as Kafka answers.
func TestAuthorizedOperationsWithoutAuthorizer(t *testing.T) {
	ts := startTestServer(t, nil)
	ctx := testCtx(t)
	cl := ts.client(t, opsVersions())
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	joinConsumerGroup(t, ctx, cl, "cg", "orders")
	wantOps(t, "no authorizer", askAuthorizedOps(t, ctx, cl, "orders", "g", "cg", true),
		authorizedOps{allClusterOps, allTopicOps, allClusterOps, allGroupOps, allGroupOps})
	wantOps(t, "no authorizer, not asking", askAuthorizedOps(t, ctx, cl, "orders", "g", "cg", false),
		authorizedOps{unset, unset, unset, unset, unset})
}
