package group

// Loading a consumer group from __consumer_offsets: each record, in log
// order, replaces the state its key names; tombstones delete it.

import (
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
)

// Replay applies one record of this group (key and value as read from the
// log; a nil value is a tombstone). A malformed record is an error and
// changes nothing.
func (g *ConsumerGroup) Replay(key, value []byte) error {
	k, err := parseConsumerKey(key)
	if err != nil {
		return err
	}
	if k.group != g.id {
		return fmt.Errorf("consumer group record for %q replayed on %q", k.group, g.id)
	}
	if err := g.replay(k, value); err != nil {
		return fmt.Errorf("consumer group %q record type %d: %w", g.id, k.typ, err)
	}
	return nil
}

func (g *ConsumerGroup) replay(k consumerKey, value []byte) error {
	if value == nil {
		g.replayTombstone(k)
		return nil
	}
	r, err := valueReader(value)
	if err != nil {
		return err
	}
	switch k.typ {
	case recGroupMetadata:
		epoch := r.Int32()
		hash, created := int64(0), int64(-1)
		readTags(r, func(tag uint32, data []byte) {
			tr := kbin.Reader{Src: data}
			switch tag {
			case 0:
				hash = tr.Int64()
			case 1:
				created = tr.Int64()
			}
		})
		if err := r.Complete(); err != nil {
			return err
		}
		g.deleted = false
		g.epoch, g.metadataHash = epoch, hash
		if created >= 0 {
			g.createdMs = created
		}
	case recPartitionMetadata:
		// Superseded by MetadataHash; nothing to keep.
	case recTargetMetadata:
		epoch := r.Int32()
		readTags(r, nil)
		if err := r.Complete(); err != nil {
			return err
		}
		g.assignmentEpoch = epoch
	case recMemberMetadata:
		m := &ConsumerMember{}
		m.InstanceID = r.CompactNullableString()
		m.RackID = r.CompactNullableString()
		m.ClientID = r.CompactString()
		m.ClientHost = r.CompactString()
		n, err := readArrayLen(r)
		if err != nil {
			return err
		}
		for i := 0; i < n && r.Ok(); i++ {
			m.SubscribedTopicNames = append(m.SubscribedTopicNames, r.CompactString())
		}
		m.SubscribedTopicRegex = r.CompactNullableString()
		m.RebalanceTimeoutMs = r.Int32()
		m.ServerAssignor = r.CompactNullableString()
		readTags(r, nil)
		if err := r.Complete(); err != nil {
			return err
		}
		cur := g.getOrCreateMember(k.member)
		if cur.InstanceID != nil && g.static[*cur.InstanceID] == cur.ID {
			delete(g.static, *cur.InstanceID)
		}
		cur.InstanceID, cur.RackID = m.InstanceID, m.RackID
		cur.ClientID, cur.ClientHost = m.ClientID, m.ClientHost
		slices.Sort(m.SubscribedTopicNames)
		cur.SubscribedTopicNames = slices.Compact(m.SubscribedTopicNames)
		cur.SubscribedTopicRegex = m.SubscribedTopicRegex
		cur.RebalanceTimeoutMs = m.RebalanceTimeoutMs
		cur.ServerAssignor = m.ServerAssignor
		if cur.InstanceID != nil {
			g.static[*cur.InstanceID] = cur.ID
		}
	case recTargetMember:
		tp, err := readTopicPartitions(r, nil)
		if err != nil {
			return err
		}
		readTags(r, nil)
		if err := r.Complete(); err != nil {
			return err
		}
		g.target[k.member] = tp
	case recCurrentAssignment:
		epoch, prev := r.Int32(), r.Int32()
		state := MemberState(r.Int8())
		epochs := map[[16]byte]map[int32]int32{}
		assigned, err := readTopicPartitions(r, epochs)
		if err != nil {
			return err
		}
		pending, err := readTopicPartitions(r, epochs)
		if err != nil {
			return err
		}
		readTags(r, nil)
		if err := r.Complete(); err != nil {
			return err
		}
		m := g.getOrCreateMember(k.member)
		g.setOwners(m, false)
		m.Epoch, m.PreviousEpoch, m.State = epoch, prev, state
		m.Assigned, m.PendingRevocation = assigned, pending
		m.AssignEpochs = epochs
		m.updateAssignEpochs() // fill epochs an older writer left out
		g.setOwners(m, true)
	}
	return nil
}

func (g *ConsumerGroup) getOrCreateMember(id string) *ConsumerMember {
	m, ok := g.members[id]
	if !ok {
		m = newConsumerMember(id)
		g.members[id] = m
	}
	return m
}

func (g *ConsumerGroup) replayTombstone(k consumerKey) {
	switch k.typ {
	case recGroupMetadata:
		g.deleted = true
		g.epoch, g.assignmentEpoch, g.metadataHash = 0, 0, 0
		g.members = map[string]*ConsumerMember{}
		g.static = map[string]string{}
		g.target = map[string]TopicPartitions{}
		g.owners = map[[16]byte]map[int32]string{}
	case recTargetMetadata:
		g.assignmentEpoch = 0
	case recTargetMember:
		delete(g.target, k.member)
	case recCurrentAssignment:
		if m, ok := g.members[k.member]; ok {
			g.setOwners(m, false)
			m.Assigned, m.PendingRevocation = TopicPartitions{}, TopicPartitions{}
			m.AssignEpochs = map[[16]byte]map[int32]int32{}
		}
	case recMemberMetadata:
		if m, ok := g.members[k.member]; ok {
			g.setOwners(m, false)
			if m.InstanceID != nil && g.static[*m.InstanceID] == m.ID {
				delete(g.static, *m.InstanceID)
			}
			delete(g.members, k.member)
		}
	}
}

// AfterLoad arms every member's session timer once the partition is
// loaded: members get a full session timeout to reach the new coordinator,
// and one that is still revoking gets a fresh rebalance timeout.
func (g *ConsumerGroup) AfterLoad(now time.Time) {
	for _, m := range g.members {
		m.sessionDeadline = now.Add(g.cfg.SessionTimeout)
		if m.State == MemberUnrevokedPartitions {
			m.rebalanceDeadline = now.Add(rebalanceTimeout(m))
		}
	}
	g.rearm()
}

func rebalanceTimeout(m *ConsumerMember) time.Duration {
	if m.RebalanceTimeoutMs <= 0 {
		return 60 * time.Second
	}
	return time.Duration(m.RebalanceTimeoutMs) * time.Millisecond
}
