package zk

import (
	"context"
	"testing"
	"time"

	"strata/controller"
	"strata/internal/testenv"
)

// Restore writes the topics with their ids, then gives the cluster the
// snapshot's cluster id; every broker's metadata takes it, and a second
// restore finds everything there.
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
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := Restore(ctx, z.Addr()+testChroot, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Created) != 1 || res.PreviousClusterID != fresh {
		t.Fatalf("restore: %+v, want kept created and the previous cluster id %s", res, fresh)
	}
	for _, c := range cs {
		waitUntil(t, 10*time.Second, "the restored cluster id and topic", func() bool {
			md := c.Metadata()
			tp := md.Topics["kept"]
			return md.ClusterID == old && tp != nil && tp.ID == id
		})
	}
	res, err = Restore(ctx, z.Addr()+testChroot, req)
	if err != nil || len(res.Existing) != 1 || len(res.Created) != 0 || res.PreviousClusterID != "" {
		t.Fatalf("a second restore: %+v, %v", res, err)
	}
}
