package group

// A next-generation (KIP-848) consumer group: the group epoch (bumped when
// membership, subscriptions or subscribed topic metadata change), the
// target assignment computed by a server-side assignor for that epoch
// (the assignment epoch), and each member reconciling toward its target.
//
// ConsumerGroup is not safe for concurrent use: its owner (the
// coordinator's per-partition lock) serializes calls. Time is an input
// (now), never read from a clock, so tests drive it by hand.

import (
	"math"
	"sort"
	"time"
)

// ConsumerGroupConfig holds the broker settings of consumer groups, with
// Kafka's names and defaults.
type ConsumerGroupConfig struct {
	// SessionTimeout is group.consumer.session.timeout.ms (45000).
	SessionTimeout time.Duration
	// HeartbeatInterval is group.consumer.heartbeat.interval.ms (5000).
	HeartbeatInterval time.Duration
	// MaxSize is group.consumer.max.size (unbounded).
	MaxSize int
	// Assignors is group.consumer.assignors ("uniform,range"); the first
	// is the default.
	Assignors []string
}

// DefaultConsumerGroupConfig returns Kafka's defaults.
func DefaultConsumerGroupConfig() ConsumerGroupConfig {
	return ConsumerGroupConfig{
		SessionTimeout:    45 * time.Second,
		HeartbeatInterval: 5 * time.Second,
		MaxSize:           math.MaxInt32,
		Assignors:         []string{AssignorUniform, AssignorRange},
	}
}

func (c ConsumerGroupConfig) withDefaults() ConsumerGroupConfig {
	d := DefaultConsumerGroupConfig()
	if c.SessionTimeout <= 0 {
		c.SessionTimeout = d.SessionTimeout
	}
	if c.HeartbeatInterval <= 0 {
		c.HeartbeatInterval = d.HeartbeatInterval
	}
	if c.MaxSize <= 0 {
		c.MaxSize = d.MaxSize
	}
	var known []string
	for _, a := range c.Assignors {
		if _, ok := LookupAssignor(a); ok {
			known = append(known, a)
		}
	}
	if len(known) == 0 {
		known = d.Assignors
	}
	c.Assignors = known
	return c
}

func (c ConsumerGroupConfig) supportsAssignor(name string) bool {
	for _, a := range c.Assignors {
		if a == name {
			return true
		}
	}
	return false
}

// ConsumerGroup is one consumer group.
type ConsumerGroup struct {
	id  string
	cfg ConsumerGroupConfig

	epoch           int32
	assignmentEpoch int32
	metadataHash    int64
	createdMs       int64
	deleted         bool // a tombstone of the group was replayed

	members map[string]*ConsumerMember
	static  map[string]string // instance id -> member id
	target  map[string]TopicPartitions
	owners  map[[16]byte]map[int32]string
	// assignor is the assignor used for the last target assignment.
	assignor string
	// topicIDs resolves subscribed topic names (offset commits name
	// topics; assignments use ids).
	topicIDs map[string][16]byte

	env   ConsumerGroupEnv
	timer *time.Timer
	armed time.Time
}

// NewConsumerGroup returns an empty group.
func NewConsumerGroup(id string, cfg ConsumerGroupConfig, now time.Time) *ConsumerGroup {
	return &ConsumerGroup{
		id:        id,
		cfg:       cfg.withDefaults(),
		createdMs: now.UnixMilli(),
		members:   map[string]*ConsumerMember{},
		static:    map[string]string{},
		target:    map[string]TopicPartitions{},
		owners:    map[[16]byte]map[int32]string{},
	}
}

// ID is the group id.
func (g *ConsumerGroup) ID() string { return g.id }

// Epoch is the group epoch.
func (g *ConsumerGroup) Epoch() int32 { return g.epoch }

// AssignmentEpoch is the epoch of the current target assignment.
func (g *ConsumerGroup) AssignmentEpoch() int32 { return g.assignmentEpoch }

// NumMembers counts members, including static members that left
// temporarily (epoch -2) and whose session has not expired.
func (g *ConsumerGroup) NumMembers() int { return len(g.members) }

// IsEmpty reports whether the group has no members.
func (g *ConsumerGroup) IsEmpty() bool { return len(g.members) == 0 }

// IsDead reports whether a tombstone deleted the group.
func (g *ConsumerGroup) IsDead() bool { return g.deleted }

// Member returns a member by id.
func (g *ConsumerGroup) Member(id string) (*ConsumerMember, bool) {
	m, ok := g.members[id]
	return m, ok
}

// MemberIDs returns the member ids, sorted.
func (g *ConsumerGroup) MemberIDs() []string {
	ids := make([]string, 0, len(g.members))
	for id := range g.members {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Target returns a member's target assignment.
func (g *ConsumerGroup) Target(memberID string) TopicPartitions { return g.target[memberID] }

// StateString is the group state as ListGroups and ConsumerGroupDescribe
// show it: Empty, Assigning, Reconciling or Stable (Dead once deleted).
func (g *ConsumerGroup) StateString() string {
	switch {
	case g.deleted:
		return "Dead"
	case len(g.members) == 0:
		return "Empty"
	case g.epoch != g.assignmentEpoch:
		return "Assigning"
	}
	for _, m := range g.members {
		if !m.reconciledTo(g.assignmentEpoch) {
			return "Reconciling"
		}
	}
	return "Stable"
}

// IsSubscribedTo reports whether a member subscribes to topic by name, or
// through a regular expression (for OffsetDelete's
// GROUP_SUBSCRIBED_TO_TOPIC).
func (g *ConsumerGroup) IsSubscribedTo(topic string) bool {
	for _, m := range g.members {
		for _, n := range m.SubscribedTopicNames {
			if n == topic {
				return true
			}
		}
		if re := memberRegex(m); re != nil && re.MatchString(topic) {
			return true
		}
	}
	return false
}

// owner returns the member holding a partition (assigned or pending
// revocation).
func (g *ConsumerGroup) owner(id [16]byte, p int32) (string, bool) {
	o, ok := g.owners[id][p]
	return o, ok
}

func (g *ConsumerGroup) setOwners(m *ConsumerMember, own bool) {
	for _, tp := range []TopicPartitions{m.Assigned, m.PendingRevocation} {
		for id, ps := range tp {
			for _, p := range ps {
				if own {
					if g.owners[id] == nil {
						g.owners[id] = map[int32]string{}
					}
					g.owners[id][p] = m.ID
				} else if g.owners[id][p] == m.ID {
					delete(g.owners[id], p)
					if len(g.owners[id]) == 0 {
						delete(g.owners, id)
					}
				}
			}
		}
	}
}

// reconcileMember runs reconciliation for m, keeping the ownership index
// current; it returns whether m changed.
func (g *ConsumerGroup) reconcileMember(m *ConsumerMember, owned TopicPartitions) bool {
	if m.reconciledTo(g.assignmentEpoch) {
		return false
	}
	g.setOwners(m, false)
	changed := reconcile(m, g.assignmentEpoch, g.target[m.ID], owned, g.owner)
	g.setOwners(m, true)
	return changed
}

// preferredAssignor is the assignor most members ask for, else the
// default (Kafka's computePreferredServerAssignor).
func (g *ConsumerGroup) preferredAssignor() string {
	counts := map[string]int{}
	for _, m := range g.members {
		if m.ServerAssignor != nil && g.cfg.supportsAssignor(*m.ServerAssignor) {
			counts[*m.ServerAssignor]++
		}
	}
	best, bestN := g.cfg.Assignors[0], 0
	for _, name := range g.cfg.Assignors {
		if counts[name] > bestN {
			best, bestN = name, counts[name]
		}
	}
	return best
}

// computeTarget runs the assignor for the group epoch and returns the
// records of what changed.
func (g *ConsumerGroup) computeTarget(topics TopicLookup) []Record {
	name := g.preferredAssignor()
	as, _ := LookupAssignor(name)
	spec := AssignSpec{Partitions: map[[16]byte]int32{}}
	for _, id := range g.MemberIDs() {
		m := g.members[id]
		am := AssignMember{ID: id, Current: g.target[id]}
		if m.InstanceID != nil {
			am.InstanceID = *m.InstanceID
		}
		if m.RackID != nil {
			am.Rack = *m.RackID
		}
		for _, t := range memberTopics(m, topics) {
			am.Topics = append(am.Topics, t.ID)
			spec.Partitions[t.ID] = t.Partitions
		}
		spec.Members = append(spec.Members, am)
	}
	next := as.Assign(spec)
	var recs []Record
	for _, id := range g.MemberIDs() {
		if old, ok := g.target[id]; !ok || !old.Equal(next[id]) {
			recs = append(recs, targetMemberRecord(g.id, id, next[id]))
		}
	}
	for id := range g.target {
		if _, ok := g.members[id]; !ok {
			recs = append(recs, tombstone(targetMemberKey(g.id, id)))
		}
	}
	g.target = next
	g.assignmentEpoch = g.epoch
	g.assignor = name
	recs = append(recs, targetMetadataRecord(g.id, g.assignmentEpoch))
	return recs
}

// bumpEpoch moves the group to a new epoch with the current subscription
// metadata.
func (g *ConsumerGroup) bumpEpoch(topics TopicLookup) Record {
	g.epoch++
	if topics != nil {
		g.metadataHash, g.topicIDs = subscriptionHash(g.members, topics)
	}
	return g.metadataRecord()
}

func (g *ConsumerGroup) metadataRecord() Record {
	return groupMetadataRecord(g.id, g.epoch, g.metadataHash, g.createdMs)
}

// removeMember forgets m and returns its tombstones, in Kafka's order
// (current assignment, target assignment, member metadata).
func (g *ConsumerGroup) removeMember(m *ConsumerMember) []Record {
	g.setOwners(m, false)
	delete(g.members, m.ID)
	delete(g.target, m.ID)
	if m.InstanceID != nil && g.static[*m.InstanceID] == m.ID {
		delete(g.static, *m.InstanceID)
	}
	return []Record{
		tombstone(currentAssignmentKey(g.id, m.ID)),
		tombstone(targetMemberKey(g.id, m.ID)),
		tombstone(memberMetadataKey(g.id, m.ID)),
	}
}

// fence removes m from the group and bumps the group epoch, so that the
// others get a new target assignment on their next heartbeat.
func (g *ConsumerGroup) fence(m *ConsumerMember, topics TopicLookup) []Record {
	recs := g.removeMember(m)
	return append(recs, g.bumpEpoch(topics))
}

// NextDeadline is the earliest session or rebalance deadline, zero if the
// group has no members.
func (g *ConsumerGroup) NextDeadline() time.Time {
	var next time.Time
	for _, m := range g.members {
		for _, d := range []time.Time{m.sessionDeadline, m.rebalanceDeadline} {
			if !d.IsZero() && (next.IsZero() || d.Before(next)) {
				next = d
			}
		}
	}
	return next
}

// Expire fences members whose session timed out, or that did not revoke
// partitions within their rebalance timeout. It returns the records to
// persist and the ids of fenced members.
func (g *ConsumerGroup) Expire(now time.Time, topics TopicLookup) ([]Record, []string) {
	var recs []Record
	var fenced []string
	for _, id := range g.MemberIDs() {
		m := g.members[id]
		session := !m.sessionDeadline.IsZero() && !now.Before(m.sessionDeadline)
		rebalance := m.State == MemberUnrevokedPartitions && !m.rebalanceDeadline.IsZero() && !now.Before(m.rebalanceDeadline)
		if session || rebalance {
			recs = append(recs, g.fence(m, topics)...)
			fenced = append(fenced, id)
		}
	}
	g.rearm()
	return recs, fenced
}

// TombstoneRecords deletes the group from __consumer_offsets (DeleteGroups,
// or conversion to a classic group): tombstones for every member, the
// target assignment and the group.
func (g *ConsumerGroup) TombstoneRecords() []Record {
	var recs []Record
	for _, id := range g.MemberIDs() {
		recs = append(recs,
			tombstone(currentAssignmentKey(g.id, id)),
			tombstone(targetMemberKey(g.id, id)),
			tombstone(memberMetadataKey(g.id, id)))
	}
	return append(recs,
		tombstone(targetMetadataKey(g.id)),
		tombstone(groupMetadataKey(g.id)))
}
