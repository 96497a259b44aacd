package group

// Offsets retention (Kafka 2.1+, KIP-211): offsets of a group expire
// offsets.retention.minutes after the group became Empty (or after their
// commit when that time is unknown); offsets of a Stable consumer group
// expire after their commit only for topics it no longer subscribes to;
// offsets committed with an explicit retention (OffsetCommit v1-v4)
// expire at their expire timestamp. An Empty group left without offsets
// is deleted. Expirations are written as tombstones. Offsets with
// pending transactional offsets, and groups that have some, stay.

func (s *shard) expireOffsets() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.loaded || s.gone {
		return
	}
	now, retention := nowMs(), s.c.cfg.OffsetsRetentionMs
	var recs []Record
	expire := func(id string, base func(OffsetEntry) int64, keep func(topic string) bool) {
		offs := s.offsets[id]
		pending := s.pendingTPs(id)
		for tp, e := range offs {
			if keep(tp.Topic) || pending[tp] {
				continue // a transaction may still commit it (Kafka's cleanupExpiredOffsets)
			}
			expired := now-base(e) >= retention
			if e.ExpireTimestamp >= 0 {
				expired = now >= e.ExpireTimestamp
			}
			if expired {
				delete(offs, tp)
				delete(s.commitPos[id], tp)
				recs = append(recs, Record{Key: offsetCommitKey(id, tp)})
			}
		}
		if len(offs) == 0 {
			delete(s.offsets, id)
			delete(s.commitPos, id)
		}
	}
	byCommit := func(e OffsetEntry) int64 { return e.CommitTimestamp }
	none := func(string) bool { return false }
	for id, g := range s.groups {
		switch {
		case g.is(stateEmpty) && g.protocolType != nil:
			base := byCommit
			if g.stateTimestamp >= 0 {
				ts := g.stateTimestamp
				base = func(OffsetEntry) int64 { return ts }
			}
			expire(id, base, none)
		case g.protocolType == nil:
			expire(id, byCommit, none) // simple consumers
		case g.is(stateStable) && g.isConsumerGroup() && g.subscribedTopics != nil:
			expire(id, byCommit, g.isSubscribedTo)
		}
		if g.is(stateEmpty) && !s.hasOffsets(id) && len(g.pendingMembers) == 0 && !s.hasPendingLocked(id) {
			g.transition(stateDead, now)
			delete(s.groups, id)
			if g.generation > 0 {
				recs = append(recs, Record{Key: classicGroupKey(id)})
			}
			s.c.log.Info("group expired", "group", id)
		}
	}
	for id, mg := range s.modern {
		if mg.IsEmpty() {
			expire(id, byCommit, none)
		} else {
			expire(id, byCommit, mg.IsSubscribedTo)
		}
	}
	if len(recs) > 0 {
		if _, err := s.appendLocked(recs); err != nil {
			s.c.log.Warn("write expired offsets", "partition", s.part, "err", err)
		}
	}
}
