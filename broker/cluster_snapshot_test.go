package broker

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"strata/broker/remotelog"
	"strata/controller"
	"strata/index"
	"strata/tier"
)

// The active controller records a topic's deletion only while the
// bucket's cluster snapshot names its cluster: with ZooKeeper wiped under
// running brokers (a new cluster id, its metadata empty) it records
// nothing in the bucket of the cluster a restore brings back.
func TestRecordDeletionsOnlyInOwnBucket(t *testing.T) {
	store := tier.NewMemStore()
	ts, p, _ := tieredBroker(t, store, "tiered-record", 1, 40)
	md := *ts.ctrl.Metadata()
	md.TopicIDs = map[[16]byte]string{} // every topic gone
	id := p.TopicID()
	recorded := func() bool {
		t.Helper()
		ok, err := tier.TopicDeletionRecorded(testCtx(t), store, index.UUID(id))
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	st := &snapshotState{seen: map[[16]byte]bool{id: true}, owner: "another-cluster", ownerOK: true}
	ts.recordDeletions(testCtx(t), st, &md, time.Now())
	if recorded() || len(st.seen) != 0 {
		t.Fatalf("recorded a deletion in another cluster's bucket (seen %v)", st.seen)
	}
	st = &snapshotState{seen: map[[16]byte]bool{id: true}}
	if ts.recordDeletions(testCtx(t), st, &md, time.Now()) || recorded() || !st.seen[id] {
		t.Fatal("recorded a deletion with the bucket's owner unknown, or forgot it")
	}
	st.owner, st.ownerOK = md.ClusterID, true
	if !ts.recordDeletions(testCtx(t), st, &md, time.Now()) || !recorded() {
		t.Fatal("the deletion was not recorded in this cluster's bucket")
	}
}

// The cluster snapshot written from a view that has not caught up (right
// after a controller election: a topic known only in part, a partition
// list from before CreatePartitions, an older producer id block) keeps
// what the bucket's snapshot has: a partial topic as it was, every
// partition, and the greater next producer id.
func TestClusterSnapshotFromALaggingView(t *testing.T) {
	store := tier.NewMemStore()
	s := &Server{ctx: t.Context(), log: slog.New(slog.DiscardHandler), tier: &tierState{store: store}, groups: &groupsHost{}}
	whole, partial, grown := index.NewUUID(), index.NewUUID(), index.NewUUID()
	cur := tier.ClusterSnapshot{NextProducerID: 5000, Topics: []tier.SnapshotTopic{
		{Name: "grown", TopicID: grown.String(), Replicas: [][]int32{{1}, {2}, {3}}},
		{Name: "partial", TopicID: partial.String(), Replicas: [][]int32{{1}, {2}, {3}, {1}}, Configs: map[string]string{"retention.ms": "1"}},
		{Name: "whole", TopicID: whole.String(), Replicas: [][]int32{{1}}},
	}}
	if _, err := tier.UpdateClusterSnapshot(t.Context(), store, "C", func(*tier.ClusterSnapshot) (tier.ClusterSnapshot, error) { return cur, nil }); err != nil {
		t.Fatal(err)
	}
	parts := func(n int) []controller.Partition {
		var out []controller.Partition
		for i := range n {
			out = append(out, controller.Partition{Index: int32(i), Replicas: []int32{int32(i%3) + 1}})
		}
		return out
	}
	md := &controller.Metadata{ClusterID: "C", Version: 7, NextProducerID: 1000,
		Topics: map[string]*controller.Topic{
			"grown":   {Name: "grown", ID: grown, Partitions: parts(1)},
			"partial": {Name: "partial", ID: partial, Partitions: parts(1)[:1], Partial: true},
			"whole":   {Name: "whole", ID: whole, Partitions: parts(2)},
		},
		TopicIDs: map[[16]byte]string{grown: "grown", partial: "partial", whole: "whole"},
	}
	st := &snapshotState{clusterVersion: -1, carried: map[string]bool{}, seen: map[[16]byte]bool{}}
	if !s.writeClusterSnapshot(t.Context(), st, md, time.Now()) {
		t.Fatal("not written")
	}
	got, err := tier.ReadClusterSnapshot(t.Context(), store)
	if err != nil {
		t.Fatal(err)
	}
	if got.NextProducerID != 5000 {
		t.Errorf("next producer id %d, want the snapshot's 5000", got.NextProducerID)
	}
	want := map[string]int{"grown": 3, "partial": 4, "whole": 2}
	if len(got.Topics) != len(want) {
		t.Fatalf("topics %+v", got.Topics)
	}
	for _, tp := range got.Topics {
		if len(tp.Replicas) != want[tp.Name] {
			t.Errorf("topic %s: %d partitions, want %d", tp.Name, len(tp.Replicas), want[tp.Name])
		}
	}
	if p := got.Topics[1]; p.Name != "partial" || p.Configs["retention.ms"] != "1" || !slices.Equal(p.Replicas[3], []int32{1}) {
		t.Errorf("the partial topic was not kept as the snapshot had it: %+v", p)
	}
	if g := got.Topics[0]; !slices.Equal(g.Replicas[0], []int32{1}) || !slices.Equal(g.Replicas[2], []int32{3}) {
		t.Errorf("grown: %+v", g)
	}
	// A newer view: its producer id wins.
	md2 := *md
	md2.Version, md2.NextProducerID = 8, 9000
	if !s.writeClusterSnapshot(t.Context(), st, &md2, time.Now()) {
		t.Fatal("not written")
	}
	if got, err := tier.ReadClusterSnapshot(t.Context(), store); err != nil || got.NextProducerID != 9000 {
		t.Fatalf("next producer id %d, %v; want 9000", got.NextProducerID, err)
	}
}

// laggingACLs is a controller whose published ACLs lag ZooKeeper's (the
// watch has not yet read what a restore wrote) or whose reads fail.
type laggingACLs struct {
	controller.Controller
	published, stored map[controller.ACLResource][]controller.ACLEntry
	err               error
}

func (c *laggingACLs) ACLs() map[controller.ACLResource][]controller.ACLEntry { return c.published }
func (c *laggingACLs) ACLChanges() <-chan struct{}                            { return nil }
func (c *laggingACLs) UpdateACLs(context.Context, controller.ACLResource, func([]controller.ACLEntry) []controller.ACLEntry) error {
	return errors.New("read-only")
}
func (c *laggingACLs) ReadACLs() (map[controller.ACLResource][]controller.ACLEntry, error) {
	return c.stored, c.err
}

// The cluster snapshot holds the ACLs as ZooKeeper holds them when it is
// written, sorted by resource pattern, not what the watch last published;
// a failed read writes nothing (retried at the next check) rather than a
// snapshot without ACLs.
func TestClusterSnapshotKeepsACLs(t *testing.T) {
	store := tier.NewMemStore()
	alice := controller.ACLEntry{Principal: "User:alice", PermissionType: "Allow", Operation: "Read", Host: "*"}
	ctrl := &laggingACLs{err: errors.New("zookeeper: connection lost"), stored: map[controller.ACLResource][]controller.ACLEntry{
		{Type: "Topic", Pattern: "PREFIXED", Name: "app-"}: {alice},
		{Type: "Group", Pattern: "LITERAL", Name: "g"}:     {alice},
		{Type: "Topic", Pattern: "LITERAL", Name: "app-x"}: {alice, {Principal: "User:bob", PermissionType: "Deny", Operation: "Write", Host: "10.0.0.1"}},
		{Type: "Topic", Pattern: "LITERAL", Name: "none"}:  {},
	}}
	s := &Server{ctx: t.Context(), log: slog.New(slog.DiscardHandler), tier: &tierState{store: store, warnings: bucketWarnings{&remotelog.BucketWarnings{}}}, groups: &groupsHost{}, ctrl: ctrl}
	md := &controller.Metadata{ClusterID: "C", Version: 1, Topics: map[string]*controller.Topic{}, TopicIDs: map[[16]byte]string{}}
	st := &snapshotState{clusterVersion: -1, carried: map[string]bool{}, seen: map[[16]byte]bool{}}
	if s.writeClusterSnapshot(t.Context(), st, md, time.Now()) {
		t.Fatal("written although the ACLs could not be read")
	}
	if _, err := tier.ReadClusterSnapshot(t.Context(), store); !errors.Is(err, tier.ErrNotFound) {
		t.Fatalf("a snapshot was written: %v", err)
	}
	ctrl.err = nil
	if !s.writeClusterSnapshot(t.Context(), st, md, time.Now()) {
		t.Fatal("not written")
	}
	got, err := tier.ReadClusterSnapshot(t.Context(), store)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range got.ACLs {
		names = append(names, a.ResourceType+"/"+a.PatternType+"/"+a.Name)
	}
	if want := []string{"Group/LITERAL/g", "Topic/LITERAL/app-x", "Topic/PREFIXED/app-"}; !slices.Equal(names, want) {
		t.Fatalf("ACLs of %v, want %v", names, want)
	}
	if e := got.ACLs[1].Entries; len(e) != 2 || e[1] != (tier.SnapshotACL{Principal: "User:bob", PermissionType: "Deny", Operation: "Write", Host: "10.0.0.1"}) {
		t.Fatalf("entries %+v", e)
	}
}
