package tier

import (
	"context"
	"errors"
	"iter"
	"testing"

	"strata/index"
)

func TestRefreshPartitionReadsOnlyNewManifests(t *testing.T) {
	ctx := ctxT(t)
	s := NewMemStore()
	x0 := index.TopicIDPartition{TopicID: topicX, Partition: 0}
	x1 := index.TopicIDPartition{TopicID: topicX, Partition: 1}
	a := uploaded(t, s, x0, 0, 99, index.CopySegmentFinished, 10)
	b := uploaded(t, s, x0, 100, 199, index.CopySegmentFinished, 10)
	other := uploaded(t, s, x1, 0, 9, index.CopySegmentFinished, 10)
	idx, err := index.Open(index.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()

	st, err := RefreshPartition(ctx, s, idx, x0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Manifests != 2 || st.Read != 2 || !st.Changed || st.Segments != 2 {
		t.Fatalf("first refresh: %+v", st)
	}
	if end, ok, _ := idx.LogEnd(x0); !ok || end != 199 {
		t.Fatalf("remote log end %d %v, want 199", end, ok)
	}
	if _, err := idx.SegmentForOffset(x1, 5); !errors.Is(err, index.ErrNotFound) {
		t.Fatalf("refresh of %s loaded %s (%v)", x0, other.Partition, err)
	}

	// Nothing new: nothing read, nothing written.
	gets := s.Calls(OpGet)
	st, err = RefreshPartition(ctx, s, idx, x0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Read != 0 || st.Changed || s.Calls(OpGet) != gets {
		t.Fatalf("idle refresh: %+v, %d gets", st, s.Calls(OpGet)-gets)
	}

	// The leader uploads another segment (and starts one more): only
	// those two manifests are read.
	c := uploaded(t, s, x0, 200, 299, index.CopySegmentFinished, 20)
	started := uploaded(t, s, x0, 300, 399, index.CopySegmentStarted, 30)
	st, err = RefreshPartition(ctx, s, idx, x0)
	if err != nil {
		t.Fatal(err)
	}
	if st.Read != 2 || !st.Changed || st.Segments != 4 {
		t.Fatalf("refresh after uploads: %+v", st)
	}
	if end, _, _ := idx.LogEnd(x0); end != c.EndOffset {
		t.Fatalf("remote log end %d, want %d", end, c.EndOffset)
	}
	// The started upload is known (for a later leader's cleanup) but not
	// read, and re-read until it finishes.
	if m, err := idx.Segment(x0, started.SegmentID); err != nil || m.State != index.CopySegmentStarted {
		t.Fatalf("started upload in the index: %+v %v", m, err)
	}
	st, _ = RefreshPartition(ctx, s, idx, x0)
	if st.Read != 1 || st.Changed {
		t.Fatalf("refresh with an unfinished upload: %+v", st)
	}

	// A segment gone from the bucket leaves the index.
	if err := s.Delete(ctx, ManifestKey(&a)); err != nil {
		t.Fatal(err)
	}
	if _, err := RefreshPartition(ctx, s, idx, x0); err != nil {
		t.Fatal(err)
	}
	if start, _, _ := idx.LogStart(x0); start != b.StartOffset {
		t.Fatalf("remote log start %d after deleting segment 0, want %d", start, b.StartOffset)
	}

	// A failing bucket fails the refresh and leaves the index alone.
	s.SetFault(func(op Op, key string) error {
		if op == OpList {
			return errors.New("bucket down")
		}
		return nil
	})
	if _, err := RefreshPartition(ctx, s, idx, x0); err == nil {
		t.Fatal("refresh with a failing bucket succeeded")
	}
	s.SetFault(nil)
	if end, _, _ := idx.LogEnd(x0); end != c.EndOffset {
		t.Fatalf("failed refresh changed the index: end %d", end)
	}
}

func TestFindSegment(t *testing.T) {
	ctx := ctxT(t)
	s := NewMemStore()
	x0 := index.TopicIDPartition{TopicID: topicX, Partition: 0}
	uploaded(t, s, x0, 0, 99, index.CopySegmentFinished, 10)
	b := uploaded(t, s, x0, 100, 199, index.CopySegmentFinished, 10)
	uploaded(t, s, x0, 100, 199, index.CopySegmentStarted, 20) // a retry that did not finish
	uploaded(t, s, x0, 200, 299, index.CopySegmentStarted, 30)
	m, err := FindSegment(ctx, s, x0, 150)
	if err != nil || m.SegmentID != b.SegmentID {
		t.Fatalf("FindSegment(150) = %s %v, want %s", m.SegmentID, err, b.SegmentID)
	}
	if m, err := FindSegment(ctx, s, x0, 199); err != nil || m.SegmentID != b.SegmentID {
		t.Fatalf("FindSegment(199) = %s %v", m.SegmentID, err)
	}
	if _, err := FindSegment(ctx, s, x0, 250); !errors.Is(err, ErrNotFound) {
		t.Fatalf("FindSegment of an unfinished upload: %v, want ErrNotFound", err)
	}
	if _, err := FindSegment(ctx, s, index.TopicIDPartition{TopicID: topicY}, 5); !errors.Is(err, ErrNotFound) {
		t.Fatalf("FindSegment of an empty partition: %v", err)
	}
}

// keyCounter counts the keys a store's listings yield.
type keyCounter struct {
	ObjectStore
	listed int
}

func (k *keyCounter) List(ctx context.Context, prefix string) iter.Seq2[ObjectInfo, error] {
	return k.ListFrom(ctx, prefix, "")
}

func (k *keyCounter) ListFrom(ctx context.Context, prefix, startAfter string) iter.Seq2[ObjectInfo, error] {
	return func(yield func(ObjectInfo, error) bool) {
		for info, err := range listFrom(ctx, k.ObjectStore, prefix, startAfter) {
			k.listed++
			if !yield(info, err) {
				return
			}
		}
	}
}

// TestFindSegmentListsAWindow: on a store that starts listings after a
// key (S3's StartAfter, here MinIO's), FindSegment lists the manifests
// near the offset, not the partition's whole history; a segment whose
// base lies far below the offset is still found, by wider windows, and a
// miss is still ErrNotFound.
func TestFindSegmentListsAWindow(t *testing.T) {
	ctx := ctxT(t)
	s3s, _ := newMinIOStore(t, func(c *S3Config) { c.ListPageSize = 1000 })
	s := &keyCounter{ObjectStore: s3s}
	x0 := index.TopicIDPartition{TopicID: topicX, Partition: 0}
	const segs, span = 200, 1000 // 200 segments of 1000 offsets
	var last index.SegmentMetadata
	for i := range int64(segs) {
		last = uploaded(t, s3s, x0, i*span, i*span+span-1, index.CopySegmentFinished, 10)
	}
	m, err := FindSegment(ctx, s, x0, last.EndOffset)
	if err != nil || m.SegmentID != last.SegmentID {
		t.Fatalf("FindSegment(%d) = %s %v, want %s", last.EndOffset, m.SegmentID, err, last.SegmentID)
	}
	if s.listed > 4*(findWindow/span+2) { // two keys per segment in the window
		t.Fatalf("FindSegment at the end listed %d keys of %d", s.listed, 2*segs)
	}
	// One long segment far below: found through wider windows.
	x1 := index.TopicIDPartition{TopicID: topicX, Partition: 1}
	long := uploaded(t, s3s, x1, 0, 999_999, index.CopySegmentFinished, 10)
	if m, err := FindSegment(ctx, s, x1, 900_000); err != nil || m.SegmentID != long.SegmentID {
		t.Fatalf("FindSegment(900000) = %s %v, want %s", m.SegmentID, err, long.SegmentID)
	}
	if _, err := FindSegment(ctx, s, x1, 1_000_000); !errors.Is(err, ErrNotFound) {
		t.Fatalf("FindSegment past the end: %v, want ErrNotFound", err)
	}
	// The same answers on a store without ListFrom.
	if m, err := FindSegment(ctx, s3s, x0, 150_500); err != nil || m.StartOffset != 150_000 {
		t.Fatalf("FindSegment(150500) without ListFrom = %d %v", m.StartOffset, err)
	}
}

// TestRefreshNewerListsFromTheLastFinished: on MinIO, RefreshNewer lists
// only the manifests from the first segment the index does not hold
// finished (the last one when all are), learns the uploads there (a
// finished upload of a base it held started, a new segment), and keeps
// the segments below as they were, even one deleted from the bucket,
// which the next RefreshPartition drops. An empty index is refreshed
// whole.
func TestRefreshNewerListsFromTheLastFinished(t *testing.T) {
	ctx := ctxT(t)
	s3s, _ := newMinIOStore(t, func(c *S3Config) { c.ListPageSize = 1000 })
	s := &keyCounter{ObjectStore: s3s}
	tp := index.TopicIDPartition{TopicID: topicX, Partition: 0}
	const segs, span = 100, 100
	var gone index.SegmentMetadata
	for i := range int64(segs) {
		m := uploaded(t, s3s, tp, i*span, i*span+span-1, index.CopySegmentFinished, 10)
		if i == 5 {
			gone = m
		}
	}
	started := uploaded(t, s3s, tp, segs*span, segs*span+span-1, index.CopySegmentStarted, 20)
	idx, err := index.Open(index.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	// An empty index: the whole partition.
	if st, err := RefreshNewer(ctx, s, idx, tp); err != nil || st.Segments != segs+1 || s.listed != 2*(segs+1) {
		t.Fatalf("RefreshNewer on an empty index: %+v %v, listed %d keys", st, err, s.listed)
	}
	// The started upload finishes under a new segment id, one more comes,
	// and an old segment is deleted.
	finished := uploaded(t, s3s, tp, segs*span, segs*span+span-1, index.CopySegmentFinished, 30)
	next := uploaded(t, s3s, tp, (segs+1)*span, (segs+1)*span+span-1, index.CopySegmentFinished, 40)
	for _, k := range []string{ManifestKey(&gone), ObjectKey(&gone, index.ObjectLog)} {
		if err := s3s.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	s.listed = 0
	st, err := RefreshNewer(ctx, s, idx, tp)
	if err != nil || !st.Changed || st.Segments != segs+2 {
		t.Fatalf("RefreshNewer: %+v %v", st, err)
	}
	if s.listed != 6 { // the started and the finished upload of one base, and the next
		t.Fatalf("RefreshNewer listed %d keys, want 6", s.listed)
	}
	have, err := idx.Segments(tp)
	if err != nil {
		t.Fatal(err)
	}
	if got := have[segs].SegmentID; got != finished.SegmentID || got == started.SegmentID || have[segs+1].SegmentID != next.SegmentID {
		t.Fatalf("the newest segments are %+v %+v, want %s and %s", have[segs], have[segs+1], finished.SegmentID, next.SegmentID)
	}
	if have[5].SegmentID != gone.SegmentID {
		t.Fatalf("RefreshNewer changed a segment below where it listed: %+v", have[5])
	}
	// All finished: the next lists from the last one on.
	s.listed = 0
	if st, err := RefreshNewer(ctx, s, idx, tp); err != nil || st.Changed || s.listed != 2 {
		t.Fatalf("RefreshNewer with nothing new: %+v %v, listed %d keys", st, err, s.listed)
	}
	// The whole refresh drops the deleted segment.
	if st, err := RefreshPartition(ctx, s, idx, tp); err != nil || !st.Changed || st.Segments != segs+1 {
		t.Fatalf("RefreshPartition: %+v %v", st, err)
	}
	if _, err := idx.SegmentForOffset(tp, gone.StartOffset); !errors.Is(err, index.ErrNotFound) {
		t.Fatalf("the deleted segment is still found: %v", err)
	}
}
