package acl

import (
	"context"
	"testing"

	"strata/controller"
)

func newAuth(t *testing.T, super []string, allowIfNone bool, bs ...Binding) *Authorizer {
	t.Helper()
	e, err := controller.OpenEmbedded(t.TempDir(), controller.Broker{ID: 1})
	if err != nil {
		t.Fatal(err)
	}
	a := New(e, super, allowIfNone)
	for _, b := range bs {
		if err := b.Validate(); err != nil {
			t.Fatal(err)
		}
		if err := a.Create(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

func bind(t ResourceType, p PatternType, name, principal string, op Operation, perm Permission) Binding {
	return Binding{Resource{t, p, name}, Entry{Principal: principal, Host: "*", Operation: op, Permission: perm}}
}

func TestMatcher(t *testing.T) {
	a := newAuth(t, []string{"User:admin"}, false,
		bind(ResourceTopic, PatternLiteral, "orders", "User:alice", OpRead, PermAllow),
		bind(ResourceTopic, PatternPrefixed, "logs-", "User:bob", OpWrite, PermAllow),
		bind(ResourceTopic, PatternLiteral, "*", "User:carol", OpDescribe, PermAllow),
		bind(ResourceTopic, PatternPrefixed, "logs-secret", "User:*", OpAll, PermDeny),
		bind(ResourceGroup, PatternLiteral, "g", "User:*", OpRead, PermAllow),
		bind(ResourceCluster, PatternLiteral, ClusterName, "User:ops", OpAlterConfigs, PermAllow),
		Binding{Resource{ResourceTopic, PatternLiteral, "hosted"}, Entry{Principal: "User:dave", Host: "10.0.0.1", Operation: OpRead, Permission: PermAllow}},
	)
	cases := []struct {
		principal, host string
		op              Operation
		t               ResourceType
		name            string
		want            bool
	}{
		{"User:alice", "1.2.3.4", OpRead, ResourceTopic, "orders", true},
		{"User:alice", "1.2.3.4", OpWrite, ResourceTopic, "orders", false},
		{"User:alice", "1.2.3.4", OpDescribe, ResourceTopic, "orders", true}, // implied by Read
		{"User:alice", "1.2.3.4", OpRead, ResourceTopic, "orders2", false},   // carol's "*" ACL names every topic: no allow-if-none
		{"User:bob", "h", OpWrite, ResourceTopic, "logs-app", true},
		{"User:bob", "h", OpDescribe, ResourceTopic, "logs-app", true},
		{"User:bob", "h", OpWrite, ResourceTopic, "logs-secret-x", false}, // deny wins
		{"User:bob", "h", OpWrite, ResourceTopic, "log", false},
		{"User:carol", "h", OpDescribe, ResourceTopic, "anything", true}, // wildcard literal
		{"User:carol", "h", OpRead, ResourceTopic, "anything", false},
		{"User:admin", "h", OpDelete, ResourceTopic, "logs-secret-x", true}, // super user beats deny
		{"User:zed", "h", OpRead, ResourceGroup, "g", true},                 // User:*
		{"User:zed", "h", OpRead, ResourceGroup, "h", false},                // no ACL: deny
		{"User:ops", "h", OpDescribeConfigs, ResourceCluster, ClusterName, true},
		{"User:ops", "h", OpAlter, ResourceCluster, ClusterName, false},
		{"User:dave", "10.0.0.1", OpRead, ResourceTopic, "hosted", true},
		{"User:dave", "10.0.0.2", OpRead, ResourceTopic, "hosted", false},
	}
	for _, c := range cases {
		if got := a.Authorize(c.principal, c.host, c.op, c.t, c.name); got != c.want {
			t.Errorf("%s@%s %v %v %q = %v, want %v", c.principal, c.host, c.op, c.t, c.name, got, c.want)
		}
	}
}

func TestAllowEveryoneIfNoACLFound(t *testing.T) {
	for _, allow := range []bool{false, true} {
		a := newAuth(t, nil, allow, bind(ResourceTopic, PatternLiteral, "guarded", "User:alice", OpRead, PermAllow))
		if got := a.Authorize("User:bob", "h", OpRead, ResourceTopic, "open"); got != allow {
			t.Errorf("allow.everyone.if.no.acl.found=%v: topic without ACLs allowed=%v", allow, got)
		}
		if a.Authorize("User:bob", "h", OpRead, ResourceTopic, "guarded") {
			t.Errorf("allow.everyone.if.no.acl.found=%v: a topic with ACLs must deny others", allow)
		}
	}
}

func TestFilterAndDelete(t *testing.T) {
	a := newAuth(t, nil, false,
		bind(ResourceTopic, PatternLiteral, "orders", "User:alice", OpRead, PermAllow),
		bind(ResourceTopic, PatternPrefixed, "ord", "User:bob", OpWrite, PermAllow),
		bind(ResourceGroup, PatternLiteral, "g", "User:alice", OpRead, PermAllow),
	)
	name := "orders"
	if got := a.Bindings(Filter{Type: ResourceTopic, Name: &name, Pattern: PatternMatch, Operation: OpAny, Permission: PermAny}); len(got) != 2 {
		t.Fatalf("MATCH orders = %v, want the literal and the prefixed", got)
	}
	alice := "User:alice"
	del, err := a.Delete(context.Background(), Filter{Type: ResourceAny, Pattern: PatternAny, Principal: &alice, Operation: OpAny, Permission: PermAny})
	if err != nil || len(del) != 2 {
		t.Fatalf("delete alice = %v, %v", del, err)
	}
	if left := a.Bindings(Filter{Type: ResourceAny, Pattern: PatternAny, Operation: OpAny, Permission: PermAny}); len(left) != 1 || left[0].Principal != "User:bob" {
		t.Fatalf("left %v", left)
	}
	if a.Authorize("User:alice", "h", OpRead, ResourceTopic, "orders") {
		t.Fatal("deleted ACL still allows")
	}
}

func TestEnabled(t *testing.T) {
	for _, c := range []string{ClassAclAuthorizer, ClassStandardAuthorizer} {
		if ok, err := Enabled(c); !ok || err != nil {
			t.Errorf("%s: %v %v", c, ok, err)
		}
	}
	if ok, err := Enabled(""); ok || err != nil {
		t.Errorf("empty: %v %v", ok, err)
	}
	if _, err := Enabled("com.example.Other"); err == nil {
		t.Error("unknown class accepted")
	}
}

// AuthorizeAny (may the principal do op on some resource of a type, as
// Kafka's authorizeByResourceType): a Deny of the resource an Allow
// names cancels it; an Allow elsewhere still counts.
func TestAuthorizeAnyHonoursDeny(t *testing.T) {
	a := newAuth(t, nil, false,
		bind(ResourceTopic, PatternLiteral, "t", "User:alice", OpWrite, PermAllow),
		bind(ResourceTopic, PatternLiteral, "t", "User:alice", OpWrite, PermDeny),
		bind(ResourceTopic, PatternPrefixed, "p-", "User:bob", OpWrite, PermAllow),
		bind(ResourceTopic, PatternLiteral, "*", "User:bob", OpWrite, PermDeny),
		bind(ResourceTopic, PatternLiteral, "t", "User:carol", OpWrite, PermAllow),
		bind(ResourceTopic, PatternLiteral, "u", "User:carol", OpWrite, PermAllow),
		bind(ResourceTopic, PatternLiteral, "t", "User:carol", OpWrite, PermDeny),
	)
	for _, c := range []struct {
		principal string
		want      bool
	}{{"User:alice", false}, {"User:bob", false}, {"User:carol", true}, {"User:dave", false}} {
		if got := a.AuthorizeAny(c.principal, "h", OpWrite, ResourceTopic); got != c.want {
			t.Errorf("AuthorizeAny(%s, Write, Topic) = %v, want %v", c.principal, got, c.want)
		}
	}
}
