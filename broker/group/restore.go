package group

// Restoring offsets: committed offsets taken in from outside the log (the
// bucket's group offsets snapshot) are written as Kafka's coordinator
// loads offsets from its log, without the member and generation checks
// of an OffsetCommit: a group that has members meanwhile keeps them, and
// an offset it has committed itself is never replaced.

import (
	"cmp"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// RestoreOffsets writes the offsets of offs that their groups do not
// have, without member or generation checks, and returns how many it
// wrote and how many it left because their topic partition does not
// exist (yet). A group with neither offsets nor metadata becomes an
// Empty classic group, as a simple consumer's commit makes it. An error
// (the partition is loading, not coordinated here, or the append or its
// replication failed) leaves the rest unwritten: the caller retries.
func (c *Coordinator) RestoreOffsets(offs map[string]map[TopicPartition]OffsetEntry) (restored, unknown int, err error) {
	for _, gid := range slices.Sorted(maps.Keys(offs)) {
		tps := slices.SortedFunc(maps.Keys(offs[gid]), func(a, b TopicPartition) int {
			if c := strings.Compare(a.Topic, b.Topic); c != 0 {
				return c
			}
			return cmp.Compare(a.Partition, b.Partition)
		})
		s, code := c.lockShard(gid)
		if code != 0 {
			return restored, unknown, kerr.ErrorForCode(code)
		}
		if g := s.groups[gid]; g != nil && g.is(stateDead) {
			s.mu.Unlock()
			return restored, unknown, kerr.CoordinatorNotAvailable
		}
		have := s.offsets[gid]
		var recs []Record
		var todo []TopicPartition
		for _, tp := range tps {
			if _, ok := have[tp]; ok {
				continue
			}
			if c.cfg.PartitionExists != nil && !c.cfg.PartitionExists(tp.Topic, tp.Partition) {
				unknown++
				continue
			}
			recs = append(recs, Record{Key: offsetCommitKey(gid, tp), Value: offsetCommitValue(offs[gid][tp])})
			todo = append(todo, tp)
		}
		var end int64
		for len(recs) > 0 {
			n := batchLen(recs)
			e, aerr := s.appendLocked(recs[:n])
			if aerr != nil {
				s.mu.Unlock()
				return restored, unknown, aerr
			}
			end = e
			for i, tp := range todo[:n] {
				s.setOffsetLocked(gid, tp, offs[gid][tp], e-int64(n)+int64(i))
			}
			if s.groups[gid] == nil && s.modern[gid] == nil {
				s.groups[gid] = newClassicGroup(gid, nowMs())
			}
			restored += n
			recs, todo = recs[n:], todo[n:]
		}
		s.mu.Unlock()
		if werr := s.waitDurable(end); werr != nil {
			return restored, unknown, werr
		}
	}
	return restored, unknown, nil
}

// Bounds of one record batch the coordinator writes of many offsets:
// well under the default max.message.bytes (1 MiB).
const (
	maxBatchRecords = 1000
	maxBatchBytes   = 512 << 10
)

// batchLen is how many of recs (at least one) go in the next batch.
func batchLen(recs []Record) int {
	size := 0
	for i, r := range recs {
		size += len(r.Key) + len(r.Value) + 16
		if i > 0 && (i == maxBatchRecords || size > maxBatchBytes) {
			return i
		}
	}
	return len(recs)
}
