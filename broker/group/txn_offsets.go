package group

// Transactional offset commits (TxnOffsetCommit, KIP-98; KIP-447's
// generation, member id and group instance id from v3), as Kafka's group
// coordinator keeps them (GroupMetadata's pendingTransactionalOffsetCommits,
// OffsetMetadataManager):
//
//   - A TxnOffsetCommit is validated against the group like an
//     OffsetCommit, except that it needs no member while it carries no
//     member id, generation or instance id (v0-v2 carry none), and that a
//     group in CompletingRebalance accepts it. A stale generation is
//     ILLEGAL_GENERATION, an unknown member UNKNOWN_MEMBER_ID, a static
//     member replaced by a newer one FENCED_INSTANCE_ID, so a zombie
//     member of an old generation cannot commit in a transaction.
//   - The offsets are written as one transactional batch carrying the
//     producer id and epoch, so the partition's producer state opens a
//     transaction there (and refuses an epoch older than the producer's:
//     INVALID_PRODUCER_EPOCH), and kept pending per producer id: OffsetFetch
//     does not see them, and with require_stable (v7+) answers
//     UNSTABLE_OFFSET_COMMIT for their partitions.
//   - When the transaction's marker is written to the partition
//     (CompleteTxn, and the control batch on replay), a COMMIT makes them the
//     committed offsets, except where a commit written after them in the
//     partition exists (the most recent record wins); an ABORT drops them.
//   - A non-transactional tombstone (OffsetDelete, DeleteGroups, retention)
//     also drops the pending offsets of its partition; retention never
//     expires an offset with pending transactional offsets, nor deletes a
//     group that has some.
//
// Kafka writes these batches with base sequence 0 and appends them as the
// coordinator, without sequence checks; the partition log here checks
// every producer batch as a client's, so a Log that checks sequences
// (SequenceLog) tells the base sequence to write.

import (
	"errors"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/plog"
)

// SequenceLog is implemented by a Log whose appends check producer
// sequence numbers (the partition log): NextSequence is the base sequence
// the next batch of producerID with producerEpoch must carry to follow
// what the partition holds (0 for a producer it does not know or a new
// epoch). Without it, transactional batches carry base sequence 0, as
// Kafka writes them.
type SequenceLog interface {
	NextSequence(producerID int64, producerEpoch int16) int32
}

// txnOffset is a pending transactional offset and the offset of its
// record in the partition.
type txnOffset struct {
	entry OffsetEntry
	pos   int64
}

// txnCompletion is a transaction marker that arrived while loading.
type txnCompletion struct {
	producerID int64
	commit     bool
}

// TxnOffsetCommit serves a TxnOffsetCommit request (v0-v5, topics by
// name). The caller has checked the transactional id and ACLs (and, for
// v5, that the transaction holds the partition: KIP-890).
func (c *Coordinator) TxnOffsetCommit(req *kmsg.TxnOffsetCommitRequest) *kmsg.TxnOffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	now := nowMs()
	type slot struct {
		tp    TopicPartition
		code  *int16
		entry OffsetEntry
	}
	var todo []slot
	for _, rt := range req.Topics {
		st := kmsg.NewTxnOffsetCommitResponseTopic()
		st.Topic = rt.Topic
		st.Partitions = make([]kmsg.TxnOffsetCommitResponseTopicPartition, len(rt.Partitions))
		for i, rp := range rt.Partitions {
			sp := &st.Partitions[i]
			sp.Default()
			sp.Partition = rp.Partition
			if c.cfg.PartitionExists != nil && !c.cfg.PartitionExists(rt.Topic, rp.Partition) {
				sp.ErrorCode = codeUnknownTopicOrPartition
				continue
			}
			e := OffsetEntry{Offset: rp.Offset, LeaderEpoch: -1, CommitTimestamp: now, ExpireTimestamp: -1}
			if rp.Metadata != nil {
				e.Metadata = *rp.Metadata
			}
			if req.Version >= 2 && rp.LeaderEpoch >= 0 {
				e.LeaderEpoch = rp.LeaderEpoch
			}
			todo = append(todo, slot{tp: TopicPartition{rt.Topic, rp.Partition}, code: &sp.ErrorCode, entry: e})
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
	if req.Group == "" {
		setAll(codeInvalidGroupID)
		return resp
	}
	if req.ProducerID < 0 || req.ProducerEpoch < 0 {
		setAll(kerr.InvalidProducerIDMapping.Code)
		return resp
	}
	s, code := c.lockShard(req.Group)
	if code != 0 {
		setAll(code)
		return resp
	}
	gen, member, instance := int32(-1), "", (*string)(nil)
	if req.Version >= 3 {
		gen, member, instance = req.Generation, req.MemberID, req.InstanceID
	}
	if code := s.validateTxnCommitLocked(req.Group, gen, member, instance, req.Version); code != 0 {
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
		if mg != nil && member != "" {
			if pc := mg.ValidateOffsetCommitPartition(member, t.tp.Topic, t.tp.Partition, gen); pc != 0 {
				*t.code = pc
				continue
			}
		}
		recs = append(recs, Record{Key: offsetCommitKey(req.Group, t.tp), Value: offsetCommitValue(t.entry)})
		ok = append(ok, t)
	}
	var end int64
	var err error
	if len(recs) > 0 {
		p := batchProducer{ID: req.ProducerID, Epoch: req.ProducerEpoch, Seq: 0, Transactional: true}
		if sl, isSeq := s.log.(SequenceLog); isSeq {
			p.Seq = sl.NextSequence(req.ProducerID, req.ProducerEpoch)
		}
		end, err = s.log.Append(encodeProducerBatch(recs, time.Now(), p))
		if err == nil {
			first := end - int64(len(recs))
			for i, t := range ok {
				s.addPendingLocked(req.ProducerID, req.Group, t.tp, txnOffset{entry: t.entry, pos: first + int64(i)})
			}
		}
	}
	s.mu.Unlock()
	if err == nil {
		err = s.waitDurable(end)
	}
	if err != nil {
		c.log.Warn("transactional offset commit", "group", req.Group, "producer_id", req.ProducerID, "err", err)
		code := txnAppendErrCode(err)
		for _, t := range ok {
			*t.code = code
		}
	}
	return resp
}

// txnAppendErrCode maps a failed transactional append: the producer
// state's refusals go back to the producer as they are (Kafka's
// storeOffsets passes them through).
func txnAppendErrCode(err error) int16 {
	for _, ke := range []*kerr.Error{kerr.InvalidProducerEpoch, kerr.InvalidTxnState, kerr.OutOfOrderSequenceNumber, kerr.ProducerFenced} {
		if errors.Is(err, ke) {
			return ke.Code
		}
	}
	return appendErrCode(err, true)
}

// validateTxnCommitLocked is Kafka's validation of a transactional offset
// commit (ClassicGroup/ConsumerGroup.validateOffsetCommit with
// isTransactional); it creates the group for a commit without generation
// to an unknown group.
func (s *shard) validateTxnCommitLocked(group string, gen int32, member string, instance *string, version int16) int16 {
	anonymous := gen < 0 && member == "" && instance == nil
	if mg := s.modern[group]; mg != nil {
		if anonymous {
			// The member fields are optional in TxnOffsetCommit: only
			// checked when given.
			return 0
		}
		return mg.ValidateOffsetCommit(member, instance, gen, version, true)
	}
	g := s.groups[group]
	if g == nil {
		if gen >= 0 {
			return codeIllegalGeneration
		}
		g = newClassicGroup(group, nowMs())
		s.groups[group] = g
	}
	if g.is(stateDead) {
		return codeCoordinatorNotAvailable
	}
	if gen < 0 && g.is(stateEmpty) {
		return 0
	}
	if anonymous {
		return 0
	}
	if instance != nil {
		cur, ok := g.staticMembers[*instance]
		if !ok {
			return codeUnknownMemberID
		}
		if cur != member {
			return codeFencedInstanceID
		}
	}
	if !g.has(member) {
		return codeUnknownMemberID
	}
	if gen != g.generation {
		return codeIllegalGeneration
	}
	// Unlike an OffsetCommit, it does not count as the member's
	// heartbeat (Kafka's commitTransactionalOffset).
	return 0
}

// addPendingLocked records a pending transactional offset.
func (s *shard) addPendingLocked(pid int64, group string, tp TopicPartition, o txnOffset) {
	byGroup := s.pending[pid]
	if byGroup == nil {
		byGroup = map[string]map[TopicPartition]txnOffset{}
		s.pending[pid] = byGroup
	}
	m := byGroup[group]
	if m == nil {
		m = map[TopicPartition]txnOffset{}
		byGroup[group] = m
	}
	m[tp] = o
}

// dropPendingLocked forgets the pending transactional offsets of tp of a
// group (a non-transactional tombstone was written for it).
func (s *shard) dropPendingLocked(group string, tp TopicPartition) {
	for pid, byGroup := range s.pending {
		if m := byGroup[group]; m != nil {
			delete(m, tp)
			if len(m) == 0 {
				delete(byGroup, group)
			}
		}
		if len(byGroup) == 0 {
			delete(s.pending, pid)
		}
	}
}

// pendingTPs returns the partitions of a group with pending
// transactional offsets (nil if none).
func (s *shard) pendingTPs(group string) map[TopicPartition]bool {
	var out map[TopicPartition]bool
	for _, byGroup := range s.pending {
		for tp := range byGroup[group] {
			if out == nil {
				out = map[TopicPartition]bool{}
			}
			out[tp] = true
		}
	}
	return out
}

// hasPendingLocked tells whether a group has pending transactional
// offsets.
func (s *shard) hasPendingLocked(group string) bool {
	for _, byGroup := range s.pending {
		if len(byGroup[group]) > 0 {
			return true
		}
	}
	return false
}

// completeTxnLocked applies a transaction marker of producer pid.
func (s *shard) completeTxnLocked(pid int64, commit bool) {
	byGroup := s.pending[pid]
	delete(s.pending, pid)
	if !commit {
		return
	}
	for group, m := range byGroup {
		for tp, o := range m {
			if _, ok := s.offsets[group][tp]; ok {
				if pos, known := s.commitPos[group][tp]; known && pos > o.pos {
					continue // a newer commit was written after it
				}
			}
			s.setOffsetLocked(group, tp, o.entry, o.pos)
			if s.groups[group] == nil && s.modern[group] == nil {
				s.groups[group] = newClassicGroup(group, nowMs())
			}
		}
	}
}

// CompleteTxn applies a transaction marker of producerID written to
// __consumer_offsets partition `partition`: with commit its pending
// transactional offsets become the groups' committed offsets (where no
// commit was written after them), else they are dropped. The writer of
// the marker calls it once the marker is durable, before it answers
// WriteTxnMarkers (Kafka's GroupCoordinator.onTransactionCompleted). A
// partition this coordinator does not own is left alone (its loader
// reads the marker); one still loading applies the marker once loaded.
func (c *Coordinator) CompleteTxn(partition int32, producerID int64, commit bool) {
	c.mu.RLock()
	s := c.shards[partition]
	c.mu.RUnlock()
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.gone:
	case !s.loaded:
		s.early = append(s.early, txnCompletion{producerID: producerID, commit: commit})
	default:
		s.completeTxnLocked(producerID, commit)
	}
}

// PendingTxnOffsets returns a copy of the pending transactional offsets
// of producerID in a partition this coordinator owns, by group; false
// while the partition is loading or not owned.
func (c *Coordinator) PendingTxnOffsets(partition int32, producerID int64) (map[string]map[TopicPartition]OffsetEntry, bool) {
	c.mu.RLock()
	s := c.shards[partition]
	c.mu.RUnlock()
	if s == nil {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.loaded || s.gone {
		return nil, false
	}
	out := map[string]map[TopicPartition]OffsetEntry{}
	for group, m := range s.pending[producerID] {
		out[group] = map[TopicPartition]OffsetEntry{}
		for tp, o := range m {
			out[group][tp] = o.entry
		}
	}
	return out, true
}

// PartitionLogSequence is SequenceLog.NextSequence for a partition log:
// the sequence after the producer's last one at the same epoch, else 0
// (a new epoch starts at 0; an unknown producer may start anywhere).
func PartitionLogSequence(l *plog.Log, producerID int64, producerEpoch int16) int32 {
	for _, p := range l.Producers() {
		if p.ProducerID != producerID {
			continue
		}
		if p.ProducerEpoch != producerEpoch || p.LastSequence == math.MaxInt32 {
			return 0
		}
		return p.LastSequence + 1 // -1 (no batch yet) gives 0
	}
	return 0
}
