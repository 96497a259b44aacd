package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/testenv"
)

// TestClusterRestoreFromBucket scales a tiered cluster to zero with
// strata admin cluster drain, then loses ZooKeeper too (the new brokers
// use another chroot: a ZooKeeper that never saw the cluster, hence
// another cluster id) and every disk. The new brokers run past their
// first snapshot check and past the reconciliation's grace period before
// the restore, as a person following docs/scaling.md does: they say at WARN
// that the bucket holds another cluster's snapshot, write nothing over
// it and delete none of its objects. strata admin restore then brings
// the topics back from the snapshot, with their ids and the old cluster
// id; every acknowledged record reads back, the consumer groups'
// committed offsets are there again, a new idempotent producer writes
// on, the authorizer's ACLs are back, and nothing in the bucket was
// deleted (minio-go's listing).
func TestClusterRestoreFromBucket(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := startScaleCluster(t, "before", "authorizer.class.name=kafka.security.authorizer.AclAuthorizer", "allow.everyone.if.no.acl.found=true")
	for _, acls := range []*kadm.ACLBuilder{
		kadm.NewACLs().Deny("User:mallory").Topics("locked").Operations(kadm.OpRead),
		kadm.NewACLs().Allow("User:alice").Groups("app-").ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpRead),
	} {
		if res, err := c.admin().CreateACLs(ctx, acls); err != nil || len(res) != 1 || res[0].Err != nil {
			t.Fatalf("create ACLs: %+v, %v", res, err)
		}
	}
	w := c.writeWorkload(ctx, "restored")
	oldTopics, err := c.admin().ListTopics(ctx, w.topic)
	if err != nil {
		t.Fatal(err)
	}
	oldID := oldTopics[w.topic].ID
	c.drain()
	c.stopAndWipe()
	// The stopping brokers' leader changes were the old cluster's last
	// snapshot writes.
	before := c.keys()
	snapOld := c.clusterSnapshot()
	if len(snapOld.ACLs) != 2 {
		t.Fatalf("the snapshot holds the ACLs of %+v, want 2 resource patterns", snapOld.ACLs)
	}

	// A new cluster: a ZooKeeper namespace that never saw the old one,
	// brokers on empty disks, the same bucket.
	c.start("after")
	waitFor(t, 30*time.Second, "every broker to warn of the other cluster's snapshot", func() bool {
		for _, b := range c.bs {
			if !strings.Contains(b.Logs(), "the bucket holds the metadata snapshot of another cluster") {
				return false
			}
		}
		return true
	})
	c.waitLog(30*time.Second, "left the objects of topic ids the cluster does not know")
	for _, b := range c.bs {
		var warn string
		for l := range strings.Lines(b.Logs()) {
			if strings.Contains(l, "the bucket holds the metadata snapshot of another cluster") {
				warn = l
			}
		}
		if !strings.Contains(warn, "level=WARN") || !strings.Contains(warn, "strata admin --bootstrap") ||
			!strings.Contains(warn, "restore --zookeeper "+c.zk.Addr()+"/after --tier s3://") || !strings.Contains(warn, snapOld.ClusterID) {
			t.Fatalf("the warning names no restore command: %s", warn)
		}
		t.Logf("broker warned: %s", strings.TrimSpace(warn))
	}
	if s := c.clusterSnapshot(); s.ClusterID != snapOld.ClusterID || s.Generation != snapOld.Generation || len(s.Topics) != len(snapOld.Topics) {
		t.Fatalf("the fresh cluster wrote over the snapshot: %s generation %d, %d topics; was %s generation %d, %d topics",
			s.ClusterID, s.Generation, len(s.Topics), snapOld.ClusterID, snapOld.Generation, len(snapOld.Topics))
	}
	for _, g := range scaleGroups {
		if s := c.groupSnapshot(g); s.ClusterID != snapOld.ClusterID || len(s.Groups[g]) == 0 {
			t.Fatalf("the fresh cluster wrote over the offsets of %s: %+v", g, s)
		}
	}
	c.nothingDeleted(before, "before the restore")

	restoreArgs := append([]string{"admin", "--bootstrap", strings.Join(c.seeds, ","), "restore", "--zookeeper", c.zk.Addr() + "/after"}, c.tier...)
	res := testenv.RunStrata(t, 3*time.Minute, restoreArgs...)
	if res.ExitCode != 0 {
		t.Fatalf("restore: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
	}
	t.Logf("restore: %s", strings.TrimSpace(res.Stdout))
	if !strings.Contains(res.Stdout, "restored 1 topics") || !strings.Contains(res.Stdout, "the cluster takes the snapshot's cluster id "+snapOld.ClusterID) ||
		!strings.Contains(res.Stdout, "restored the ACLs of 2 resource patterns") {
		t.Fatalf("restore output:\n%s", res.Stdout)
	}

	adm := c.admin()
	newTopics, err := adm.ListTopics(ctx, w.topic)
	if err != nil {
		t.Fatal(err)
	}
	if newTopics[w.topic].ID != oldID {
		t.Fatalf("restored topic id %v, was %v", newTopics[w.topic].ID, oldID)
	}
	waitState(t, 10*time.Second, "the restored ACLs", func() (string, bool) {
		d, err := adm.DescribeACLs(ctx, kadm.NewACLs().AnyResource().ResourcePatternType(kadm.ACLPatternAny).Operations(kadm.OpAny).Allow().Deny().AllowHosts().DenyHosts())
		if err != nil || len(d) != 1 || d[0].Err != nil {
			return fmt.Sprintf("%+v, %v", d, err), false
		}
		var got []string
		for _, a := range d[0].Described {
			got = append(got, fmt.Sprintf("%s %s %s %s %s %s", a.Principal, a.Permission, a.Operation, a.Type, a.Pattern, a.Name))
		}
		slices.Sort(got)
		return strings.Join(got, "; "), slices.Equal(got, []string{"User:alice ALLOW READ GROUP PREFIXED app-", "User:mallory DENY READ TOPIC LITERAL locked"})
	})
	c.verify(ctx, w)
	md, err := adm.Metadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if md.Cluster != snapOld.ClusterID {
		t.Fatalf("restored cluster id %s, want the snapshot's %s", md.Cluster, snapOld.ClusterID)
	}
	nprod := newClient(t, c.seeds[0], kgo.SeedBrokers(c.seeds...), kgo.DefaultProduceTopic(w.topic),
		kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := range 10 {
		if err := nprod.ProduceSync(ctx, &kgo.Record{Value: fmt.Appendf(nil, "after-%d", i)}).FirstErr(); err != nil {
			t.Fatalf("produce to the restored cluster: %v", err)
		}
	}
	waitState(t, 30*time.Second, "the restored cluster's snapshot", func() (string, bool) {
		s := c.clusterSnapshot()
		return fmt.Sprintf("%s generation %d, %d topics", s.ClusterID, s.Generation, len(s.Topics)),
			s.ClusterID == snapOld.ClusterID && s.Generation > snapOld.Generation && len(s.Topics) == len(snapOld.Topics)
	})
	c.nothingDeleted(before, "after the restore")
}
