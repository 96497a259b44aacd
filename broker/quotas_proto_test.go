package broker

import (
	"context"
	"time"

	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClientQuotasAnswers: DescribeClientQuotas answers no entries to a
// valid filter, INVALID_REQUEST to a bad one and
// CLUSTER_AUTHORIZATION_FAILED without DescribeConfigs on the cluster;
// AlterClientQuotas refuses each entry, saying quotas are not supported.
func TestClientQuotasAnswers(t *testing.T) {
	b := startACLBroker(t, nil)
	ctx := testCtx(t)
	admin, anon := b.as(t, "admin"), b.anonymous(t)
	describe := func(cl interface {
		Request(context.Context, kmsg.Request) (kmsg.Response, error)
	}, comps ...kmsg.DescribeClientQuotasRequestComponent) *kmsg.DescribeClientQuotasResponse {
		t.Helper()
		req := kmsg.NewPtrDescribeClientQuotasRequest()
		req.Components = comps
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	comp := func(typ string, match int8, name *string) kmsg.DescribeClientQuotasRequestComponent {
		c := kmsg.NewDescribeClientQuotasRequestComponent()
		c.EntityType, c.MatchType, c.Match = typ, kmsg.QuotasMatchType(match), name
		return c
	}
	if r := describe(admin, comp("user", 2, nil)); r.ErrorCode != 0 || r.Entries == nil || len(r.Entries) != 0 {
		t.Fatalf("describe every user's quotas = %v %+v, want no error and an empty list", kerr.ErrorForCode(r.ErrorCode), r.Entries)
	}
	for _, bad := range [][]kmsg.DescribeClientQuotasRequestComponent{
		{comp("group", 2, nil)},
		{comp("user", 0, nil)},
		{comp("user", 2, nil), comp("user", 1, nil)},
		{comp("ip", 2, nil), comp("user", 2, nil)},
		{comp("user", 7, nil)},
	} {
		if r := describe(admin, bad...); r.ErrorCode != kerr.InvalidRequest.Code || r.ErrorMessage == nil {
			t.Errorf("describe with filter %+v = %v, want INVALID_REQUEST with a message", bad, kerr.ErrorForCode(r.ErrorCode))
		}
	}
	if r := describe(anon, comp("user", 2, nil)); r.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("describe without DescribeConfigs on the cluster = %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(r.ErrorCode))
	}
	mustACLs(t, ctx, kadm.NewClient(admin), kadm.NewACLs().Allow("User:ANONYMOUS").Clusters().Operations(kadm.OpDescribeConfigs))
	waitFor(t, "the ACL", 5*time.Second, func() bool { return describe(anon, comp("user", 2, nil)).ErrorCode == 0 })

	alter := func(cl interface {
		Request(context.Context, kmsg.Request) (kmsg.Response, error)
	}) kmsg.AlterClientQuotasResponseEntry {
		t.Helper()
		req := kmsg.NewPtrAlterClientQuotasRequest()
		e := kmsg.NewAlterClientQuotasRequestEntry()
		ent := kmsg.NewAlterClientQuotasRequestEntryEntity()
		ent.Type, ent.Name = "user", kmsg.StringPtr("alice")
		op := kmsg.NewAlterClientQuotasRequestEntryOp()
		op.Key, op.Value = "producer_byte_rate", 1024
		e.Entity, e.Ops = append(e.Entity, ent), append(e.Ops, op)
		req.Entries = append(req.Entries, e)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Entries) != 1 {
			t.Fatalf("AlterClientQuotas = %v %+v", err, resp)
		}
		return resp.Entries[0]
	}
	if e := alter(admin); e.ErrorCode != kerr.InvalidRequest.Code || e.ErrorMessage == nil || *e.ErrorMessage != quotasUnsupported ||
		len(e.Entity) != 1 || e.Entity[0].Type != "user" {
		t.Fatalf("AlterClientQuotas = %+v, want INVALID_REQUEST saying quotas are not supported", e)
	}
	if e := alter(anon); e.ErrorCode != kerr.ClusterAuthorizationFailed.Code {
		t.Fatalf("AlterClientQuotas without AlterConfigs = %v, want CLUSTER_AUTHORIZATION_FAILED", kerr.ErrorForCode(e.ErrorCode))
	}
}
