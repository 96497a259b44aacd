package index

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
)

// UUID is a Kafka Uuid (topic ids, remote segment ids): 16 bytes, shown as
// unpadded URL-safe base64 like Kafka's Uuid.toString. It converts to and
// from kmsg's [16]byte topic ids.
type UUID [16]byte

// NewUUID returns a random (version 4) UUID that is not the zero UUID.
func NewUUID() UUID {
	var u UUID
	for u.IsZero() {
		_, _ = rand.Read(u[:])
		u[6] = u[6]&0x0f | 0x40
		u[8] = u[8]&0x3f | 0x80
	}
	return u
}

// IsZero reports whether u is Kafka's ZERO_UUID (no id).
func (u UUID) IsZero() bool { return u == UUID{} }

// String is Kafka's form: 22 characters of unpadded URL-safe base64.
func (u UUID) String() string { return base64.RawURLEncoding.EncodeToString(u[:]) }

// ParseUUID parses Kafka's string form of a Uuid.
func ParseUUID(s string) (UUID, error) {
	var u UUID
	if len(s) != 22 {
		return u, fmt.Errorf("uuid %q: want 22 base64url characters", s)
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != 16 {
		return u, fmt.Errorf("uuid %q: not base64url", s)
	}
	copy(u[:], b)
	return u, nil
}

// TopicIDPartition names a partition by topic id (which, unlike the name,
// is never reused) and partition index, as Kafka's TopicIdPartition.
type TopicIDPartition struct {
	TopicID   UUID
	Partition int32
}

func (tp TopicIDPartition) String() string { return fmt.Sprintf("%s-%d", tp.TopicID, tp.Partition) }

// State is Kafka's RemoteLogSegmentState, with Kafka's ids.
type State int8

const (
	CopySegmentStarted    State = 0 // upload under way; not readable
	CopySegmentFinished   State = 1 // uploaded; readable
	DeleteSegmentStarted  State = 2 // deletion under way; not readable
	DeleteSegmentFinished State = 3 // deleted; the index forgets the segment
)

func (s State) String() string {
	switch s {
	case CopySegmentStarted:
		return "COPY_SEGMENT_STARTED"
	case CopySegmentFinished:
		return "COPY_SEGMENT_FINISHED"
	case DeleteSegmentStarted:
		return "DELETE_SEGMENT_STARTED"
	case DeleteSegmentFinished:
		return "DELETE_SEGMENT_FINISHED"
	}
	return fmt.Sprintf("State(%d)", int8(s))
}

// Valid reports whether s is one of the four states.
func (s State) Valid() bool { return s >= CopySegmentStarted && s <= DeleteSegmentFinished }

// ValidTransition reports whether a segment may move from one state to
// another, as Kafka's RemoteLogSegmentState.isValidTransition: a new
// segment (from == nil) starts in COPY_SEGMENT_STARTED; a state may be
// set again (retries are idempotent); COPY_SEGMENT_STARTED moves to
// COPY_SEGMENT_FINISHED or DELETE_SEGMENT_STARTED (an abandoned upload is
// cleaned up), COPY_SEGMENT_FINISHED to DELETE_SEGMENT_STARTED, and
// DELETE_SEGMENT_STARTED to DELETE_SEGMENT_FINISHED.
func ValidTransition(from *State, to State) bool {
	if from == nil {
		return to == CopySegmentStarted
	}
	if *from == to {
		return to.Valid()
	}
	switch *from {
	case CopySegmentStarted:
		return to == CopySegmentFinished || to == DeleteSegmentStarted
	case CopySegmentFinished:
		return to == DeleteSegmentStarted
	case DeleteSegmentStarted:
		return to == DeleteSegmentFinished
	}
	return false
}

// EpochEntry is one leader epoch of a segment and the first offset the
// segment holds in it.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// SegmentMetadata is Kafka's RemoteLogSegmentMetadata: one sealed segment
// of a partition that is (being) copied to the object store.
type SegmentMetadata struct {
	Partition TopicIDPartition
	// SegmentID is the RemoteLogSegmentId's id: fresh for every upload
	// attempt, so that the objects of two attempts never collide.
	SegmentID UUID
	// Topic is the topic's name at upload time, kept for people reading
	// the bucket; the id is what identifies the topic.
	Topic string

	StartOffset    int64        // the segment's base offset (first offset)
	EndOffset      int64        // its last offset, inclusive
	MaxTimestamp   int64        // largest batch max timestamp, ms; -1 if none
	EventTimestamp int64        // when this state was set, ms (a STARTED manifest: its latest heartbeat)
	BrokerID       int32        // broker that set this state
	SegmentSize    int64        // bytes of the .log object
	LeaderEpochs   []EpochEntry // epochs → start offsets, ascending; first starts at StartOffset
	State          State
	// UploadEpoch is the leader epoch of the partition under which the
	// upload ran (its leader was BrokerID at the COPY_SEGMENT_STARTED
	// state). The broker writes the COPY_SEGMENT_FINISHED state only
	// while it still leads at this epoch; of two readable segments that
	// hold an offset, the one uploaded at the greater epoch serves it
	// (Prefer). Manifests before version 3 did not record it: 0. Only
	// manifests with packed objects are written in version 3, so a
	// segment without them loses it in the index and the bucket (the
	// uploader always packs).
	UploadEpoch int32

	// Objects lists the objects uploaded for the segment (beyond the
	// manifest) and their sizes, so that readers know which exist and
	// a reconciliation pass can verify them.
	Objects []ObjectEntry
}

// ObjectKind is one of a remote segment's objects; its value is its id in
// the manifest.
type ObjectKind int8

const (
	ObjectLog                   ObjectKind = 0 // <base>.log
	ObjectOffsetIndex           ObjectKind = 1 // <base>.index
	ObjectTimeIndex             ObjectKind = 2 // <base>.timeindex
	ObjectLeaderEpochCheckpoint ObjectKind = 3 // leader-epoch-checkpoint, cut to the segment
	ObjectProducerSnapshot      ObjectKind = 4 // <base>.snapshot
	ObjectTransactionIndex      ObjectKind = 5 // <base>.txnindex
	ObjectIndexes               ObjectKind = 6 // <base>.indexes: the packed objects, one after another
	objectKinds                            = 7
)

// Suffix is the object's key suffix (see tier's key layout); each is the
// local file's extension, the checkpoint included.
func (k ObjectKind) Suffix() string {
	switch k {
	case ObjectLog:
		return ".log"
	case ObjectOffsetIndex:
		return ".index"
	case ObjectTimeIndex:
		return ".timeindex"
	case ObjectLeaderEpochCheckpoint:
		return ".leader-epoch-checkpoint"
	case ObjectProducerSnapshot:
		return ".snapshot"
	case ObjectTransactionIndex:
		return ".txnindex"
	case ObjectIndexes:
		return ".indexes"
	}
	return fmt.Sprintf(".kind%d", int8(k))
}

// Valid reports whether k is a known kind.
func (k ObjectKind) Valid() bool { return k >= 0 && k < objectKinds }

// ObjectEntry is one uploaded object of a segment. A packed object has no
// object of its own: its bytes are [Offset, Offset+Size) of the segment's
// .indexes object, which packs the small objects so that a segment costs
// the bucket fewer PUTs (on MinIO a 16 KiB PUT took a tenth of the time an
// 8 MiB one did).
type ObjectEntry struct {
	Kind   ObjectKind
	Size   int64
	Packed bool
	Offset int64 // in the .indexes object, when Packed
}

// Object returns the entry of the given kind.
func (m *SegmentMetadata) Object(k ObjectKind) (ObjectEntry, bool) {
	for _, o := range m.Objects {
		if o.Kind == k {
			return o, true
		}
	}
	return ObjectEntry{}, false
}

// EpochRange returns the offsets [start, end] the segment holds in a
// leader epoch, as Kafka computes them: from the epoch's start offset to
// the next epoch's start minus one, or to the segment's end offset.
func (m *SegmentMetadata) EpochRange(epoch int32) (start, end int64, ok bool) {
	for i, e := range m.LeaderEpochs {
		if e.Epoch != epoch {
			continue
		}
		end = m.EndOffset
		if i+1 < len(m.LeaderEpochs) {
			end = m.LeaderEpochs[i+1].StartOffset - 1
		}
		return e.StartOffset, end, true
	}
	return 0, 0, false
}

// Clone returns a deep copy.
func (m SegmentMetadata) Clone() SegmentMetadata {
	m.LeaderEpochs = slices.Clone(m.LeaderEpochs)
	m.Objects = slices.Clone(m.Objects)
	return m
}

// Prefer is the one rule that picks, of two segments holding an offset,
// the one that serves it (reads by the index, tier.FindSegment, the
// reconciliation): a readable (COPY_SEGMENT_FINISHED) segment over one
// that is not, then the greater upload epoch (the newer leader's upload:
// a frozen former leader's may have finished beside it), then the greater
// end offset (fewer segments to read), then the later event time (of a
// finished segment, when its upload finished: the later upload where
// manifests without an upload epoch say 0 for both), then the greater
// segment id. It reports whether a is picked over b. Whether a segment's
// objects are missing (Index.MarkMissing) is not in the metadata: the
// index leaves such segments out before it asks.
func Prefer(a, b *SegmentMetadata) bool {
	if ar, br := a.State == CopySegmentFinished, b.State == CopySegmentFinished; ar != br {
		return ar
	}
	av, bv := viewSegOf(a), viewSegOf(b)
	return prefer(&av, &bv)
}

// ErrInvalidMetadata wraps every reason Validate refuses metadata for.
var ErrInvalidMetadata = errors.New("invalid remote segment metadata")

// MaxTopicLen is the longest topic name Kafka allows.
const MaxTopicLen = 249

// Validate checks the metadata's own consistency: ids set, offsets
// ordered, leader epochs ascending inside the segment and starting at its
// first offset, a known state, known object kinds without repeats.
func (m *SegmentMetadata) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: segment %s of %s at %d: %s", ErrInvalidMetadata, m.SegmentID, m.Partition, m.StartOffset, fmt.Sprintf(format, args...))
	}
	switch {
	case m.Partition.TopicID.IsZero():
		return bad("zero topic id")
	case m.Partition.Partition < 0:
		return bad("negative partition")
	case m.SegmentID.IsZero():
		return bad("zero segment id")
	case len(m.Topic) > MaxTopicLen:
		return bad("topic name of %d bytes", len(m.Topic))
	case m.StartOffset < 0:
		return bad("negative start offset")
	case m.EndOffset < m.StartOffset:
		return bad("end offset %d below start offset", m.EndOffset)
	case m.MaxTimestamp < -1:
		return bad("max timestamp %d", m.MaxTimestamp)
	case m.UploadEpoch < 0:
		return bad("negative upload epoch %d", m.UploadEpoch)
	case m.SegmentSize < 0:
		return bad("negative size")
	case !m.State.Valid():
		return bad("unknown state %d", m.State)
	case len(m.LeaderEpochs) == 0:
		return bad("no leader epochs")
	case m.LeaderEpochs[0].StartOffset != m.StartOffset:
		return bad("first leader epoch starts at %d, not at the start offset", m.LeaderEpochs[0].StartOffset)
	}
	for i, e := range m.LeaderEpochs {
		if e.Epoch < 0 {
			return bad("negative leader epoch %d", e.Epoch)
		}
		if e.StartOffset > m.EndOffset {
			return bad("leader epoch %d starts at %d, after the end offset", e.Epoch, e.StartOffset)
		}
		if i > 0 {
			p := m.LeaderEpochs[i-1]
			if e.Epoch <= p.Epoch || e.StartOffset <= p.StartOffset {
				return bad("leader epochs not ascending: %d@%d after %d@%d", e.Epoch, e.StartOffset, p.Epoch, p.StartOffset)
			}
		}
	}
	var seen [objectKinds]bool
	for _, o := range m.Objects {
		if !o.Kind.Valid() {
			return bad("unknown object kind %d", o.Kind)
		}
		if seen[o.Kind] {
			return bad("object %s listed twice", o.Kind.Suffix())
		}
		seen[o.Kind] = true
		if o.Size < 0 {
			return bad("object %s of negative size", o.Kind.Suffix())
		}
		if o.Kind == ObjectLog && o.Size != m.SegmentSize {
			return bad("log object of %d bytes, segment size %d", o.Size, m.SegmentSize)
		}
		if !o.Packed {
			if o.Offset != 0 {
				return bad("object %s not packed at offset %d", o.Kind.Suffix(), o.Offset)
			}
			continue
		}
		if o.Kind == ObjectLog || o.Kind == ObjectIndexes {
			return bad("object %s packed", o.Kind.Suffix())
		}
		packs, ok := m.Object(ObjectIndexes)
		if !ok || packs.Packed {
			return bad("object %s packed without an %s object", o.Kind.Suffix(), ObjectIndexes.Suffix())
		}
		if o.Offset < 0 || o.Offset > packs.Size || o.Size > packs.Size-o.Offset {
			return bad("object %s packed at [%d, +%d) of %d bytes", o.Kind.Suffix(), o.Offset, o.Size, packs.Size)
		}
	}
	return nil
}
