package tier

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	"strata/index"
)

// Fencing on the store: every write of a segment's manifest after its
// first is a compare-and-swap on the ETag of the version its writer last
// read or wrote (PutIf with If-Match), and the first is If-None-Match: *.
// See "Fencing" in the package doc.

// maxCASTries bounds the re-reads of a manifest that changed under a
// deleter (a heartbeat of a live upload, another deleter).
const maxCASTries = 5

// errFinishedMeanwhile: an unfinished upload that a cleanup meant to
// delete is COPY_SEGMENT_FINISHED in the bucket; it is adopted instead.
var errFinishedMeanwhile = errors.New("the upload finished in the bucket meanwhile")

// readManifestTagged reads a manifest as readManifest does, with the ETag
// of the version read (also when the manifest is unusable: etag is then
// set and the error wraps errBadManifest).
func readManifestTagged(ctx context.Context, store ObjectStore, key string) (index.SegmentMetadata, string, error) {
	k, err := ParseSegmentKey(key)
	if err != nil {
		return index.SegmentMetadata{}, "", fmt.Errorf("%w: %v", errBadManifest, err)
	}
	b, etag, err := store.GetTagged(ctx, key, index.MaxManifestSize)
	if errors.Is(err, ErrTooLarge) {
		return index.SegmentMetadata{}, etag, fmt.Errorf("%w: %v", errBadManifest, err)
	}
	if err != nil {
		return index.SegmentMetadata{}, "", err
	}
	m, err := index.DecodeManifest(b)
	if err != nil {
		return m, etag, fmt.Errorf("%w: %s: %v", errBadManifest, key, err)
	}
	if m.Partition != k.Partition || m.StartOffset != k.BaseOffset || m.SegmentID != k.SegmentID {
		return m, etag, fmt.Errorf("%w: %s holds the manifest of segment %s of %s at %d", errBadManifest, key, m.SegmentID, m.Partition, m.StartOffset)
	}
	return m, etag, nil
}

// casManifest writes m's manifest under cond and returns its ETag. When
// the condition fails it reads the manifest back: if it is exactly what
// this call wrote (a retried request whose first attempt landed), the
// write stands; otherwise the error wraps ErrPreconditionFailed.
func casManifest(ctx context.Context, store ObjectStore, m *index.SegmentMetadata, cond Cond) (string, error) {
	b, err := index.EncodeManifest(m)
	if err != nil {
		return "", err
	}
	key := ManifestKey(m)
	etag, err := store.PutIf(ctx, key, bytes.NewReader(b), int64(len(b)), cond)
	if err == nil {
		return etag, nil
	}
	if !errors.Is(err, ErrPreconditionFailed) {
		return "", fmt.Errorf("put manifest of %s: %w", m.SegmentID, err)
	}
	got, gotTag, rerr := store.GetTagged(ctx, key, index.MaxManifestSize)
	if rerr == nil && bytes.Equal(got, b) {
		return gotTag, nil
	}
	return "", fmt.Errorf("manifest of segment %s of %s at %d: %w", m.SegmentID, m.Partition, m.StartOffset, err)
}

// markDeleting rewrites a segment's manifest in DELETE_SEGMENT_STARTED as
// a compare-and-swap on the version it reads: once it returns, no writer
// holding an older ETag (an uploader about to write its FINISHED state, a
// heartbeat) can change the manifest, so the segment's objects may go.
// A missing manifest is replaced by one in DELETE_SEGMENT_STARTED
// (If-None-Match: *), so that no late first write of the upload lands
// either. With unfinished set (the segment is an upload the caller holds
// unfinished), a manifest found COPY_SEGMENT_FINISHED by the segment's
// own uploader is errFinishedMeanwhile and nothing is written.
func markDeleting(ctx context.Context, store ObjectStore, m *index.SegmentMetadata, unfinished bool) error {
	key := ManifestKey(m)
	for try := 0; ; try++ {
		got, etag, err := readManifestTagged(ctx, store, key)
		cond := Cond{IfMatch: etag}
		switch {
		case errors.Is(err, ErrNotFound):
			cond = Cond{IfAbsent: true}
		case errors.Is(err, errBadManifest) && etag != "":
			// Ours to replace: the key is this segment's.
		case err != nil:
			return err
		case unfinished && got.State == index.CopySegmentFinished:
			return fmt.Errorf("segment %s of %s at %d: %w", m.SegmentID, m.Partition, m.StartOffset, errFinishedMeanwhile)
		case got.State == index.DeleteSegmentStarted:
			return nil // another deleter has fenced it
		}
		d := *m
		d.State = index.DeleteSegmentStarted
		_, err = casManifest(ctx, store, &d, cond)
		if err == nil || !errors.Is(err, ErrPreconditionFailed) || try+1 == maxCASTries {
			return err
		}
	}
}

// CheckMissing is what a reader does when a read of a finished segment
// found one of its objects missing (ErrNotFound): it looks again, in the
// bucket, whether the segment is still finished there (its manifest in
// COPY_SEGMENT_FINISHED) while the object is gone (a HEAD): gone. A
// segment under deletion (its manifest gone or in DELETE_SEGMENT_STARTED)
// is not gone: the next refresh forgets it. When it is gone and other
// readable segments cover all its offsets, it is marked missing in the
// index (Index.MarkMissing), which from then on resolves its offsets
// through them: marked, and first when this call marked it (so that the
// caller reports it once). When nothing else covers them it is left as it
// is: its records are only there, reads of them fail, and they serve
// again should the object come back.
func CheckMissing(ctx context.Context, store ObjectStore, idx *index.Index, m *index.SegmentMetadata) (gone, marked, first bool, err error) {
	got, err := readManifest(ctx, store, ManifestKey(m))
	switch {
	case errors.Is(err, ErrNotFound) || errors.Is(err, errBadManifest):
		return false, false, false, nil
	case err != nil:
		return false, false, false, err
	case got.State != index.CopySegmentFinished:
		return false, false, false, nil
	}
	for _, o := range m.Objects {
		if o.Packed {
			continue
		}
		if _, err := store.Head(ctx, ObjectKey(m, o.Kind)); errors.Is(err, ErrNotFound) {
			gone = true
			break
		} else if err != nil {
			return false, false, false, err
		}
	}
	if !gone {
		return false, false, false, nil // read again: it was a moment's miss
	}
	covered, err := coveredByOthers(idx, m)
	if err != nil || !covered {
		return true, false, false, err
	}
	first, err = idx.MarkMissing(m.Partition, m.SegmentID)
	if errors.Is(err, index.ErrNotFound) {
		return true, false, false, nil // forgotten meanwhile
	}
	return true, err == nil, first, err
}

// coveredByOthers reports whether the partition's other readable segments
// (finished, not marked missing) hold every offset of m.
func coveredByOthers(idx *index.Index, m *index.SegmentMetadata) (bool, error) {
	segs, err := idx.Segments(m.Partition)
	if err != nil {
		return false, err
	}
	missing, err := idx.Missing(m.Partition)
	if err != nil {
		return false, err
	}
	var others []index.SegmentMetadata
	for _, s := range segs {
		if s.State == index.CopySegmentFinished && s.SegmentID != m.SegmentID && !slices.Contains(missing, s.SegmentID) {
			others = append(others, s)
		}
	}
	slices.SortFunc(others, func(a, b index.SegmentMetadata) int { return cmp.Compare(a.StartOffset, b.StartOffset) })
	next := m.StartOffset // the first offset not yet covered
	for _, s := range others {
		if s.StartOffset > next {
			break
		}
		next = max(next, s.EndOffset+1)
		if next > m.EndOffset {
			return true, nil
		}
	}
	return false, nil
}

// RepairMissing deletes, from the bucket and the index, the segments of a
// partition marked missing (CheckMissing) whose every offset another
// readable segment covers, so that the bucket holds no finished manifest
// without its objects. A segment whose offsets nothing else covers is
// left (and stays out of reads): its records are lost, and deleting its
// manifest would hide that. The partition's leader runs it in its copy
// pass. It returns how many it deleted.
func (u *Uploader) RepairMissing(ctx context.Context, tp index.TopicIDPartition) (int, error) {
	ids, err := u.Index.Missing(tp)
	if err != nil || len(ids) == 0 {
		return 0, err
	}
	n := 0
	for _, id := range ids {
		m, err := u.Index.Segment(tp, id)
		if errors.Is(err, index.ErrNotFound) {
			continue
		}
		if err != nil {
			return n, err
		}
		if m.State != index.CopySegmentFinished || !u.covered(tp, m.StartOffset, m.EndOffset) {
			continue
		}
		if err := u.deleteSegment(ctx, m); err != nil {
			return n, fmt.Errorf("repair segment %s of %s with missing objects: %w", id, tp, err)
		}
		u.logger().Info("deleted a remote segment whose objects were missing; other segments cover its offsets",
			"partition", tp.String(), "segment_id", id.String(), "start", m.StartOffset, "end", m.EndOffset, "upload_epoch", m.UploadEpoch, "broker", m.BrokerID)
		n++
	}
	return n, nil
}

// covered reports whether readable segments hold every offset of
// [start, end].
func (u *Uploader) covered(tp index.TopicIDPartition, start, end int64) bool {
	for off := start; off <= end; {
		s, err := u.Index.SegmentForOffset(tp, off)
		if err != nil || s.StartOffset > off || s.EndOffset < off {
			return false
		}
		off = s.EndOffset + 1
	}
	return true
}

// ErrNoConditionalWrites: the store took a PutIf whose condition did not
// hold (it ignores If-None-Match).
var ErrNoConditionalWrites = errors.New("the object store ignores conditional writes (If-None-Match: *)")

// ErrConditionalWritesRefused: the store refused a conditional write it
// should have answered (a server without them may answer 501 Not
// Implemented or 400): every upload, cleanup and snapshot write fails on
// it.
var ErrConditionalWritesRefused = errors.New("the object store refuses conditional writes (If-None-Match, If-Match)")

// ProbeConditionalWrites checks that the store honours conditional
// writes: it writes a probe object under SnapshotPrefix, writes it again
// with If-None-Match: * (which must fail with ErrPreconditionFailed) and
// deletes it. ErrNoConditionalWrites when the conditional write
// succeeded; ErrConditionalWritesRefused (wrapping the store's answer)
// when it failed otherwise; another error when the plain write failed.
func ProbeConditionalWrites(ctx context.Context, store ObjectStore) error {
	key := SnapshotPrefix + "probe/" + index.NewUUID().String()
	defer store.Delete(context.WithoutCancel(ctx), key)
	body := []byte("conditional write probe")
	if err := store.Put(ctx, key, bytes.NewReader(body), int64(len(body))); err != nil {
		return fmt.Errorf("probe conditional writes: %w", err)
	}
	_, err := store.PutIf(ctx, key, bytes.NewReader(body), int64(len(body)), Cond{IfAbsent: true})
	switch {
	case err == nil:
		return ErrNoConditionalWrites
	case errors.Is(err, ErrPreconditionFailed):
		return nil
	case ctx.Err() != nil:
		return fmt.Errorf("probe conditional writes: %w", err)
	}
	return fmt.Errorf("%w: %v", ErrConditionalWritesRefused, err)
}
