package group

// Loading a partition: replay every record from the log start to the
// log end (once it is committed); the last record of a key wins and a
// tombstone deletes.
// The state is built aside and installed at once, so requests see either
// COORDINATOR_LOAD_IN_PROGRESS or the whole partition.

import (
	"errors"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type loadState struct {
	s       *shard
	groups  map[string]*kmsg.GroupMetadataValue
	offsets map[string]map[TopicPartition]OffsetEntry
	modern  map[string]ModernGroup
	bad     int
}

func (ls *loadState) apply(r Record) error {
	v, err := keyVersion(r.Key)
	if err != nil {
		ls.bad++
		return nil
	}
	switch {
	case v == seedKeyVersion:
		return nil // a load marker (OffsetCommitBatches)
	case v == 0 || v == 1:
		gid, tp, err := parseOffsetCommitKey(r.Key)
		if err != nil {
			ls.bad++
			return nil
		}
		if r.Value == nil {
			if m := ls.offsets[gid]; m != nil {
				delete(m, tp)
				if len(m) == 0 {
					delete(ls.offsets, gid)
				}
			}
			return nil
		}
		e, err := parseOffsetCommitValue(r.Value)
		if err != nil {
			ls.bad++
			return nil
		}
		m := ls.offsets[gid]
		if m == nil {
			m = map[TopicPartition]OffsetEntry{}
			ls.offsets[gid] = m
		}
		m[tp] = e
	case v == 2:
		gid, err := parseClassicGroupKey(r.Key)
		if err != nil {
			ls.bad++
			return nil
		}
		if r.Value == nil {
			delete(ls.groups, gid)
			return nil
		}
		gv, err := parseClassicGroupValue(r.Value)
		if err != nil {
			ls.bad++
			return nil
		}
		ls.groups[gid] = gv
	default:
		h := ls.s.c.cfg.Modern
		if h.RecordGroupID == nil || h.NewGroup == nil {
			return nil
		}
		gid, ok := h.RecordGroupID(r.Key)
		if !ok {
			return nil // unknown record type: ignored, as Kafka does
		}
		mg := ls.modern[gid]
		if mg == nil {
			mg = h.NewGroup(gid)
			ls.modern[gid] = mg
		}
		if err := mg.Replay(r.Key, r.Value); err != nil {
			ls.bad++
		}
	}
	return nil
}

// load replays the partition and installs its groups.
func (s *shard) load() {
	start := time.Now()
	ls := &loadState{s: s, groups: map[string]*kmsg.GroupMetadataValue{}, offsets: map[string]map[TopicPartition]OffsetEntry{}, modern: map[string]ModernGroup{}}
	err := s.log.Replay(func(b []byte) error { return decodeBatches(b, ls.apply) })
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone {
		for _, mg := range ls.modern {
			mg.Close()
		}
		return
	}
	if errors.Is(err, kerr.NotLeaderForPartition) {
		// Leadership moved while loading; Resign follows.
		s.c.log.Info("stopped loading __consumer_offsets partition", "partition", s.part, "err", err)
		return
	}
	if err != nil {
		// The partition stays unavailable (COORDINATOR_LOAD_IN_PROGRESS)
		// rather than serving a partial state.
		s.c.log.Error("load __consumer_offsets partition", "partition", s.part, "err", err)
		return
	}
	now := time.Now()
	for gid, mg := range ls.modern {
		mg.AfterLoad(now)
		if mg.IsDead() {
			mg.Close()
			continue
		}
		s.modern[gid] = mg
	}
	for gid, gv := range ls.groups {
		if s.modern[gid] != nil {
			continue
		}
		s.groups[gid] = groupFromValue(gid, gv)
	}
	s.offsets = ls.offsets
	for gid := range s.offsets {
		if s.groups[gid] == nil && s.modern[gid] == nil {
			s.groups[gid] = newClassicGroup(gid, -1) // offsets only (simple consumers)
		}
	}
	s.loaded = true
	for _, g := range s.groups {
		for _, m := range g.members {
			s.scheduleHeartbeat(g, m, m.sessionTimeoutMs)
		}
	}
	if ls.bad > 0 {
		s.c.log.Warn("skipped malformed records in __consumer_offsets", "partition", s.part, "records", ls.bad)
	}
	s.c.log.Debug("loaded __consumer_offsets partition", "partition", s.part, "groups", len(s.groups)+len(s.modern),
		"offset_groups", len(s.offsets), "took", time.Since(start).Round(time.Millisecond))
}

// groupFromValue rebuilds a classic group from its last GroupMetadataValue:
// Stable with its members if it has any, else Empty.
func groupFromValue(id string, v *kmsg.GroupMetadataValue) *classicGroup {
	g := newClassicGroup(id, v.CurrentStateTimestamp)
	g.generation = v.Generation
	if v.ProtocolType != "" {
		pt := v.ProtocolType
		g.protocolType = &pt
	}
	g.protocolName = v.Protocol
	for _, mv := range v.Members {
		m := &member{
			id: mv.MemberID, instanceID: mv.InstanceID, clientID: mv.ClientID, clientHost: mv.ClientHost,
			rebalanceTimeoutMs: mv.RebalanceTimeoutMillis, sessionTimeoutMs: mv.SessionTimeoutMillis,
			protocolType: v.ProtocolType, assignment: mv.Assignment,
		}
		if v.Version == 0 {
			m.rebalanceTimeoutMs = m.sessionTimeoutMs
		}
		if v.Protocol != nil {
			m.protocols = []protocol{{name: *v.Protocol, metadata: mv.Subscription}}
		}
		g.add(m)
	}
	g.leaderID = ""
	if v.Leader != nil && g.members[*v.Leader] != nil {
		g.leaderID = *v.Leader
	} else if ids := g.memberOrder(); len(ids) > 0 {
		g.leaderID = ids[0]
	}
	if len(g.members) > 0 {
		g.state = stateStable
	}
	g.subscribedTopics = g.computeSubscribedTopics()
	return g
}
