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

	"strata/broker/plog"
)

type loadState struct {
	s       *shard
	groups  map[string]*kmsg.GroupMetadataValue
	offsets map[string]map[TopicPartition]OffsetEntry
	modern  map[string]ModernGroup
	bad     int

	// Transactional offsets (txn_offsets.go): the partition offset of
	// each committed offset's record, and the pending offsets of open
	// transactions by producer id.
	pos     map[string]map[TopicPartition]int64
	pending map[int64]map[string]map[TopicPartition]txnOffset
}

func newLoadState(s *shard) *loadState {
	return &loadState{s: s, groups: map[string]*kmsg.GroupMetadataValue{}, offsets: map[string]map[TopicPartition]OffsetEntry{},
		modern: map[string]ModernGroup{}, pos: map[string]map[TopicPartition]int64{}, pending: map[int64]map[string]map[TopicPartition]txnOffset{}}
}

// applyBatches replays whole batches in log order: a transaction marker
// (control batch) completes its producer's pending offsets, a
// transactional batch adds to them (Kafka's loadGroupsAndOffsets).
func (ls *loadState) applyBatches(data []byte) error {
	return walkBatches(data, func(h batchHead, b []byte) error {
		if h.Control {
			if h.ProducerID < 0 {
				return nil
			}
			m, err := plog.DecodeControlBatch(b)
			if err != nil {
				ls.bad++
				return nil
			}
			ls.endTxn(h.ProducerID, m.Type == plog.ControlCommit)
			return nil
		}
		txnPID := int64(-1)
		if h.Transactional && h.ProducerID >= 0 {
			txnPID = h.ProducerID
		}
		return batchRecords(b, func(delta int64, r Record) error {
			return ls.applyAt(r, h.BaseOffset+delta, txnPID)
		})
	})
}

// endTxn applies a marker read from the log.
func (ls *loadState) endTxn(pid int64, commit bool) {
	byGroup := ls.pending[pid]
	delete(ls.pending, pid)
	if !commit {
		return
	}
	for gid, m := range byGroup {
		for tp, o := range m {
			if _, ok := ls.offsets[gid][tp]; ok {
				if pos, known := ls.pos[gid][tp]; known && pos > o.pos {
					continue
				}
			}
			ls.setOffset(gid, tp, o.entry, o.pos)
		}
	}
}

func (ls *loadState) setOffset(gid string, tp TopicPartition, e OffsetEntry, pos int64) {
	m := ls.offsets[gid]
	if m == nil {
		m = map[TopicPartition]OffsetEntry{}
		ls.offsets[gid] = m
	}
	m[tp] = e
	pm := ls.pos[gid]
	if pm == nil {
		pm = map[TopicPartition]int64{}
		ls.pos[gid] = pm
	}
	pm[tp] = pos
}

// apply replays one record of a non-transactional batch at an unknown
// offset.
func (ls *loadState) apply(r Record) error { return ls.applyAt(r, -1, -1) }

// applyAt replays one record written at pos; txnPID is the producer of a
// transactional batch, else -1.
func (ls *loadState) applyAt(r Record, pos, txnPID int64) error {
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
			if txnPID >= 0 {
				if m := ls.pending[txnPID][gid]; m != nil {
					delete(m, tp)
				}
				return nil
			}
			if m := ls.offsets[gid]; m != nil {
				delete(m, tp)
				if len(m) == 0 {
					delete(ls.offsets, gid)
				}
			}
			// A tombstone also drops the pending offsets of its
			// partition.
			for _, byGroup := range ls.pending {
				delete(byGroup[gid], tp)
			}
			return nil
		}
		e, err := parseOffsetCommitValue(r.Value)
		if err != nil {
			ls.bad++
			return nil
		}
		if txnPID >= 0 {
			byGroup := ls.pending[txnPID]
			if byGroup == nil {
				byGroup = map[string]map[TopicPartition]txnOffset{}
				ls.pending[txnPID] = byGroup
			}
			m := byGroup[gid]
			if m == nil {
				m = map[TopicPartition]txnOffset{}
				byGroup[gid] = m
			}
			m[tp] = txnOffset{entry: e, pos: pos}
			return nil
		}
		ls.setOffset(gid, tp, e, pos)
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
	ls := newLoadState(s)
	err := s.log.Replay(ls.applyBatches)
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
	s.offsets, s.commitPos = ls.offsets, ls.pos
	s.pending = map[int64]map[string]map[TopicPartition]txnOffset{}
	for pid, byGroup := range ls.pending {
		for gid, m := range byGroup {
			for tp, o := range m {
				s.addPendingLocked(pid, gid, tp, o)
			}
		}
	}
	for gid := range s.offsets {
		if s.groups[gid] == nil && s.modern[gid] == nil {
			s.groups[gid] = newClassicGroup(gid, -1) // offsets only (simple consumers)
		}
	}
	for _, byGroup := range s.pending {
		for gid := range byGroup {
			if s.groups[gid] == nil && s.modern[gid] == nil {
				s.groups[gid] = newClassicGroup(gid, -1)
			}
		}
	}
	// Markers written while the partition was read: applied after what
	// the log held (applying one the replay saw again changes nothing).
	for _, e := range s.early {
		s.completeTxnLocked(e.producerID, e.commit)
	}
	s.early = nil
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
