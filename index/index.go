package index

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// Errors callers branch on.
var (
	// ErrNotFound: no segment matches the lookup, or the segment id to
	// update is unknown.
	ErrNotFound = errors.New("remote segment not found")
	// ErrInvalidTransition: the state change is not one Kafka's
	// RemoteLogSegmentState allows.
	ErrInvalidTransition = errors.New("invalid remote segment state transition")
	// ErrSegmentExists: another segment id already holds the base offset
	// (it must reach DELETE_SEGMENT_FINISHED first), or the same id was
	// added with different metadata.
	ErrSegmentExists = errors.New("remote segment exists")
	// ErrClosed: the index was closed.
	ErrClosed = errors.New("remote segment index closed")
)

// Key prefixes of the Badger database; see the package doc.
const (
	prefixSegment = 's'
	prefixID      = 'i'
	prefixEpoch   = 'e'
	prefixMeta    = 'm'
)

var keyVersion = []byte{prefixMeta, 'v'}

// indexVersion is the version of the database layout, kept under keyVersion.
const indexVersion = 1

// Options configures Open.
type Options struct {
	// Dir is the database directory, created if missing (for a broker:
	// <data dir>/remote-index).
	Dir string
	// Logger gets Badger's warnings and errors; nil: slog.Default().
	Logger *slog.Logger
	// InMemory keeps everything in memory (tests); Dir is then ignored.
	InMemory bool
}

// Index is the Badger index of remote segments. Its methods may be called
// from any goroutine: writes are serialised by one mutex, reads see a
// consistent snapshot of the database.
type Index struct {
	db *badger.DB

	mu     sync.Mutex // serialises read-modify-write updates
	closed bool

	memo memo // LogStart, LogEnd and LogStartOffset answers (memo.go)
}

// Open opens (or creates) the index. Writes are synced to disk before the
// call that made them returns.
func Open(o Options) (*Index, error) {
	if o.Dir == "" && !o.InMemory {
		return nil, errors.New("open remote segment index: no directory")
	}
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	bo := badger.DefaultOptions(o.Dir).
		WithInMemory(o.InMemory).
		WithSyncWrites(true).
		WithLogger(badgerLogger{logger.With("component", "remote-index")}).
		WithMetricsEnabled(false).
		WithCompression(options.None).
		WithMemTableSize(4 << 20).
		WithValueThreshold(64 << 10).
		WithNumMemtables(2).
		WithBlockCacheSize(0).
		WithNumLevelZeroTables(2).
		WithNumLevelZeroTablesStall(8).
		WithNumCompactors(2).
		WithValueLogFileSize(16 << 20).
		WithNumGoroutines(2)
	if o.InMemory {
		bo.Dir, bo.ValueDir = "", ""
	}
	db, err := badger.Open(bo)
	if err != nil {
		return nil, fmt.Errorf("open remote segment index %s: %w", o.Dir, err)
	}
	x := &Index{db: db}
	err = db.Update(func(txn *badger.Txn) error {
		it, err := txn.Get(keyVersion)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return txn.Set(keyVersion, binary.BigEndian.AppendUint16(nil, indexVersion))
		}
		if err != nil {
			return err
		}
		return it.Value(func(v []byte) error {
			if len(v) != 2 || binary.BigEndian.Uint16(v) != indexVersion {
				return fmt.Errorf("layout version %x, this broker reads %d: move the directory away: the broker refreshes a new one from the bucket", v, indexVersion)
			}
			return nil
		})
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("open remote segment index %s: %w", o.Dir, err)
	}
	return x, nil
}

// Close closes the database.
func (x *Index) Close() error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil
	}
	x.closed = true
	x.memo.touchAll() // later lookups reach Badger and fail with ErrClosed
	return x.db.Close()
}

// AddSegment records a segment whose upload starts: its state must be
// COPY_SEGMENT_STARTED (Kafka's addCopyInProgressSegment). Adding the
// same segment again with the same metadata is a no-op, so that retries
// are idempotent.
func (x *Index) AddSegment(m SegmentMetadata) error {
	if err := m.Validate(); err != nil {
		return err
	}
	if m.State != CopySegmentStarted {
		return fmt.Errorf("%w: segment %s added in state %s, want %s", ErrInvalidTransition, m.SegmentID, m.State, CopySegmentStarted)
	}
	val, err := EncodeManifest(&m)
	if err != nil {
		return err
	}
	defer x.memo.touch(m.Partition)
	return x.update(func(txn *badger.Txn) error {
		if old, ok, err := getByID(txn, m.SegmentID); err != nil {
			return err
		} else if ok {
			oldVal, _ := EncodeManifest(&old)
			if !bytes.Equal(oldVal, val) {
				return fmt.Errorf("%w: segment %s is known in state %s with other metadata", ErrSegmentExists, m.SegmentID, old.State)
			}
			return nil
		}
		sk := segmentKey(m.Partition, m.StartOffset)
		if _, err := txn.Get(sk); err == nil {
			old, err := getSegment(txn, sk)
			if err != nil {
				return err
			}
			return fmt.Errorf("%w: %s offset %d is held by segment %s (%s)", ErrSegmentExists, m.Partition, m.StartOffset, old.SegmentID, old.State)
		} else if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		return putSegment(txn, nil, &m, val)
	})
}

// SegmentUpdate is Kafka's RemoteLogSegmentMetadataUpdate: a new state for
// a known segment.
type SegmentUpdate struct {
	Partition      TopicIDPartition
	SegmentID      UUID
	State          State
	EventTimestamp int64
	BrokerID       int32
}

// UpdateSegment moves a segment to a new state, if Kafka's state machine
// allows it, and returns the updated metadata. COPY_SEGMENT_FINISHED makes
// the segment readable; DELETE_SEGMENT_STARTED makes it unreadable again;
// DELETE_SEGMENT_FINISHED removes it from the index.
func (x *Index) UpdateSegment(u SegmentUpdate) (SegmentMetadata, error) {
	var out SegmentMetadata
	defer x.memo.touch(u.Partition)
	err := x.update(func(txn *badger.Txn) error {
		old, ok, err := getByID(txn, u.SegmentID)
		if err != nil {
			return err
		}
		if !ok || old.Partition != u.Partition {
			return fmt.Errorf("%w: segment %s of %s", ErrNotFound, u.SegmentID, u.Partition)
		}
		if u.State == CopySegmentStarted && old.State != CopySegmentStarted || !ValidTransition(&old.State, u.State) {
			return fmt.Errorf("%w: segment %s from %s to %s", ErrInvalidTransition, u.SegmentID, old.State, u.State)
		}
		m := old.Clone()
		m.State, m.EventTimestamp, m.BrokerID = u.State, u.EventTimestamp, u.BrokerID
		out = m
		if u.State == DeleteSegmentFinished {
			return deleteSegment(txn, &old)
		}
		val, err := EncodeManifest(&m)
		if err != nil {
			return err
		}
		return putSegment(txn, &old, &m, val)
	})
	return out, err
}

// ReplacePartition makes segs the partition's whole content, whatever
// their states (a refresh from the bucket loads what the manifests say).
// Every segment must belong to tp, and ids must be unique. Two segments
// may start at one offset (two leaders uploaded the same range, or an
// abandoned attempt beside a finished one): the index keeps the one
// Prefer picks, so every broker reading the same bucket keeps the same
// one; the other's objects are left to whoever settles it.
func (x *Index) ReplacePartition(tp TopicIDPartition, segs []SegmentMetadata) error {
	ids := make(map[UUID]bool, len(segs))
	byBase := make(map[int64]int, len(segs))
	kept := make([]SegmentMetadata, 0, len(segs))
	for i := range segs {
		m := &segs[i]
		if m.Partition != tp {
			return fmt.Errorf("replace %s: segment %s belongs to %s", tp, m.SegmentID, m.Partition)
		}
		if m.State == DeleteSegmentFinished {
			return fmt.Errorf("replace %s: %w: segment %s is %s", tp, ErrInvalidTransition, m.SegmentID, m.State)
		}
		if ids[m.SegmentID] {
			return fmt.Errorf("replace %s: %w: segment %s given twice", tp, ErrSegmentExists, m.SegmentID)
		}
		ids[m.SegmentID] = true
		if j, ok := byBase[m.StartOffset]; ok {
			if Prefer(m, &kept[j]) {
				kept[j] = *m
			}
			continue
		}
		byBase[m.StartOffset] = len(kept)
		kept = append(kept, *m)
	}
	segs = kept
	vals := make([][]byte, len(segs))
	for i := range segs {
		m := &segs[i]
		v, err := EncodeManifest(m)
		if err != nil {
			return fmt.Errorf("replace %s: %w", tp, err)
		}
		vals[i] = v
	}
	defer x.memo.touch(tp) // after x.mu is released: the writes are done
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return ErrClosed
	}
	// A partition may not fit one transaction: write the new segments,
	// then delete the keys of the old ones that nothing new overwrote, in
	// batches. Readers (which do not take x.mu for long) see the old
	// segments, then old and new together, then the new ones: never an
	// empty partition. A crash in between is repaired by the partition's
	// next refresh from the bucket, which a broker makes before it
	// trusts the partition again.
	var old []SegmentMetadata
	if err := x.db.View(func(txn *badger.Txn) error {
		return scan(txn, tp, false, func(m *SegmentMetadata) bool { old = append(old, m.Clone()); return true })
	}); err != nil {
		return err
	}
	wb := x.db.NewWriteBatch()
	defer wb.Cancel()
	written := map[string]bool{}
	set := func(k, v []byte) error {
		written[string(k)] = true
		return wb.Set(k, v)
	}
	for i := range segs {
		if err := setSegment(set, nil, &segs[i], vals[i]); err != nil {
			return err
		}
	}
	for i := range old {
		for _, k := range keysOf(&old[i]) {
			if written[string(k)] {
				continue
			}
			if err := wb.Delete(k); err != nil {
				return err
			}
		}
	}
	if err := wb.Flush(); err != nil {
		return fmt.Errorf("replace %s: %w", tp, err)
	}
	return x.db.Sync()
}

// Segment returns one segment by id.
func (x *Index) Segment(tp TopicIDPartition, id UUID) (SegmentMetadata, error) {
	var m SegmentMetadata
	err := x.view(func(txn *badger.Txn) error {
		got, ok, err := getByID(txn, id)
		if err != nil {
			return err
		}
		if !ok || got.Partition != tp {
			return fmt.Errorf("%w: segment %s of %s", ErrNotFound, id, tp)
		}
		m = got
		return nil
	})
	return m, err
}

// Segments lists a partition's segments in every state (except deleted,
// which the index forgets), by start offset.
func (x *Index) Segments(tp TopicIDPartition) ([]SegmentMetadata, error) {
	var out []SegmentMetadata
	err := x.view(func(txn *badger.Txn) error {
		return scan(txn, tp, false, func(m *SegmentMetadata) bool { out = append(out, m.Clone()); return true })
	})
	return out, err
}

// Partitions lists the partitions that have segments, ordered by topic id
// and partition.
func (x *Index) Partitions() ([]TopicIDPartition, error) {
	var out []TopicIDPartition
	err := x.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte{prefixSegment}})
		defer it.Close()
		for it.Rewind(); it.Valid(); {
			k := it.Item().Key()
			if len(k) != 1+20+8 {
				return fmt.Errorf("remote segment index: malformed key %x", k)
			}
			tp := TopicIDPartition{Partition: int32(binary.BigEndian.Uint32(k[17:21]))}
			copy(tp.TopicID[:], k[1:17])
			out = append(out, tp)
			it.Seek(append(partitionPrefix(tp), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff))
		}
		return nil
	})
	return out, err
}

// SegmentForOffset returns the readable (COPY_SEGMENT_FINISHED) segment
// holding offset: the finished segment with the greatest start offset at
// or below it, if its end offset reaches it.
func (x *Index) SegmentForOffset(tp TopicIDPartition, offset int64) (SegmentMetadata, error) {
	var out SegmentMetadata
	err := x.view(func(txn *badger.Txn) error {
		found := false
		err := scanDown(txn, tp, offset, func(m *SegmentMetadata) bool {
			if m.State != CopySegmentFinished {
				return true
			}
			if m.EndOffset >= offset {
				out, found = m.Clone(), true
			}
			return false
		})
		if err == nil && !found {
			err = fmt.Errorf("%w: %s offset %d", ErrNotFound, tp, offset)
		}
		return err
	})
	return out, err
}

// SegmentForEpochOffset is Kafka's remoteLogSegmentMetadata(leaderEpoch,
// offset): among the readable segments holding leader epoch epoch, the
// one with the greatest epoch start at or below offset, if the epoch's
// range in it reaches offset.
func (x *Index) SegmentForEpochOffset(tp TopicIDPartition, epoch int32, offset int64) (SegmentMetadata, error) {
	var out SegmentMetadata
	err := x.view(func(txn *badger.Txn) error {
		prefix := epochPrefix(tp, epoch)
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, Reverse: true})
		defer it.Close()
		it.Seek(binary.BigEndian.AppendUint64(bytes.Clone(prefix), uint64(offset)))
		if !it.Valid() {
			return fmt.Errorf("%w: %s epoch %d offset %d", ErrNotFound, tp, epoch, offset)
		}
		base, err := epochTarget(it.Item())
		if err != nil {
			return err
		}
		m, err := getSegment(txn, segmentKey(tp, base))
		if err != nil {
			return err
		}
		if _, end, ok := m.EpochRange(epoch); !ok || end < offset || m.State != CopySegmentFinished {
			return fmt.Errorf("%w: %s epoch %d offset %d", ErrNotFound, tp, epoch, offset)
		}
		out = m
		return nil
	})
	return out, err
}

// HighestOffsetForEpoch is Kafka's highestOffsetForEpoch: the last offset
// of leader epoch epoch in the readable remote segments.
func (x *Index) HighestOffsetForEpoch(tp TopicIDPartition, epoch int32) (int64, bool, error) {
	var (
		end   int64
		found bool
	)
	err := x.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: epochPrefix(tp, epoch)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			base, err := epochTarget(it.Item())
			if err != nil {
				return err
			}
			m, err := getSegment(txn, segmentKey(tp, base))
			if err != nil {
				return err
			}
			if _, e, ok := m.EpochRange(epoch); ok && (!found || e > end) {
				end, found = e, true
			}
		}
		return nil
	})
	return end, found, err
}

// SegmentForTimestamp returns the first readable segment, by start
// offset, that ends at or after fromOffset and has a max timestamp at or
// after ts: where ListOffsets by timestamp continues its search (records
// below fromOffset, the log start, are not to be returned).
func (x *Index) SegmentForTimestamp(tp TopicIDPartition, ts, fromOffset int64) (SegmentMetadata, error) {
	var out SegmentMetadata
	err := x.view(func(txn *badger.Txn) error {
		found := false
		err := scan(txn, tp, false, func(m *SegmentMetadata) bool {
			if m.State == CopySegmentFinished && m.EndOffset >= fromOffset && m.MaxTimestamp >= ts {
				out, found = m.Clone(), true
				return false
			}
			return true
		})
		if err == nil && !found {
			err = fmt.Errorf("%w: %s timestamp %d", ErrNotFound, tp, ts)
		}
		return err
	})
	return out, err
}

// LogStart returns the remote log start offset: the start offset of the
// first readable segment. ok is false when there is none.
func (x *Index) LogStart(tp TopicIDPartition) (int64, bool, error) {
	return x.firstReadable(tp, memoLogStart, func(m *SegmentMetadata) int64 { return m.StartOffset })
}

// LogEnd returns the remote log end: the last offset of the readable
// segment with the greatest start offset (Kafka's highest remote offset;
// LATEST_TIERED answers it). ok is false when there is none.
func (x *Index) LogEnd(tp TopicIDPartition) (int64, bool, error) {
	return x.firstReadable(tp, memoLogEnd, func(m *SegmentMetadata) int64 { return m.EndOffset })
}

// firstReadable is offsetOf the partition's first readable segment, from
// the lowest start offset (memoLogStart) or the highest (memoLogEnd).
func (x *Index) firstReadable(tp TopicIDPartition, kind memoKind, offsetOf func(*SegmentMetadata) int64) (int64, bool, error) {
	return x.memoized(memoKey{tp, kind}, func() (offset int64, ok bool, err error) {
		err = x.view(func(txn *badger.Txn) error {
			return scan(txn, tp, kind == memoLogEnd, func(m *SegmentMetadata) bool {
				if m.State == CopySegmentFinished {
					offset, ok = offsetOf(m), true
					return false
				}
				return true
			})
		})
		return offset, ok, err
	})
}

func (x *Index) view(fn func(*badger.Txn) error) error {
	x.mu.Lock()
	closed := x.closed
	x.mu.Unlock()
	if closed {
		return ErrClosed
	}
	return x.db.View(fn)
}

func (x *Index) update(fn func(*badger.Txn) error) error {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return ErrClosed
	}
	return x.db.Update(fn)
}

// Keys.

func partitionPrefix(tp TopicIDPartition) []byte {
	k := make([]byte, 0, 1+20+8)
	k = append(k, prefixSegment)
	k = append(k, tp.TopicID[:]...)
	return binary.BigEndian.AppendUint32(k, uint32(tp.Partition))
}

func segmentKey(tp TopicIDPartition, base int64) []byte {
	return binary.BigEndian.AppendUint64(partitionPrefix(tp), uint64(base))
}

func idKey(id UUID) []byte { return append([]byte{prefixID}, id[:]...) }

func epochPrefix(tp TopicIDPartition, epoch int32) []byte {
	k := make([]byte, 0, 1+20+4+8)
	k = append(k, prefixEpoch)
	k = append(k, tp.TopicID[:]...)
	k = binary.BigEndian.AppendUint32(k, uint32(tp.Partition))
	return binary.BigEndian.AppendUint32(k, uint32(epoch))
}

func epochKey(tp TopicIDPartition, e EpochEntry) []byte {
	return binary.BigEndian.AppendUint64(epochPrefix(tp, e.Epoch), uint64(e.StartOffset))
}

// keysOf lists every key a stored segment has.
func keysOf(m *SegmentMetadata) [][]byte {
	keys := [][]byte{segmentKey(m.Partition, m.StartOffset), idKey(m.SegmentID)}
	for _, e := range m.LeaderEpochs {
		keys = append(keys, epochKey(m.Partition, e))
	}
	return keys
}

// setSegment writes m (value val) with set; old, when not nil, is the
// stored version being replaced, whose epoch keys go when m is not
// readable. Epoch keys exist for readable segments only, as Kafka maps
// epochs to segments from COPY_SEGMENT_FINISHED until
// DELETE_SEGMENT_STARTED.
func setSegment(set func(k, v []byte) error, del func(k []byte) error, m *SegmentMetadata, val []byte) error {
	if err := set(segmentKey(m.Partition, m.StartOffset), val); err != nil {
		return err
	}
	target := segmentKey(m.Partition, m.StartOffset)[1:]
	if err := set(idKey(m.SegmentID), target); err != nil {
		return err
	}
	base := binary.BigEndian.AppendUint64(nil, uint64(m.StartOffset))
	for _, e := range m.LeaderEpochs {
		k := epochKey(m.Partition, e)
		var err error
		switch {
		case m.State == CopySegmentFinished:
			err = set(k, base)
		case del != nil:
			err = del(k)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func putSegment(txn *badger.Txn, old, m *SegmentMetadata, val []byte) error {
	var del func([]byte) error
	if old != nil {
		del = txn.Delete
	}
	return setSegment(txn.Set, del, m, val)
}

func deleteSegment(txn *badger.Txn, m *SegmentMetadata) error {
	for _, k := range keysOf(m) {
		if err := txn.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

func getSegment(txn *badger.Txn, key []byte) (SegmentMetadata, error) {
	item, err := txn.Get(key)
	if err != nil {
		return SegmentMetadata{}, fmt.Errorf("remote segment index: get %x: %w", key, err)
	}
	var m SegmentMetadata
	err = item.Value(func(v []byte) error {
		m, err = DecodeManifest(v)
		return err
	})
	if err != nil {
		return SegmentMetadata{}, fmt.Errorf("remote segment index: entry %x: %w", key, err)
	}
	return m, nil
}

func getByID(txn *badger.Txn, id UUID) (SegmentMetadata, bool, error) {
	item, err := txn.Get(idKey(id))
	if errors.Is(err, badger.ErrKeyNotFound) {
		return SegmentMetadata{}, false, nil
	}
	if err != nil {
		return SegmentMetadata{}, false, err
	}
	target, err := item.ValueCopy(nil)
	if err != nil {
		return SegmentMetadata{}, false, err
	}
	m, err := getSegment(txn, append([]byte{prefixSegment}, target...))
	if err != nil {
		return SegmentMetadata{}, false, err
	}
	if m.SegmentID != id {
		return SegmentMetadata{}, false, fmt.Errorf("remote segment index: id key of %s points at segment %s", id, m.SegmentID)
	}
	return m, true, nil
}

func epochTarget(item *badger.Item) (int64, error) {
	var base int64
	err := item.Value(func(v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("remote segment index: epoch entry %x of %d bytes", item.Key(), len(v))
		}
		base = int64(binary.BigEndian.Uint64(v))
		return nil
	})
	return base, err
}

// scan calls fn for the partition's segments by start offset (descending
// when reverse) until fn returns false.
func scan(txn *badger.Txn, tp TopicIDPartition, reverse bool, fn func(*SegmentMetadata) bool) error {
	prefix := partitionPrefix(tp)
	it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, Reverse: reverse, PrefetchValues: true, PrefetchSize: 16})
	defer it.Close()
	if reverse {
		it.Seek(append(bytes.Clone(prefix), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff))
	} else {
		it.Rewind()
	}
	return iterate(it, fn)
}

// scanDown calls fn for the partition's segments with start offsets at or
// below offset, descending, until fn returns false.
func scanDown(txn *badger.Txn, tp TopicIDPartition, offset int64, fn func(*SegmentMetadata) bool) error {
	it := txn.NewIterator(badger.IteratorOptions{Prefix: partitionPrefix(tp), Reverse: true})
	defer it.Close()
	it.Seek(segmentKey(tp, offset))
	return iterate(it, fn)
}

func iterate(it *badger.Iterator, fn func(*SegmentMetadata) bool) error {
	for ; it.Valid(); it.Next() {
		var m SegmentMetadata
		err := it.Item().Value(func(v []byte) error {
			var err error
			m, err = DecodeManifest(v)
			return err
		})
		if err != nil {
			return fmt.Errorf("remote segment index: entry %x: %w", it.Item().Key(), err)
		}
		if !fn(&m) {
			return nil
		}
	}
	return nil
}

// badgerLogger sends Badger's warnings and errors to slog; its info and
// debug chatter is dropped.
type badgerLogger struct{ l *slog.Logger }

func (b badgerLogger) Errorf(f string, a ...any)   { b.l.Error(fmt.Sprintf(f, a...)) }
func (b badgerLogger) Warningf(f string, a ...any) { b.l.Warn(fmt.Sprintf(f, a...)) }
func (badgerLogger) Infof(string, ...any)          {}
func (badgerLogger) Debugf(string, ...any)         {}
