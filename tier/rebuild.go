package tier

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	"strata/index"
)

// RebuildStats reports what a rebuild found.
type RebuildStats struct {
	Manifests  int // manifest objects read
	Segments   int // segments loaded into the index
	Partitions int // partitions whose content was replaced
	// Corrupt lists manifests that did not decode or whose key disagrees
	// with their content; they are not loaded. A pass that removes
	// orphaned objects must leave their segments alone (their data may
	// be good) and report them.
	Corrupt []string
	// Superseded lists manifests that lost to another manifest for the
	// same base offset (see RebuildIndex); cleanups may delete their
	// segments.
	Superseded []string
}

// rebuildWorkers is how many manifests are fetched at once.
const rebuildWorkers = 8

// RebuildIndex makes the index hold exactly what the bucket's manifests
// say: every partition with manifests gets their segments, in the states
// they record, and partitions without any are emptied. When two manifests
// claim the same base offset of a partition (an upload retried under a new
// segment id), the one in the most advanced state wins (COPY_SEGMENT_FINISHED,
// then DELETE_SEGMENT_STARTED, then COPY_SEGMENT_STARTED), then the later
// event timestamp. The index is marked as rebuilding until the end, so a
// crash midway is redone at the next start (index.NeedsRebuild).
func RebuildIndex(ctx context.Context, store ObjectStore, idx *index.Index) (RebuildStats, error) {
	return rebuild(ctx, store, idx, "", nil)
}

// RebuildPartition does what RebuildIndex does for one partition.
func RebuildPartition(ctx context.Context, store ObjectStore, idx *index.Index, tp index.TopicIDPartition) (RebuildStats, error) {
	return rebuild(ctx, store, idx, PartitionPrefix(tp), &tp)
}

func rebuild(ctx context.Context, store ObjectStore, idx *index.Index, prefix string, only *index.TopicIDPartition) (RebuildStats, error) {
	var st RebuildStats
	if err := idx.BeginRebuild(); err != nil {
		return st, fmt.Errorf("rebuild index: %w", err)
	}
	var keys []string
	for info, err := range store.List(ctx, prefix) {
		if err != nil {
			return st, fmt.Errorf("rebuild index: %w", err)
		}
		if strings.HasSuffix(info.Key, ManifestSuffix) {
			keys = append(keys, info.Key)
		}
	}
	st.Manifests = len(keys)

	type result struct {
		key  string
		m    index.SegmentMetadata
		err  error // a store error: the rebuild fails
		bad  bool  // corrupt or mismatched: skipped
		gone bool  // deleted since the listing: skipped
	}
	results := make([]result, len(keys))
	work := make(chan int)
	var wg sync.WaitGroup
	for range min(rebuildWorkers, len(keys)) {
		wg.Go(func() {
			for i := range work {
				results[i] = result{key: keys[i]}
				m, err := readManifest(ctx, store, keys[i])
				results[i].m, results[i].err = m, err
				results[i].gone = errors.Is(err, ErrNotFound)
				results[i].bad = errors.Is(err, errBadManifest)
				if results[i].gone || results[i].bad {
					results[i].err = nil
				}
			}
		})
	}
	for i := range keys {
		work <- i
	}
	close(work)
	wg.Wait()

	byPart := map[index.TopicIDPartition]map[int64]result{}
	for _, r := range results {
		if r.err != nil {
			return st, fmt.Errorf("rebuild index: %w", r.err)
		}
		if r.gone {
			continue
		}
		if r.bad {
			st.Corrupt = append(st.Corrupt, r.key)
			continue
		}
		if only != nil && r.m.Partition != *only {
			continue
		}
		segs := byPart[r.m.Partition]
		if segs == nil {
			segs = map[int64]result{}
			byPart[r.m.Partition] = segs
		}
		old, dup := segs[r.m.StartOffset]
		switch {
		case !dup:
			segs[r.m.StartOffset] = r
		case wins(&r.m, &old.m):
			st.Superseded = append(st.Superseded, old.key)
			segs[r.m.StartOffset] = r
		default:
			st.Superseded = append(st.Superseded, r.key)
		}
	}

	parts := map[index.TopicIDPartition]bool{}
	if only != nil {
		parts[*only] = true
	} else {
		known, err := idx.Partitions()
		if err != nil {
			return st, fmt.Errorf("rebuild index: %w", err)
		}
		for _, tp := range known {
			parts[tp] = true
		}
	}
	for tp := range byPart {
		parts[tp] = true
	}
	for tp := range parts {
		var segs []index.SegmentMetadata
		for _, r := range byPart[tp] {
			segs = append(segs, r.m)
		}
		slices.SortFunc(segs, func(a, b index.SegmentMetadata) int { return cmp.Compare(a.StartOffset, b.StartOffset) })
		if err := idx.ReplacePartition(tp, segs); err != nil {
			return st, fmt.Errorf("rebuild index: %w", err)
		}
		st.Segments += len(segs)
		st.Partitions++
	}
	slices.Sort(st.Corrupt)
	slices.Sort(st.Superseded)
	if err := idx.EndRebuild(); err != nil {
		return st, fmt.Errorf("rebuild index: %w", err)
	}
	return st, nil
}

var errBadManifest = errors.New("unusable manifest")

// readManifest fetches and decodes one manifest and checks that its key
// agrees with it. An unusable manifest (corrupt, of an unknown version,
// or at the wrong key) is errBadManifest; one deleted since the listing
// ErrNotFound; anything else a failure to read it.
func readManifest(ctx context.Context, store ObjectStore, key string) (index.SegmentMetadata, error) {
	k, err := ParseSegmentKey(key)
	if err != nil {
		return index.SegmentMetadata{}, fmt.Errorf("%w: %v", errBadManifest, err)
	}
	r, err := store.Get(ctx, key, 0, index.MaxManifestSize+1)
	if err != nil {
		return index.SegmentMetadata{}, err
	}
	defer r.Close()
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, r); err != nil {
		return index.SegmentMetadata{}, fmt.Errorf("read %s: %w", key, err)
	}
	m, err := index.DecodeManifest(buf.Bytes())
	if err != nil {
		return m, fmt.Errorf("%w: %s: %v", errBadManifest, key, err)
	}
	if m.Partition != k.Partition || m.StartOffset != k.BaseOffset || m.SegmentID != k.SegmentID {
		return m, fmt.Errorf("%w: %s holds the manifest of segment %s of %s at %d", errBadManifest, key, m.SegmentID, m.Partition, m.StartOffset)
	}
	return m, nil
}

// wins reports whether manifest a should be kept over b for the same base
// offset.
func wins(a, b *index.SegmentMetadata) bool {
	rank := func(s index.State) int {
		switch s {
		case index.CopySegmentFinished:
			return 3
		case index.DeleteSegmentStarted:
			return 2
		}
		return 1
	}
	if ra, rb := rank(a.State), rank(b.State); ra != rb {
		return ra > rb
	}
	if a.EventTimestamp != b.EventTimestamp {
		return a.EventTimestamp > b.EventTimestamp
	}
	return bytes.Compare(a.SegmentID[:], b.SegmentID[:]) > 0
}
