package zk

import (
	"context"
	"maps"
	"reflect"
	"testing"
	"time"

	"strata/controller"
	"strata/internal/testenv"
)

// Restore writes the topics with their ids and the ACLs, then gives the
// cluster the snapshot's cluster id; every broker's metadata and ACLs take
// them, and a second restore finds everything there.
func TestRestoreAdoptsClusterID(t *testing.T) {
	z := testenv.StartZooKeeper(t)
	cs := []*Controller{newController(t, z, 1), newController(t, z, 2)}
	activeOf(t, cs...)
	fresh := cs[0].Metadata().ClusterID
	if fresh == "" {
		t.Fatal("no cluster id")
	}
	old := encodeUUID(controller.NewTopicID())
	id := controller.NewTopicID()
	req := RestoreRequest{
		Topics:    []RestoreTopic{{Name: "kept", ID: id, Replicas: [][]int32{{1, 2}}, Configs: map[string]string{"retention.ms": "1000"}}},
		ClusterID: old,
		ACLs: map[controller.ACLResource][]controller.ACLEntry{
			{Type: "Topic", Pattern: "LITERAL", Name: "kept"}:            {{Principal: "User:alice", PermissionType: "Allow", Operation: "Read", Host: "*"}},
			{Type: "Group", Pattern: "PREFIXED", Name: "app-"}:           {{Principal: "User:alice", PermissionType: "Allow", Operation: "Read", Host: "*"}},
			{Type: "Cluster", Pattern: "LITERAL", Name: "kafka-cluster"}: {{Principal: "User:bob", PermissionType: "Deny", Operation: "Alter", Host: "10.0.0.1"}},
		},
	}
	// A resource that has ACLs in the new cluster keeps them.
	mine := []controller.ACLEntry{{Principal: "User:carol", PermissionType: "Allow", Operation: "Write", Host: "*"}}
	cs[1].ACLs() // the second broker watches the ACLs from now
	ctx0, cancel0 := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel0()
	if err := cs[0].UpdateACLs(ctx0, controller.ACLResource{Type: "Topic", Pattern: "LITERAL", Name: "kept"}, func([]controller.ACLEntry) []controller.ACLEntry { return mine }); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := Restore(ctx, z.Addr()+testChroot, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Created) != 1 || res.PreviousClusterID != fresh || res.ACLs != 2 || res.ExistingACLs != 1 {
		t.Fatalf("restore: %+v, want kept created and the previous cluster id %s", res, fresh)
	}
	for _, c := range cs {
		waitUntil(t, 10*time.Second, "the restored cluster id and topic", func() bool {
			md := c.Metadata()
			tp := md.Topics["kept"]
			return md.ClusterID == old && tp != nil && tp.ID == id
		})
	}
	want := maps.Clone(req.ACLs)
	want[controller.ACLResource{Type: "Topic", Pattern: "LITERAL", Name: "kept"}] = mine
	waitUntil(t, 10*time.Second, "the restored ACLs on the other broker", func() bool {
		return reflect.DeepEqual(cs[1].ACLs(), want)
	})
	if got, err := cs[0].ReadACLs(); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("ReadACLs: %v, %v; want %v", got, err, want)
	}
	res, err = Restore(ctx, z.Addr()+testChroot, req)
	if err != nil || len(res.Existing) != 1 || len(res.Created) != 0 || res.PreviousClusterID != "" || res.ACLs != 0 || res.ExistingACLs != 3 {
		t.Fatalf("a second restore: %+v, %v", res, err)
	}
}
