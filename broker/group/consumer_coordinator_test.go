package group

import (
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// memLog is an in-memory __consumer_offsets partition.
type memLog struct {
	mu   sync.Mutex
	data []byte
	n    int64
}

func (l *memLog) Append(batch []byte) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.data = append(l.data, batch...)
	l.n++
	return l.n, nil
}
func (l *memLog) WaitDurable(int64) error { return nil }
func (l *memLog) Replay(fn func([]byte) error) error {
	l.mu.Lock()
	b := append([]byte(nil), l.data...)
	l.mu.Unlock()
	return fn(b)
}

func waitCond(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// newTestCoordinator runs a Coordinator with consumer groups over one
// in-memory partition.
func newTestCoordinator(t *testing.T, cgc ConsumerGroupConfig, topics TopicLookup, l *memLog) *Coordinator {
	var c *Coordinator
	cfg := Config{NumPartitions: 1, Logger: slog.New(slog.DiscardHandler)}
	cfg.Modern = ConsumerGroupHooks(cgc, func() TopicLookup { return topics }, func() *Coordinator { return c })
	c = New(cfg)
	t.Cleanup(c.Close)
	c.Elect(0, l)
	return c
}

func coordHB(t *testing.T, c *Coordinator, topics TopicLookup, req *kmsg.ConsumerGroupHeartbeatRequest) (*kmsg.ConsumerGroupHeartbeatResponse, int16) {
	t.Helper()
	var resp *kmsg.ConsumerGroupHeartbeatResponse
	code := c.WithConsumerGroup(req.Group, req.MemberEpoch == 0, func(mg ModernGroup) []Record {
		r, recs := mg.(*ConsumerGroup).Heartbeat(HeartbeatContext{Now: time.Now(), Topics: topics}, req)
		resp = r
		return recs
	})
	return resp, code
}

func TestConsumerGroupThroughCoordinator(t *testing.T) {
	topics := testTopics(map[string]int32{"a": 4})
	l := &memLog{}
	c := newTestCoordinator(t, ConsumerGroupConfig{SessionTimeout: 300 * time.Millisecond}, topics, l)
	var r *kmsg.ConsumerGroupHeartbeatResponse
	waitCond(t, "partition loaded", func() bool {
		var code int16
		r, code = coordHB(t, c, topics, joinReq("m1", "a"))
		return code == 0
	})
	if r.ErrorCode != 0 || r.MemberEpoch != 1 {
		t.Fatalf("join: %+v", r)
	}
	if _, code := coordHB(t, c, topics, hbReq("zz", 4, nil)); code != 0 {
		t.Fatalf("heartbeat on an existing group: code %d", code)
	}
	r2, code := coordHB(t, c, topics, hbReq("m1", 1, nil))
	if code != 0 || r2.ErrorCode != 0 {
		t.Fatalf("heartbeat: %d %+v", code, r2)
	}
	if _, code := coordHB(t, c, topics, func() *kmsg.ConsumerGroupHeartbeatRequest {
		r := hbReq("m1", 1, nil)
		r.Group = "other"
		return r
	}()); code != kerr.GroupIDNotFound.Code {
		t.Fatalf("heartbeat to a missing group: code %d", code)
	}

	// Reload the partition: the group comes back from the log.
	c.Resign(0)
	c.Elect(0, l)
	var desc kmsg.ConsumerGroupDescribeResponseGroup
	waitCond(t, "group reloaded", func() bool {
		return c.ConsumerGroupFor("grp", func(mg ModernGroup) { desc = mg.(*ConsumerGroup).Describe(topics) }) == 0
	})
	if desc.Epoch != 1 || len(desc.Members) != 1 || len(desc.Members[0].Assignment.TopicPartitions[0].Partitions) != 4 {
		t.Fatalf("reloaded: %+v", desc)
	}

	// m1 stops heartbeating: its session (300ms) expires on the group's
	// own timer, and the removal is persisted.
	waitCond(t, "session expiry", func() bool {
		empty := false
		c.ConsumerGroupFor("grp", func(mg ModernGroup) { empty = mg.IsEmpty() })
		return empty
	})
	c.Resign(0)
	c.Elect(0, l)
	waitCond(t, "group reloaded empty", func() bool {
		var st string
		code := c.ConsumerGroupFor("grp", func(mg ModernGroup) { st = mg.StateString() })
		return code == 0 && st == "Empty"
	})
}
