package group

// Heartbeat and LeaveGroup.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Heartbeat serves a Heartbeat request.
func (c *Coordinator) Heartbeat(req *kmsg.HeartbeatRequest) *kmsg.HeartbeatResponse {
	resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
	resp.ErrorCode = c.heartbeat(req.Group, req.MemberID, req.InstanceID, req.Generation)
	return resp
}

func (c *Coordinator) heartbeat(groupID, memberID string, instanceID *string, generation int32) int16 {
	if groupID == "" {
		return codeInvalidGroupID
	}
	s, code := c.lockShard(groupID)
	if code == codeCoordinatorLoadInProgress {
		return 0 // the group is loading: answer blindly, as Kafka does
	}
	if code != 0 {
		return code
	}
	defer s.mu.Unlock()
	g := s.groups[groupID]
	switch {
	case g == nil:
		return codeUnknownMemberID
	case g.is(stateDead):
		return codeCoordinatorNotAvailable
	case g.staticMemberFenced(instanceID, memberID):
		return codeFencedInstanceID
	case !g.has(memberID):
		return codeUnknownMemberID
	case generation != g.generation:
		return codeIllegalGeneration
	}
	m := g.members[memberID]
	switch g.state {
	case stateCompletingRebalance, stateStable:
		s.scheduleHeartbeat(g, m, m.sessionTimeoutMs)
		return 0
	case statePreparingRebalance:
		s.scheduleHeartbeat(g, m, m.sessionTimeoutMs)
		return codeRebalanceInProgress
	}
	return codeUnknownMemberID
}

// LeaveGroup serves a LeaveGroup request (v0-2: one member; v3+: a batch,
// KIP-345, where a member may be named by instance id alone).
func (c *Coordinator) LeaveGroup(req *kmsg.LeaveGroupRequest) *kmsg.LeaveGroupResponse {
	resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
	type leaving struct {
		memberID   string
		instanceID *string
	}
	var ls []leaving
	if req.Version < 3 {
		ls = append(ls, leaving{memberID: req.MemberID})
	} else {
		for _, m := range req.Members {
			ls = append(ls, leaving{memberID: m.MemberID, instanceID: m.InstanceID})
		}
	}
	codes := make([]int16, len(ls))
	resp.ErrorCode = func() int16 {
		if req.Group == "" {
			return codeInvalidGroupID
		}
		s, code := c.lockShard(req.Group)
		if code != 0 {
			return code
		}
		defer s.mu.Unlock()
		g := s.groups[req.Group]
		if g != nil && g.is(stateDead) {
			return codeCoordinatorNotAvailable
		}
		for i, l := range ls {
			codes[i] = s.leaveLocked(g, l.memberID, l.instanceID)
		}
		return 0
	}()
	if req.Version < 3 {
		if resp.ErrorCode == 0 {
			resp.ErrorCode = codes[0]
		}
		return resp
	}
	if resp.ErrorCode != 0 {
		return resp
	}
	for i, l := range ls {
		rm := kmsg.NewLeaveGroupResponseMember()
		rm.MemberID, rm.InstanceID, rm.ErrorCode = l.memberID, l.instanceID, codes[i]
		resp.Members = append(resp.Members, rm)
	}
	return resp
}

func (s *shard) leaveLocked(g *classicGroup, memberID string, instanceID *string) int16 {
	if g == nil {
		return codeUnknownMemberID
	}
	if memberID == "" {
		// Administrative removal by instance id.
		if instanceID != nil {
			if cur, ok := g.staticMembers[*instanceID]; ok {
				s.removeMemberAndUpdateGroup(g, g.members[cur], "removed by instance id")
				return 0
			}
		}
		return codeUnknownMemberID
	}
	if _, ok := g.pendingMembers[memberID]; ok {
		g.remove(memberID)
		if g.is(statePreparingRebalance) {
			s.maybeCompleteJoin(g)
		}
		return 0
	}
	if g.staticMemberFenced(instanceID, memberID) {
		return codeFencedInstanceID
	}
	if m := g.members[memberID]; m != nil {
		s.removeMemberAndUpdateGroup(g, m, "member left the group")
		return 0
	}
	return codeUnknownMemberID
}
