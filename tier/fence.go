package tier

import (
	"bytes"
	"context"
	"errors"
	"fmt"

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
