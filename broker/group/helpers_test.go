package group

import (
	"encoding/binary"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// testLog is an in-memory offsets partition.
type testLog struct {
	mu      sync.Mutex
	batches [][]byte
	next    int64
	fail    error
}

func (l *testLog) Append(b []byte) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return 0, l.fail
	}
	b = append([]byte(nil), b...)
	// Offsets as the log assigns them (the CRC does not cover them).
	n := 0
	for p := b; len(p) >= 61; { // 61: a v2 batch header
		size := 12 + int(binary.BigEndian.Uint32(p[8:]))
		binary.BigEndian.PutUint64(p, uint64(l.next+int64(n)))
		n += int(binary.BigEndian.Uint32(p[57:]))
		p = p[size:]
	}
	l.batches = append(l.batches, b)
	l.next += int64(n)
	return l.next, nil
}

func (l *testLog) WaitDurable(int64) error { return nil }

func (l *testLog) Replay(fn func([]byte) error) error {
	l.mu.Lock()
	bs := append([][]byte(nil), l.batches...)
	l.mu.Unlock()
	for _, b := range bs {
		if err := fn(b); err != nil {
			return err
		}
	}
	return nil
}

// records decodes everything written so far.
func (l *testLog) records(t *testing.T) []Record {
	var out []Record
	l.Replay(func(b []byte) error {
		return decodeBatches(b, func(r Record) error { out = append(out, r); return nil })
	})
	return out
}

func testConfig() Config {
	return Config{
		NumPartitions: 1, MinSessionTimeoutMs: 10, MaxSessionTimeoutMs: 600000,
		InitialRebalanceDelayMs: 100, GroupMaxSize: 100, OffsetsRetentionMs: 60_000,
		RetentionCheckIntervalMs: 3_600_000, MetadataMaxBytes: 4096,
	}
}

// startCoord starts a coordinator owning partition 0 on l, loaded.
func startCoord(t *testing.T, l *testLog, mod func(*Config)) *Coordinator {
	cfg := testConfig()
	if mod != nil {
		mod(&cfg)
	}
	c := New(cfg)
	t.Cleanup(c.Close)
	c.Elect(0, l)
	synctest.Wait()
	return c
}

func consumerMeta(topics ...string) []byte {
	m := kmsg.NewConsumerMemberMetadata()
	m.Topics = topics
	return m.AppendTo(nil)
}

type joinOpts struct {
	member    string
	instance  *string
	version   int16
	session   int32
	rebalance int32
	protoType string
	protocols []string
	meta      []byte
}

func classicJoinReq(group string, o joinOpts) *kmsg.JoinGroupRequest {
	r := kmsg.NewPtrJoinGroupRequest()
	r.Version = 9
	if o.version != 0 {
		r.Version = o.version
	}
	r.Group, r.MemberID, r.InstanceID = group, o.member, o.instance
	r.SessionTimeoutMillis, r.RebalanceTimeoutMillis = 1000, 2000
	if o.session != 0 {
		r.SessionTimeoutMillis = o.session
	}
	if o.rebalance != 0 {
		r.RebalanceTimeoutMillis = o.rebalance
	}
	r.ProtocolType = "consumer"
	if o.protoType != "" {
		r.ProtocolType = o.protoType
	}
	if o.protocols == nil {
		o.protocols = []string{"range"}
	}
	if o.meta == nil {
		o.meta = consumerMeta("t")
	}
	for _, p := range o.protocols {
		rp := kmsg.NewJoinGroupRequestProtocol()
		rp.Name, rp.Metadata = p, o.meta
		r.Protocols = append(r.Protocols, rp)
	}
	return r
}

// joinAsync sends a JoinGroup in a goroutine.
func joinAsync(c *Coordinator, req *kmsg.JoinGroupRequest) <-chan *kmsg.JoinGroupResponse {
	ch := make(chan *kmsg.JoinGroupResponse, 1)
	go func() { ch <- c.JoinGroup(req, "client", "/127.0.0.1") }()
	return ch
}

// recv returns a response that must already be there (after synctest.Wait).
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	synctest.Wait()
	select {
	case v := <-ch:
		return v
	default:
		t.Fatal("no response yet")
		panic("unreachable")
	}
}

func pending[T any](t *testing.T, ch <-chan T) {
	t.Helper()
	synctest.Wait()
	select {
	case <-ch:
		t.Fatal("answered too early")
	default:
	}
}

// joinNew does the KIP-394 round and returns the second join's channel.
func joinNew(t *testing.T, c *Coordinator, group string, o joinOpts) <-chan *kmsg.JoinGroupResponse {
	t.Helper()
	if o.instance == nil {
		r := recv(t, joinAsync(c, classicJoinReq(group, o)))
		if r.ErrorCode != codeMemberIDRequired || r.MemberID == "" {
			t.Fatalf("first join: code %d member %q", r.ErrorCode, r.MemberID)
		}
		o.member = r.MemberID
	}
	return joinAsync(c, classicJoinReq(group, o))
}

func syncReq(group, member string, gen int32, assign map[string][]byte) *kmsg.SyncGroupRequest {
	r := kmsg.NewPtrSyncGroupRequest()
	r.Version = 5
	r.Group, r.MemberID, r.Generation = group, member, gen
	r.ProtocolType, r.Protocol = kmsg.StringPtr("consumer"), kmsg.StringPtr("range")
	for id, a := range assign {
		ra := kmsg.NewSyncGroupRequestGroupAssignment()
		ra.MemberID, ra.MemberAssignment = id, a
		r.GroupAssignment = append(r.GroupAssignment, ra)
	}
	return r
}

func syncAsync(c *Coordinator, req *kmsg.SyncGroupRequest) <-chan *kmsg.SyncGroupResponse {
	ch := make(chan *kmsg.SyncGroupResponse, 1)
	go func() { ch <- c.SyncGroup(req) }()
	return ch
}

func heartbeat(c *Coordinator, group, member string, gen int32) int16 {
	r := kmsg.NewPtrHeartbeatRequest()
	r.Version = 4
	r.Group, r.MemberID, r.Generation = group, member, gen
	return c.Heartbeat(r).ErrorCode
}

func commit(c *Coordinator, group, member string, gen int32, topic string, part int32, off int64, meta string) int16 {
	r := kmsg.NewPtrOffsetCommitRequest()
	r.Version = 9
	r.Group, r.MemberID, r.Generation = group, member, gen
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetCommitRequestTopicPartition()
	rp.Partition, rp.Offset, rp.Metadata = part, off, &meta
	rt.Partitions = append(rt.Partitions, rp)
	r.Topics = append(r.Topics, rt)
	return c.OffsetCommit(r).Topics[0].Partitions[0].ErrorCode
}

// fetched returns the committed offset (-1 = none) and the error code.
func fetched(c *Coordinator, group, topic string, part int32) (int64, int16) {
	r := kmsg.NewPtrOffsetFetchRequest()
	r.Version = 7
	r.Group = group
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{part}
	r.Topics = append(r.Topics, rt)
	resp := c.OffsetFetch(r)
	if resp.ErrorCode != 0 {
		return -1, resp.ErrorCode
	}
	return resp.Topics[0].Partitions[0].Offset, 0
}

// stableGroup forms a group of n dynamic members and returns their ids
// (leader first) and the generation.
func stableGroup(t *testing.T, c *Coordinator, group string, n int) ([]string, int32) {
	t.Helper()
	var chs []<-chan *kmsg.JoinGroupResponse
	for range n {
		chs = append(chs, joinNew(t, c, group, joinOpts{}))
	}
	time.Sleep(200 * time.Millisecond) // group.initial.rebalance.delay.ms
	var ids []string
	var leader string
	var gen int32
	for _, ch := range chs {
		r := recv(t, ch)
		if r.ErrorCode != 0 {
			t.Fatalf("join: code %d", r.ErrorCode)
		}
		ids = append(ids, r.MemberID)
		leader, gen = r.LeaderID, r.Generation
	}
	assign := map[string][]byte{}
	for _, id := range ids {
		assign[id] = []byte("a-" + id)
	}
	var schs []<-chan *kmsg.SyncGroupResponse
	for _, id := range ids {
		var a map[string][]byte
		if id == leader {
			a = assign
		}
		schs = append(schs, syncAsync(c, syncReq(group, id, gen, a)))
	}
	for i, ch := range schs {
		r := recv(t, ch)
		if r.ErrorCode != 0 || string(r.MemberAssignment) != "a-"+ids[i] {
			t.Fatalf("sync %s: code %d assignment %q", ids[i], r.ErrorCode, r.MemberAssignment)
		}
	}
	out := []string{leader}
	for _, id := range ids {
		if id != leader {
			out = append(out, id)
		}
	}
	return out, gen
}
