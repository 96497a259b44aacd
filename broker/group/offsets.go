package group

// OffsetCommit and OffsetFetch. A commit is validated against the group
// (generation, member, state), appended to the group's partition as one
// batch, applied, and acknowledged once durable.

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// OffsetCommit serves an OffsetCommit request (v0-v9).
func (c *Coordinator) OffsetCommit(req *kmsg.OffsetCommitRequest) *kmsg.OffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	now := nowMs()
	type slot struct {
		tp    TopicPartition
		code  *int16
		entry OffsetEntry
	}
	var todo []slot
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.OffsetCommitResponseTopicPartition, len(rt.Partitions))
		for i, rp := range rt.Partitions {
			sp := &st.Partitions[i]
			sp.Default()
			sp.Partition = rp.Partition
			tp := TopicPartition{rt.Topic, rp.Partition}
			if c.cfg.PartitionExists != nil && !c.cfg.PartitionExists(rt.Topic, rp.Partition) {
				sp.ErrorCode = codeUnknownTopicOrPartition
				continue
			}
			e := OffsetEntry{Offset: rp.Offset, LeaderEpoch: -1, CommitTimestamp: now, ExpireTimestamp: -1}
			if rp.Metadata != nil {
				e.Metadata = *rp.Metadata
			}
			if req.Version >= 6 && rp.LeaderEpoch >= 0 {
				e.LeaderEpoch = rp.LeaderEpoch
			}
			if req.Version == 1 && rp.Timestamp != -1 {
				e.CommitTimestamp = rp.Timestamp
			}
			if req.Version >= 2 && req.Version <= 4 && req.RetentionTimeMillis != -1 {
				e.ExpireTimestamp = now + req.RetentionTimeMillis
			}
			todo = append(todo, slot{tp: tp, code: &sp.ErrorCode, entry: e})
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(todo) == 0 {
		return resp
	}
	setAll := func(code int16) {
		for _, t := range todo {
			*t.code = code
		}
	}
	s, code := c.lockShard(req.Group)
	if code != 0 {
		setAll(code)
		return resp
	}
	code = s.validateCommitLocked(req)
	if code != 0 {
		s.mu.Unlock()
		setAll(code)
		return resp
	}
	mg := s.modern[req.Group]
	var recs []Record
	var ok []slot
	for _, t := range todo {
		if len(t.entry.Metadata) > int(c.cfg.MetadataMaxBytes) {
			*t.code = codeOffsetMetadataTooLarge
			continue
		}
		if mg != nil {
			if pc := mg.ValidateOffsetCommitPartition(req.MemberID, t.tp.Topic, t.tp.Partition, req.Generation); pc != 0 {
				*t.code = pc
				continue
			}
		}
		recs = append(recs, Record{Key: offsetCommitKey(req.Group, t.tp), Value: offsetCommitValue(t.entry)})
		ok = append(ok, t)
	}
	end, err := s.appendLocked(recs)
	if err == nil {
		first := end - int64(len(recs))
		for i, t := range ok {
			s.setOffsetLocked(req.Group, t.tp, t.entry, first+int64(i))
		}
	}
	s.mu.Unlock()
	if err == nil {
		err = s.waitDurable(end)
	}
	if err != nil {
		c.log.Warn("offset commit", "group", req.Group, "err", err)
		code := appendErrCode(err, true)
		for _, t := range ok {
			*t.code = code
		}
	}
	return resp
}

// validateCommitLocked is Kafka's doCommitOffsets validation; it creates
// the group for a simple (generation -1) commit to an unknown group.
func (s *shard) validateCommitLocked(req *kmsg.OffsetCommitRequest) int16 {
	if mg := s.modern[req.Group]; mg != nil {
		return mg.ValidateOffsetCommit(req.MemberID, req.InstanceID, req.Generation, req.Version, false)
	}
	g := s.groups[req.Group]
	if g == nil {
		if req.Generation >= 0 {
			return codeIllegalGeneration // from an older generation, or an unknown group
		}
		g = newClassicGroup(req.Group, nowMs())
		s.groups[req.Group] = g
	}
	if g.is(stateDead) {
		return codeCoordinatorNotAvailable
	}
	if req.Generation >= 0 || req.MemberID != "" || req.InstanceID != nil {
		if req.InstanceID != nil {
			if cur, ok := g.staticMembers[*req.InstanceID]; ok && cur != req.MemberID {
				return codeFencedInstanceID
			}
		}
		if !g.has(req.MemberID) {
			return codeUnknownMemberID
		}
		if req.Generation != g.generation {
			return codeIllegalGeneration
		}
	} else if !g.is(stateEmpty) {
		return codeUnknownMemberID // only members commit to a group with members
	}
	switch g.state {
	case stateCompletingRebalance:
		return codeRebalanceInProgress
	case stateStable, statePreparingRebalance:
		m := g.members[req.MemberID]
		s.scheduleHeartbeat(g, m, m.sessionTimeoutMs)
	}
	return 0
}

// offsetFetchGroup is one group of an OffsetFetch; topics nil = all.
type offsetFetchPartition struct {
	tp    TopicPartition
	entry OffsetEntry
	found bool
	// unstable: the fetch requires stable offsets and a transaction
	// holds pending offsets of tp.
	unstable bool
}

// fetchOffsets returns the committed offsets of a group (every one when
// topics is nil); unknown partitions come back with found=false.
func (c *Coordinator) fetchOffsets(groupID string, topics map[string][]int32, all, requireStable bool, memberID *string, epoch int32) (int16, []offsetFetchPartition) {
	s, code := c.lockShard(groupID)
	if code != 0 {
		return code, nil
	}
	defer s.mu.Unlock()
	if mg := s.modern[groupID]; mg != nil {
		if code := mg.ValidateOffsetFetch(memberID, epoch); code != 0 {
			return code, nil
		}
	}
	offs := s.offsets[groupID]
	if g := s.groups[groupID]; g != nil && g.is(stateDead) {
		offs = nil
	}
	var unstable map[TopicPartition]bool
	if requireStable {
		unstable = s.pendingTPs(groupID)
	}
	var out []offsetFetchPartition
	if all {
		for tp, e := range offs {
			out = append(out, offsetFetchPartition{tp: tp, entry: e, found: true, unstable: unstable[tp]})
		}
		return 0, out
	}
	for t, ps := range topics {
		for _, p := range ps {
			tp := TopicPartition{t, p}
			e, ok := offs[tp]
			out = append(out, offsetFetchPartition{tp: tp, entry: e, found: ok, unstable: unstable[tp]})
		}
	}
	return 0, out
}
