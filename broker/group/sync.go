package group

// SyncGroup: followers wait for the leader's assignment; the leader's
// SyncGroup persists the group (GroupMetadataValue with every member's
// assignment) and the group becomes Stable once that is in the log.
// Every member is answered only after the write is durable.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SyncGroup serves a SyncGroup request; followers block until the leader
// has synced.
func (c *Coordinator) SyncGroup(req *kmsg.SyncGroupRequest) *kmsg.SyncGroupResponse {
	resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
	r := c.sync(req)
	resp.ErrorCode = r.code
	resp.MemberAssignment = r.assignment
	if resp.MemberAssignment == nil {
		resp.MemberAssignment = []byte{}
	}
	if req.Version >= 5 && r.code == 0 {
		resp.ProtocolType, resp.Protocol = r.protocolType, r.protocolName
	}
	return resp
}

func (c *Coordinator) sync(req *kmsg.SyncGroupRequest) syncResult {
	if req.Group == "" {
		return syncResult{code: codeInvalidGroupID}
	}
	s, code := c.lockShard(req.Group)
	if code == codeCoordinatorLoadInProgress {
		// The rebalance state was lost: rejoin without rediscovering the
		// coordinator (older clients do not expect LOAD_IN_PROGRESS here).
		return syncResult{code: codeRebalanceInProgress}
	}
	if code != 0 {
		return syncResult{code: code}
	}
	ch := make(chan syncResult, 1)
	s.syncLocked(req, ch)
	s.mu.Unlock()
	var r syncResult
	select {
	case r = <-ch:
	case <-c.done:
		return syncResult{code: codeNotCoordinator}
	}
	if err := s.waitDurable(r.durableOffset); err != nil {
		return syncResult{code: appendErrCode(err, false)}
	}
	return r
}

func (s *shard) syncLocked(req *kmsg.SyncGroupRequest, ch chan syncResult) {
	reply := func(code int16) { ch <- syncResult{code: code} }
	g := s.groups[req.Group]
	switch {
	case g == nil:
		reply(codeUnknownMemberID)
		return
	case g.is(stateDead):
		reply(codeCoordinatorNotAvailable)
		return
	case g.staticMemberFenced(req.InstanceID, req.MemberID):
		reply(codeFencedInstanceID)
		return
	case !g.has(req.MemberID):
		reply(codeUnknownMemberID)
		return
	case req.Generation != g.generation:
		reply(codeIllegalGeneration)
		return
	case req.ProtocolType != nil && (g.protocolType == nil || *g.protocolType != *req.ProtocolType),
		req.Protocol != nil && (g.protocolName == nil || *g.protocolName != *req.Protocol):
		reply(codeInconsistentGroupProtocol)
		return
	}
	m := g.members[req.MemberID]
	switch g.state {
	case stateEmpty:
		reply(codeUnknownMemberID)
	case statePreparingRebalance:
		reply(codeRebalanceInProgress)
	case stateStable:
		delete(g.pendingSync, m.id)
		ch <- syncResult{protocolType: g.protocolType, protocolName: g.protocolName, assignment: m.assignment}
		s.scheduleHeartbeat(g, m, m.sessionTimeoutMs)
	case stateCompletingRebalance:
		if m.syncCh != nil && m.syncCh != ch {
			m.syncCh <- syncResult{code: codeRebalanceInProgress} // superseded duplicate
		}
		m.syncCh = ch
		delete(g.pendingSync, m.id)
		if g.isLeader(m.id) {
			s.leaderSync(g, req.GroupAssignment)
		}
	}
}

// leaderSync stores the leader's assignment (members it left out get an
// empty one) and completes the rebalance.
func (s *shard) leaderSync(g *classicGroup, given []kmsg.SyncGroupRequestGroupAssignment) {
	assignment := make(map[string][]byte, len(g.members))
	for _, a := range given {
		if g.has(a.MemberID) {
			assignment[a.MemberID] = a.MemberAssignment
		}
	}
	for id := range g.members {
		if _, ok := assignment[id]; !ok {
			assignment[id] = []byte{}
		}
	}
	end, err := s.storeGroupLocked(g, assignment)
	if err != nil {
		s.c.log.Warn("persist group assignment", "group", g.id, "generation", g.generation, "err", err)
		s.resetAndPropagateAssignmentError(g, appendErrCode(err, false))
		s.maybePrepareRebalance(g, "failed to persist the group assignment")
		return
	}
	for id, a := range assignment {
		g.members[id].assignment = a
	}
	s.propagateAssignment(g, 0, end)
	g.transition(stateStable, nowMs())
}
