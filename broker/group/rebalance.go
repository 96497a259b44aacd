package group

// The rebalance: the join phase (PreparingRebalance, bounded by the
// rebalance timeout, or group.initial.rebalance.delay.ms for a new group),
// the sync phase (CompletingRebalance, bounded by the rebalance timeout),
// and the session timers that expire members.

import (
	"time"
)

func ms(v int32) time.Duration { return time.Duration(v) * time.Millisecond }

func (s *shard) maybePrepareRebalance(g *classicGroup, reason string) {
	if g.canRebalance() {
		s.prepareRebalance(g, reason)
	}
}

// prepareRebalance moves the group to PreparingRebalance: members waiting
// for their assignment are told to rejoin, and the join phase is armed.
func (s *shard) prepareRebalance(g *classicGroup, reason string) {
	if g.is(stateCompletingRebalance) {
		s.resetAndPropagateAssignmentError(g, codeRebalanceInProgress)
	}
	g.syncSeq++ // cancel the pending-sync timer
	initial := g.is(stateEmpty)
	g.transition(statePreparingRebalance, nowMs())
	s.c.log.Debug("preparing to rebalance group", "group", g.id, "generation", g.generation, "reason", reason)
	if initial {
		delay := s.c.cfg.InitialRebalanceDelayMs
		s.armJoin(g, delay, true, max(int64(g.rebalanceTimeoutMs())-int64(delay), 0))
		return
	}
	s.armJoin(g, g.rebalanceTimeoutMs(), false, 0)
	s.maybeCompleteJoin(g)
}

func (s *shard) armJoin(g *classicGroup, delayMs int32, initial bool, remainMs int64) {
	g.joinSeq++
	seq := g.joinSeq
	g.joinInitial, g.joinRemain = initial, remainMs
	s.afterFunc(ms(delayMs), func() {
		if s.groups[g.id] != g || g.joinSeq != seq || !g.is(statePreparingRebalance) {
			return
		}
		if g.joinInitial && g.newMemberAdded && g.joinRemain != 0 {
			// New members keep arriving: wait another delay, within
			// the rebalance timeout.
			g.newMemberAdded = false
			d := min(int64(s.c.cfg.InitialRebalanceDelayMs), g.joinRemain)
			s.armJoin(g, int32(d), true, max(g.joinRemain-d, 0))
			return
		}
		s.completeJoin(g)
	})
}

// maybeCompleteJoin ends the join phase early once every known member has
// rejoined (never during the initial delay).
func (s *shard) maybeCompleteJoin(g *classicGroup) {
	if g.is(statePreparingRebalance) && !g.joinInitial && g.hasAllMembersJoined() {
		s.completeJoin(g)
	}
}

// completeJoin is Kafka's onCompleteJoin: drop dynamic members that did
// not rejoin, start the next generation, answer every waiting JoinGroup
// (the leader with all members' metadata) and arm the sync phase.
func (s *shard) completeJoin(g *classicGroup) {
	g.joinSeq++
	g.joinInitial = false
	for _, id := range g.memberOrder() {
		m := g.members[id]
		if !m.awaitingJoin() && m.instanceID == nil {
			s.c.log.Debug("removing member that did not rejoin", "group", g.id, "member", id)
			g.invokeSync(m, syncResult{code: codeUnknownMemberID})
			g.remove(id)
		}
	}
	if g.is(stateDead) {
		return
	}
	if !g.maybeElectNewJoinedLeader() && len(g.members) > 0 {
		// Nobody rejoined: wait another rebalance timeout, until session
		// timeouts remove the silent members.
		s.armJoin(g, g.rebalanceTimeoutMs(), false, 0)
		return
	}
	g.initNextGeneration(nowMs())
	if g.is(stateEmpty) {
		if _, err := s.storeGroupLocked(g, nil); err != nil {
			s.c.log.Warn("persist empty group", "group", g.id, "err", err)
		}
		return
	}
	s.c.log.Info("group rebalanced", "group", g.id, "generation", g.generation, "protocol", *g.protocolName, "members", len(g.members))
	for _, id := range g.memberOrder() {
		m := g.members[id]
		r := joinResult{memberID: m.id, generation: g.generation, protocolType: g.protocolType,
			protocolName: g.protocolName, leaderID: g.leaderID}
		if g.isLeader(m.id) {
			r.members = g.currentMemberMetadata()
		}
		g.invokeJoin(m, r)
		s.scheduleHeartbeat(g, m, m.sessionTimeoutMs)
		m.isNew = false
		g.pendingSync[m.id] = true
	}
	s.schedulePendingSync(g)
}

// schedulePendingSync removes members that do not SyncGroup within the
// rebalance timeout, and rebalances.
func (s *shard) schedulePendingSync(g *classicGroup) {
	g.syncSeq++
	seq, gen := g.syncSeq, g.generation
	s.afterFunc(ms(g.rebalanceTimeoutMs()), func() {
		if s.groups[g.id] != g || g.syncSeq != seq || g.generation != gen || len(g.pendingSync) == 0 {
			return
		}
		if !g.is(stateCompletingRebalance) && !g.is(stateStable) {
			return
		}
		for id := range g.pendingSync {
			s.c.log.Debug("removing member that did not sync", "group", g.id, "member", id)
			g.remove(id)
		}
		s.prepareRebalance(g, "members did not send SyncGroup in time")
	})
}

// resetAndPropagateAssignmentError clears assignments and answers every
// waiting SyncGroup with code.
func (s *shard) resetAndPropagateAssignmentError(g *classicGroup, code int16) {
	for _, m := range g.members {
		m.assignment = nil
	}
	s.propagateAssignment(g, code, 0)
}

func (s *shard) propagateAssignment(g *classicGroup, code int16, durable int64) {
	for _, id := range g.memberOrder() {
		m := g.members[id]
		r := syncResult{code: code, durableOffset: durable}
		if code == 0 {
			r.protocolType, r.protocolName, r.assignment = g.protocolType, g.protocolName, m.assignment
		}
		if g.invokeSync(m, r) {
			// Its session may have lapsed while it waited: restart it.
			s.scheduleHeartbeat(g, m, m.sessionTimeoutMs)
		}
	}
}

// scheduleHeartbeat satisfies the member's current heartbeat expectation
// and expects the next one within timeoutMs.
func (s *shard) scheduleHeartbeat(g *classicGroup, m *member, timeoutMs int32) {
	m.heartbeatSatisfied = false
	m.hbSeq++
	seq := m.hbSeq
	s.afterFunc(ms(timeoutMs), func() {
		if s.groups[g.id] != g || g.members[m.id] != m || m.hbSeq != seq {
			return
		}
		if !m.hasSatisfiedHeartbeat() {
			s.c.log.Debug("member session expired", "group", g.id, "member", m.id)
			s.removeMemberAndUpdateGroup(g, m, "session timeout")
		}
	})
}

// removeMemberAndUpdateGroup removes a member (session expiry, leave) and
// rebalances the rest.
func (s *shard) removeMemberAndUpdateGroup(g *classicGroup, m *member, reason string) {
	g.invokeJoin(m, joinResult{code: codeUnknownMemberID, generation: -1})
	g.invokeSync(m, syncResult{code: codeUnknownMemberID})
	g.remove(m.id)
	switch g.state {
	case stateStable, stateCompletingRebalance:
		s.maybePrepareRebalance(g, reason)
	case statePreparingRebalance:
		s.maybeCompleteJoin(g)
	}
}
