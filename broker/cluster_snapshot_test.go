package broker

import (
	"testing"
	"time"

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
	id := p.topicID
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
