package index

import (
	"bytes"
	"fmt"
	"log/slog"

	"github.com/dgraph-io/badger/v4"
)

// Layout version 1 keyed a segment by its base offset alone, and its epoch
// entries by epoch and start offset:
//
//	's' topicId[16] partition[4] base[8]           → manifest
//	'e' topicId[16] partition[4] epoch[4] start[8] → base[8]
//
// Its 'i', 'o', 'd' and 'm' keys are those of version 2.
const (
	v1SegmentKeyLen = 1 + 16 + 4 + 8
	v1EpochKeyLen   = 1 + 16 + 4 + 4 + 8
)

// migrateV1 rewrites a database of layout version 1 in place, in three
// steps, each synced before the next starts: it writes every segment's
// version 2 keys (segment, id and, when COPY_SEGMENT_FINISHED, epoch
// keys); it deletes the version 1 segment and epoch keys; it sets the
// version. Keys of the two versions differ in length, so that a crash at
// any point leaves a database of version 1 whose next Open migrates what
// is left (writing again what a previous attempt wrote is a no-op). A
// version 1 entry whose manifest does not decode is dropped, with the id
// keys that point at it (it was unreadable already; a refresh from the
// bucket brings the segment back).
func (x *Index) migrateV1(logger *slog.Logger) error {
	logger = logger.With("component", "remote-index")
	segments, dropped, err := x.migrateWrite(logger)
	if err != nil {
		return fmt.Errorf("migrate layout version 1 to 2: write the new keys: %w", err)
	}
	if err := x.migrateDelete(); err != nil {
		return fmt.Errorf("migrate layout version 1 to 2: delete the old keys: %w", err)
	}
	if err := x.setVersion(); err != nil {
		return fmt.Errorf("migrate layout version 1 to 2: %w", err)
	}
	logger.Info("remote index migrated from layout version 1 to 2", "segments", segments, "dropped", dropped)
	return nil
}

// migrateWrite is migrateV1's first step: the version 2 keys of every
// version 1 segment key, synced.
func (x *Index) migrateWrite(logger *slog.Logger) (segments, dropped int, err error) {
	bad := map[string]bool{} // id key targets of dropped entries
	wb := x.db.NewWriteBatch()
	defer wb.Cancel()
	err = x.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixSegment}, PrefetchValues: true, PrefetchSize: 64})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			k := it.Item().Key()
			if len(k) != v1SegmentKeyLen {
				continue // written by an earlier attempt
			}
			var m SegmentMetadata
			err := it.Item().Value(func(v []byte) error {
				var err error
				m, err = DecodeManifest(v)
				return err
			})
			if err == nil && !bytes.Equal(segmentBase(m.Partition, m.StartOffset), k) {
				err = fmt.Errorf("the manifest of segment %s of %s at %d", m.SegmentID, m.Partition, m.StartOffset)
			}
			if err != nil {
				logger.Warn("remote index migration: dropping an unreadable entry; the next refresh from the bucket restores it", "key", fmt.Sprintf("%x", k), "err", err)
				bad[string(k[1:])] = true
				dropped++
				continue
			}
			val, err := EncodeManifest(&m)
			if err != nil {
				return err
			}
			if err := setSegment(wb.Set, nil, &m, val); err != nil {
				return err
			}
			segments++
		}
		if len(bad) == 0 {
			return nil
		}
		it2 := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixID}, PrefetchValues: true})
		defer it2.Close()
		for it2.Rewind(); it2.Valid(); it2.Next() {
			target, err := it2.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			if bad[string(target)] {
				if err := wb.Delete(it2.Item().KeyCopy(nil)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err == nil {
		err = wb.Flush()
	}
	if err == nil {
		err = x.db.Sync()
	}
	return segments, dropped, err
}

// migrateDelete is migrateV1's second step: it deletes the version 1
// segment and epoch keys, synced.
func (x *Index) migrateDelete() error {
	wb := x.db.NewWriteBatch()
	defer wb.Cancel()
	err := x.db.View(func(txn *badger.Txn) error {
		for _, old := range []struct {
			prefix byte
			n      int
		}{{prefixSegment, v1SegmentKeyLen}, {prefixEpoch, v1EpochKeyLen}} {
			it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{old.prefix}})
			for it.Rewind(); it.Valid(); it.Next() {
				if len(it.Item().Key()) != old.n {
					continue
				}
				if err := wb.Delete(it.Item().KeyCopy(nil)); err != nil {
					it.Close()
					return err
				}
			}
			it.Close()
		}
		return nil
	})
	if err == nil {
		err = wb.Flush()
	}
	if err == nil {
		err = x.db.Sync()
	}
	return err
}
