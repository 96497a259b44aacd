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
	// ErrSegmentExists: the segment id is known with other metadata (or
	// in another partition), or ReplacePartition was given one id twice.
	// Other segments at the same or overlapping offsets are no conflict.
	ErrSegmentExists = errors.New("remote segment exists")
	// ErrClosed: the index was closed.
	ErrClosed = errors.New("remote segment index closed")
)

// Key prefixes of the Badger database; see the package doc.
const (
	prefixSegment = 's'
	prefixID      = 'i'
	prefixEpoch   = 'e'
	prefixMissing = 'x'
	prefixMeta    = 'm'
)

var keyVersion = []byte{prefixMeta, 'v'}

// indexVersion is the version of the database layout, kept under
// keyVersion. Open migrates version 1 (migrate.go).
const indexVersion = 2

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

	memo memo // resolved views of partitions, LogStartOffset answers (memo.go)
}

// Open opens (or creates) the index. Writes are synced to disk before the
// call that made them returns. A database of layout version 1 is migrated
// to version 2 first (migrate.go).
func Open(o Options) (*Index, error) {
	logger := o.Logger
	if logger == nil {
		logger = slog.Default()
	}
	x, err := openDB(o, logger)
	if err != nil {
		return nil, err
	}
	if err := x.checkVersion(logger); err != nil {
		x.db.Close()
		return nil, fmt.Errorf("open remote segment index %s: %w", o.Dir, err)
	}
	return x, nil
}

// openDB opens the Badger database, whatever its layout version.
func openDB(o Options, logger *slog.Logger) (*Index, error) {
	if o.Dir == "" && !o.InMemory {
		return nil, errors.New("open remote segment index: no directory")
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
	return &Index{db: db}, nil
}

// checkVersion sets the layout version of a new database, migrates one of
// version 1, and refuses any other.
func (x *Index) checkVersion(logger *slog.Logger) error {
	var version uint16
	found := false
	err := x.db.View(func(txn *badger.Txn) error {
		it, err := txn.Get(keyVersion)
		if errors.Is(err, badger.ErrKeyNotFound) {
			return nil
		}
		if err != nil {
			return err
		}
		return it.Value(func(v []byte) error {
			if len(v) != 2 {
				return fmt.Errorf("layout version %x: move the directory away: the broker refreshes a new one from the bucket", v)
			}
			version, found = binary.BigEndian.Uint16(v), true
			return nil
		})
	})
	switch {
	case err != nil:
		return err
	case !found:
		return x.setVersion()
	case version == 1:
		return x.migrateV1(logger)
	case version != indexVersion:
		return fmt.Errorf("layout version %d, this broker reads %d (and migrates 1): move the directory away: the broker refreshes a new one from the bucket", version, indexVersion)
	}
	return nil
}

func (x *Index) setVersion() error {
	return x.db.Update(func(txn *badger.Txn) error {
		return txn.Set(keyVersion, binary.BigEndian.AppendUint16(nil, indexVersion))
	})
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
// are idempotent; the same id with other metadata is ErrSegmentExists.
// Other segments may start at the same offset or overlap it (a new leader
// uploads a longer segment at the base of its predecessor's, say): reads
// pick among them (see "Overlapping segments" in the package doc).
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
// the segment readable (unless it is marked missing); DELETE_SEGMENT_STARTED
// makes it unreadable again; DELETE_SEGMENT_FINISHED removes it from the
// index, with its missing mark.
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
// Every segment must belong to tp, and ids must be unique; any number may
// start at one offset or overlap (two leaders uploaded the same range, or
// an abandoned attempt lies beside a finished one): each is kept, and
// reads pick among the readable ones by Prefer, so that every broker
// reading the same bucket serves the same one. The missing marks
// (MarkMissing) of segments still in segs stay; those of the others go.
func (x *Index) ReplacePartition(tp TopicIDPartition, segs []SegmentMetadata) error {
	ids := make(map[UUID]bool, len(segs))
	vals := make([][]byte, len(segs))
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
	var marks [][]byte
	if err := x.db.View(func(txn *badger.Txn) error {
		if err := scan(txn, tp, false, func(m *SegmentMetadata) bool { old = append(old, m.Clone()); return true }); err != nil {
			return err
		}
		return scanMissing(txn, tp, func(id UUID) {
			if !ids[id] {
				marks = append(marks, missingKey(tp, id))
			}
		})
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
	for _, k := range marks {
		if err := wb.Delete(k); err != nil {
			return err
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
// which the index forgets), marked missing or not, by start offset, then
// segment id (bytewise).
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
			if len(k) != segmentKeyLen {
				return fmt.Errorf("remote segment index: malformed key %x", k)
			}
			tp := TopicIDPartition{Partition: int32(binary.BigEndian.Uint32(k[17:21]))}
			copy(tp.TopicID[:], k[1:17])
			out = append(out, tp)
			it.Seek(append(partitionPrefix(tp), bytes.Repeat([]byte{0xff}, segmentKeyLen)...))
		}
		return nil
	})
	return out, err
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

// Key lengths of layout version 2.
const (
	segmentKeyLen = 1 + 16 + 4 + 8 + 16     // 's' topicId partition base segmentId
	epochKeyLen   = 1 + 16 + 4 + 4 + 8 + 16 // 'e' topicId partition epoch start segmentId
)

func partitionPrefix(tp TopicIDPartition) []byte {
	k := make([]byte, 0, segmentKeyLen)
	k = append(k, prefixSegment)
	k = append(k, tp.TopicID[:]...)
	return binary.BigEndian.AppendUint32(k, uint32(tp.Partition))
}

// segmentBase is the prefix of the keys of the partition's segments that
// start at base.
func segmentBase(tp TopicIDPartition, base int64) []byte {
	return binary.BigEndian.AppendUint64(partitionPrefix(tp), uint64(base))
}

func segmentKey(tp TopicIDPartition, base int64, id UUID) []byte {
	return append(segmentBase(tp, base), id[:]...)
}

func idKey(id UUID) []byte { return append([]byte{prefixID}, id[:]...) }

func epochPrefix(tp TopicIDPartition, epoch int32) []byte {
	k := make([]byte, 0, epochKeyLen)
	k = append(k, prefixEpoch)
	k = append(k, tp.TopicID[:]...)
	k = binary.BigEndian.AppendUint32(k, uint32(tp.Partition))
	return binary.BigEndian.AppendUint32(k, uint32(epoch))
}

func epochKey(tp TopicIDPartition, e EpochEntry, id UUID) []byte {
	return append(binary.BigEndian.AppendUint64(epochPrefix(tp, e.Epoch), uint64(e.StartOffset)), id[:]...)
}

func missingPrefix(tp TopicIDPartition) []byte {
	k := append([]byte{prefixMissing}, tp.TopicID[:]...)
	return binary.BigEndian.AppendUint32(k, uint32(tp.Partition))
}

func missingKey(tp TopicIDPartition, id UUID) []byte { return append(missingPrefix(tp), id[:]...) }

// keysOf lists every key a stored segment has, but its missing mark.
func keysOf(m *SegmentMetadata) [][]byte {
	keys := [][]byte{segmentKey(m.Partition, m.StartOffset, m.SegmentID), idKey(m.SegmentID)}
	for _, e := range m.LeaderEpochs {
		keys = append(keys, epochKey(m.Partition, e, m.SegmentID))
	}
	return keys
}

// setSegment writes m (value val) with set; del, when not nil, deletes
// the epoch keys a stored version of m had when m is not readable. Epoch
// keys exist for COPY_SEGMENT_FINISHED segments only, as Kafka maps epochs
// to segments from COPY_SEGMENT_FINISHED until DELETE_SEGMENT_STARTED.
func setSegment(set func(k, v []byte) error, del func(k []byte) error, m *SegmentMetadata, val []byte) error {
	if err := set(segmentKey(m.Partition, m.StartOffset, m.SegmentID), val); err != nil {
		return err
	}
	if err := set(idKey(m.SegmentID), segmentBase(m.Partition, m.StartOffset)[1:]); err != nil {
		return err
	}
	base := binary.BigEndian.AppendUint64(nil, uint64(m.StartOffset))
	for _, e := range m.LeaderEpochs {
		k := epochKey(m.Partition, e, m.SegmentID)
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
	for _, k := range append(keysOf(m), missingKey(m.Partition, m.SegmentID)) {
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
	if len(target) != 16+4+8 {
		return SegmentMetadata{}, false, fmt.Errorf("remote segment index: id key of %s holds %d bytes", id, len(target))
	}
	m, err := getSegment(txn, append(append([]byte{prefixSegment}, target...), id[:]...))
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
		it.Seek(append(bytes.Clone(prefix), bytes.Repeat([]byte{0xff}, segmentKeyLen-len(prefix))...))
	} else {
		it.Rewind()
	}
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
