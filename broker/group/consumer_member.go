package group

// A member of a next-generation (KIP-848) consumer group and its
// reconciliation: how the member's current assignment moves toward the
// group's target assignment without two members ever owning a partition
// at once (Kafka's CurrentAssignmentBuilder).
//
// A partition leaving a member is first listed as pending revocation; the
// member stays at its epoch in UNREVOKED_PARTITIONS until it reports (in
// its heartbeat's owned partitions) that it let them go. Only then does it
// move to the target epoch. A partition that the target gives to a member
// while another member still holds it (pending revocation there) is held
// back: the member moves to the target epoch in UNRELEASED_PARTITIONS and
// gets the partition on a later heartbeat, once it is free.

import (
	"slices"
	"time"
)

// MemberState is Kafka's MemberState, with its persisted values.
type MemberState int8

const (
	MemberStable               MemberState = 0
	MemberUnrevokedPartitions  MemberState = 2
	MemberUnreleasedPartitions MemberState = 3
	MemberUnknown              MemberState = 127
)

func (s MemberState) String() string {
	switch s {
	case MemberStable:
		return "stable"
	case MemberUnrevokedPartitions:
		return "unrevoked_partitions"
	case MemberUnreleasedPartitions:
		return "unreleased_partitions"
	}
	return "unknown"
}

// Member epochs with a meaning in ConsumerGroupHeartbeat requests.
const (
	EpochJoin        int32 = 0
	EpochLeave       int32 = -1
	EpochStaticLeave int32 = -2
)

// ConsumerMember is one member of a consumer group.
type ConsumerMember struct {
	ID         string
	InstanceID *string
	RackID     *string
	ClientID   string
	ClientHost string

	SubscribedTopicNames []string // sorted, no duplicates
	SubscribedTopicRegex *string
	ServerAssignor       *string
	RebalanceTimeoutMs   int32

	Epoch         int32
	PreviousEpoch int32
	State         MemberState
	// Assigned are the partitions the member may consume.
	Assigned TopicPartitions
	// PendingRevocation are partitions the member must give up; it still
	// owns them until it says otherwise.
	PendingRevocation TopicPartitions
	// AssignEpochs is the member epoch at which each partition of
	// Assigned and PendingRevocation was given to the member (KIP-1251:
	// an offset commit at an older epoch is accepted for it).
	AssignEpochs map[[16]byte]map[int32]int32

	sessionDeadline   time.Time
	rebalanceDeadline time.Time // zero unless UNREVOKED_PARTITIONS
}

func newConsumerMember(id string) *ConsumerMember {
	return &ConsumerMember{
		ID:                 id,
		RebalanceTimeoutMs: -1,
		Assigned:           TopicPartitions{},
		PendingRevocation:  TopicPartitions{},
		AssignEpochs:       map[[16]byte]map[int32]int32{},
	}
}

// isStatic reports whether the member has an instance id.
func (m *ConsumerMember) isStatic() bool { return m.InstanceID != nil }

// reconciledTo reports whether the member is done with target epoch e.
func (m *ConsumerMember) reconciledTo(e int32) bool {
	return m.State == MemberStable && m.Epoch == e
}

// ownsAny reports whether owned (what the member says it holds; nil =
// not reported, assume everything) holds any partition of set.
func ownsAny(owned, set TopicPartitions) bool {
	if set.Len() == 0 {
		return false
	}
	if owned == nil {
		return true
	}
	for id, ps := range set {
		for _, p := range ps {
			if owned.Has(id, p) {
				return true
			}
		}
	}
	return false
}

// ownerFunc returns the member currently holding a partition.
type ownerFunc func(id [16]byte, p int32) (string, bool)

// reconcile moves m toward target at targetEpoch; owned is what the member
// reported (nil if it did not). It returns whether m changed.
func reconcile(m *ConsumerMember, targetEpoch int32, target, owned TopicPartitions, owner ownerFunc) bool {
	switch m.State {
	case MemberStable:
		if m.Epoch == targetEpoch {
			return false
		}
		return nextAssignment(m, m.Epoch, targetEpoch, target, owned, owner)
	case MemberUnrevokedPartitions:
		if ownsAny(owned, m.PendingRevocation) {
			return false
		}
		return nextAssignment(m, min(m.Epoch+1, targetEpoch), targetEpoch, target, owned, owner)
	default: // unreleased partitions, or unknown after a bad record
		return nextAssignment(m, m.Epoch, targetEpoch, target, owned, owner)
	}
}

func nextAssignment(m *ConsumerMember, epoch, targetEpoch int32, target, owned TopicPartitions, owner ownerFunc) bool {
	kept := TopicPartitions{}
	revoke := TopicPartitions{}
	toAssign := TopicPartitions{}
	unreleased := false
	topics := map[[16]byte]bool{}
	for id := range target {
		topics[id] = true
	}
	for id := range m.Assigned {
		topics[id] = true
	}
	for id := range topics {
		tgt, cur := target[id], m.Assigned[id]
		for _, p := range cur {
			if slices.Contains(tgt, p) {
				kept.add(id, p)
			} else {
				revoke.add(id, p)
			}
		}
		for _, p := range tgt {
			if slices.Contains(cur, p) {
				continue
			}
			if o, held := owner(id, p); held && o != m.ID {
				unreleased = true
				continue
			}
			toAssign.add(id, p)
		}
	}
	before := *m
	switch {
	case revoke.Len() > 0 && ownsAny(owned, revoke):
		m.setEpoch(epoch)
		m.State = MemberUnrevokedPartitions
		m.Assigned, m.PendingRevocation = kept, revoke
	case toAssign.Len() > 0:
		for id, ps := range toAssign {
			for _, p := range ps {
				kept.add(id, p)
			}
		}
		m.setEpoch(targetEpoch)
		m.State = MemberStable
		if unreleased {
			m.State = MemberUnreleasedPartitions
		}
		m.Assigned, m.PendingRevocation = kept, TopicPartitions{}
	default:
		m.setEpoch(targetEpoch)
		m.State = MemberStable
		if unreleased {
			m.State = MemberUnreleasedPartitions
		}
		m.Assigned, m.PendingRevocation = kept, TopicPartitions{}
	}
	m.updateAssignEpochs()
	return before.Epoch != m.Epoch || before.PreviousEpoch != m.PreviousEpoch || before.State != m.State ||
		!before.Assigned.Equal(m.Assigned) || !before.PendingRevocation.Equal(m.PendingRevocation)
}

// setEpoch moves the member to epoch e, remembering the one it leaves.
func (m *ConsumerMember) setEpoch(e int32) {
	if e != m.Epoch {
		m.PreviousEpoch = m.Epoch
	}
	m.Epoch = e
}

// updateAssignEpochs keeps the assignment epoch of partitions the member
// already held and stamps new ones with the current epoch.
func (m *ConsumerMember) updateAssignEpochs() {
	next := map[[16]byte]map[int32]int32{}
	stamp := func(tp TopicPartitions) {
		for id, ps := range tp {
			for _, p := range ps {
				e, ok := m.AssignEpochs[id][p]
				if !ok {
					e = m.Epoch
				}
				if next[id] == nil {
					next[id] = map[int32]int32{}
				}
				next[id][p] = e
			}
		}
	}
	stamp(m.Assigned)
	stamp(m.PendingRevocation)
	m.AssignEpochs = next
}
