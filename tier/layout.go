package tier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"strata/index"
)

// ManifestSuffix ends the key of a segment's manifest object.
const ManifestSuffix = ".manifest"

// TopicPrefix is the key prefix of every object of a topic:
// "<topic id>/", the id in Kafka's base64url form. Bucket lifecycle rules
// for a topic target the store's prefix followed by this.
func TopicPrefix(topicID index.UUID) string { return topicID.String() + "/" }

// PartitionPrefix is the key prefix of a partition's objects:
// "<topic id>/<partition>/".
func PartitionPrefix(tp index.TopicIDPartition) string {
	return TopicPrefix(tp.TopicID) + strconv.Itoa(int(tp.Partition)) + "/"
}

// segmentStem is "<topic id>/<partition>/<20-digit base offset>-<segment id>".
func segmentStem(tp index.TopicIDPartition, base int64, id index.UUID) string {
	return basePrefix(tp, base) + "-" + id.String()
}

// basePrefix is "<topic id>/<partition>/<20-digit base offset>": a listing
// that starts after it (S3's StartAfter) holds every key of base and
// above, and none below.
func basePrefix(tp index.TopicIDPartition, base int64) string {
	return fmt.Sprintf("%s%020d", PartitionPrefix(tp), base)
}

// ObjectKey is the key of one of a segment's objects.
func ObjectKey(m *index.SegmentMetadata, kind index.ObjectKind) string {
	return segmentStem(m.Partition, m.StartOffset, m.SegmentID) + kind.Suffix()
}

// ManifestKey is the key of a segment's manifest.
func ManifestKey(m *index.SegmentMetadata) string {
	return segmentStem(m.Partition, m.StartOffset, m.SegmentID) + ManifestSuffix
}

// SegmentKey is a parsed object key of the layout.
type SegmentKey struct {
	Partition  index.TopicIDPartition
	BaseOffset int64
	SegmentID  index.UUID
	Suffix     string // ".log", ".manifest", …
}

// ParseSegmentKey parses a key of the layout (relative to the store).
func ParseSegmentKey(key string) (SegmentKey, error) {
	bad := func(why string) (SegmentKey, error) {
		return SegmentKey{}, fmt.Errorf("object key %q: %s", key, why)
	}
	parts := strings.Split(key, "/")
	if len(parts) != 3 {
		return bad("want <topic id>/<partition>/<base>-<segment id>.<kind>")
	}
	var k SegmentKey
	var err error
	if k.Partition.TopicID, err = index.ParseUUID(parts[0]); err != nil || k.Partition.TopicID.IsZero() {
		return bad("bad topic id")
	}
	p, err := strconv.ParseInt(parts[1], 10, 32)
	if err != nil || p < 0 || strconv.Itoa(int(p)) != parts[1] {
		return bad("bad partition")
	}
	k.Partition.Partition = int32(p)
	name := parts[2]
	if len(name) < 20+1+22+1 || name[20] != '-' {
		return bad("bad segment name")
	}
	base, err := strconv.ParseInt(name[:20], 10, 64)
	if err != nil || base < 0 {
		return bad("bad base offset")
	}
	k.BaseOffset = base
	if k.SegmentID, err = index.ParseUUID(name[21:43]); err != nil || k.SegmentID.IsZero() {
		return bad("bad segment id")
	}
	k.Suffix = name[43:]
	if !strings.HasPrefix(k.Suffix, ".") {
		return bad("no suffix")
	}
	return k, nil
}

// ObjectRange is where a segment's object of the given kind lies: its own
// object (off 0), or its range of the segment's .indexes object when it
// is packed there. ok is false when the segment has none.
func ObjectRange(m *index.SegmentMetadata, kind index.ObjectKind) (key string, off, n int64, packed, ok bool) {
	o, ok := m.Object(kind)
	if !ok {
		return "", 0, 0, false, false
	}
	if o.Packed {
		return ObjectKey(m, index.ObjectIndexes), o.Offset, o.Size, true, true
	}
	return ObjectKey(m, kind), 0, o.Size, false, true
}

// GetObject reads a segment's small object of the given kind whole, from
// its own object or from its range of the .indexes object: nil when the
// segment has none. It refuses an object above limit bytes, and one whose
// bytes are not the size the manifest gives (ErrCorruptSegment); a
// missing object is ErrNotFound.
func GetObject(ctx context.Context, store ObjectStore, m *index.SegmentMetadata, kind index.ObjectKind, limit int64) ([]byte, error) {
	key, off, n, packed, ok := ObjectRange(m, kind)
	if !ok || n == 0 {
		return nil, nil
	}
	if n < 0 || n > limit {
		return nil, fmt.Errorf("%w: %s of segment %s: %d bytes, more than %d", ErrCorruptSegment, kind.Suffix(), m.SegmentID, n, limit)
	}
	want := n + 1 // an object of its own: one byte more shows it is longer than the manifest says
	if packed {
		want = n
	}
	body, err := store.Get(ctx, key, off, want)
	if errors.Is(err, ErrInvalidRange) {
		return nil, fmt.Errorf("%w: %s: shorter than the manifest says (%v)", ErrCorruptSegment, key, err)
	}
	if err != nil {
		return nil, err
	}
	defer body.Close()
	b, err := io.ReadAll(io.LimitReader(body, want))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	if int64(len(b)) != n {
		return nil, fmt.Errorf("%w: %s of segment %s: %d bytes at %d of %s, manifest says %d", ErrCorruptSegment, kind.Suffix(), m.SegmentID, len(b), off, key, n)
	}
	return b, nil
}
