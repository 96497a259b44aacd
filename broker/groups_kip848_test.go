package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t testing.TB, what string, d time.Duration, cond func() bool) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("%s after %v", what, time.Since(start).Round(time.Millisecond))
}

// kip848Sets keep startup cheap and shorten the heartbeat interval so that
// members learn of new epochs quickly.
var kip848Sets = map[string]string{"offsets.topic.num.partitions": "3", "group.consumer.heartbeat.interval.ms": "200"}

// describe848 returns the ConsumerGroupDescribe answer for one group.
func describe848(t testing.TB, rc *rawConn, id string) kmsg.ConsumerGroupDescribeResponseGroup {
	t.Helper()
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{id}
	resp := rc.do(req, 1).(*kmsg.ConsumerGroupDescribeResponse)
	if len(resp.Groups) != 1 {
		t.Fatalf("describe: %d groups", len(resp.Groups))
	}
	return resp.Groups[0]
}

// coordinatorReady creates __consumer_offsets (FindCoordinator) and waits
// until the group's coordinator answers.
func coordinatorReady(t testing.TB, rc *rawConn, id string) {
	t.Helper()
	waitFor(t, "coordinator of "+id, 15*time.Second, func() bool {
		fc := kmsg.NewPtrFindCoordinatorRequest()
		fc.CoordinatorKey = id
		if r := rc.do(fc, 3).(*kmsg.FindCoordinatorResponse); r.ErrorCode != 0 {
			return false
		}
		d := describe848(t, rc, id)
		return d.ErrorCode == kerr.GroupIDNotFound.Code || d.ErrorCode == 0
	})
}

func hb848(group, member string, epoch int32) *kmsg.ConsumerGroupHeartbeatRequest {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Group, r.MemberID, r.MemberEpoch = group, member, epoch
	return r
}

func join848(group, member string, topics ...string) *kmsg.ConsumerGroupHeartbeatRequest {
	r := hb848(group, member, 0)
	r.RebalanceTimeoutMillis = 30000
	r.SubscribedTopicNames = topics
	r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	return r
}

func TestKIP848RawHeartbeats(t *testing.T) {
	ts := startTestServer(t, kip848Sets)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("t848", 4, nil)
	coordinatorReady(t, rc, "g848")
	coordinatorReady(t, rc, "nope") // its __consumer_offsets partition may load later

	do := func(r *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
		return rc.do(r, 1).(*kmsg.ConsumerGroupHeartbeatResponse)
	}
	// Bad input gets Kafka's codes.
	bad := join848("g848", "", "t848")
	wantCode(t, "empty member id", do(bad).ErrorCode, kerr.InvalidRequest)
	bad = join848("g848", "m", "t848")
	bad.ServerAssignor = kmsg.StringPtr("roundrobin")
	wantCode(t, "unknown assignor", do(bad).ErrorCode, kerr.UnsupportedAssignor)
	bad = join848("g848", "m", "t848")
	bad.SubscribedTopicRegex = kmsg.StringPtr("[")
	wantCode(t, "bad regex", do(bad).ErrorCode, kerr.InvalidRegularExpression)
	wantCode(t, "heartbeat to a missing group", do(hb848("nope", "m", 3)).ErrorCode, kerr.GroupIDNotFound)
	wantCode(t, "bad epoch", do(hb848("g848", "m", -7)).ErrorCode, kerr.InvalidRequest)

	// Two members: the second gets partitions only once the first has
	// revoked them.
	r1 := do(join848("g848", "m1", "t848"))
	wantCode(t, "m1 join", r1.ErrorCode, nil)
	if r1.MemberEpoch != 1 || r1.Assignment == nil || len(r1.Assignment.Topics[0].Partitions) != 4 {
		t.Fatalf("m1 join: %+v", r1)
	}
	r2 := do(join848("g848", "m2", "t848"))
	wantCode(t, "m2 join", r2.ErrorCode, nil)
	if n := len(r2.Assignment.Topics); n != 0 {
		t.Fatalf("m2 got partitions m1 owns: %+v", r2.Assignment)
	}
	owned := func(a *kmsg.ConsumerGroupHeartbeatResponseAssignment) []kmsg.ConsumerGroupHeartbeatRequestTopic {
		var out []kmsg.ConsumerGroupHeartbeatRequestTopic
		for _, t := range a.Topics {
			out = append(out, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: t.TopicID, Partitions: t.Partitions})
		}
		if out == nil {
			out = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		}
		return out
	}
	h := hb848("g848", "m1", 1)
	h.Topics = owned(r1.Assignment)
	r1 = do(h)
	if r1.MemberEpoch != 1 || len(r1.Assignment.Topics[0].Partitions) != 2 {
		t.Fatalf("m1 must revoke two partitions first: %+v", r1)
	}
	h.Topics = owned(r1.Assignment)
	r1 = do(h)
	if r1.MemberEpoch != 2 {
		t.Fatalf("m1 after revoking: epoch %d", r1.MemberEpoch)
	}
	h2 := hb848("g848", "m2", r2.MemberEpoch)
	h2.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	r2 = do(h2)
	if r2.Assignment == nil || len(r2.Assignment.Topics) != 1 || len(r2.Assignment.Topics[0].Partitions) != 2 {
		t.Fatalf("m2 after release: %+v", r2)
	}
	d := describe848(t, rc, "g848")
	if d.ErrorCode != 0 || d.State != "Stable" || len(d.Members) != 2 || d.AssignorName != "uniform" || d.Epoch != 2 {
		t.Fatalf("describe: %+v", d)
	}
	for _, m := range d.Members {
		if m.MemberType != 1 || len(m.Assignment.TopicPartitions) != 1 || m.Assignment.TopicPartitions[0].Topic != "t848" {
			t.Fatalf("member %+v", m)
		}
	}
	// Fencing and leaving.
	wantCode(t, "future epoch", do(hb848("g848", "m2", 9)).ErrorCode, kerr.FencedMemberEpoch)
	wantCode(t, "unknown member", do(hb848("g848", "zz", 2)).ErrorCode, kerr.UnknownMemberID)
	if r := do(hb848("g848", "m2", -1)); r.ErrorCode != 0 || r.MemberEpoch != -1 {
		t.Fatalf("leave: %+v", r)
	}
	if d := describe848(t, rc, "g848"); len(d.Members) != 1 || d.Epoch != 3 {
		t.Fatalf("after leave: %+v", d)
	}
	// Describe of a missing group.
	wantCode(t, "describe missing", describe848(t, rc, "missing").ErrorCode, kerr.GroupIDNotFound)

	// ListGroups shows the group as a consumer group (Assigning: m2 left,
	// the new target waits for the next heartbeat); DeleteGroups needs it
	// empty; the classic DescribeGroups does not know it.
	lg := kmsg.NewPtrListGroupsRequest()
	lgr := rc.do(lg, 5).(*kmsg.ListGroupsResponse)
	found := false
	for _, g := range lgr.Groups {
		if g.Group == "g848" {
			found = g.GroupType == "consumer" && g.ProtocolType == "consumer" && g.GroupState == "Assigning"
		}
	}
	if !found {
		t.Fatalf("list groups: %+v", lgr.Groups)
	}
	dg := kmsg.NewPtrDescribeGroupsRequest()
	dg.Groups = []string{"g848"}
	wantCode(t, "classic describe", rc.do(dg, 5).(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode, kerr.GroupIDNotFound)
	del := kmsg.NewPtrDeleteGroupsRequest()
	del.Groups = []string{"g848"}
	wantCode(t, "delete non-empty", rc.do(del, 2).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode, kerr.NonEmptyGroup)
	wantCode(t, "m1 heartbeat", do(hb848("g848", "m1", 2)).ErrorCode, nil)
	wantCode(t, "m1 leaves", do(hb848("g848", "m1", -1)).ErrorCode, nil)
	wantCode(t, "delete empty", rc.do(del, 2).(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode, nil)
	wantCode(t, "describe deleted", describe848(t, rc, "g848").ErrorCode, kerr.GroupIDNotFound)
}

// TestKIP848FranzGo runs franz-go consumers with the server-side
// balancer: every record is consumed once, partitions move on join and
// leave, and committed offsets (member epoch as generation) persist.
func TestKIP848FranzGo(t *testing.T) {
	ts := startTestServer(t, kip848Sets)
	rc := dialRaw(t, ts.addr())
	const topic, grp, parts = "orders848", "kip848-franz", 6
	rc.createTopic(topic, parts, nil)
	coordinatorReady(t, rc, grp)
	ctx := testCtx(t)

	var mu sync.Mutex
	seen := map[string]int{}
	consume := func(name string, cl *kgo.Client, stop <-chan struct{}, done chan<- struct{}) {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			fs := cl.PollFetches(pctx)
			cancel()
			fs.EachRecord(func(r *kgo.Record) {
				mu.Lock()
				seen[string(r.Value)]++
				mu.Unlock()
			})
		}
	}
	newConsumer := func() *kgo.Client {
		cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr()), kgo.ConsumerGroup(grp), kgo.ConsumeTopics(topic),
			kgo.ServerSideBalancer(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.AutoCommitInterval(100*time.Millisecond), kgo.FetchMaxWait(100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	members := func() (int, string, []int) {
		d := describe848(t, rc, grp)
		var sizes []int
		for _, m := range d.Members {
			n := 0
			for _, tp := range m.Assignment.TopicPartitions {
				n += len(tp.Partitions)
			}
			sizes = append(sizes, n)
		}
		return len(d.Members), d.State, sizes
	}
	produce := func(from, n int) {
		p := ts.client(t)
		for i := from; i < from+n; i++ {
			if err := p.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: int32(i % parts), Value: []byte(fmt.Sprint(i))}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}

	a := newConsumer()
	defer a.Close()
	stopA, doneA := make(chan struct{}), make(chan struct{})
	go consume("a", a, stopA, doneA)
	waitFor(t, "a owns every partition", 20*time.Second, func() bool {
		n, st, sz := members()
		return n == 1 && st == "Stable" && len(sz) == 1 && sz[0] == parts
	})
	b := newConsumer()
	stopB, doneB := make(chan struct{}), make(chan struct{})
	go consume("b", b, stopB, doneB)
	waitFor(t, "a and b share the partitions", 20*time.Second, func() bool {
		n, st, sz := members()
		return n == 2 && st == "Stable" && sz[0] == parts/2 && sz[1] == parts/2
	})
	produce(0, 60)
	waitFor(t, "60 records consumed", 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == 60
	})

	// b leaves: a takes everything back.
	close(stopB)
	<-doneB
	b.Close()
	waitFor(t, "a alone again", 20*time.Second, func() bool {
		n, st, sz := members()
		return n == 1 && st == "Stable" && sz[0] == parts
	})
	produce(60, 60)
	waitFor(t, "120 records consumed", 20*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == 120
	})
	mu.Lock()
	for v, n := range seen {
		if n != 1 {
			// No crash happened: nothing may be processed twice.
			t.Errorf("record %s consumed %d times", v, n)
		}
	}
	mu.Unlock()
	close(stopA)
	<-doneA
	if err := a.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	a.Close()

	// Offsets committed by KIP-848 members are there.
	adm := ts.admin(t)
	waitFor(t, "committed offsets", 20*time.Second, func() bool {
		offs, err := adm.FetchOffsets(ctx, grp)
		if err != nil {
			return false
		}
		total := int64(0)
		offs.Each(func(o kadm.OffsetResponse) { total += o.At })
		return total == 120
	})
	if d := describe848(t, rc, grp); d.State != "Empty" {
		t.Fatalf("after everyone left: %+v", d)
	}
}
