package tier

import (
	"context"
	"testing"

	"strata/index"
)

// refreshedIndex is a new index refreshed from the bucket, as a broker
// that never saw the uploads has.
func refreshedIndex(t *testing.T, store ObjectStore) *index.Index {
	t.Helper()
	idx, err := index.Open(index.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { idx.Close() })
	if _, err := RefreshPartition(context.Background(), store, idx, upTP); err != nil {
		t.Fatal(err)
	}
	return idx
}

// checkResolves fails the test unless every offset of [from, to] resolves
// in idx to a segment of broker want whose objects are all in the store.
func checkResolves(t *testing.T, store *MemStore, idx *index.Index, from, to int64, want int32) {
	t.Helper()
	ctx := context.Background()
	for off := from; off <= to; off++ {
		m, err := idx.SegmentForOffset(upTP, off)
		if err != nil || m.BrokerID != want {
			t.Fatalf("offset %d: segment of broker %d (epoch %d), %v; want broker %d's", off, m.BrokerID, m.UploadEpoch, err, want)
		}
		for _, o := range m.Objects {
			if _, err := store.Head(ctx, ObjectKey(&m, o.Kind)); !o.Packed && err != nil {
				t.Fatalf("offset %d: %v", off, err)
			}
		}
	}
}

// Regression (issue 22, the stall): the index held one segment per base
// offset, so a new leader whose sealed segment starts where an uploaded
// one starts but ends later could not upload it (ErrSegmentExists) and
// its uploads stalled for good, with local retention keeping everything
// from there on. Now it uploads the longer segment beside the shorter,
// reads resolve the shared offsets to the newer leader's upload, and the
// remote log end reaches the new leader's last sealed segment.
func TestLongerSegmentAtAnUploadedBase(t *testing.T) {
	short, _ := testLog(t, 20) // 2 KiB segments
	long, _ := testLogSized(t, 6144, 20)
	store := NewMemStore()
	alive := func(int32) bool { return true }
	old, leader := fenceBroker(t, store, 1, alive), fenceBroker(t, store, 2, alive)
	ctx := context.Background()

	first := sealed(short)[0]
	if st, err := old.CopyPartition(ctx, upTP, "t", short, first.NextOffset, Leadership{Epoch: 2}); err != nil || st.Copied != 1 {
		t.Fatalf("the old leader's upload of its first segment: %+v, %v", st, err)
	}
	ls := sealed(long)
	if ls[0].BaseOffset != first.BaseOffset || ls[0].NextOffset <= first.NextOffset {
		t.Fatalf("test setup: the new leader's first segment [%d, %d) does not extend the old one's [%d, %d)", ls[0].BaseOffset, ls[0].NextOffset, first.BaseOffset, first.NextOffset)
	}
	if _, err := RefreshPartition(ctx, store, leader.Index, upTP); err != nil {
		t.Fatal(err)
	}
	st, err := leader.CopyPartition(ctx, upTP, "t", long, long.LogEndOffset(), Leadership{Epoch: 3})
	if err != nil || st.Copied != len(ls) {
		t.Fatalf("the new leader's pass: %+v, %v; want its %d sealed segments copied", st, err, len(ls))
	}
	last := ls[len(ls)-1].NextOffset - 1
	if end, ok, err := leader.Index.LogEnd(upTP); err != nil || !ok || end != last {
		t.Fatalf("remote log end %d, %v, %v; want %d", end, ok, err, last)
	}
	if n := checkFinishedWhole(t, store); n != len(ls)+1 {
		t.Fatalf("%d finished manifests, want %d", n, len(ls)+1)
	}
	// Every broker reads the shared offsets from the newer upload.
	for _, idx := range []*index.Index{leader.Index, refreshedIndex(t, store)} {
		checkResolves(t, store, idx, 0, last, leader.BrokerID)
	}
	// A later pass has nothing to do: no stall, no second upload.
	if st, err := leader.CopyPartition(ctx, upTP, "t", long, long.LogEndOffset(), Leadership{Epoch: 3}); err != nil || st.Copied != 0 {
		t.Fatalf("a second pass: %+v, %v", st, err)
	}
}

// Issue 22, readers: of two finished segments over the same offsets, the
// one a reader picks (the higher upload epoch) has lost an object. The
// reader's check (CheckMissing) marks it missing once, reads then resolve
// to the other segment, and the leader's next pass deletes it from the
// bucket (RepairMissing), so that no finished manifest names a missing
// object. A missing segment that nothing else covers is kept, unmarked.
func TestMissingSegmentIsSkippedAndRepaired(t *testing.T) {
	l, _ := testLog(t, 20)
	store := NewMemStore()
	alive := func(int32) bool { return true }
	z, leader := fenceBroker(t, store, 1, alive), fenceBroker(t, store, 2, alive)
	ctx := context.Background()
	ls := sealed(l)
	// Two uploads of every segment: the old leader's at epoch 2 and the
	// new one's at epoch 3 (its index never learned the old ones), but
	// the old leader uploaded only the first two segments.
	if _, err := z.CopyPartition(ctx, upTP, "t", l, ls[1].NextOffset, Leadership{Epoch: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := leader.CopyPartition(ctx, upTP, "t", l, l.LogEndOffset(), Leadership{Epoch: 3}); err != nil {
		t.Fatal(err)
	}
	reader, err := index.Open(index.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	if _, err := RefreshPartition(ctx, store, reader, upTP); err != nil {
		t.Fatal(err)
	}
	// The new leader's segments 0 and 2 lose their .log.
	lost := map[int64]index.SegmentMetadata{}
	for _, base := range []int64{ls[0].BaseOffset, ls[2].BaseOffset} {
		m, err := reader.SegmentForOffset(upTP, base)
		if err != nil || m.BrokerID != leader.BrokerID {
			t.Fatalf("offset %d: broker %d, %v; want the new leader's upload", base, m.BrokerID, err)
		}
		if err := store.Delete(ctx, ObjectKey(&m, index.ObjectLog)); err != nil {
			t.Fatal(err)
		}
		lost[base] = m
	}
	// A read that failed on segment 0 checks, and marks it once: the old
	// leader's upload covers it.
	m0 := lost[ls[0].BaseOffset]
	for try := range 2 {
		gone, marked, first, err := CheckMissing(ctx, store, reader, &m0)
		if err != nil || !gone || !marked || first != (try == 0) {
			t.Fatalf("segment 0, check %d: gone %v, marked %v, first %v, %v", try, gone, marked, first, err)
		}
	}
	checkResolves(t, store, reader, ls[0].BaseOffset, ls[0].NextOffset-1, z.BrokerID)
	// Segment 2 is the only one holding its offsets: it is gone but not
	// marked, and reads of it go on failing (a storage error) rather than
	// skipping its records.
	m2 := lost[ls[2].BaseOffset]
	if gone, marked, _, err := CheckMissing(ctx, store, reader, &m2); err != nil || !gone || marked {
		t.Fatalf("segment 2: gone %v, marked %v, %v; want gone and not marked", gone, marked, err)
	}
	if m, err := reader.SegmentForOffset(upTP, ls[2].BaseOffset); err != nil || m.SegmentID != m2.SegmentID {
		t.Fatalf("offset %d resolves to %s, %v; want the lost segment still", ls[2].BaseOffset, m.SegmentID, err)
	}
	// The mark survives a refresh from the bucket.
	if _, err := RefreshPartition(ctx, store, reader, upTP); err != nil {
		t.Fatal(err)
	}
	checkResolves(t, store, reader, ls[0].BaseOffset, ls[0].NextOffset-1, z.BrokerID)

	// The leader's pass, on the reader's index (as the leader's own
	// would be once it read): segment 0 goes, segment 2 stays.
	repairer := &Uploader{Store: store, Index: reader, BrokerID: leader.BrokerID}
	if n, err := repairer.RepairMissing(ctx, upTP); err != nil || n != 1 {
		t.Fatalf("RepairMissing: %d, %v; want the covered segment deleted", n, err)
	}
	if missing, err := reader.Missing(upTP); err != nil || len(missing) != 0 {
		t.Fatalf("marks after the repair: %v, %v", missing, err)
	}
	if _, err := store.Head(ctx, ManifestKey(ptr(lost[ls[0].BaseOffset]))); err == nil {
		t.Fatal("the covered missing segment's manifest is still in the bucket")
	}
	if _, err := store.Head(ctx, ManifestKey(ptr(lost[ls[2].BaseOffset]))); err != nil {
		t.Fatalf("the uncovered missing segment's manifest: %v; want it kept", err)
	}
	checkResolves(t, store, reader, ls[0].BaseOffset, ls[0].NextOffset-1, z.BrokerID)
}

func ptr[T any](v T) *T { return &v }
