package group

// The registry's hooks for KIP-848 consumer groups (consumer_*.go): a
// group id is either a classic group or a ModernGroup in its shard.

import (
	"time"
)

// ModernGroup is what the registry needs from a KIP-848 consumer group.
type ModernGroup interface {
	Replay(key, value []byte) error // load path
	AfterLoad(now time.Time)        // once per group after its partition is loaded
	IsDead() bool                   // dropped from the registry after load
	IsEmpty() bool
	StateString() string              // ListGroups
	IsSubscribedTo(topic string) bool // OffsetDelete, offsets retention
	TombstoneRecords() []Record       // DeleteGroups, conversion to a classic group
	ValidateOffsetCommit(memberID string, instanceID *string, generation int32, apiVersion int16, isTxn bool) int16
	ValidateOffsetCommitPartition(memberID, topic string, partition, generation int32) int16
	ValidateOffsetFetch(memberID *string, epoch int32) int16
	Close() // unloaded or deleted: stop timers
}

// ModernHooks create KIP-848 groups for the registry.
type ModernHooks struct {
	NewGroup      func(groupID string) ModernGroup
	RecordGroupID func(key []byte) (string, bool) // key versions 3..8
}

// WithConsumerGroup runs fn on the KIP-848 group groupID with its
// partition locked, appends the records fn returns and waits until they
// are durable. A missing group is created when create is set (an empty
// classic group of that id is converted: its metadata is deleted, its
// offsets kept); a classic group with members, or a missing group without
// create, is GROUP_ID_NOT_FOUND.
func (c *Coordinator) WithConsumerGroup(groupID string, create bool, fn func(g ModernGroup) []Record) int16 {
	s, code := c.lockShard(groupID)
	if code != 0 {
		return code
	}
	mg := s.modern[groupID]
	var pre []Record
	if mg == nil {
		if !create || c.cfg.Modern.NewGroup == nil {
			s.mu.Unlock()
			return codeGroupIDNotFound
		}
		if g := s.groups[groupID]; g != nil {
			if !g.is(stateEmpty) {
				s.mu.Unlock()
				return codeGroupIDNotFound
			}
			if g.generation > 0 {
				pre = append(pre, Record{Key: classicGroupKey(groupID)})
			}
			g.state = stateDead
			delete(s.groups, groupID)
		}
		mg = c.cfg.Modern.NewGroup(groupID)
		s.modern[groupID] = mg
	}
	recs := append(pre, fn(mg)...)
	end, err := s.appendLocked(recs)
	if mg.IsDead() {
		mg.Close()
		delete(s.modern, groupID)
	}
	s.mu.Unlock()
	if err != nil {
		c.log.Warn("consumer group write", "group", groupID, "err", err)
		return appendErrCode(err, false)
	}
	if err := s.waitDurable(end); err != nil {
		return appendErrCode(err, false)
	}
	return 0
}

// ConsumerGroupFor runs fn on the KIP-848 group groupID with its partition
// locked, read-only; GROUP_ID_NOT_FOUND if there is none.
func (c *Coordinator) ConsumerGroupFor(groupID string, fn func(g ModernGroup)) int16 {
	s, code := c.lockShard(groupID)
	if code != 0 {
		return code
	}
	defer s.mu.Unlock()
	mg := s.modern[groupID]
	if mg == nil {
		return codeGroupIDNotFound
	}
	fn(mg)
	return 0
}

// LockedModern runs fn for a timer of a KIP-848 group: with its partition
// locked, if the group is still loaded; the records fn returns are
// appended without waiting.
func (c *Coordinator) LockedModern(groupID string, mg ModernGroup, fn func(g ModernGroup) []Record) {
	c.mu.RLock()
	s := c.shards[PartitionFor(groupID, c.nparts)]
	c.mu.RUnlock()
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.gone || !s.loaded || s.modern[groupID] != mg {
		return
	}
	if _, err := s.appendLocked(fn(mg)); err != nil {
		c.log.Warn("consumer group write", "group", groupID, "err", err)
	}
	if mg.IsDead() {
		mg.Close()
		delete(s.modern, groupID)
	}
}
