package group

// Offset commits and fetches by members of a consumer group: the
// OffsetCommit generation is the member epoch (KIP-848), checked here; the
// offsets themselves live in the coordinator's offset store like those of
// classic groups.

import (
	"github.com/twmb/franz-go/pkg/kerr"
)

// ValidateOffsetCommit checks a commit's member and epoch. A commit
// without a member (generation < 0) is accepted only while the group is
// empty (admin tools, consumers without group management).
// Non-transactional commits from KIP-848 members need OffsetCommit v9+.
// A newer epoch than the member's is STALE_MEMBER_EPOCH; an older one is
// judged per partition (ValidateOffsetCommitPartition).
func (g *ConsumerGroup) ValidateOffsetCommit(memberID string, instanceID *string, generation int32, apiVersion int16, isTxn bool) int16 {
	if generation < 0 && len(g.members) == 0 {
		return 0
	}
	m, ok := g.members[memberID]
	if !ok {
		return kerr.UnknownMemberID.Code
	}
	if !isTxn && apiVersion < 9 {
		return kerr.UnsupportedVersion.Code
	}
	if generation > m.Epoch || generation < 0 {
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}

// ValidateOffsetCommitPartition checks one partition of a commit that
// passed ValidateOffsetCommit (KIP-1251): at the member's epoch any
// partition may be committed; at an older epoch, only partitions the
// member held since that epoch or earlier.
func (g *ConsumerGroup) ValidateOffsetCommitPartition(memberID, topic string, partition, generation int32) int16 {
	m, ok := g.members[memberID]
	if !ok {
		return 0 // an admin commit on an empty group
	}
	if generation == m.Epoch {
		return 0
	}
	id, known := g.topicIDs[topic]
	if e, held := m.AssignEpochs[id][partition]; known && held && generation >= e {
		return 0
	}
	return kerr.StaleMemberEpoch.Code
}

// ValidateOffsetFetch checks the member of an OffsetFetch v9+ request;
// without a member id (and a negative epoch) it is an admin fetch.
func (g *ConsumerGroup) ValidateOffsetFetch(memberID *string, epoch int32) int16 {
	if memberID == nil && epoch < 0 {
		return 0
	}
	if memberID == nil {
		return kerr.UnknownMemberID.Code
	}
	m, ok := g.members[*memberID]
	if !ok {
		return kerr.UnknownMemberID.Code
	}
	if epoch != m.Epoch {
		return kerr.StaleMemberEpoch.Code
	}
	return 0
}
