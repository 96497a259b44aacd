package zk

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"strata/controller"
	"strata/internal/testenv"
)

// TestACLStore: an ACL written through one broker is in Kafka's znode
// with Kafka's JSON, announced under /kafka-acl-changes (or
// /kafka-acl-extended-changes), and applied by the other broker within
// a second; deleting the last ACL of a resource removes its znode.
func TestACLStore(t *testing.T) {
	z := testenv.StartZooKeeper(t)
	c1, c2 := newController(t, z, 1), newController(t, z, 2)
	if len(c2.ACLs()) != 0 {
		t.Fatalf("ACLs before any: %v", c2.ACLs())
	}
	ctx := context.Background()
	alice := controller.ACLEntry{Principal: "User:alice", PermissionType: "Allow", Operation: "Read", Host: "*"}
	seen := func(c *Controller, res controller.ACLResource, want []controller.ACLEntry) {
		t.Helper()
		deadline := time.Now().Add(time.Second)
		for !slices.Equal(c.ACLs()[res], want) {
			if time.Now().After(deadline) {
				t.Fatalf("broker %d has %v for %v after a second, want %v", c.opts.Broker.ID, c.ACLs()[res], res, want)
			}
			select {
			case <-c.ACLChanges():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	lit := controller.ACLResource{Type: "Topic", Pattern: "LITERAL", Name: "orders"}
	pre := controller.ACLResource{Type: "Group", Pattern: "PREFIXED", Name: "app-"}
	for _, res := range []controller.ACLResource{lit, pre} {
		c2.ACLChanges() // watching before the change
		if err := c1.UpdateACLs(ctx, res, func(cur []controller.ACLEntry) []controller.ACLEntry { return append(cur, alice) }); err != nil {
			t.Fatal(err)
		}
		seen(c2, res, []controller.ACLEntry{alice})
	}

	raw := rawClient(t, z)
	var node struct {
		Version int                   `json:"version"`
		ACLs    []controller.ACLEntry `json:"acls"`
	}
	readJSON(t, raw, "/kafka-acl/Topic/orders", &node)
	if node.Version != 1 || !slices.Equal(node.ACLs, []controller.ACLEntry{alice}) {
		t.Fatalf("/kafka-acl/Topic/orders holds %+v", node)
	}
	readJSON(t, raw, "/kafka-acl-extended/prefixed/Group/app-", &node)
	if !slices.Equal(node.ACLs, []controller.ACLEntry{alice}) {
		t.Fatalf("/kafka-acl-extended/prefixed/Group/app- holds %+v", node)
	}
	for path, want := range map[string]string{"/kafka-acl-changes": "Topic:orders", "/kafka-acl-extended-changes": `"patternType":"PREFIXED"`} {
		names, _, err := raw.Children(testChroot + path)
		if err != nil || len(names) != 1 || !strings.HasPrefix(names[0], "acl_changes_") {
			t.Fatalf("%s children %v, %v", path, names, err)
		}
		data, _, _ := raw.Get(testChroot + path + "/" + names[0])
		if !strings.Contains(string(data), want) {
			t.Fatalf("%s/%s holds %q, want %q in it", path, names[0], data, want)
		}
	}

	// The other broker deletes; the first applies it.
	c1.ACLChanges()
	if err := c2.UpdateACLs(ctx, lit, func([]controller.ACLEntry) []controller.ACLEntry { return nil }); err != nil {
		t.Fatal(err)
	}
	seen(c1, lit, nil)
	if ok, _, _ := raw.Exists(testChroot + "/kafka-acl/Topic/orders"); ok {
		t.Fatal("the resource's znode is left without ACLs")
	}
	if err := c1.UpdateACLs(ctx, controller.ACLResource{Type: "Group", Pattern: "LITERAL", Name: "a/b"}, func(cur []controller.ACLEntry) []controller.ACLEntry { return append(cur, alice) }); err == nil {
		t.Fatal("a name with / was stored")
	}
}
