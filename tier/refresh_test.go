package tier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
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
// finished upload beside a started one at its base, a new segment), and
// keeps the segments below as they were, even one deleted from the
// bucket, which the next RefreshPartition drops. An empty index is
// refreshed whole.
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
	if err != nil || !st.Changed || st.Segments != segs+3 {
		t.Fatalf("RefreshNewer: %+v %v", st, err)
	}
	if s.listed != 6 { // the started and the finished upload of one base, and the next
		t.Fatalf("RefreshNewer listed %d keys, want 6", s.listed)
	}
	have, err := idx.Segments(tp)
	if err != nil {
		t.Fatal(err)
	}
	if got := []index.UUID{have[segs].SegmentID, have[segs+1].SegmentID, have[segs+2].SegmentID}; !slices.Contains(got[:2], started.SegmentID) ||
		!slices.Contains(got[:2], finished.SegmentID) || got[2] != next.SegmentID {
		t.Fatalf("the newest segments are %v, want %s and %s (any order), then %s", got, started.SegmentID, finished.SegmentID, next.SegmentID)
	}
	if m, err := idx.SegmentForOffset(tp, finished.StartOffset); err != nil || m.SegmentID != finished.SegmentID {
		t.Fatalf("offset %d served by %s %v, want the finished upload", finished.StartOffset, m.SegmentID, err)
	}
	if have[5].SegmentID != gone.SegmentID {
		t.Fatalf("RefreshNewer changed a segment below where it listed: %+v", have[5])
	}
	// The started upload is cleaned up (as a leader's pass does): the next
	// RefreshNewer still lists from its base, and drops it.
	for _, k := range []string{ManifestKey(&started), ObjectKey(&started, index.ObjectLog)} {
		if err := s3s.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	s.listed = 0
	if st, err := RefreshNewer(ctx, s, idx, tp); err != nil || !st.Changed || st.Segments != segs+2 || s.listed != 4 {
		t.Fatalf("RefreshNewer after the cleanup: %+v %v, listed %d keys", st, err, s.listed)
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

// uploadedAt is uploaded with packed objects, so that the manifest (of
// version 3) records the upload epoch up.
func uploadedAt(t *testing.T, s ObjectStore, tp index.TopicIDPartition, start, end int64, state index.State, up int32) index.SegmentMetadata {
	t.Helper()
	m := index.SegmentMetadata{
		Partition: tp, SegmentID: index.NewUUID(), Topic: "orders",
		StartOffset: start, EndOffset: end, MaxTimestamp: 1000 + end, EventTimestamp: 10, BrokerID: 1,
		SegmentSize: 10, LeaderEpochs: []index.EpochEntry{{Epoch: up, StartOffset: start}}, State: state, UploadEpoch: up,
		Objects: []index.ObjectEntry{{Kind: index.ObjectLog, Size: 10}, {Kind: index.ObjectIndexes, Size: 4},
			{Kind: index.ObjectOffsetIndex, Size: 4, Packed: true}},
	}
	put(t, s, ObjectKey(&m, index.ObjectLog), bytes.Repeat([]byte{1}, 10))
	put(t, s, ObjectKey(&m, index.ObjectIndexes), bytes.Repeat([]byte{2}, 4))
	b, err := index.EncodeManifest(&m)
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, ManifestKey(&m), b)
	return m
}

// TestRefreshKeepsEverySegment: a refresh keeps every manifest as a
// segment of its own, however many start at one base or overlap, and the
// index serves each offset from the one index.Prefer picks, as FindSegment
// does from the bucket: the newer leader's upload over a frozen former
// leader's, the longer of one leader's, and the other's offsets beyond.
func TestRefreshKeepsEverySegment(t *testing.T) {
	type seg struct {
		name       string
		start, end int64
		state      index.State
		up         int32
	}
	F, S := index.CopySegmentFinished, index.CopySegmentStarted
	for _, c := range []struct {
		name    string
		segs    []seg
		offsets map[int64]string // "" none
		end     int64
	}{
		{"a new leader's longer segment at its predecessor's base", []seg{
			{"old", 0, 99, F, 1}, {"new", 0, 149, F, 2},
		}, map[int64]string{0: "new", 99: "new", 149: "new", 150: ""}, 149},
		{"a frozen former leader finished beside the new leader", []seg{
			{"leader", 100, 199, F, 3}, {"zombie", 100, 199, F, 2}, {"next", 200, 299, F, 3},
		}, map[int64]string{100: "leader", 199: "leader", 200: "next"}, 299},
		{"the former leader's longer upload serves past the new leader's", []seg{
			{"zombie", 100, 249, F, 2}, {"leader", 100, 199, F, 3},
		}, map[int64]string{100: "leader", 199: "leader", 200: "zombie", 249: "zombie", 250: ""}, 249},
		{"one leader's retry, longer", []seg{
			{"first", 0, 99, F, 4}, {"retry", 0, 119, F, 4},
		}, map[int64]string{0: "retry", 119: "retry"}, 119},
		{"a started upload beside a finished one", []seg{
			{"done", 0, 99, F, 1}, {"started", 0, 149, S, 2},
		}, map[int64]string{0: "done", 99: "done", 100: ""}, 99},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := ctxT(t)
			s := NewMemStore()
			tp := index.TopicIDPartition{TopicID: topicX, Partition: 0}
			names := map[index.UUID]string{}
			for _, g := range c.segs {
				m := uploadedAt(t, s, tp, g.start, g.end, g.state, g.up)
				names[m.SegmentID] = g.name
			}
			idx, err := index.Open(index.Options{InMemory: true})
			if err != nil {
				t.Fatal(err)
			}
			defer idx.Close()
			for _, refresh := range []func(context.Context, ObjectStore, *index.Index, index.TopicIDPartition) (RefreshStats, error){RefreshPartition, RefreshNewer} {
				st, err := refresh(ctx, s, idx, tp)
				if err != nil || st.Segments != len(c.segs) {
					t.Fatalf("refresh: %+v %v, want %d segments", st, err, len(c.segs))
				}
			}
			for off, want := range c.offsets {
				m, err := idx.SegmentForOffset(tp, off)
				got := names[m.SegmentID]
				if errors.Is(err, index.ErrNotFound) {
					got = ""
				} else if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("offset %d served by %q, want %q", off, got, want)
				}
				m, err = FindSegment(ctx, s, tp, off)
				got = names[m.SegmentID]
				if errors.Is(err, ErrNotFound) {
					got = ""
				} else if err != nil {
					t.Fatal(err)
				}
				if got != want {
					t.Errorf("FindSegment(%d) = %q, want %q", off, got, want)
				}
			}
			if end, _, _ := idx.LogEnd(tp); end != c.end {
				t.Errorf("log end %d, want %d", end, c.end)
			}
		})
	}
}

// TestRefreshKeepsMissingMarks: a segment the index marked missing stays
// out of reads through refreshes that list its manifest again, whole or
// newer, changed or not, and its mark goes once its manifest is gone.
func TestRefreshKeepsMissingMarks(t *testing.T) {
	ctx := ctxT(t)
	s := NewMemStore()
	tp := index.TopicIDPartition{TopicID: topicX, Partition: 0}
	older := uploadedAt(t, s, tp, 0, 99, index.CopySegmentFinished, 1)
	lost := uploadedAt(t, s, tp, 0, 149, index.CopySegmentFinished, 2)
	idx, err := index.Open(index.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	if _, err := RefreshPartition(ctx, s, idx, tp); err != nil {
		t.Fatal(err)
	}
	if changed, err := idx.MarkMissing(tp, lost.SegmentID); err != nil || !changed {
		t.Fatalf("mark: %v %v", changed, err)
	}
	check := func(what string, end int64) {
		t.Helper()
		if m, err := idx.SegmentForOffset(tp, 50); err != nil || m.SegmentID != older.SegmentID {
			t.Fatalf("%s: offset 50 served by %s %v, want the older segment", what, m.SegmentID, err)
		}
		if _, err := idx.SegmentForOffset(tp, 120); !errors.Is(err, index.ErrNotFound) {
			t.Fatalf("%s: offset 120: %v, want ErrNotFound", what, err)
		}
		if got, _, _ := idx.LogEnd(tp); got != end {
			t.Fatalf("%s: log end %d, want %d", what, got, end)
		}
		if ids, _ := idx.Missing(tp); !slices.Equal(ids, []index.UUID{lost.SegmentID}) {
			t.Fatalf("%s: missing %v", what, ids)
		}
	}
	end := int64(99)
	check("marked", end)
	for i, refresh := range []func(context.Context, ObjectStore, *index.Index, index.TopicIDPartition) (RefreshStats, error){RefreshPartition, RefreshNewer} {
		if _, err := refresh(ctx, s, idx, tp); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("refresh %d, nothing new", i), end)
		// A new upload: the partition is rewritten.
		next := uploadedAt(t, s, tp, 200+int64(i)*100, 299+int64(i)*100, index.CopySegmentFinished, 2)
		if st, err := refresh(ctx, s, idx, tp); err != nil || !st.Changed {
			t.Fatalf("refresh %d: %+v %v", i, st, err)
		}
		end = next.EndOffset
		check(fmt.Sprintf("refresh %d, rewritten", i), end)
	}
	for _, k := range []string{ManifestKey(&lost), ObjectKey(&lost, index.ObjectLog)} {
		if err := s.Delete(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := RefreshPartition(ctx, s, idx, tp); err != nil {
		t.Fatal(err)
	}
	if ids, _ := idx.Missing(tp); len(ids) != 0 {
		t.Fatalf("mark of a segment gone from the bucket: %v", ids)
	}
}
