package group

import (
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var t0 = time.Unix(1_700_000_000, 0)

func testTopics(parts map[string]int32) *StaticTopics {
	var ts []TopicInfo
	for name, n := range parts {
		var id [16]byte
		copy(id[:], name)
		ts = append(ts, TopicInfo{Name: name, ID: id, Partitions: n})
	}
	return NewStaticTopics(ts)
}

func tid(name string) [16]byte {
	var id [16]byte
	copy(id[:], name)
	return id
}

// harness drives one group with a fake clock and records what was
// persisted.
type harness struct {
	t      *testing.T
	g      *ConsumerGroup
	now    time.Time
	topics *StaticTopics
	recs   []Record
}

func newHarness(t *testing.T, cfg ConsumerGroupConfig, parts map[string]int32) *harness {
	return &harness{t: t, g: NewConsumerGroup("grp", cfg, t0), now: t0, topics: testTopics(parts)}
}

func joinReq(member string, topics ...string) *kmsg.ConsumerGroupHeartbeatRequest {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version = 1
	r.Group = "grp"
	r.MemberID = member
	r.MemberEpoch = 0
	r.RebalanceTimeoutMillis = 30000
	r.SubscribedTopicNames = topics
	r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	return r
}

func hbReq(member string, epoch int32, owned TopicPartitions) *kmsg.ConsumerGroupHeartbeatRequest {
	r := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	r.Version = 1
	r.Group = "grp"
	r.MemberID = member
	r.MemberEpoch = epoch
	if owned != nil {
		r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		for _, id := range sortedTopicIDs(owned) {
			r.Topics = append(r.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: id, Partitions: owned[id]})
		}
	}
	return r
}

func (h *harness) hb(req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	h.t.Helper()
	if code, msg := ValidateConsumerGroupHeartbeat(req, h.g.cfg); code != 0 {
		h.t.Fatalf("request invalid: %d %s", code, msg)
	}
	resp, recs := h.g.Heartbeat(HeartbeatContext{ClientID: "cli", ClientHost: "/127.0.0.1", Now: h.now, Topics: h.topics}, req)
	if resp.ErrorCode != 0 && len(recs) > 0 {
		h.t.Fatalf("error answer with %d records", len(recs))
	}
	h.recs = append(h.recs, recs...)
	h.checkOwners()
	return resp
}

func (h *harness) ok(req *kmsg.ConsumerGroupHeartbeatRequest) *kmsg.ConsumerGroupHeartbeatResponse {
	h.t.Helper()
	resp := h.hb(req)
	if resp.ErrorCode != 0 {
		h.t.Fatalf("heartbeat %s/%d: error %v %v", req.MemberID, req.MemberEpoch, kerr.ErrorForCode(resp.ErrorCode), resp.ErrorMessage)
	}
	return resp
}

func (h *harness) expire(d time.Duration) []string {
	h.now = h.now.Add(d)
	recs, fenced := h.g.Expire(h.now, h.topics)
	h.recs = append(h.recs, recs...)
	h.checkOwners()
	return fenced
}

// checkOwners fails if two members hold a partition, or the ownership
// index disagrees with the members.
func (h *harness) checkOwners() {
	h.t.Helper()
	seen := map[topicPartition]string{}
	for _, id := range h.g.MemberIDs() {
		m := h.g.members[id]
		for _, tp := range []TopicPartitions{m.Assigned, m.PendingRevocation} {
			for tid, ps := range tp {
				for _, p := range ps {
					k := topicPartition{tid, p}
					if o, dup := seen[k]; dup {
						h.t.Fatalf("partition %d held by %s and %s", p, o, id)
					}
					seen[k] = id
					if o, _ := h.g.owner(tid, p); o != id {
						h.t.Fatalf("owner index says %q for a partition of %s", o, id)
					}
				}
			}
		}
	}
	n := 0
	for _, ps := range h.g.owners {
		n += len(ps)
	}
	if n != len(seen) {
		h.t.Fatalf("owner index has %d entries, members hold %d", n, len(seen))
	}
}

func respTP(resp *kmsg.ConsumerGroupHeartbeatResponse) TopicPartitions {
	if resp.Assignment == nil {
		return nil
	}
	out := TopicPartitions{}
	for _, t := range resp.Assignment.Topics {
		for _, p := range t.Partitions {
			out.add(t.TopicID, p)
		}
	}
	return out
}

func TestConsumerJoinSingleMember(t *testing.T) {
	h := newHarness(t, ConsumerGroupConfig{}, map[string]int32{"a": 6})
	resp := h.ok(joinReq("m1", "a"))
	if resp.MemberEpoch != 1 || *resp.MemberID != "m1" || resp.HeartbeatIntervalMillis != 5000 {
		t.Fatalf("join: %+v", resp)
	}
	if got := respTP(resp); got.Len() != 6 {
		t.Fatalf("assignment %v", got)
	}
	if h.g.Epoch() != 1 || h.g.AssignmentEpoch() != 1 || h.g.StateString() != "Stable" {
		t.Fatalf("group epoch %d/%d state %s", h.g.Epoch(), h.g.AssignmentEpoch(), h.g.StateString())
	}
	// A keepalive heartbeat carries no assignment.
	resp = h.ok(hbReq("m1", 1, nil))
	if resp.Assignment != nil || resp.MemberEpoch != 1 {
		t.Fatalf("keepalive: %+v", resp)
	}
}

func TestConsumerRevokeBeforeAssign(t *testing.T) {
	h := newHarness(t, ConsumerGroupConfig{}, map[string]int32{"a": 6})
	all := respTP(h.ok(joinReq("m1", "a")))

	r2 := h.ok(joinReq("m2", "a"))
	if r2.MemberEpoch != 2 || respTP(r2).Len() != 0 {
		t.Fatalf("m2 must wait for m1's partitions: epoch %d %v", r2.MemberEpoch, respTP(r2))
	}
	if m2, _ := h.g.Member("m2"); m2.State != MemberUnreleasedPartitions {
		t.Fatalf("m2 state %v", m2.State)
	}
	if s := h.g.StateString(); s != "Reconciling" {
		t.Fatalf("group state %s", s)
	}

	// m1 learns it must give up half, staying at epoch 1.
	r1 := h.ok(hbReq("m1", 1, all))
	kept := respTP(r1)
	if r1.MemberEpoch != 1 || kept.Len() != 3 {
		t.Fatalf("m1 revoke step: epoch %d kept %v", r1.MemberEpoch, kept)
	}
	if m1, _ := h.g.Member("m1"); m1.State != MemberUnrevokedPartitions || m1.PendingRevocation.Len() != 3 {
		t.Fatalf("m1 state %v pending %v", m1.State, m1.PendingRevocation)
	}
	// m2 still cannot have them.
	if got := respTP(h.ok(hbReq("m2", 2, TopicPartitions{}))); got != nil && got.Len() != 0 {
		t.Fatalf("m2 got partitions m1 still owns: %v", got)
	}
	// Still owning them, m1 stays put.
	if r := h.ok(hbReq("m1", 1, all)); r.MemberEpoch != 1 {
		t.Fatalf("m1 advanced while owning revoked partitions")
	}
	// m1 revokes: it moves to epoch 2.
	if r := h.ok(hbReq("m1", 1, kept)); r.MemberEpoch != 2 {
		t.Fatalf("m1 after revocation at epoch %d", r.MemberEpoch)
	}
	r2 = h.ok(hbReq("m2", 2, TopicPartitions{}))
	if got := respTP(r2); got.Len() != 3 {
		t.Fatalf("m2 after release: %v", got)
	}
	if s := h.g.StateString(); s != "Stable" {
		t.Fatalf("group state %s", s)
	}
}

func TestConsumerEpochFencing(t *testing.T) {
	h := newHarness(t, ConsumerGroupConfig{}, map[string]int32{"a": 2})
	h.ok(joinReq("m1", "a"))
	for _, tc := range []struct {
		member string
		epoch  int32
		owned  TopicPartitions
		code   int16
	}{
		{"m1", 2, nil, kerr.FencedMemberEpoch.Code},
		{"m1", 0 + 1, nil, 0},
		{"nobody", 1, nil, kerr.UnknownMemberID.Code},
		// Previous epoch (0) with owned partitions inside the
		// assignment: the response with epoch 1 was lost.
		{"m1", 0 + 0, TopicPartitions{}, -1},
	} {
		var req *kmsg.ConsumerGroupHeartbeatRequest
		if tc.code == -1 {
			continue // epoch 0 is a join, covered by rejoin below
		}
		req = hbReq(tc.member, tc.epoch, tc.owned)
		if got := h.hb(req).ErrorCode; got != tc.code {
			t.Fatalf("%s epoch %d: code %d want %d", tc.member, tc.epoch, got, tc.code)
		}
	}

	// Lost response: m2 joins (epoch 2 target), m1 moves to epoch 2 but
	// the response is lost; m1 retries with epoch 1 and owned partitions
	// within its assignment: accepted.
	h.ok(joinReq("m2", "a"))
	m1, _ := h.g.Member("m1")
	r := h.ok(hbReq("m1", 1, m1.Assigned))
	assigned := respTP(r)
	if r.MemberEpoch != 1 {
		// moved to unrevoked at epoch 1
		t.Fatalf("m1 epoch %d", r.MemberEpoch)
	}
	r = h.ok(hbReq("m1", 1, assigned))
	if r.MemberEpoch != 2 {
		t.Fatalf("m1 should reach epoch 2, at %d", r.MemberEpoch)
	}
	if code := h.hb(hbReq("m1", 1, assigned)).ErrorCode; code != 0 {
		t.Fatalf("previous epoch with a subset: %v", kerr.ErrorForCode(code))
	}
	if code := h.hb(hbReq("m1", 1, TopicPartitions{tid("a"): {0, 1}})).ErrorCode; code != kerr.FencedMemberEpoch.Code {
		t.Fatalf("previous epoch with a superset: %v", kerr.ErrorForCode(code))
	}
	// A known member rejoining at epoch 0 gets its assignment back.
	r = h.ok(joinReq("m1", "a"))
	if r.MemberEpoch != 2 || !respTP(r).Equal(assigned) {
		t.Fatalf("rejoin: epoch %d %v", r.MemberEpoch, respTP(r))
	}
}

func TestConsumerSessionTimeout(t *testing.T) {
	h := newHarness(t, ConsumerGroupConfig{}, map[string]int32{"a": 4})
	h.ok(joinReq("m1", "a"))
	r2 := h.ok(joinReq("m2", "a"))
	_ = r2
	m1, _ := h.g.Member("m1")
	h.ok(hbReq("m1", 1, m1.Assigned.Clone()))
	// m1 revoked nothing yet (owned reported). m1 keeps heartbeating;
	// m2 goes silent.
	for i := 0; i < 9; i++ {
		h.now = h.now.Add(5 * time.Second)
		m1, _ = h.g.Member("m1")
		h.ok(hbReq("m1", m1.Epoch, m1.Assigned.Clone()))
	}
	fenced := h.expire(0)
	if len(fenced) != 1 || fenced[0] != "m2" {
		t.Fatalf("fenced %v", fenced)
	}
	m1, _ = h.g.Member("m1")
	r := h.ok(hbReq("m1", m1.Epoch, m1.Assigned.Clone()))
	if respTP(r).Len() != 4 {
		t.Fatalf("m1 should own everything after m2 expired: %v", respTP(r))
	}
	if h.g.NumMembers() != 1 {
		t.Fatalf("members %v", h.g.MemberIDs())
	}
}

func TestConsumerRebalanceTimeout(t *testing.T) {
	h := newHarness(t, ConsumerGroupConfig{}, map[string]int32{"a": 4})
	all := respTP(h.ok(joinReq("m1", "a")))
	h.ok(joinReq("m2", "a"))
	h.ok(hbReq("m1", 1, all)) // m1 must revoke two
	// m1 keeps heartbeating without revoking; its rebalance timeout
	// (30s) passes although its session does not.
	for i := 0; i < 7; i++ {
		h.now = h.now.Add(5 * time.Second)
		h.ok(hbReq("m1", 1, all))
		h.ok(hbReq("m2", 2, TopicPartitions{}))
	}
	fenced := h.expire(0)
	if len(fenced) != 1 || fenced[0] != "m1" {
		t.Fatalf("fenced %v", fenced)
	}
	if code := h.hb(hbReq("m1", 1, all)).ErrorCode; code != kerr.UnknownMemberID.Code {
		t.Fatalf("fenced member heartbeat: %v", kerr.ErrorForCode(code))
	}
	if got := respTP(h.ok(hbReq("m2", 2, TopicPartitions{}))); got.Len() != 4 {
		t.Fatalf("m2: %v", got)
	}
}

func TestConsumerLeave(t *testing.T) {
	h := newHarness(t, ConsumerGroupConfig{}, map[string]int32{"a": 4})
	h.ok(joinReq("m1", "a"))
	h.ok(joinReq("m2", "a"))
	e := h.g.Epoch()
	r := h.ok(hbReq("m2", -1, nil))
	if r.MemberEpoch != -1 || h.g.NumMembers() != 1 || h.g.Epoch() != e+1 {
		t.Fatalf("leave: %+v members %d epoch %d", r, h.g.NumMembers(), h.g.Epoch())
	}
	if code := h.hb(hbReq("m2", -1, nil)).ErrorCode; code != kerr.UnknownMemberID.Code {
		t.Fatalf("second leave: %v", kerr.ErrorForCode(code))
	}
	h.ok(hbReq("m1", -1, nil))
	if s := h.g.StateString(); s != "Empty" {
		t.Fatalf("state %s", s)
	}
}

func staticJoin(member, inst string, topics ...string) *kmsg.ConsumerGroupHeartbeatRequest {
	r := joinReq(member, topics...)
	r.InstanceID = kmsg.StringPtr(inst)
	return r
}

func TestConsumerStaticMembership(t *testing.T) {
	h := newHarness(t, ConsumerGroupConfig{}, map[string]int32{"a": 4})
	h.ok(staticJoin("s1", "i1", "a"))
	h.ok(staticJoin("s2", "i2", "a"))
	s1, _ := h.g.Member("s1")
	h.ok(hbReq("s1", s1.Epoch, s1.Assigned.Clone()))
	s1, _ = h.g.Member("s1")
	h.ok(hbReq("s1", s1.Epoch, s1.Assigned.Clone()))
	s2, _ := h.g.Member("s2")
	h.ok(hbReq("s2", s2.Epoch, TopicPartitions{}))
	s1, _ = h.g.Member("s1")
	s2, _ = h.g.Member("s2")
	if h.g.StateString() != "Stable" {
		t.Fatalf("state %s", h.g.StateString())
	}
	before := s1.Assigned.Clone()
	epoch := h.g.Epoch()

	// Another process with instance i1 while s1 is alive: rejected.
	if code := h.hb(staticJoin("x1", "i1", "a")).ErrorCode; code != kerr.UnreleasedInstanceID.Code {
		t.Fatalf("duplicate instance: %v", kerr.ErrorForCode(code))
	}
	// A heartbeat for i1 from the wrong member id is fenced.
	req := hbReq("x1", 3, nil)
	req.InstanceID = kmsg.StringPtr("i1")
	if code := h.hb(req).ErrorCode; code != kerr.FencedInstanceID.Code {
		t.Fatalf("wrong member for instance: %v", kerr.ErrorForCode(code))
	}

	// s1 restarts: leaves with -2, comes back with a new member id and
	// gets the same partitions without a new group epoch.
	leave := hbReq("s1", -2, nil)
	leave.InstanceID = kmsg.StringPtr("i1")
	if r := h.ok(leave); r.MemberEpoch != -2 {
		t.Fatalf("static leave epoch %d", r.MemberEpoch)
	}
	if h.g.NumMembers() != 2 || h.g.Epoch() != epoch {
		t.Fatalf("static leave changed the group: %d members epoch %d", h.g.NumMembers(), h.g.Epoch())
	}
	r := h.ok(staticJoin("s1b", "i1", "a"))
	if !respTP(r).Equal(before) || r.MemberEpoch != epoch {
		t.Fatalf("static rejoin: epoch %d %v want %v", r.MemberEpoch, respTP(r), before)
	}
	if h.g.Epoch() != epoch {
		t.Fatalf("static rejoin bumped the group epoch")
	}
	if _, ok := h.g.Member("s1"); ok {
		t.Fatal("old incarnation still a member")
	}
	// The session of a member that left with -2 still expires.
	leave = hbReq("s1b", -2, nil)
	leave.InstanceID = kmsg.StringPtr("i1")
	h.ok(leave)
	h.now = h.now.Add(40 * time.Second)
	s2, _ = h.g.Member("s2")
	h.ok(hbReq("s2", s2.Epoch, s2.Assigned.Clone()))
	if fenced := h.expire(6 * time.Second); len(fenced) != 1 || fenced[0] != "s1b" {
		t.Fatalf("fenced %v", fenced)
	}
}

func TestConsumerGroupMaxSize(t *testing.T) {
	h := newHarness(t, ConsumerGroupConfig{MaxSize: 1}, map[string]int32{"a": 1})
	h.ok(joinReq("m1", "a"))
	if code := h.hb(joinReq("m2", "a")).ErrorCode; code != kerr.GroupMaxSizeReached.Code {
		t.Fatalf("got %v", kerr.ErrorForCode(code))
	}
	h.ok(joinReq("m1", "a")) // a known member may rejoin
}

// TestConsumerHeartbeatValidation has one case per rule of Kafka's
// validation of a ConsumerGroupHeartbeat (GroupCoordinatorService.
// throwIfConsumerGroupHeartbeatRequestIsInvalid in Kafka 4.4), each with a
// request that breaks it and, where Kafka draws the line, one that does
// not; the message is Kafka's.
func TestConsumerHeartbeatValidation(t *testing.T) {
	cfg := DefaultConsumerGroupConfig()
	type req = kmsg.ConsumerGroupHeartbeatRequest
	join := func(f func(r *req)) *req {
		r := joinReq("m", "a")
		f(r)
		return r
	}
	beat := func(epoch int32, f func(r *req)) *req {
		r := hbReq("m", epoch, nil)
		f(r)
		return r
	}
	none := func(*req) {}
	const invalid, ok = "invalid", ""
	for _, tc := range []struct {
		name string
		req  *req
		code int16
		msg  string
	}{
		{"a join as the Java client sends it", join(none), 0, ok},
		// librdkafka 2.16 (issue 23): names and an empty, non-null regex.
		{"a join with topic names and an empty regex", join(func(r *req) { r.SubscribedTopicRegex = kmsg.StringPtr("") }), 0, ok},

		// MemberId: not blank from v1 on, and at any version above epoch 0 or at -1.
		{"v1 join without a member id", join(func(r *req) { r.MemberID = "" }), kerr.InvalidRequest.Code, "MemberId can't be empty."},
		{"v1 join with a blank member id", join(func(r *req) { r.MemberID = " \t" }), kerr.InvalidRequest.Code, "MemberId can't be empty."},
		{"v0 join without a member id (the broker makes one)", join(func(r *req) { r.MemberID = ""; r.Version = 0 }), 0, ok},
		{"v0 heartbeat without a member id", beat(3, func(r *req) { r.MemberID = ""; r.Version = 0 }), kerr.InvalidRequest.Code, "MemberId can't be empty."},
		{"v0 leave without a member id", beat(EpochLeave, func(r *req) { r.MemberID = ""; r.Version = 0 }), kerr.InvalidRequest.Code, "MemberId can't be empty."},
		{"v0 static leave without a member id (fenced later, not refused here)", beat(EpochStaticLeave, func(r *req) {
			r.MemberID = ""
			r.Version = 0
			r.InstanceID = kmsg.StringPtr("i")
		}), 0, ok},

		// GroupId: not blank.
		{"an empty group id", join(func(r *req) { r.Group = "" }), kerr.InvalidRequest.Code, "GroupId can't be empty."},
		{"a blank group id", join(func(r *req) { r.Group = "  " }), kerr.InvalidRequest.Code, "GroupId can't be empty."},
		{"a group id with spaces around it", join(func(r *req) { r.Group = " g " }), 0, ok},

		// InstanceId and RackId: null, or not blank.
		{"an empty instance id", join(func(r *req) { r.InstanceID = kmsg.StringPtr("") }), kerr.InvalidRequest.Code, "InstanceId can't be empty."},
		{"a blank instance id", beat(2, func(r *req) { r.InstanceID = kmsg.StringPtr("\n") }), kerr.InvalidRequest.Code, "InstanceId can't be empty."},
		{"an empty rack id", join(func(r *req) { r.RackID = kmsg.StringPtr("") }), kerr.InvalidRequest.Code, "RackId can't be empty."},
		{"a blank rack id", join(func(r *req) { r.RackID = kmsg.StringPtr(" ") }), kerr.InvalidRequest.Code, "RackId can't be empty."},
		{"a rack id", join(func(r *req) { r.RackID = kmsg.StringPtr("r1") }), 0, ok},

		// A join: a rebalance timeout, an empty non-null TopicPartitions, names or a regex.
		{"a join without a rebalance timeout", join(func(r *req) { r.RebalanceTimeoutMillis = -1 }), kerr.InvalidRequest.Code, "RebalanceTimeoutMs must be provided in first request."},
		{"a join with a rebalance timeout below -1", join(func(r *req) { r.RebalanceTimeoutMillis = -5 }), 0, ok},
		{"a join with a null TopicPartitions", join(func(r *req) { r.Topics = nil }), kerr.InvalidRequest.Code, "TopicPartitions must be empty when (re-)joining."},
		{"a join that owns partitions", join(func(r *req) {
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{Partitions: []int32{0}}}
		}), kerr.InvalidRequest.Code, "TopicPartitions must be empty when (re-)joining."},
		{"a join with neither names nor a regex", join(func(r *req) { r.SubscribedTopicNames = nil }), kerr.InvalidRequest.Code,
			"Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."},
		{"a join with empty names", join(func(r *req) { r.SubscribedTopicNames = []string{} }), 0, ok},
		{"a join with an empty regex alone", join(func(r *req) { r.SubscribedTopicNames = nil; r.SubscribedTopicRegex = kmsg.StringPtr("") }), 0, ok},
		// A regex that does not compile is Heartbeat's to refuse
		// (TestConsumerHeartbeatInvalidRegex), as Kafka's coordinator does.
		{"a join with a regex that does not compile", join(func(r *req) { r.SubscribedTopicRegex = kmsg.StringPtr("(") }), 0, ok},

		// Other epochs: a heartbeat needs nothing of the above.
		{"a heartbeat with nulls", beat(4, none), 0, ok},
		{"a leave", beat(EpochLeave, none), 0, ok},
		{"a static leave without an instance id", beat(EpochStaticLeave, none), kerr.InvalidRequest.Code, "InstanceId can't be null."},
		{"a static leave", beat(EpochStaticLeave, func(r *req) { r.InstanceID = kmsg.StringPtr("i") }), 0, ok},
		{"epoch -3", beat(-3, none), kerr.InvalidRequest.Code, "MemberEpoch is invalid."},

		// ServerAssignor: null, or one the broker runs.
		{"an unknown assignor", join(func(r *req) { r.ServerAssignor = kmsg.StringPtr("sticky") }), kerr.UnsupportedAssignor.Code,
			"ServerAssignor sticky is not supported. Supported assignors: uniform, range."},
		{"the range assignor", join(func(r *req) { r.ServerAssignor = kmsg.StringPtr("range") }), 0, ok},
		{"an unknown assignor on a heartbeat", beat(2, func(r *req) { r.ServerAssignor = kmsg.StringPtr("x") }), kerr.UnsupportedAssignor.Code,
			"ServerAssignor x is not supported. Supported assignors: uniform, range."},
	} {
		code, msg := ValidateConsumerGroupHeartbeat(tc.req, cfg)
		if code != tc.code || msg != tc.msg {
			t.Errorf("%s: got %d %q, want %d %q", tc.name, code, msg, tc.code, tc.msg)
		}
	}
}

// TestConsumerHeartbeatInvalidRegex: a regex that does not compile is
// INVALID_REGULAR_EXPRESSION once the member is known, and the group is
// unchanged; an empty regex subscribes to nothing.
func TestConsumerHeartbeatInvalidRegex(t *testing.T) {
	h := newHarness(t, ConsumerGroupConfig{}, map[string]int32{"a": 2})
	bad := joinReq("m1")
	bad.SubscribedTopicRegex = kmsg.StringPtr("(")
	r := h.hb(bad)
	if r.ErrorCode != kerr.InvalidRegularExpression.Code || r.ErrorMessage == nil ||
		*r.ErrorMessage != "SubscribedTopicRegex `(` is not a valid regular expression: missing closing )." {
		t.Fatalf("got %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	if len(h.g.MemberIDs()) != 0 || len(h.recs) != 0 {
		t.Fatalf("a refused join left members %v, records %d", h.g.MemberIDs(), len(h.recs))
	}
	// A fenced epoch is found before the regex, as in Kafka.
	r = h.ok(joinReq("m1", "a"))
	stale := hbReq("m1", r.MemberEpoch+5, nil)
	stale.SubscribedTopicRegex = kmsg.StringPtr("(")
	if code := h.hb(stale).ErrorCode; code != kerr.FencedMemberEpoch.Code {
		t.Fatalf("stale epoch with a bad regex: %v", kerr.ErrorForCode(code))
	}
	// An empty regex beside names subscribes to the names alone.
	j := joinReq("m2", "a")
	j.SubscribedTopicRegex = kmsg.StringPtr("")
	h.ok(j)
	if h.g.IsSubscribedTo("b") || !h.g.IsSubscribedTo("a") {
		t.Fatal("IsSubscribedTo with an empty regex")
	}
}

// TestConsumerJoinAsLibrdkafka216 pins issue 23: librdkafka 2.16's KIP-848
// consumer joins with v1, a member id of its own, epoch 0, its topic
// names, an empty (not null) SubscribedTopicRegex and an empty
// TopicPartitions. Strata refused the empty regex with INVALID_REQUEST,
// which librdkafka treats as fatal; Kafka 4.4 accepts it.
func TestConsumerJoinAsLibrdkafka216(t *testing.T) {
	h := newHarness(t, ConsumerGroupConfig{}, map[string]int32{"t": 3})
	req := joinReq("LQgCXkX0TSqSYGXJLhusHw", "t")
	req.RebalanceTimeoutMillis = 300000
	req.SubscribedTopicRegex = kmsg.StringPtr("")
	r := h.ok(req)
	if r.MemberEpoch != 1 || respTP(r).Len() != 3 {
		t.Fatalf("join: epoch %d, assignment %v", r.MemberEpoch, respTP(r))
	}
}

func TestConsumerRegexAndMetadataChange(t *testing.T) {
	h := newHarness(t, ConsumerGroupConfig{}, map[string]int32{"orders-1": 2, "orders-2": 2, "other": 3})
	req := joinReq("m1")
	req.SubscribedTopicNames = nil
	req.SubscribedTopicRegex = kmsg.StringPtr("orders-.*")
	r := h.ok(req)
	if got := respTP(r); got.Len() != 4 || got.Has(tid("other"), 0) {
		t.Fatalf("regex assignment %v", got)
	}
	// A new partition in a subscribed topic bumps the epoch and is
	// assigned on the next heartbeat.
	e := h.g.Epoch()
	h.topics = testTopics(map[string]int32{"orders-1": 3, "orders-2": 2, "other": 3})
	r = h.ok(hbReq("m1", r.MemberEpoch, respTP(r)))
	if h.g.Epoch() != e+1 || respTP(r).Len() != 5 {
		t.Fatalf("after partition added: epoch %d %v", h.g.Epoch(), respTP(r))
	}
	if !h.g.IsSubscribedTo("orders-9") || h.g.IsSubscribedTo("other") {
		t.Fatal("IsSubscribedTo")
	}
}

func TestConsumerRangeAssignorChoice(t *testing.T) {
	h := newHarness(t, ConsumerGroupConfig{}, map[string]int32{"a": 4, "b": 4})
	req := joinReq("m1", "a", "b")
	req.ServerAssignor = kmsg.StringPtr("range")
	h.ok(req)
	req = joinReq("m2", "a", "b")
	req.ServerAssignor = kmsg.StringPtr("range")
	h.ok(req)
	if d := h.g.Describe(h.topics); d.AssignorName != "range" {
		t.Fatalf("assignor %s", d.AssignorName)
	}
	// Co-partitioned: same partition numbers of a and b per member.
	for _, id := range []string{"m1", "m2"} {
		tg := h.g.Target(id)
		if fmt.Sprint(tg[tid("a")]) != fmt.Sprint(tg[tid("b")]) {
			t.Fatalf("target of %s not co-partitioned: %v", id, tg)
		}
	}
}

func TestConsumerOffsetCommitValidation(t *testing.T) {
	h := newHarness(t, ConsumerGroupConfig{}, map[string]int32{"a": 2})
	g := h.g
	if code := g.ValidateOffsetCommit("", nil, -1, 9, false); code != 0 {
		t.Fatalf("admin commit on empty group: %v", kerr.ErrorForCode(code))
	}
	r := h.ok(joinReq("m1", "a"))
	e := r.MemberEpoch
	for _, tc := range []struct {
		member string
		gen    int32
		ver    int16
		txn    bool
		code   int16
	}{
		{"m1", e, 9, false, 0},
		{"m1", e + 1, 9, false, kerr.StaleMemberEpoch.Code},
		{"m1", e, 8, false, kerr.UnsupportedVersion.Code},
		{"m1", e, 3, true, 0},
		{"zz", e, 9, false, kerr.UnknownMemberID.Code},
		{"", -1, 9, false, kerr.UnknownMemberID.Code},
	} {
		if code := g.ValidateOffsetCommit(tc.member, nil, tc.gen, tc.ver, tc.txn); code != tc.code {
			t.Errorf("%+v: got %v", tc, kerr.ErrorForCode(code))
		}
	}
	// m2 joins; m1 moves to a newer epoch keeping partition kept.
	h.ok(joinReq("m2", "a"))
	h.ok(hbReq("m1", e, respTP(r)))
	m1, _ := g.Member("m1")
	h.ok(hbReq("m1", m1.Epoch, m1.Assigned.Clone()))
	m1, _ = g.Member("m1")
	if m1.Epoch == e {
		t.Fatalf("m1 did not advance")
	}
	var kept int32 = m1.Assigned[tid("a")][0]
	if code := g.ValidateOffsetCommitPartition("m1", "a", kept, e); code != 0 {
		t.Fatalf("KIP-1251 commit at the older epoch: %v", kerr.ErrorForCode(code))
	}
	if code := g.ValidateOffsetCommitPartition("m1", "a", 1-kept, e); code != kerr.StaleMemberEpoch.Code {
		t.Fatalf("commit of a partition no longer held: %v", kerr.ErrorForCode(code))
	}
	if code := g.ValidateOffsetFetch(kmsg.StringPtr("m1"), m1.Epoch); code != 0 {
		t.Fatalf("fetch: %v", kerr.ErrorForCode(code))
	}
	if code := g.ValidateOffsetFetch(kmsg.StringPtr("m1"), m1.Epoch-1); code != kerr.StaleMemberEpoch.Code {
		t.Fatalf("stale fetch: %v", kerr.ErrorForCode(code))
	}
	if code := g.ValidateOffsetFetch(nil, -1); code != 0 {
		t.Fatalf("admin fetch: %v", kerr.ErrorForCode(code))
	}
}
