package group

// ConsumerGroupHeartbeat (KIP-848) on a consumer group: joining (epoch 0),
// heartbeating (the member's epoch), leaving (-1) and a static member's
// temporary leave (-2). Each heartbeat may bump the group epoch (new
// member, changed subscription or subscribed topic metadata), recompute
// the target assignment, and reconcile the member one step.

import (
	"errors"
	"fmt"
	"regexp/syntax"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// HeartbeatContext carries what a heartbeat needs besides the request.
type HeartbeatContext struct {
	ClientID   string
	ClientHost string
	Now        time.Time
	Topics     TopicLookup
	// NewMemberID makes a member id for v0 joins without one.
	NewMemberID func() string
}

// ValidateConsumerGroupHeartbeat checks the request's fields as Kafka
// does before touching any group (GroupCoordinatorService in Kafka 4.4;
// GroupMetadataManager before it); a non-zero code is INVALID_REQUEST or
// UNSUPPORTED_ASSIGNOR, with Kafka's message. The rules, in Kafka's order:
//
//   - MemberId must not be blank from v1 on (the client makes it up), and
//     at any version when the epoch is above 0 or -1 (leave);
//   - GroupId must not be blank; InstanceId and RackId, when not null,
//     must not be blank ("blank" is Java's trim().isEmpty(): every byte a
//     space or a control character);
//   - a join (epoch 0) needs a RebalanceTimeoutMs other than -1, an empty
//     and non-null TopicPartitions, and SubscribedTopicNames or
//     SubscribedTopicRegex non-null (either may be empty: a member
//     subscribed to nothing is still a member; an empty regex subscribes
//     to nothing);
//   - a static member's leave (epoch -2) needs an InstanceId; an epoch
//     below -2 is invalid;
//   - a ServerAssignor, when set, must be one the broker runs.
//
// Nothing else is refused here: a RebalanceTimeoutMs below -1 or an empty
// SubscribedTopicRegex passes, as on Kafka, and a regex that does not
// compile is refused by Heartbeat (INVALID_REGULAR_EXPRESSION) once the
// member is known, where Kafka checks it.
func ValidateConsumerGroupHeartbeat(req *kmsg.ConsumerGroupHeartbeatRequest, cfg ConsumerGroupConfig) (int16, string) {
	cfg = cfg.withDefaults()
	invalid := func(msg string) (int16, string) { return kerr.InvalidRequest.Code, msg }
	if (req.Version >= 1 || req.MemberEpoch > 0 || req.MemberEpoch == EpochLeave) && blank(req.MemberID) {
		return invalid("MemberId can't be empty.")
	}
	if blank(req.Group) {
		return invalid("GroupId can't be empty.")
	}
	if req.InstanceID != nil && blank(*req.InstanceID) {
		return invalid("InstanceId can't be empty.")
	}
	if req.RackID != nil && blank(*req.RackID) {
		return invalid("RackId can't be empty.")
	}
	switch {
	case req.MemberEpoch == EpochJoin:
		if req.RebalanceTimeoutMillis == -1 {
			return invalid("RebalanceTimeoutMs must be provided in first request.")
		}
		if req.Topics == nil || len(req.Topics) > 0 {
			return invalid("TopicPartitions must be empty when (re-)joining.")
		}
		if req.SubscribedTopicNames == nil && req.SubscribedTopicRegex == nil {
			return invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
		}
	case req.MemberEpoch == EpochStaticLeave:
		if req.InstanceID == nil {
			return invalid("InstanceId can't be null.")
		}
	case req.MemberEpoch < EpochStaticLeave:
		return invalid("MemberEpoch is invalid.")
	}
	if req.ServerAssignor != nil && !cfg.supportsAssignor(*req.ServerAssignor) {
		return kerr.UnsupportedAssignor.Code, fmt.Sprintf("ServerAssignor %s is not supported. Supported assignors: %s.",
			*req.ServerAssignor, strings.Join(cfg.Assignors, ", "))
	}
	return 0, ""
}

// blank is Kafka's test for an empty string field: String.trim() strips
// every character up to U+0020, so a value of spaces and control
// characters alone is empty too.
func blank(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] > ' ' {
			return false
		}
	}
	return true
}

// checkRegex refuses a SubscribedTopicRegex that does not compile, as
// Kafka does when a member's regex changes to a non-empty one
// (INVALID_REGULAR_EXPRESSION); an empty regex subscribes to nothing.
func checkRegex(m *ConsumerMember, req *kmsg.ConsumerGroupHeartbeatRequest) (int16, string) {
	re := req.SubscribedTopicRegex
	if re == nil || *re == "" || (m != nil && m.SubscribedTopicRegex != nil && *m.SubscribedTopicRegex == *re) {
		return 0, ""
	}
	if _, err := compileTopicRegex(*re); err != nil {
		why := err.Error()
		var se *syntax.Error
		if errors.As(err, &se) {
			why = string(se.Code) // "missing closing )", as RE2/J describes it
		}
		return kerr.InvalidRegularExpression.Code, fmt.Sprintf("SubscribedTopicRegex `%s` is not a valid regular expression: %s.", *re, why)
	}
	return 0, ""
}

// errResp fills an error answer.
func errResp(resp *kmsg.ConsumerGroupHeartbeatResponse, code int16, msg string) *kmsg.ConsumerGroupHeartbeatResponse {
	resp.ErrorCode = code
	if msg != "" {
		resp.ErrorMessage = kmsg.StringPtr(msg)
	}
	return resp
}

func ownedFromRequest(ts []kmsg.ConsumerGroupHeartbeatRequestTopic) TopicPartitions {
	if ts == nil {
		return nil
	}
	out := TopicPartitions{}
	for _, t := range ts {
		for _, p := range t.Partitions {
			out.add(t.TopicID, p)
		}
	}
	return out
}

func isSubset(owned, of TopicPartitions) bool {
	if owned == nil {
		return false
	}
	for id, ps := range owned {
		for _, p := range ps {
			if !of.Has(id, p) {
				return false
			}
		}
	}
	return true
}

// Heartbeat handles a validated request (see ValidateConsumerGroupHeartbeat)
// and returns the response and the records to persist before answering.
// On an error answer the group is unchanged and there are no records.
func (g *ConsumerGroup) Heartbeat(hc HeartbeatContext, req *kmsg.ConsumerGroupHeartbeatRequest) (*kmsg.ConsumerGroupHeartbeatResponse, []Record) {
	defer g.rearm()
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	resp.HeartbeatIntervalMillis = int32(g.cfg.HeartbeatInterval.Milliseconds())
	if hc.Topics == nil {
		hc.Topics = NewStaticTopics(nil)
	}
	if req.MemberEpoch == EpochLeave || req.MemberEpoch == EpochStaticLeave {
		return g.leave(hc, req, resp)
	}
	owned := ownedFromRequest(req.Topics)

	// Find or create the member.
	memberID := req.MemberID
	if memberID == "" && req.MemberEpoch == EpochJoin && hc.NewMemberID != nil {
		memberID = hc.NewMemberID()
	}
	m, isNew, replaced, code, msg := g.resolveMember(req, memberID, owned)
	if code == 0 {
		code, msg = checkRegex(m, req)
	}
	if code != 0 {
		return errResp(resp, code, msg), nil
	}
	var recs []Record
	if replaced != nil {
		recs = append(recs, g.replaceStatic(replaced, m)...)
	}
	if isNew {
		g.members[m.ID] = m
		if m.InstanceID == nil && req.InstanceID != nil {
			m.InstanceID = req.InstanceID
		}
		if m.InstanceID != nil {
			g.static[*m.InstanceID] = m.ID
		}
	}

	// Update the subscription.
	subChanged, metaChanged := g.updateMember(m, req, hc)
	if isNew && replaced == nil {
		subChanged = true
	}
	if metaChanged || isNew {
		recs = append(recs, memberMetadataRecord(g.id, m))
	}
	hash, ids := subscriptionHash(g.members, hc.Topics)
	g.topicIDs = ids
	if subChanged || hash != g.metadataHash {
		recs = append(recs, g.bumpEpoch(hc.Topics))
	}
	if g.epoch > g.assignmentEpoch || replaced != nil {
		recs = append(recs, g.computeTarget(hc.Topics)...)
	}

	// Reconcile.
	before := m.Assigned.Clone()
	if req.MemberEpoch == EpochJoin && !isNew && replaced == nil {
		// A known member rejoining (its last response was lost, or it
		// was fenced on its side): it owns nothing now, so anything
		// pending revocation is released.
		owned = TopicPartitions{}
	}
	if g.reconcileMember(m, owned) || replaced != nil {
		recs = append(recs, currentAssignmentRecord(g.id, m))
	}
	if m.State == MemberUnrevokedPartitions {
		if m.rebalanceDeadline.IsZero() {
			m.rebalanceDeadline = hc.Now.Add(rebalanceTimeout(m))
		}
	} else {
		m.rebalanceDeadline = time.Time{}
	}
	m.sessionDeadline = hc.Now.Add(g.cfg.SessionTimeout)

	resp.MemberID = kmsg.StringPtr(m.ID)
	resp.MemberEpoch = m.Epoch
	full := req.RebalanceTimeoutMillis != -1 && (req.SubscribedTopicNames != nil || req.SubscribedTopicRegex != nil) && req.Topics != nil
	if req.MemberEpoch == EpochJoin || full || !before.Equal(m.Assigned) {
		resp.Assignment = responseAssignment(m.Assigned)
	}
	return resp, recs
}

func responseAssignment(tp TopicPartitions) *kmsg.ConsumerGroupHeartbeatResponseAssignment {
	a := kmsg.NewConsumerGroupHeartbeatResponseAssignment()
	a.Topics = []kmsg.ConsumerGroupHeartbeatResponseAssignmentTopic{}
	for _, id := range sortedTopicIDs(tp) {
		t := kmsg.NewConsumerGroupHeartbeatResponseAssignmentTopic()
		t.TopicID = id
		t.Partitions = slices.Clone(tp[id])
		a.Topics = append(a.Topics, t)
	}
	return &a
}

// resolveMember finds the member a join or heartbeat is for. replaced is a
// static member that m (new) takes over.
func (g *ConsumerGroup) resolveMember(req *kmsg.ConsumerGroupHeartbeatRequest, memberID string, owned TopicPartitions) (m *ConsumerMember, isNew bool, replaced *ConsumerMember, code int16, msg string) {
	full := func() (int16, string) {
		return kerr.GroupMaxSizeReached.Code, fmt.Sprintf("The consumer group has reached its maximum capacity of %d members.", g.cfg.MaxSize)
	}
	join := req.MemberEpoch == EpochJoin
	if req.InstanceID != nil {
		inst := *req.InstanceID
		existing := g.members[g.static[inst]]
		if join {
			switch {
			case existing == nil:
				if cur, ok := g.members[memberID]; ok {
					return cur, false, nil, 0, ""
				}
				if len(g.members) >= g.cfg.MaxSize {
					c, s := full()
					return nil, false, nil, c, s
				}
				return newConsumerMember(memberID), true, nil, 0, ""
			case existing.ID == memberID:
				// The same incarnation rejoining in place.
				return existing, false, nil, 0, ""
			case existing.Epoch != EpochStaticLeave:
				return nil, false, nil, kerr.UnreleasedInstanceID.Code, fmt.Sprintf(
					"Static member %s with instance id %s cannot join the group because the instance id is owned by %s member.",
					memberID, inst, existing.ID)
			default:
				nm := *existing
				nm.ID = memberID
				nm.Assigned = existing.Assigned.Clone()
				nm.PendingRevocation = existing.PendingRevocation.Clone()
				nm.AssignEpochs = map[[16]byte]map[int32]int32{}
				return &nm, true, existing, 0, ""
			}
		}
		if existing == nil {
			return nil, false, nil, kerr.UnknownMemberID.Code, fmt.Sprintf("Instance id %s is unknown.", inst)
		}
		if existing.ID != memberID {
			return nil, false, nil, kerr.FencedInstanceID.Code, fmt.Sprintf(
				"Static member %s with instance id %s is fenced by existing member %s.", memberID, inst, existing.ID)
		}
		m = existing
	} else {
		cur, ok := g.members[memberID]
		if join {
			if ok {
				return cur, false, nil, 0, ""
			}
			if len(g.members) >= g.cfg.MaxSize {
				c, s := full()
				return nil, false, nil, c, s
			}
			return newConsumerMember(memberID), true, nil, 0, ""
		}
		if !ok {
			return nil, false, nil, kerr.UnknownMemberID.Code, fmt.Sprintf("Member %s is not a member of group %s.", memberID, g.id)
		}
		m = cur
	}
	// A heartbeat must carry the member's epoch, or its previous epoch
	// with owned partitions within its assignment (a lost response).
	if req.MemberEpoch > m.Epoch || (req.MemberEpoch < m.Epoch &&
		(req.MemberEpoch != m.PreviousEpoch || !isSubset(owned, m.Assigned))) {
		return nil, false, nil, kerr.FencedMemberEpoch.Code, fmt.Sprintf(
			"The consumer group member has a different member epoch (%d) than the one known by the group coordinator (%d). The member must abandon all its partitions and rejoin.",
			req.MemberEpoch, m.Epoch)
	}
	return m, false, nil, 0, ""
}

// replaceStatic swaps old (a static member that left with epoch -2) for
// its new incarnation nm, which keeps the old assignment and target.
func (g *ConsumerGroup) replaceStatic(old, nm *ConsumerMember) []Record {
	target := g.target[old.ID]
	recs := g.removeMember(old)
	// The new incarnation starts at epoch 0 holding the old assignment;
	// reconciliation moves it to the assignment epoch.
	nm.Epoch, nm.PreviousEpoch, nm.State = 0, 0, MemberUnknown
	if target != nil {
		g.target[nm.ID] = target
		recs = append(recs, targetMemberRecord(g.id, nm.ID, target))
	}
	nm.updateAssignEpochs()
	g.setOwners(nm, true)
	return recs
}

// updateMember applies the request's non-null fields; it reports whether
// the subscription changed, and whether anything persisted changed.
func (g *ConsumerGroup) updateMember(m *ConsumerMember, req *kmsg.ConsumerGroupHeartbeatRequest, hc HeartbeatContext) (subChanged, changed bool) {
	setStr := func(dst **string, v *string) {
		if v != nil && (*dst == nil || **dst != *v) {
			s := *v
			*dst = &s
			changed = true
		}
	}
	setStr(&m.RackID, req.RackID)
	setStr(&m.ServerAssignor, req.ServerAssignor)
	if req.InstanceID != nil {
		setStr(&m.InstanceID, req.InstanceID)
	}
	if req.RebalanceTimeoutMillis > 0 && req.RebalanceTimeoutMillis != m.RebalanceTimeoutMs {
		m.RebalanceTimeoutMs = req.RebalanceTimeoutMillis
		changed = true
	}
	if hc.ClientID != m.ClientID || hc.ClientHost != m.ClientHost {
		m.ClientID, m.ClientHost = hc.ClientID, hc.ClientHost
		changed = true
	}
	if req.SubscribedTopicNames != nil {
		names := slices.Clone(req.SubscribedTopicNames)
		slices.Sort(names)
		names = slices.Compact(names)
		if !slices.Equal(names, m.SubscribedTopicNames) {
			m.SubscribedTopicNames = names
			subChanged, changed = true, true
		}
	}
	if req.SubscribedTopicRegex != nil {
		re := *req.SubscribedTopicRegex
		if m.SubscribedTopicRegex == nil || *m.SubscribedTopicRegex != re {
			m.SubscribedTopicRegex = &re
			subChanged, changed = true, true
		}
	}
	return subChanged, changed
}

// leave handles epoch -1 (leave) and -2 (static member leaving for now).
func (g *ConsumerGroup) leave(hc HeartbeatContext, req *kmsg.ConsumerGroupHeartbeatRequest, resp *kmsg.ConsumerGroupHeartbeatResponse) (*kmsg.ConsumerGroupHeartbeatResponse, []Record) {
	var m *ConsumerMember
	if req.InstanceID == nil {
		cur, ok := g.members[req.MemberID]
		if !ok {
			return errResp(resp, kerr.UnknownMemberID.Code, fmt.Sprintf("Member %s is not a member of group %s.", req.MemberID, g.id)), nil
		}
		m = cur
	} else {
		cur, ok := g.members[g.static[*req.InstanceID]]
		if !ok {
			return errResp(resp, kerr.UnknownMemberID.Code, fmt.Sprintf("Instance id %s is unknown.", *req.InstanceID)), nil
		}
		if cur.ID != req.MemberID {
			return errResp(resp, kerr.FencedInstanceID.Code, fmt.Sprintf(
				"Static member %s with instance id %s is fenced by existing member %s.", req.MemberID, *req.InstanceID, cur.ID)), nil
		}
		m = cur
	}
	resp.MemberID = kmsg.StringPtr(req.MemberID)
	resp.MemberEpoch = req.MemberEpoch
	if req.MemberEpoch == EpochStaticLeave && m.isStatic() {
		// The member keeps its partitions (no rebalance) until it comes
		// back with a new member id or its session expires.
		m.setEpoch(EpochStaticLeave)
		m.rebalanceDeadline = time.Time{}
		return resp, []Record{currentAssignmentRecord(g.id, m)}
	}
	return resp, g.fence(m, hc.Topics)
}
