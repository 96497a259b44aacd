package index

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/dgraph-io/badger/v4"
)

// Partition and topic state beside the segments (see "Database layout"
// in the package doc):
//
//	'o' topicId[16] partition[4]               → int64 log start offset (DeleteRecords below the local log)
//	'd' topicId[16]                            → the topic's name: its deletion is pending
//	'x' topicId[16] partition[4] segmentId[16] → empty: the segment's objects are missing (MarkMissing)
const (
	prefixLogStart      = 'o'
	prefixTopicDeletion = 'd'
)

func logStartKey(tp TopicIDPartition) []byte {
	k := append([]byte{prefixLogStart}, tp.TopicID[:]...)
	return binary.BigEndian.AppendUint32(k, uint32(tp.Partition))
}

func topicDeletionKey(id UUID) []byte { return append([]byte{prefixTopicDeletion}, id[:]...) }

// RaiseLogStartOffset records the partition's log start offset as
// DeleteRecords left it (Kafka's logStartOffset, which may lie below the
// local log start of a tiered partition). It only moves up: a lower
// offset leaves the recorded one. It returns the recorded offset.
func (x *Index) RaiseLogStartOffset(tp TopicIDPartition, offset int64) (int64, error) {
	if offset < 0 {
		return 0, fmt.Errorf("log start offset %d of %s: negative", offset, tp)
	}
	out := offset
	defer x.memo.touch(tp)
	err := x.update(func(txn *badger.Txn) error {
		old, ok, err := getLogStart(txn, tp)
		if err != nil {
			return err
		}
		if ok && old >= offset {
			out = old
			return nil
		}
		return txn.Set(logStartKey(tp), binary.BigEndian.AppendUint64(nil, uint64(offset)))
	})
	return out, err
}

// LogStartOffset returns the offset RaiseLogStartOffset recorded; ok is
// false when none was.
func (x *Index) LogStartOffset(tp TopicIDPartition) (int64, bool, error) {
	return x.memoized(memoKey{tp, memoLogStartOffset}, func() (offset int64, ok bool, err error) {
		err = x.view(func(txn *badger.Txn) error {
			offset, ok, err = getLogStart(txn, tp)
			return err
		})
		return offset, ok, err
	})
}

func getLogStart(txn *badger.Txn, tp TopicIDPartition) (int64, bool, error) {
	item, err := txn.Get(logStartKey(tp))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	var off int64
	err = item.Value(func(v []byte) error {
		if len(v) != 8 || int64(binary.BigEndian.Uint64(v)) < 0 {
			return fmt.Errorf("remote segment index: log start entry of %s: %d bytes", tp, len(v))
		}
		off = int64(binary.BigEndian.Uint64(v))
		return nil
	})
	return off, err == nil, err
}

// MarkMissing records that a segment's objects turned out to be missing
// from the bucket: from then on reads do not choose it (where no other
// readable segment holds its offsets, they find nothing, as in a gap),
// and LogStart and LogEnd do not count it. The mark is kept across
// restarts and refreshes from the bucket (which re-read the segment's
// manifest unchanged) until the segment is deleted
// (DELETE_SEGMENT_FINISHED, ForgetTopic, or a ReplacePartition without
// it). The segment is still listed (Segments), in its state, so that
// retention and cleanups delete it. changed is false when the segment was
// marked already; ErrNotFound when the index does not know it in tp.
func (x *Index) MarkMissing(tp TopicIDPartition, id UUID) (changed bool, err error) {
	defer x.memo.touch(tp)
	err = x.update(func(txn *badger.Txn) error {
		m, ok, err := getByID(txn, id)
		if err != nil {
			return err
		}
		if !ok || m.Partition != tp {
			return fmt.Errorf("%w: segment %s of %s", ErrNotFound, id, tp)
		}
		k := missingKey(tp, id)
		if _, err := txn.Get(k); err == nil {
			return nil
		} else if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		changed = true
		return txn.Set(k, nil)
	})
	return changed && err == nil, err
}

// Missing lists the partition's segments marked missing, by segment id
// (bytewise).
func (x *Index) Missing(tp TopicIDPartition) ([]UUID, error) {
	var out []UUID
	err := x.view(func(txn *badger.Txn) error {
		return scanMissing(txn, tp, func(id UUID) { out = append(out, id) })
	})
	return out, err
}

// scanMissing calls fn with the id of each of tp's segments marked missing.
func scanMissing(txn *badger.Txn, tp TopicIDPartition, fn func(UUID)) error {
	prefix := missingPrefix(tp)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
	defer it.Close()
	for it.Rewind(); it.Valid(); it.Next() {
		k := it.Item().Key()
		if len(k) != len(prefix)+16 {
			return fmt.Errorf("remote segment index: malformed key %x", k)
		}
		var id UUID
		copy(id[:], k[len(prefix):])
		fn(id)
	}
	return nil
}

// MarkTopicDeleted records that a topic was deleted and its remote data
// must go; the mark stays until ForgetTopic, across restarts.
func (x *Index) MarkTopicDeleted(id UUID, name string) error {
	if len(name) > MaxTopicLen {
		name = name[:MaxTopicLen]
	}
	return x.update(func(txn *badger.Txn) error { return txn.Set(topicDeletionKey(id), []byte(name)) })
}

// UnmarkTopicDeleted removes the mark of MarkTopicDeleted and nothing
// else: the topic turned out not to be deleted (its id is in the
// metadata again).
func (x *Index) UnmarkTopicDeleted(id UUID) error {
	return x.update(func(txn *badger.Txn) error { return txn.Delete(topicDeletionKey(id)) })
}

// PendingTopicDeletion is a topic marked by MarkTopicDeleted.
type PendingTopicDeletion struct {
	TopicID UUID
	Topic   string
}

// PendingTopicDeletions lists the topics marked deleted, by id.
func (x *Index) PendingTopicDeletions() ([]PendingTopicDeletion, error) {
	var out []PendingTopicDeletion
	err := x.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixTopicDeletion}})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			if len(k) != 1+16 {
				return fmt.Errorf("remote segment index: malformed key %x", k)
			}
			d := PendingTopicDeletion{}
			copy(d.TopicID[:], k[1:])
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			d.Topic = string(v)
			out = append(out, d)
		}
		return nil
	})
	return out, err
}

// ForgetTopic removes everything the index holds of a topic: its
// segments in every state, their epoch and id keys and missing marks, the
// partitions' log start offsets and the pending-deletion mark. Call it once the topic's
// objects are gone from the bucket.
func (x *Index) ForgetTopic(id UUID) error {
	defer x.memo.touchAll() // after x.mu is released: the deletes are done
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return ErrClosed
	}
	var keys [][]byte
	err := x.db.View(func(txn *badger.Txn) error {
		sp := append([]byte{prefixSegment}, id[:]...)
		it := txn.NewIterator(badger.IteratorOptions{Prefix: sp, PrefetchValues: true})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			var m SegmentMetadata
			if err := it.Item().Value(func(v []byte) error {
				var err error
				m, err = DecodeManifest(v)
				return err
			}); err != nil {
				// An undecodable entry: drop its segment key at least.
				keys = append(keys, it.Item().KeyCopy(nil))
				continue
			}
			keys = append(keys, keysOf(&m)...)
		}
		for _, p := range [][]byte{append([]byte{prefixEpoch}, id[:]...), append([]byte{prefixLogStart}, id[:]...), append([]byte{prefixMissing}, id[:]...)} {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: p})
			for it.Rewind(); it.Valid(); it.Next() {
				keys = append(keys, it.Item().KeyCopy(nil))
			}
			it.Close()
		}
		return nil
	})
	if err != nil {
		return err
	}
	keys = append(keys, topicDeletionKey(id))
	wb := x.db.NewWriteBatch()
	defer wb.Cancel()
	for _, k := range keys {
		if err := wb.Delete(k); err != nil {
			return err
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("forget topic %s: %w", id, err)
	}
	return x.db.Sync()
}
