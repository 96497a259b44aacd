package group

// The classic group: members, generation, protocol selection and the
// bookkeeping Kafka's GroupMetadata keeps. All fields are guarded by the
// owning shard's mutex; nothing here does I/O or reads the clock.

import (
	"slices"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

type groupState int8

const (
	stateEmpty groupState = iota
	statePreparingRebalance
	stateCompletingRebalance
	stateStable
	stateDead
)

func (s groupState) String() string {
	switch s {
	case stateEmpty:
		return "Empty"
	case statePreparingRebalance:
		return "PreparingRebalance"
	case stateCompletingRebalance:
		return "CompletingRebalance"
	case stateStable:
		return "Stable"
	}
	return "Dead"
}

type protocol struct {
	name     string
	metadata []byte
}

// joinResult answers a JoinGroup that waited for a rebalance.
type joinResult struct {
	code          int16
	memberID      string
	generation    int32
	protocolType  *string
	protocolName  *string
	leaderID      string
	skipAssign    bool
	members       []kmsg.JoinGroupResponseMember // only for the leader
	durableOffset int64                          // wait until this offset is durable before answering (0 = none)
}

// syncResult answers a SyncGroup that waited for the leader's assignment.
type syncResult struct {
	code          int16
	protocolType  *string
	protocolName  *string
	assignment    []byte
	durableOffset int64
}

type member struct {
	id                 string
	instanceID         *string
	clientID           string
	clientHost         string
	rebalanceTimeoutMs int32
	sessionTimeoutMs   int32
	protocolType       string
	protocols          []protocol
	assignment         []byte

	// joinCh / syncCh are set while a JoinGroup / SyncGroup waits.
	joinCh chan joinResult
	syncCh chan syncResult

	isNew              bool // joined in the current rebalance, has not received a JoinGroup answer
	heartbeatSatisfied bool
	hbSeq              uint64 // identifies the armed session timer; bumped to cancel it
}

func (m *member) awaitingJoin() bool { return m.joinCh != nil }
func (m *member) awaitingSync() bool { return m.syncCh != nil }

// hasSatisfiedHeartbeat is Kafka's rule: members waiting in a rebalance
// are not expired by their session timeout (the rebalance timeout bounds
// them), except new members, which have never been answered.
func (m *member) hasSatisfiedHeartbeat() bool {
	if m.isNew {
		return m.heartbeatSatisfied
	}
	if m.awaitingJoin() || m.awaitingSync() {
		return true
	}
	return m.heartbeatSatisfied
}

func (m *member) metadata(protocolName string) []byte {
	for _, p := range m.protocols {
		if p.name == protocolName {
			return p.metadata
		}
	}
	return nil
}

// matches tells whether protocols are the member's current ones, in order.
func (m *member) matches(protocols []protocol) bool {
	return slices.EqualFunc(m.protocols, protocols, func(a, b protocol) bool {
		return a.name == b.name && string(a.metadata) == string(b.metadata)
	})
}

// vote is the member's most preferred protocol among candidates.
func (m *member) vote(candidates map[string]bool) string {
	for _, p := range m.protocols {
		if candidates[p.name] {
			return p.name
		}
	}
	return ""
}

type classicGroup struct {
	id             string
	state          groupState
	stateTimestamp int64 // ms when the current state began; -1 if unknown (old records)
	protocolType   *string
	protocolName   *string
	generation     int32
	leaderID       string

	members          map[string]*member
	staticMembers    map[string]string // instance id -> member id
	pendingMembers   map[string]uint64 // KIP-394: member ids handed out, not yet joined -> timer seq
	pendingSync      map[string]bool   // members that must still SyncGroup this generation
	numAwaitingJoin  int
	supported        map[string]int // protocol name -> members supporting it
	newMemberAdded   bool
	subscribedTopics map[string]bool // nil = unknown

	// Timers: a seq bumped on every (re)arm or cancel, so a timer that
	// fires late sees it is stale.
	joinSeq     uint64
	joinInitial bool  // the armed join timer is the initial delayed join
	joinRemain  int64 // ms of rebalance timeout left after the initial delay
	syncSeq     uint64
	pendingSeq  uint64 // last KIP-394 pending-member timer handed out
}

func newClassicGroup(id string, nowMs int64) *classicGroup {
	return &classicGroup{
		id:             id,
		state:          stateEmpty,
		stateTimestamp: nowMs,
		members:        map[string]*member{},
		staticMembers:  map[string]string{},
		pendingMembers: map[string]uint64{},
		pendingSync:    map[string]bool{},
		supported:      map[string]int{},
	}
}

func (g *classicGroup) is(s groupState) bool { return g.state == s }

func (g *classicGroup) transition(s groupState, nowMs int64) {
	g.state = s
	g.stateTimestamp = nowMs
}

func (g *classicGroup) has(memberID string) bool { _, ok := g.members[memberID]; return ok }

func (g *classicGroup) isLeader(memberID string) bool {
	return g.leaderID != "" && g.leaderID == memberID
}

func (g *classicGroup) memberOrder() []string {
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

func (g *classicGroup) isConsumerGroup() bool {
	return g.protocolType != nil && *g.protocolType == "consumer"
}

// staticMemberFenced: the instance id is known and mapped to another
// member id.
func (g *classicGroup) staticMemberFenced(instanceID *string, memberID string) bool {
	if instanceID == nil {
		return false
	}
	cur, ok := g.staticMembers[*instanceID]
	return ok && cur != memberID
}

func (g *classicGroup) hasStaticMember(instanceID *string) bool {
	if instanceID == nil {
		return false
	}
	_, ok := g.staticMembers[*instanceID]
	return ok
}

func (g *classicGroup) incSupported(m *member) {
	for _, p := range m.protocols {
		g.supported[p.name]++
	}
}

func (g *classicGroup) decSupported(m *member) {
	for _, p := range m.protocols {
		if g.supported[p.name]--; g.supported[p.name] <= 0 {
			delete(g.supported, p.name)
		}
	}
}

// supportsProtocols: an empty group accepts any non-empty protocol type
// and list; otherwise the type must match and one protocol must be
// supported by every member.
func (g *classicGroup) supportsProtocols(protocolType string, protocols []protocol) bool {
	if g.is(stateEmpty) {
		return protocolType != "" && len(protocols) > 0
	}
	if g.protocolType == nil || *g.protocolType != protocolType {
		return false
	}
	for _, p := range protocols {
		if g.supported[p.name] == len(g.members) {
			return true
		}
	}
	return false
}

func (g *classicGroup) add(m *member) {
	if len(g.members) == 0 {
		pt := m.protocolType
		g.protocolType = &pt
	}
	if g.leaderID == "" {
		g.leaderID = m.id
	}
	g.members[m.id] = m
	g.incSupported(m)
	if m.awaitingJoin() {
		g.numAwaitingJoin++
	}
	if m.instanceID != nil {
		g.staticMembers[*m.instanceID] = m.id
	}
	delete(g.pendingMembers, m.id)
}

func (g *classicGroup) remove(memberID string) {
	if m, ok := g.members[memberID]; ok {
		g.decSupported(m)
		if m.awaitingJoin() {
			g.numAwaitingJoin--
		}
		if m.instanceID != nil && g.staticMembers[*m.instanceID] == memberID {
			delete(g.staticMembers, *m.instanceID)
		}
		delete(g.members, memberID)
		m.hbSeq++ // cancel its session timer
	}
	if g.isLeader(memberID) {
		g.leaderID = ""
		if ids := g.memberOrder(); len(ids) > 0 {
			g.leaderID = ids[0]
		}
	}
	delete(g.pendingMembers, memberID)
	delete(g.pendingSync, memberID)
}

// updateMember replaces the member's protocols and timeouts and its join
// waiter (nil: no longer waiting).
func (g *classicGroup) updateMember(m *member, protocols []protocol, rebalanceTimeoutMs, sessionTimeoutMs int32, joinCh chan joinResult) {
	g.decSupported(m)
	m.protocols = protocols
	g.incSupported(m)
	m.rebalanceTimeoutMs, m.sessionTimeoutMs = rebalanceTimeoutMs, sessionTimeoutMs
	if m.joinCh != nil && joinCh != nil && m.joinCh != joinCh {
		// A duplicate JoinGroup replaces an older one still waiting; the
		// older request's client has given up on it.
		m.joinCh <- joinResult{code: codeRebalanceInProgress, memberID: m.id, generation: -1}
	}
	switch {
	case joinCh != nil && !m.awaitingJoin():
		g.numAwaitingJoin++
	case joinCh == nil && m.awaitingJoin():
		g.numAwaitingJoin--
	}
	m.joinCh = joinCh
}

func (g *classicGroup) invokeJoin(m *member, r joinResult) {
	if m.joinCh == nil {
		return
	}
	m.joinCh <- r
	m.joinCh = nil
	g.numAwaitingJoin--
}

func (g *classicGroup) invokeSync(m *member, r syncResult) bool {
	if m.syncCh == nil {
		return false
	}
	m.syncCh <- r
	m.syncCh = nil
	return true
}

// replaceStaticMember gives the member of an instance id a new member id,
// fencing any request the old one has waiting.
func (g *classicGroup) replaceStaticMember(instanceID, oldID, newID string) *member {
	m := g.members[oldID]
	delete(g.members, oldID)
	g.invokeJoin(m, joinResult{code: codeFencedInstanceID, memberID: oldID, generation: -1})
	g.invokeSync(m, syncResult{code: codeFencedInstanceID})
	m.id = newID
	g.members[newID] = m
	if g.leaderID == oldID {
		g.leaderID = newID
	}
	if g.pendingSync[oldID] {
		delete(g.pendingSync, oldID)
		g.pendingSync[newID] = true
	}
	g.staticMembers[instanceID] = newID
	return m
}

func (g *classicGroup) hasAllMembersJoined() bool {
	return len(g.members) == g.numAwaitingJoin && len(g.pendingMembers) == 0
}

func (g *classicGroup) rebalanceTimeoutMs() int32 {
	var t int32
	for _, m := range g.members {
		t = max(t, m.rebalanceTimeoutMs)
	}
	return t
}

func (g *classicGroup) canRebalance() bool {
	return g.is(stateStable) || g.is(stateCompletingRebalance) || g.is(stateEmpty)
}

// maybeElectNewJoinedLeader keeps the leader if it rejoined, else picks a
// member that did; false if none did.
func (g *classicGroup) maybeElectNewJoinedLeader() bool {
	if g.leaderID == "" {
		return false
	}
	if l := g.members[g.leaderID]; l != nil && l.awaitingJoin() {
		return true
	}
	for _, id := range g.memberOrder() {
		if g.members[id].awaitingJoin() {
			g.leaderID = id
			return true
		}
	}
	return false
}

// selectProtocol picks, among the protocols every member supports, the
// one most members prefer (ties by name, for determinism).
func (g *classicGroup) selectProtocol() string {
	candidates := map[string]bool{}
	for name, n := range g.supported {
		if n == len(g.members) {
			candidates[name] = true
		}
	}
	votes := map[string]int{}
	for _, m := range g.members {
		if v := m.vote(candidates); v != "" {
			votes[v]++
		}
	}
	best, bestN := "", -1
	for name, n := range votes {
		if n > bestN || n == bestN && name < best {
			best, bestN = name, n
		}
	}
	return best
}

// initNextGeneration starts a new generation after the join phase.
func (g *classicGroup) initNextGeneration(nowMs int64) {
	g.generation++
	if len(g.members) > 0 {
		p := g.selectProtocol()
		g.protocolName = &p
		g.transition(stateCompletingRebalance, nowMs)
	} else {
		g.protocolName = nil
		g.transition(stateEmpty, nowMs)
	}
	g.subscribedTopics = g.computeSubscribedTopics()
	clear(g.pendingSync)
}

// computeSubscribedTopics parses the consumer protocol's subscriptions
// (only for protocol type "consumer"); nil if unknown or unparseable.
func (g *classicGroup) computeSubscribedTopics() map[string]bool {
	if !g.isConsumerGroup() || g.protocolName == nil {
		return nil
	}
	topics := map[string]bool{}
	for _, m := range g.members {
		md := m.metadata(*g.protocolName)
		if len(md) == 0 {
			return nil
		}
		var s kmsg.ConsumerMemberMetadata
		if err := s.ReadFrom(md); err != nil {
			return nil
		}
		for _, t := range s.Topics {
			topics[t] = true
		}
	}
	return topics
}

func (g *classicGroup) isSubscribedTo(topic string) bool {
	return g.subscribedTopics != nil && g.subscribedTopics[topic]
}

// currentMemberMetadata is what the leader receives in its JoinGroup
// response.
func (g *classicGroup) currentMemberMetadata() []kmsg.JoinGroupResponseMember {
	out := make([]kmsg.JoinGroupResponseMember, 0, len(g.members))
	for _, id := range g.memberOrder() {
		m := g.members[id]
		jm := kmsg.NewJoinGroupResponseMember()
		jm.MemberID, jm.InstanceID = m.id, m.instanceID
		if g.protocolName != nil {
			jm.ProtocolMetadata = m.metadata(*g.protocolName)
		}
		out = append(out, jm)
	}
	return out
}

// matchState compares a ListGroups state filter (case-insensitive).
func matchState(filter []string, state string) bool {
	if len(filter) == 0 {
		return true
	}
	for _, f := range filter {
		if strings.EqualFold(f, state) {
			return true
		}
	}
	return false
}
