package broker

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func groupTestServer(t *testing.T) *testServer {
	return startTestServer(t, map[string]string{
		"offsets.topic.num.partitions":     "3",
		"group.initial.rebalance.delay.ms": "0",
		"group.min.session.timeout.ms":     "100",
	})
}

// TestGroupConsumeCommitResume: two members split a topic, commit, and a
// new consumer of the same group resumes after the committed offsets.
func TestGroupConsumeCommitResume(t *testing.T) {
	ts := groupTestServer(t)
	ctx := testCtx(t)
	adm := ts.admin(t)
	if _, err := adm.CreateTopic(ctx, 4, 1, nil, "gt"); err != nil {
		t.Fatal(err)
	}
	prod := ts.client(t)
	const n = 200
	for i := range n {
		prod.Produce(ctx, &kgo.Record{Topic: "gt", Value: []byte(fmt.Sprint(i))}, nil)
	}
	if err := prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	consume := func(cl *kgo.Client, want int) {
		for {
			mu.Lock()
			got := len(seen)
			mu.Unlock()
			if got >= want {
				return
			}
			fs := cl.PollFetches(ctx)
			if ctx.Err() != nil {
				t.Fatalf("timed out with %d records", got)
			}
			fs.EachRecord(func(r *kgo.Record) {
				mu.Lock()
				seen[string(r.Value)]++
				mu.Unlock()
			})
		}
	}
	opts := []kgo.Opt{kgo.ConsumerGroup("g1"), kgo.ConsumeTopics("gt"), kgo.SessionTimeout(time.Second),
		kgo.HeartbeatInterval(100 * time.Millisecond), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
	c1 := ts.client(t, opts...)
	consume(c1, n)
	if err := c1.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
	c1.Close()
	for i := range 10 {
		prod.Produce(ctx, &kgo.Record{Topic: "gt", Value: []byte(fmt.Sprint(n + i))}, nil)
	}
	prod.Flush(ctx)
	c2 := ts.client(t, opts...)
	consume(c2, n+10)
	for k, v := range seen {
		if v != 1 {
			t.Fatalf("record %s consumed %d times", k, v)
		}
	}
}

// TestFindCoordinatorKeys: batched keys (v4+, KIP-699), transaction keys
// (no coordinator yet) and unknown key types.
func TestFindCoordinatorKeys(t *testing.T) {
	ts := groupTestServer(t)
	ctx := testCtx(t)
	cl := ts.client(t)
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.Version = 4
	req.CoordinatorKeys = []string{"a", "b"}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Coordinators) != 2 {
		t.Fatalf("coordinators: %+v", resp.Coordinators)
	}
	for _, c := range resp.Coordinators {
		if c.ErrorCode != 0 || c.NodeID != 0 || c.Port <= 0 {
			t.Fatalf("group key %s: %+v", c.Key, c)
		}
	}
	if ts.ctrl.Metadata().Topics[offsetsTopic] == nil {
		t.Fatal("__consumer_offsets not created")
	}
	req.CoordinatorType = 1
	waitFor(t, "a transaction coordinator", 10*time.Second, func() bool {
		resp, err := req.RequestWith(ctx, cl)
		return err == nil && resp.Coordinators[0].ErrorCode == 0 && resp.Coordinators[0].NodeID == 0
	})
	old := kmsg.NewPtrFindCoordinatorRequest()
	old.Version = 2
	old.CoordinatorKey, old.CoordinatorType = "g", 7
	if resp, err := old.RequestWith(ctx, cl); err != nil || resp.ErrorCode != kerr.InvalidRequest.Code {
		t.Fatalf("unknown key type: %v %+v", err, resp)
	}
}
