package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// TestClusterReassignFailoverCancelAndZNode drives reassignments through
// the states a controller can be caught in. A reassignment held back by a
// 1 kB/s follower throttle survives a kill -9 of the active controller
// (its state is in ZooKeeper) and completes under the next one once the
// throttle is lifted; another, held back the same way, is cancelled: the
// replicas revert and the broker that was being added deletes its copy;
// and a reassignment written to /admin/reassign_partitions, as Kafka's
// ZooKeeper-mode tools did, is carried out and the znode removed. Every
// record reads back at the end.
func TestClusterReassignFailoverCancelAndZNode(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := startReassignCluster(t, ctx, "failover")
	const topic, valueSize = "failover", 1000
	adm := c.admin()
	if r, err := adm.CreateTopic(ctx, 1, 2, nil, topic); err != nil || r.Err != nil {
		t.Fatalf("create topic: %v %v", err, r.Err)
	}
	acks := c.fill(topic, 1600, valueSize)
	c.add(4)
	check := func(what string, err error, rs kadm.AlterConfigsResponses) {
		t.Helper()
		alterOK(t, what, err, rs)
	}
	throttle := func(broker int32) {
		t.Helper()
		slow, list := "1000", "0:"+strconv.Itoa(int(broker))
		rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "follower.replication.throttled.rate", Value: &slow}}, broker)
		check("throttle", err, rs)
		rs, err = adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "follower.replication.throttled.replicas", Value: &list}}, topic)
		check("throttle", err, rs)
	}
	unthrottle := func(broker int32) {
		t.Helper()
		rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "follower.replication.throttled.rate", Op: kadm.DeleteConfig}}, broker)
		check("lift the throttle", err, rs)
	}
	reassign := func(target []int32) error {
		var req kadm.AlterPartitionAssignmentsReq
		if target == nil {
			req.CancelAssign(topic, 0)
		} else {
			req.Assign(topic, 0, target)
		}
		res, err := c.admin().AlterPartitionAssignments(ctx, req)
		if err == nil {
			err = res.Error()
		}
		return err
	}
	// done waits for replicas target (in any order when anyOrder: a
	// cancellation reverts to the original replicas in the order of the
	// full replica set, as Kafka's does) and no reassignment in progress.
	done := func(target []int32, anyOrder bool) {
		t.Helper()
		waitState(t, 60*time.Second, fmt.Sprintf("replicas %v and no reassignment", target), func() (string, bool) {
			ra, err := c.reassigning()
			l, replicas, isr := c.state(topic)
			same := slices.Equal(replicas, target)
			if anyOrder {
				same = slices.Equal(slices.Sorted(slices.Values(replicas)), slices.Sorted(slices.Values(target)))
			}
			return fmt.Sprintf("in progress %v (%v), leader %d, replicas %v, isr %v", ra, err, l, replicas, isr),
				err == nil && len(ra) == 0 && same && len(isr) == len(target)
		})
	}
	inProgress := func(adding int32) {
		t.Helper()
		waitState(t, 20*time.Second, fmt.Sprintf("broker %d being added", adding), func() (string, bool) {
			ra, err := c.reassigning()
			return fmt.Sprintf("%v %v", ra, err), err == nil && slices.Equal(ra[topic+"-0"], []int32{adding})
		})
	}

	// 1. A reassignment held back by the throttle outlives its controller.
	_, replicas, _ := c.state(topic)
	target := []int32{4, replicas[0]}
	throttle(4)
	if err := reassign(target); err != nil {
		t.Fatalf("reassign to %v: %v", target, err)
	}
	inProgress(4)
	md, err := clusterMetadata(ctx, c.seeds, topic)
	if err != nil {
		t.Fatal(err)
	}
	ctrl := md.Controller
	if ctrl == 4 {
		t.Fatalf("broker 4, just added, is the controller")
	}
	c.bs[ctrl].Kill9()
	live := slices.DeleteFunc(slices.Clone(c.seeds), func(s string) bool { return s == c.bs[ctrl].Addr() })
	waitFor(t, 30*time.Second, "another controller", func() bool {
		md, err := clusterMetadata(ctx, live, topic)
		return err == nil && md.Controller >= 0 && md.Controller != ctrl
	})
	inProgress(4) // the new controller knows it from ZooKeeper
	unthrottle(4)
	c.bs[ctrl].Restart()
	done(target, false)

	// 2. A cancelled reassignment reverts; the broker being added deletes
	// its copy. The broker added is one that never held the partition: a
	// former replica (the controller killed in step 1 was one) may still
	// have its whole log, catch up at once despite the throttle, and
	// complete the reassignment before it can be cancelled.
	var extra int32
	for id := int32(1); id <= 4; id++ {
		if !slices.Contains(target, id) && !slices.Contains(replicas, id) {
			extra = id
			break
		}
	}
	if extra == 0 {
		t.Fatalf("no broker outside the original replicas %v and the target %v", replicas, target)
	}
	throttle(extra)
	if err := reassign([]int32{extra, target[1]}); err != nil {
		t.Fatalf("second reassignment: %v", err)
	}
	inProgress(extra)
	if err := reassign(nil); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	done(target, true)
	waitFor(t, 30*time.Second, fmt.Sprintf("broker %d deleting its copy after the cancellation", extra), func() bool {
		_, err := os.Stat(filepath.Join(c.bs[extra].DataDir(), topic+"-0"))
		return os.IsNotExist(err)
	})
	if err := reassign(nil); !errorsIsCode(err, kerr.NoReassignmentInProgress) {
		t.Fatalf("cancelling with none in progress: %v, want NO_REASSIGNMENT_IN_PROGRESS", err)
	}
	unthrottle(extra)

	// 3. /admin/reassign_partitions, as Kafka's ZooKeeper-mode tools
	// wrote it.
	conn, _, err := gozk.Connect([]string{c.zk.Addr()}, 5*time.Second, gozk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	znode := c.chroot + "/admin/reassign_partitions"
	want := []int32{target[1], extra}
	body, _ := json.Marshal(map[string]any{"version": 1, "partitions": []map[string]any{{"topic": topic, "partition": 0, "replicas": want}}})
	if _, err := conn.Create(znode, body, 0, gozk.WorldACL(gozk.PermAll)); err != nil {
		t.Fatalf("create %s: %v", znode, err)
	}
	done(want, false)
	waitFor(t, 30*time.Second, znode+" removed once done", func() bool {
		ok, _, err := conn.Exists(znode)
		return err == nil && !ok
	})
	verifyAcked(t, ctx, c.seeds, topic, acks)
}

// errorsIsCode tells whether err is the Kafka error want.
func errorsIsCode(err error, want *kerr.Error) bool {
	ke, ok := err.(*kerr.Error)
	if ok {
		return ke.Code == want.Code
	}
	return err != nil && kerr.ErrorForCode(want.Code).Error() != "" && containsErr(err, want)
}

func containsErr(err error, want *kerr.Error) bool {
	for e := err; e != nil; {
		if ke, ok := e.(*kerr.Error); ok && ke.Code == want.Code {
			return true
		}
		u, ok := e.(interface{ Unwrap() error })
		if !ok {
			return false
		}
		e = u.Unwrap()
	}
	return false
}
