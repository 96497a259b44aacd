package group

// JoinGroup: Kafka's classic join phase. A join either answers at once or
// registers the member's waiter; the rebalance (rebalance.go) answers all
// waiters when the join phase completes.

import (
	"crypto/rand"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// newMemberJoinTimeoutMs bounds how long a new member's JoinGroup may wait
// in a rebalance (Kafka's NewMemberJoinTimeoutMs).
const newMemberJoinTimeoutMs = 5 * 60 * 1000

// joinArgs is a decoded JoinGroup request.
type joinArgs struct {
	groupID            string
	memberID           string
	instanceID         *string
	clientID           string
	clientHost         string
	rebalanceTimeoutMs int32
	sessionTimeoutMs   int32
	protocolType       string
	protocols          []protocol
	requireKnownMember bool // v4+ (KIP-394)
	supportSkipAssign  bool // v9+ (KIP-814)
	reason             string
}

// JoinGroup serves a JoinGroup request; it blocks until the rebalance it
// takes part in completes.
func (c *Coordinator) JoinGroup(req *kmsg.JoinGroupRequest, clientID, clientHost string) *kmsg.JoinGroupResponse {
	a := joinArgs{
		groupID: req.Group, memberID: req.MemberID, instanceID: req.InstanceID,
		clientID: clientID, clientHost: clientHost,
		rebalanceTimeoutMs: req.RebalanceTimeoutMillis, sessionTimeoutMs: req.SessionTimeoutMillis,
		protocolType: req.ProtocolType, requireKnownMember: req.Version >= 4, supportSkipAssign: req.Version >= 9,
	}
	if req.Version == 0 {
		a.rebalanceTimeoutMs = a.sessionTimeoutMs
	}
	if req.Reason != nil {
		a.reason = *req.Reason
	}
	seen := map[string]bool{}
	for _, p := range req.Protocols {
		if !seen[p.Name] {
			seen[p.Name] = true
			a.protocols = append(a.protocols, protocol{name: p.Name, metadata: p.Metadata})
		}
	}
	r := c.join(a)
	resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
	resp.ErrorCode, resp.Generation, resp.MemberID = r.code, r.generation, r.memberID
	resp.LeaderID, resp.SkipAssignment, resp.Members = r.leaderID, r.skipAssign, r.members
	resp.ProtocolType = r.protocolType
	switch {
	case r.protocolName != nil:
		resp.Protocol = r.protocolName
	case req.Version < 7:
		resp.Protocol = kmsg.StringPtr("") // not nullable before v7
	}
	if req.Version < 5 {
		for i := range resp.Members {
			resp.Members[i].InstanceID = nil
		}
	}
	return resp
}

func (c *Coordinator) join(a joinArgs) joinResult {
	fail := func(code int16) joinResult { return joinResult{code: code, memberID: a.memberID, generation: -1} }
	if a.groupID == "" {
		return fail(codeInvalidGroupID)
	}
	s, code := c.lockShard(a.groupID)
	if code != 0 {
		return fail(code)
	}
	if a.sessionTimeoutMs < c.cfg.MinSessionTimeoutMs || a.sessionTimeoutMs > c.cfg.MaxSessionTimeoutMs {
		s.mu.Unlock()
		return fail(codeInvalidSessionTimeout)
	}
	ch := make(chan joinResult, 1)
	s.joinLocked(a, ch)
	s.mu.Unlock()
	var r joinResult
	select {
	case r = <-ch:
	case <-c.done:
		return fail(codeNotCoordinator)
	}
	if err := s.waitDurable(r.durableOffset); err != nil {
		return joinResult{code: appendErrCode(err, false), memberID: r.memberID, generation: -1}
	}
	return r
}

// joinLocked is Kafka's handleJoinGroup once the coordinator is known;
// the answer arrives on ch, now or when the rebalance completes.
func (s *shard) joinLocked(a joinArgs, ch chan joinResult) {
	reply := func(code int16, memberID string) { ch <- joinResult{code: code, memberID: memberID, generation: -1} }
	if mg := s.modern[a.groupID]; mg != nil {
		if !mg.IsEmpty() {
			reply(codeInconsistentGroupProtocol, a.memberID)
			return
		}
		// An empty KIP-848 group becomes a classic group; its offsets stay.
		if _, err := s.appendLocked(mg.TombstoneRecords()); err != nil {
			reply(appendErrCode(err, false), a.memberID)
			return
		}
		mg.Close()
		delete(s.modern, a.groupID)
	}
	unknown := a.memberID == ""
	g := s.groups[a.groupID]
	if g == nil {
		if !unknown {
			reply(codeUnknownMemberID, a.memberID)
			return
		}
		g = newClassicGroup(a.groupID, nowMs())
		s.groups[a.groupID] = g
	}
	if !s.acceptJoiningMember(g, a.memberID) {
		g.remove(a.memberID)
		if a.instanceID != nil && g.staticMembers[*a.instanceID] == a.memberID {
			delete(g.staticMembers, *a.instanceID)
		}
		reply(codeGroupMaxSizeReached, "")
	} else if unknown {
		s.newMemberJoin(g, a, ch)
	} else {
		s.currentMemberJoin(g, a, ch)
	}
	s.maybeCompleteJoin(g)
}

// acceptJoiningMember applies group.max.size.
func (s *shard) acceptJoiningMember(g *classicGroup, memberID string) bool {
	max := int(s.c.cfg.GroupMaxSize)
	switch g.state {
	case stateEmpty, stateDead:
		return true
	case statePreparingRebalance:
		m := g.members[memberID]
		return m != nil && m.awaitingJoin() || g.numAwaitingJoin < max
	default:
		return g.has(memberID) || len(g.members) < max
	}
}

func (s *shard) newMemberJoin(g *classicGroup, a joinArgs, ch chan joinResult) {
	if g.is(stateDead) {
		ch <- joinResult{code: codeCoordinatorNotAvailable, memberID: a.memberID, generation: -1}
		return
	}
	if !g.supportsProtocols(a.protocolType, a.protocols) {
		ch <- joinResult{code: codeInconsistentGroupProtocol, memberID: a.memberID, generation: -1}
		return
	}
	prefix := a.clientID
	if a.instanceID != nil {
		prefix = *a.instanceID
	}
	newID := prefix + "-" + newUUID()
	if a.instanceID != nil {
		if old, ok := g.staticMembers[*a.instanceID]; ok {
			s.updateStaticMemberAndRebalance(g, old, newID, a, ch)
		} else {
			s.addMemberAndRebalance(g, newID, a, ch)
		}
		return
	}
	if a.requireKnownMember {
		// KIP-394: hand out the id and wait for the member to come back
		// with it (within its session timeout).
		s.addPendingMember(g, newID, a.sessionTimeoutMs)
		ch <- joinResult{code: codeMemberIDRequired, memberID: newID, generation: -1}
		return
	}
	s.addMemberAndRebalance(g, newID, a, ch)
}

func (s *shard) currentMemberJoin(g *classicGroup, a joinArgs, ch chan joinResult) {
	reply := func(code int16) { ch <- joinResult{code: code, memberID: a.memberID, generation: -1} }
	switch {
	case g.is(stateDead):
		reply(codeCoordinatorNotAvailable)
		return
	case !g.supportsProtocols(a.protocolType, a.protocols):
		reply(codeInconsistentGroupProtocol)
		return
	}
	if _, pending := g.pendingMembers[a.memberID]; pending {
		if a.instanceID != nil {
			// Pending members are dynamic; a static id here is a client
			// bug (Kafka throws): treat the member as unknown.
			reply(codeUnknownMemberID)
			return
		}
		s.addMemberAndRebalance(g, a.memberID, a, ch)
		return
	}
	switch {
	case g.staticMemberFenced(a.instanceID, a.memberID):
		reply(codeFencedInstanceID)
		return
	case !g.has(a.memberID) || a.instanceID != nil && !g.hasStaticMember(a.instanceID):
		reply(codeUnknownMemberID)
		return
	}
	m := g.members[a.memberID]
	current := func() joinResult {
		r := joinResult{memberID: m.id, generation: g.generation, protocolType: g.protocolType, protocolName: g.protocolName, leaderID: g.leaderID}
		if g.isLeader(m.id) {
			r.members = g.currentMemberMetadata()
		}
		return r
	}
	switch g.state {
	case statePreparingRebalance:
		s.updateMemberAndRebalance(g, m, a, ch, "member joining during PreparingRebalance")
	case stateCompletingRebalance:
		if m.matches(a.protocols) {
			// It missed the JoinGroup answer: repeat it.
			ch <- current()
		} else {
			s.updateMemberAndRebalance(g, m, a, ch, "member changed its metadata during CompletingRebalance")
		}
	case stateStable:
		if g.isLeader(m.id) || !m.matches(a.protocols) {
			// The leader rejoining forces a rebalance (it may have seen a
			// metadata change the others have not).
			s.updateMemberAndRebalance(g, m, a, ch, "leader rejoined or member changed its metadata during Stable")
		} else {
			r := current()
			r.members = nil
			ch <- r
		}
	default: // Empty cannot have members; answer so the client resets
		reply(codeUnknownMemberID)
	}
}

func (s *shard) addMemberAndRebalance(g *classicGroup, memberID string, a joinArgs, ch chan joinResult) {
	m := &member{
		id: memberID, instanceID: a.instanceID, clientID: a.clientID, clientHost: a.clientHost,
		rebalanceTimeoutMs: a.rebalanceTimeoutMs, sessionTimeoutMs: a.sessionTimeoutMs,
		protocolType: a.protocolType, protocols: a.protocols, joinCh: ch, isNew: true,
	}
	if g.is(statePreparingRebalance) && g.generation == 0 {
		g.newMemberAdded = true
	}
	g.add(m)
	// New members cannot heartbeat yet; bound their wait instead.
	s.scheduleHeartbeat(g, m, newMemberJoinTimeoutMs)
	s.maybePrepareRebalance(g, fmt.Sprintf("adding new member %s", memberID))
}

func (s *shard) updateMemberAndRebalance(g *classicGroup, m *member, a joinArgs, ch chan joinResult, reason string) {
	g.updateMember(m, a.protocols, a.rebalanceTimeoutMs, a.sessionTimeoutMs, ch)
	s.prepareRebalance(g, reason)
}

// updateStaticMemberAndRebalance: a static member rejoined with a new
// member id. In a Stable group whose selected protocol would not change,
// it takes over the old member's place and assignment without a
// rebalance; otherwise the group rebalances.
func (s *shard) updateStaticMemberAndRebalance(g *classicGroup, oldID, newID string, a joinArgs, ch chan joinResult) {
	oldLeader := g.leaderID
	m := g.replaceStaticMember(*a.instanceID, oldID, newID)
	s.scheduleHeartbeat(g, m, m.sessionTimeoutMs)
	oldProtocols, oldRebalance, oldSession := m.protocols, m.rebalanceTimeoutMs, m.sessionTimeoutMs
	g.updateMember(m, a.protocols, a.rebalanceTimeoutMs, a.sessionTimeoutMs, ch)
	switch g.state {
	case stateStable:
		if g.protocolName == nil || g.selectProtocol() != *g.protocolName {
			s.maybePrepareRebalance(g, "static member rejoined with a change of protocol")
			return
		}
		end, err := s.storeGroupLocked(g, nil)
		if err != nil {
			s.c.log.Warn("persist static member", "group", g.id, "err", err)
			g.updateMember(m, oldProtocols, oldRebalance, oldSession, nil)
			m = g.replaceStaticMember(*a.instanceID, newID, oldID)
			s.scheduleHeartbeat(g, m, m.sessionTimeoutMs)
			ch <- joinResult{code: appendErrCode(err, false), generation: g.generation,
				protocolType: g.protocolType, protocolName: g.protocolName, leaderID: oldLeader}
			return
		}
		r := joinResult{memberID: newID, generation: g.generation, protocolType: g.protocolType,
			protocolName: g.protocolName, leaderID: oldLeader, durableOffset: end}
		if a.supportSkipAssign {
			// v9+ (KIP-814): the leader learns it leads but skips the
			// assignment, which a Stable group would ignore.
			r.leaderID = g.leaderID
			if g.isLeader(newID) {
				r.members, r.skipAssign = g.currentMemberMetadata(), true
			}
		}
		g.invokeJoin(m, r)
	case stateCompletingRebalance:
		// The leader may have assigned to the old member id: rebalance.
		s.prepareRebalance(g, "static member rejoined during CompletingRebalance")
	}
	// PreparingRebalance: it simply waits for the join to complete.
}

// addPendingMember registers a KIP-394 member id that must rejoin within
// the session timeout.
func (s *shard) addPendingMember(g *classicGroup, memberID string, sessionTimeoutMs int32) {
	g.pendingSeq++
	seq := g.pendingSeq
	g.pendingMembers[memberID] = seq
	s.afterFunc(ms(sessionTimeoutMs), func() {
		if s.groups[g.id] != g || g.pendingMembers[memberID] != seq {
			return
		}
		g.remove(memberID)
		if g.is(statePreparingRebalance) {
			s.maybeCompleteJoin(g)
		}
	})
}

// newUUID is a random (v4) UUID in Java's text form, as Kafka's member
// ids use.
func newUUID() string {
	var b [16]byte
	rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}
