package group

// DescribeGroups, ListGroups, DeleteGroups and OffsetDelete.

import (
	"fmt"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups serves a DescribeGroups request (v0-v6). An unknown
// group is described as Dead (v6+: GROUP_ID_NOT_FOUND, KIP-1043); a
// KIP-848 group is not a classic group.
func (c *Coordinator) DescribeGroups(req *kmsg.DescribeGroupsRequest) *kmsg.DescribeGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
	for _, id := range req.Groups {
		resp.Groups = append(resp.Groups, c.describeGroup(id, req.Version))
	}
	return resp
}

func (c *Coordinator) describeGroup(id string, version int16) kmsg.DescribeGroupsResponseGroup {
	dg := kmsg.NewDescribeGroupsResponseGroup()
	dg.Group = id
	s, code := c.lockShard(id)
	if code != 0 {
		dg.ErrorCode = code
		return dg
	}
	defer s.mu.Unlock()
	g := s.groups[id]
	notFound := func(msg string) {
		dg.State = "Dead"
		if version >= 6 {
			dg.ErrorCode, dg.ErrorMessage = codeGroupIDNotFound, kmsg.StringPtr(msg)
		}
	}
	if s.modern[id] != nil {
		notFound(fmt.Sprintf("Group %s is not a classic group.", id))
		dg.ErrorCode = codeGroupIDNotFound
		return dg
	}
	if g == nil || g.is(stateDead) {
		notFound(fmt.Sprintf("Group %s not found.", id))
		return dg
	}
	dg.State = g.state.String()
	if g.protocolType != nil {
		dg.ProtocolType = *g.protocolType
	}
	stable := g.is(stateStable) && g.protocolName != nil
	if stable {
		dg.Protocol = *g.protocolName
	}
	for _, mid := range g.memberOrder() {
		m := g.members[mid]
		dm := kmsg.NewDescribeGroupsResponseGroupMember()
		dm.MemberID, dm.ClientID, dm.ClientHost = m.id, m.clientID, m.clientHost
		if version >= 4 {
			dm.InstanceID = m.instanceID
		}
		dm.ProtocolMetadata, dm.MemberAssignment = []byte{}, []byte{}
		if stable {
			if md := m.metadata(*g.protocolName); md != nil {
				dm.ProtocolMetadata = md
			}
			if m.assignment != nil {
				dm.MemberAssignment = m.assignment
			}
		}
		dg.Members = append(dg.Members, dm)
	}
	return dg
}

// ListGroups serves a ListGroups request (v0-v5): every group of every
// loaded partition, filtered by state (v4+, case-insensitive) and type
// (v5+, "classic" or "consumer").
func (c *Coordinator) ListGroups(req *kmsg.ListGroupsRequest) *kmsg.ListGroupsResponse {
	resp := req.ResponseKind().(*kmsg.ListGroupsResponse)
	if c.anyLoading() {
		resp.ErrorCode = codeCoordinatorLoadInProgress
	}
	typeOK := func(t string) bool {
		if req.Version < 5 || len(req.TypesFilter) == 0 {
			return true
		}
		for _, f := range req.TypesFilter {
			if strings.EqualFold(f, t) {
				return true
			}
		}
		return false
	}
	var states []string
	if req.Version >= 4 {
		states = req.StatesFilter
	}
	for _, s := range c.allShards() {
		s.mu.Lock()
		if s.loaded && !s.gone {
			for id, g := range s.groups {
				if g.is(stateDead) || !typeOK("classic") || !matchState(states, g.state.String()) {
					continue
				}
				lg := kmsg.NewListGroupsResponseGroup()
				lg.Group, lg.GroupState, lg.GroupType = id, g.state.String(), "classic"
				if g.protocolType != nil {
					lg.ProtocolType = *g.protocolType
				}
				resp.Groups = append(resp.Groups, lg)
			}
			for id, mg := range s.modern {
				if !typeOK("consumer") || !matchState(states, mg.StateString()) {
					continue
				}
				lg := kmsg.NewListGroupsResponseGroup()
				lg.Group, lg.ProtocolType, lg.GroupState, lg.GroupType = id, "consumer", mg.StateString(), "consumer"
				resp.Groups = append(resp.Groups, lg)
			}
		}
		s.mu.Unlock()
	}
	sort.Slice(resp.Groups, func(i, j int) bool { return resp.Groups[i].Group < resp.Groups[j].Group })
	return resp
}

// DeleteGroups deletes empty groups: their offsets and metadata get
// tombstones. NON_EMPTY_GROUP for groups with members, GROUP_ID_NOT_FOUND
// for unknown ones.
func (c *Coordinator) DeleteGroups(req *kmsg.DeleteGroupsRequest) *kmsg.DeleteGroupsResponse {
	resp := req.ResponseKind().(*kmsg.DeleteGroupsResponse)
	for _, id := range req.Groups {
		dg := kmsg.NewDeleteGroupsResponseGroup()
		dg.Group = id
		dg.ErrorCode = c.deleteGroup(id)
		resp.Groups = append(resp.Groups, dg)
	}
	return resp
}

func (c *Coordinator) deleteGroup(id string) int16 {
	s, code := c.lockShard(id)
	if code != 0 {
		return code
	}
	var recs []Record
	for tp := range s.offsets[id] {
		recs = append(recs, Record{Key: offsetCommitKey(id, tp)})
	}
	// Pending transactional offsets get tombstones too, so that a
	// transaction committed later does not bring the group back
	// (Kafka's deleteAllOffsets).
	for tp := range s.pendingTPs(id) {
		if _, ok := s.offsets[id][tp]; !ok {
			recs = append(recs, Record{Key: offsetCommitKey(id, tp)})
		}
	}
	if mg := s.modern[id]; mg != nil {
		if !mg.IsEmpty() {
			s.mu.Unlock()
			return codeNonEmptyGroup
		}
		recs = append(recs, mg.TombstoneRecords()...)
		mg.Close()
		delete(s.modern, id)
	} else {
		g := s.groups[id]
		switch {
		case g == nil || g.is(stateDead):
			s.mu.Unlock()
			return codeGroupIDNotFound
		case !g.is(stateEmpty):
			s.mu.Unlock()
			return codeNonEmptyGroup
		}
		g.transition(stateDead, nowMs())
		delete(s.groups, id)
		if g.generation > 0 {
			recs = append(recs, Record{Key: classicGroupKey(id)})
		}
	}
	for tp := range s.pendingTPs(id) {
		s.dropPendingLocked(id, tp)
	}
	delete(s.offsets, id)
	delete(s.commitPos, id)
	end, err := s.appendLocked(recs)
	s.mu.Unlock()
	if err == nil {
		err = s.waitDurable(end)
	}
	if err != nil {
		c.log.Warn("delete group", "group", id, "err", err)
		return appendErrCode(err, false)
	}
	return 0
}

// OffsetDelete serves an OffsetDelete request (v0): offsets of topics the
// group is subscribed to cannot be deleted while it has members
// (GROUP_SUBSCRIBED_TO_TOPIC).
func (c *Coordinator) OffsetDelete(req *kmsg.OffsetDeleteRequest) *kmsg.OffsetDeleteResponse {
	resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
	type slot struct {
		tp   TopicPartition
		code *int16
	}
	var todo []slot
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetDeleteResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.OffsetDeleteResponseTopicPartition, len(rt.Partitions))
		for i, rp := range rt.Partitions {
			sp := &st.Partitions[i]
			sp.Default()
			sp.Partition = rp.Partition
			if c.cfg.PartitionExists != nil && !c.cfg.PartitionExists(rt.Topic, rp.Partition) {
				sp.ErrorCode = codeUnknownTopicOrPartition
				continue
			}
			todo = append(todo, slot{TopicPartition{rt.Topic, rp.Partition}, &sp.ErrorCode})
		}
		resp.Topics = append(resp.Topics, st)
	}
	s, code := c.lockShard(req.Group)
	if code != 0 {
		resp.ErrorCode = code
		return resp
	}
	subscribed := func(string) bool { return false }
	if mg := s.modern[req.Group]; mg != nil {
		if !mg.IsEmpty() {
			subscribed = mg.IsSubscribedTo
		}
	} else {
		g := s.groups[req.Group]
		switch {
		case g == nil || g.is(stateDead):
			s.mu.Unlock()
			resp.ErrorCode = codeGroupIDNotFound
			return resp
		case g.is(stateEmpty):
		case g.isConsumerGroup():
			subscribed = g.isSubscribedTo
		default:
			s.mu.Unlock()
			resp.ErrorCode = codeNonEmptyGroup
			return resp
		}
	}
	var recs []Record
	offs := s.offsets[req.Group]
	pending := s.pendingTPs(req.Group)
	for _, t := range todo {
		if subscribed(t.tp.Topic) {
			*t.code = codeGroupSubscribedToTopic
			continue
		}
		if _, ok := offs[t.tp]; ok || pending[t.tp] {
			recs = append(recs, Record{Key: offsetCommitKey(req.Group, t.tp)})
			delete(offs, t.tp)
			s.dropPendingLocked(req.Group, t.tp) // as the tombstone does on replay
		}
	}
	end, err := s.appendLocked(recs)
	s.mu.Unlock()
	if err == nil {
		err = s.waitDurable(end)
	}
	if err != nil {
		c.log.Warn("offset delete", "group", req.Group, "err", err)
		resp.ErrorCode = appendErrCode(err, false)
	}
	return resp
}
