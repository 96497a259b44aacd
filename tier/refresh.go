package tier

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"strata/index"
)

// RefreshStats reports what a RefreshPartition did.
type RefreshStats struct {
	Manifests int  // manifest keys listed
	Read      int  // manifests read (the others were known and final)
	Changed   bool // the index's partition was rewritten
	Segments  int  // segments the partition holds now
}

// RefreshPartition makes one partition of the index hold what the
// bucket's manifests of it say: every manifest is a segment of its own,
// by segment id, in the state it says, however many start at one base
// offset or overlap (an upload retried under a new segment id, a new
// leader's longer segment at its predecessor's base, a frozen former
// leader's upload beside the new leader's); the index's reads pick among
// the readable ones by index.Prefer, and keep out those it marked missing
// (index.Index.MarkMissing), whose marks a refresh keeps. Undecodable
// manifests, or ones at another segment's key, are skipped. It reads
// only the manifests it does not know in their final state: a listed
// manifest whose segment id the
// index holds in COPY_SEGMENT_FINISHED is taken from the index (a
// finished manifest changes only when its segment is deleted, and that
// rewrites it in DELETE_SEGMENT_STARTED, which a refresh notices only when
// the deletion ends and the manifest is gone: until then a follower may
// try a segment being deleted and answer KAFKA_STORAGE_ERROR). The
// index is rewritten only when something changed. This is how followers
// learn their leader's uploads, and how a new leader learns its
// predecessor's before its first upload.
//
// A crash midway leaves the partition partly written; a broker trusts a
// partition's index only once it has refreshed it since it opened the
// partition (broker/remotelog), and that refresh repairs it.
func RefreshPartition(ctx context.Context, store ObjectStore, idx *index.Index, tp index.TopicIDPartition) (RefreshStats, error) {
	return refresh(ctx, store, idx, tp, false)
}

// RefreshNewer is RefreshPartition for the part of the partition the index
// may not know yet: it lists only the manifests whose base offset is at or
// above the first segment the index does not hold COPY_SEGMENT_FINISHED
// (the last one when it holds them all: S3's StartAfter,
// ListFromStore), so that its cost follows the uploads since the last
// refresh, not the partition's history. The segments below that base are
// kept as the index has them: their deletion, or another upload at a base
// below it (a new leader whose log diverged), shows only at the next
// RefreshPartition. An index that holds nothing of the partition is
// refreshed whole.
func RefreshNewer(ctx context.Context, store ObjectStore, idx *index.Index, tp index.TopicIDPartition) (RefreshStats, error) {
	return refresh(ctx, store, idx, tp, true)
}

func refresh(ctx context.Context, store ObjectStore, idx *index.Index, tp index.TopicIDPartition, newer bool) (RefreshStats, error) {
	var st RefreshStats
	have, err := idx.Segments(tp)
	if err != nil {
		return st, fmt.Errorf("refresh %s: %w", tp, err)
	}
	known := make(map[index.UUID]index.SegmentMetadata, len(have))
	for _, m := range have {
		known[m.SegmentID] = m
	}
	// from: the first base offset listed; the index's segments below it
	// are kept.
	from := int64(-1)
	if newer && len(have) > 0 {
		from = have[len(have)-1].StartOffset
		for _, m := range have {
			if m.State != index.CopySegmentFinished {
				from = m.StartOffset
				break
			}
		}
	}
	startAfter := ""
	if from > 0 {
		startAfter = basePrefix(tp, from)
	}
	byID := map[index.UUID]index.SegmentMetadata{}
	for info, err := range listFrom(ctx, store, PartitionPrefix(tp), startAfter) {
		if err != nil {
			return st, fmt.Errorf("refresh %s: %w", tp, err)
		}
		if !strings.HasSuffix(info.Key, ManifestSuffix) {
			continue
		}
		st.Manifests++
		k, err := ParseSegmentKey(info.Key)
		if err != nil || k.Partition != tp {
			continue // not a manifest of this layout: reconciliation reports it
		}
		if k.BaseOffset < from {
			continue // kept from the index
		}
		m, ok := known[k.SegmentID]
		if !ok || m.State != index.CopySegmentFinished || m.StartOffset != k.BaseOffset {
			st.Read++
			m, err = readManifest(ctx, store, info.Key)
			switch {
			case errors.Is(err, ErrNotFound), errors.Is(err, errBadManifest):
				continue
			case err != nil:
				return st, fmt.Errorf("refresh %s: %w", tp, err)
			}
		}
		// One segment id under two base offsets (no uploader writes that):
		// every broker keeps the same one.
		if old, dup := byID[m.SegmentID]; !dup || index.Prefer(&m, &old) {
			byID[m.SegmentID] = m
		}
	}
	segs := make([]index.SegmentMetadata, 0, len(byID))
	for _, m := range have {
		if m.StartOffset < from {
			segs = append(segs, m)
		}
	}
	for _, m := range byID {
		segs = append(segs, m)
	}
	slices.SortFunc(segs, compareSegments)
	st.Segments = len(segs)
	if sameSegments(have, segs) {
		return st, nil
	}
	if err := idx.ReplacePartition(tp, segs); err != nil {
		return st, fmt.Errorf("refresh %s: %w", tp, err)
	}
	st.Changed = true
	return st, nil
}

// compareSegments orders segments as the index lists them: by start
// offset, then segment id.
func compareSegments(a, b index.SegmentMetadata) int {
	if c := cmp.Compare(a.StartOffset, b.StartOffset); c != 0 {
		return c
	}
	return bytes.Compare(a.SegmentID[:], b.SegmentID[:])
}

// sameSegments reports whether two partition listings (in the index's
// order) hold the same segments in the same states.
func sameSegments(a, b []index.SegmentMetadata) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].SegmentID != b[i].SegmentID || a[i].State != b[i].State || a[i].StartOffset != b[i].StartOffset {
			return false
		}
	}
	return true
}

// FindSegment returns the COPY_SEGMENT_FINISHED segment of the partition
// that serves offset, reading the bucket directly (no index): of the
// finished manifests whose segment holds offset, the one index.Prefer
// picks, as an index would (it cannot know which segments an index marked
// missing). A follower rebuilding its log from the leader's local tail
// uses it when its own index does not know the segment yet. So that its
// cost does not grow with the partition's history, it lists and reads
// only the manifests whose base lies in a window below offset (S3's
// StartAfter: ListFromStore), widened sixteenfold while no segment in it
// holds offset; a segment whose base lies below the window in which one
// was found is not considered. ErrNotFound when no finished segment holds
// offset.
func FindSegment(ctx context.Context, store ObjectStore, tp index.TopicIDPartition, offset int64) (index.SegmentMetadata, error) {
	fail := func(err error) (index.SegmentMetadata, error) {
		return index.SegmentMetadata{}, fmt.Errorf("find segment of %s at %d: %w", tp, offset, err)
	}
	read := map[string]bool{} // manifests read in a narrower window
	for window := int64(findWindow); ; window *= 16 {
		from := max(offset-window+1, 0)
		startAfter := ""
		if from > 0 {
			startAfter = basePrefix(tp, from)
		}
		var names []string
		var bases []int64
		for info, err := range listFrom(ctx, store, PartitionPrefix(tp), startAfter) {
			if err != nil {
				return fail(err)
			}
			if !strings.HasSuffix(info.Key, ManifestSuffix) {
				continue
			}
			k, err := ParseSegmentKey(info.Key)
			if err != nil || k.Partition != tp {
				continue
			}
			if k.BaseOffset > offset {
				break // keys are in base order
			}
			names = append(names, info.Key)
			bases = append(bases, k.BaseOffset)
		}
		var best *index.SegmentMetadata
		for i := len(names) - 1; i >= 0; i-- {
			if read[names[i]] {
				continue
			}
			read[names[i]] = true
			m, err := readManifest(ctx, store, names[i])
			switch {
			case errors.Is(err, ErrNotFound), errors.Is(err, errBadManifest):
				continue
			case err != nil:
				return fail(err)
			}
			if m.State != index.CopySegmentFinished || m.EndOffset < offset {
				continue
			}
			if best == nil || index.Prefer(&m, best) {
				best = &m
			}
		}
		if best != nil {
			return *best, nil
		}
		if from == 0 {
			return fail(fmt.Errorf("%w: no remote segment holds it", ErrNotFound))
		}
	}
}

// findWindow is FindSegment's first window of base offsets.
const findWindow = 1 << 12
