package group

// A shard is one __consumer_offsets partition this broker leads: the
// groups that hash to it, their committed offsets, and the log they are
// persisted to. One mutex (mu) guards everything in it, including every
// group's state; timers take it when they fire. Lock order: Coordinator.mu
// before shard.mu; nothing else is held with shard.mu except the
// partition log's own lock inside Log.Append and SequenceLog.NextSequence.

import (
	"fmt"
	"sync"
	"time"
)

type shard struct {
	c    *Coordinator
	part int32
	log  Log

	mu      sync.Mutex
	loaded  bool
	gone    bool
	groups  map[string]*classicGroup
	modern  map[string]ModernGroup
	offsets map[string]map[TopicPartition]OffsetEntry
	// commitPos is the offset in the partition of the record each
	// committed offset came from (-1 or absent: unknown), so that a
	// transaction's commit does not replace a newer commit.
	commitPos map[string]map[TopicPartition]int64
	// pending are the transactional offsets of open transactions, by
	// producer id (txn_offsets.go).
	pending map[int64]map[string]map[TopicPartition]txnOffset
	// early are transaction completions that arrived while loading,
	// applied once loaded.
	early []txnCompletion
}

func newShard(c *Coordinator, part int32, l Log) *shard {
	return &shard{
		c: c, part: part, log: l,
		groups:    map[string]*classicGroup{},
		modern:    map[string]ModernGroup{},
		offsets:   map[string]map[TopicPartition]OffsetEntry{},
		commitPos: map[string]map[TopicPartition]int64{},
		pending:   map[int64]map[string]map[TopicPartition]txnOffset{},
	}
}

// afterFunc runs fn with the shard locked after d, unless the shard was
// unloaded by then.
func (s *shard) afterFunc(d time.Duration, fn func()) {
	time.AfterFunc(d, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.gone || !s.loaded {
			return
		}
		fn()
	})
}

// appendLocked writes recs as one batch and returns the offset to wait
// for before acknowledging.
func (s *shard) appendLocked(recs []Record) (int64, error) {
	if len(recs) == 0 {
		return 0, nil
	}
	end, err := s.log.Append(encodeBatch(recs, time.Now()))
	if err != nil {
		return 0, fmt.Errorf("append to __consumer_offsets-%d: %w", s.part, err)
	}
	return end, nil
}

// waitDurable waits (without the lock) for an append to be durable; 0 =
// nothing to wait for.
func (s *shard) waitDurable(end int64) error {
	if end <= 0 {
		return nil
	}
	if err := s.log.WaitDurable(end); err != nil {
		return fmt.Errorf("wait for __consumer_offsets-%d: %w", s.part, err)
	}
	return nil
}

// storeGroupLocked persists the group's metadata with assignment (nil:
// members' current assignments).
func (s *shard) storeGroupLocked(g *classicGroup, assignment map[string][]byte) (int64, error) {
	return s.appendLocked([]Record{{Key: classicGroupKey(g.id), Value: classicGroupValue(g, assignment)}})
}

// unload answers every waiting request NOT_COORDINATOR and stops the
// shard's timers (they check gone).
func (s *shard) unload() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gone = true
	for _, g := range s.groups {
		for _, m := range g.members {
			g.invokeJoin(m, joinResult{code: codeNotCoordinator, memberID: m.id, generation: -1})
			g.invokeSync(m, syncResult{code: codeNotCoordinator})
		}
	}
	for _, mg := range s.modern {
		mg.Close()
	}
	s.groups, s.modern, s.offsets = map[string]*classicGroup{}, map[string]ModernGroup{}, map[string]map[TopicPartition]OffsetEntry{}
	s.commitPos, s.pending, s.early = map[string]map[TopicPartition]int64{}, map[int64]map[string]map[TopicPartition]txnOffset{}, nil
}

// groupOffsets returns the offsets map of a group, creating it.
func (s *shard) groupOffsets(id string) map[TopicPartition]OffsetEntry {
	m := s.offsets[id]
	if m == nil {
		m = map[TopicPartition]OffsetEntry{}
		s.offsets[id] = m
	}
	return m
}

func (s *shard) hasOffsets(id string) bool { return len(s.offsets[id]) > 0 }

// setOffsetLocked makes e, written at pos of the partition (-1:
// unknown), a group's committed offset of tp.
func (s *shard) setOffsetLocked(id string, tp TopicPartition, e OffsetEntry, pos int64) {
	s.groupOffsets(id)[tp] = e
	m := s.commitPos[id]
	if m == nil {
		m = map[TopicPartition]int64{}
		s.commitPos[id] = m
	}
	m[tp] = pos
}
