package index

import (
	"bytes"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/dgraph-io/badger/v4"
)

// Reads resolve an offset through the segments that hold it (see
// "Overlapping segments" in the package doc): of the readable segments
// (COPY_SEGMENT_FINISHED, not marked missing) holding it, the one Prefer
// picks serves it. A partition's resolved view is built from one scan of
// its segments and kept (memo.go) until the partition is written, so that
// a lookup by offset is a binary search and a Badger get.

// partView is one partition's readable segments, resolved.
type partView struct {
	// segs are the readable segments, by start offset, then segment id.
	segs []viewSeg
	// pieces cover the offsets the readable segments hold: ascending,
	// disjoint, each served by one segment (adjacent pieces of one
	// segment are merged). Offsets no piece holds are gaps.
	pieces []piece
	// missing holds the partition's segments marked missing, whatever
	// their state.
	missing map[UUID]bool
	// start and end are the least start offset and the greatest end
	// offset of segs (LogStart, LogEnd); maxSpan the greatest
	// EndOffset-StartOffset. All three mean nothing when segs is empty.
	start, end, maxSpan int64
}

type viewSeg struct {
	id          UUID
	start, end  int64
	maxTS       int64
	eventTS     int64
	uploadEpoch int32
}

type piece struct {
	from, to int64 // inclusive
	seg      int32 // in partView.segs
}

// size is what the view counts for toward the memo's bound.
func (v *partView) size() int { return len(v.segs) + len(v.pieces) + len(v.missing) }

// at returns the piece holding offset.
func (v *partView) at(offset int64) (piece, bool) {
	i := v.from(offset)
	if i == len(v.pieces) || v.pieces[i].from > offset {
		return piece{}, false
	}
	return v.pieces[i], true
}

// from returns the index of the first piece that ends at or after offset.
func (v *partView) from(offset int64) int {
	return sort.Search(len(v.pieces), func(i int) bool { return v.pieces[i].to >= offset })
}

// prefer is Prefer's order of two readable segments: the greater upload
// epoch, then the greater end offset, then the later event time, then the
// greater segment id.
func prefer(a, b *viewSeg) bool {
	switch {
	case a.uploadEpoch != b.uploadEpoch:
		return a.uploadEpoch > b.uploadEpoch
	case a.end != b.end:
		return a.end > b.end
	case a.eventTS != b.eventTS:
		return a.eventTS > b.eventTS
	}
	return bytes.Compare(a.id[:], b.id[:]) > 0
}

// viewSegOf is the part of m a view keeps.
func viewSegOf(m *SegmentMetadata) viewSeg {
	return viewSeg{id: m.SegmentID, start: m.StartOffset, end: m.EndOffset, maxTS: m.MaxTimestamp, eventTS: m.EventTimestamp, uploadEpoch: m.UploadEpoch}
}

// resolve computes the pieces of segs (sorted by start offset): a sweep
// over the start offsets, with the segments that hold the current offset
// in a heap ordered by Prefer; the heap's best serves up to its end or
// the next segment's start, whichever comes first.
func (v *partView) resolve() {
	segs := v.segs
	if len(segs) == 0 {
		return
	}
	v.start, v.end = segs[0].start, segs[0].end
	for i := range segs {
		s := &segs[i]
		v.end = max(v.end, s.end)
		v.maxSpan = max(v.maxSpan, s.end-s.start)
	}
	h := &segHeap{segs: segs}
	next := 0
	cur := segs[0].start
	for next < len(segs) || h.Len() > 0 {
		if h.Len() == 0 {
			cur = max(cur, segs[next].start)
		}
		for next < len(segs) && segs[next].start <= cur {
			heap.Push(h, int32(next))
			next++
		}
		for h.Len() > 0 && segs[h.idx[0]].end < cur {
			heap.Pop(h)
		}
		if h.Len() == 0 {
			continue
		}
		best := h.idx[0]
		to := segs[best].end
		if next < len(segs) && segs[next].start-1 < to {
			to = segs[next].start - 1
		}
		if n := len(v.pieces); n > 0 && v.pieces[n-1].seg == best && v.pieces[n-1].to == cur-1 {
			v.pieces[n-1].to = to
		} else {
			v.pieces = append(v.pieces, piece{from: cur, to: to, seg: best})
		}
		if to == math.MaxInt64 {
			break
		}
		cur = to + 1
	}
}

// segHeap is a heap of indexes into segs, the one Prefer picks on top.
type segHeap struct {
	segs []viewSeg
	idx  []int32
}

func (h *segHeap) Len() int           { return len(h.idx) }
func (h *segHeap) Less(i, j int) bool { return prefer(&h.segs[h.idx[i]], &h.segs[h.idx[j]]) }
func (h *segHeap) Swap(i, j int)      { h.idx[i], h.idx[j] = h.idx[j], h.idx[i] }
func (h *segHeap) Push(x any)         { h.idx = append(h.idx, x.(int32)) }
func (h *segHeap) Pop() any {
	x := h.idx[len(h.idx)-1]
	h.idx = h.idx[:len(h.idx)-1]
	return x
}

// resolved returns tp's view: the memo's, or a new one, which the memo
// keeps unless the partition was written meanwhile. Concurrent callers
// wait for one build rather than each scanning the partition.
func (x *Index) resolved(tp TopicIDPartition) (*partView, error) {
	for {
		if v, ok := x.memo.view(tp); ok {
			return v, nil
		}
		stamp, wait := x.memo.beginView(tp)
		if wait != nil {
			<-wait
			continue
		}
		v, err := x.buildView(tp)
		x.memo.endView(tp, stamp, v, err)
		return v, err
	}
}

func (x *Index) buildView(tp TopicIDPartition) (*partView, error) {
	v := &partView{missing: map[UUID]bool{}}
	err := x.view(func(txn *badger.Txn) error {
		if err := scanMissing(txn, tp, func(id UUID) { v.missing[id] = true }); err != nil {
			return err
		}
		return scan(txn, tp, false, func(m *SegmentMetadata) bool {
			if m.State == CopySegmentFinished && !v.missing[m.SegmentID] {
				v.segs = append(v.segs, viewSegOf(m))
			}
			return true
		})
	})
	if err != nil {
		return nil, err
	}
	v.resolve()
	return v, nil
}

// readable reads the segment s of a view; ErrNotFound (what) when it is
// no longer readable (written since the view was built).
func (x *Index) readable(tp TopicIDPartition, s *viewSeg, what string, args ...any) (SegmentMetadata, error) {
	var m SegmentMetadata
	err := x.view(func(txn *badger.Txn) error {
		item, err := txn.Get(segmentKey(tp, s.start, s.id))
		if err == nil {
			err = item.Value(func(v []byte) error {
				var err error
				m, err = DecodeManifest(v)
				return err
			})
			if err != nil {
				return fmt.Errorf("remote segment index: segment %s of %s: %w", s.id, tp, err)
			}
			if m.State == CopySegmentFinished {
				return nil
			}
		} else if !errors.Is(err, badger.ErrKeyNotFound) {
			return err
		}
		return fmt.Errorf("%w: %s %s", ErrNotFound, tp, fmt.Sprintf(what, args...))
	})
	return m, err
}

// SegmentForOffset returns the readable segment that serves offset: of
// the COPY_SEGMENT_FINISHED segments not marked missing that hold it, the
// one Prefer picks. ErrNotFound when none holds it (below the first, in a
// gap, past the last).
func (x *Index) SegmentForOffset(tp TopicIDPartition, offset int64) (SegmentMetadata, error) {
	v, err := x.resolved(tp)
	if err != nil {
		return SegmentMetadata{}, err
	}
	p, ok := v.at(offset)
	if !ok {
		return SegmentMetadata{}, fmt.Errorf("%w: %s offset %d", ErrNotFound, tp, offset)
	}
	return x.readable(tp, &v.segs[p.seg], "offset %d", offset)
}

// SegmentForEpochOffset is Kafka's remoteLogSegmentMetadata(leaderEpoch,
// offset): of the readable segments whose range of leader epoch epoch
// holds offset, the one Prefer picks. It seeks the epoch's entries ('e'
// keys) down from offset, as far as the longest readable segment reaches.
func (x *Index) SegmentForEpochOffset(tp TopicIDPartition, epoch int32, offset int64) (SegmentMetadata, error) {
	notFound := func() (SegmentMetadata, error) {
		return SegmentMetadata{}, fmt.Errorf("%w: %s epoch %d offset %d", ErrNotFound, tp, epoch, offset)
	}
	v, err := x.resolved(tp)
	if err != nil {
		return SegmentMetadata{}, err
	}
	if _, ok := v.at(offset); !ok {
		return notFound()
	}
	var best *SegmentMetadata
	err = x.view(func(txn *badger.Txn) error {
		prefix := epochPrefix(tp, epoch)
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, Reverse: true})
		defer it.Close()
		seek := binary.BigEndian.AppendUint64(bytes.Clone(prefix), uint64(offset))
		for it.Seek(append(seek, bytes.Repeat([]byte{0xff}, 16)...)); it.Valid(); it.Next() {
			start, id, base, err := epochEntry(it.Item())
			if err != nil {
				return err
			}
			if start < offset-v.maxSpan {
				break // no readable segment starting here reaches offset
			}
			if v.missing[id] {
				continue
			}
			m, err := getSegment(txn, segmentKey(tp, base, id))
			if err != nil {
				return err
			}
			if _, end, ok := m.EpochRange(epoch); !ok || end < offset || m.State != CopySegmentFinished {
				continue
			}
			if best == nil || Prefer(&m, best) {
				best = &m
			}
		}
		return nil
	})
	if err != nil {
		return SegmentMetadata{}, err
	}
	if best == nil {
		return notFound()
	}
	return *best, nil
}

// HighestOffsetForEpoch is Kafka's highestOffsetForEpoch: the last offset
// of leader epoch epoch in the readable segments (not marked missing).
func (x *Index) HighestOffsetForEpoch(tp TopicIDPartition, epoch int32) (int64, bool, error) {
	var (
		end   int64
		found bool
	)
	v, err := x.resolved(tp)
	if err != nil {
		return 0, false, err
	}
	err = x.view(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: epochPrefix(tp, epoch)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			_, id, base, err := epochEntry(it.Item())
			if err != nil {
				return err
			}
			if v.missing[id] {
				continue
			}
			m, err := getSegment(txn, segmentKey(tp, base, id))
			if err != nil {
				return err
			}
			if _, e, ok := m.EpochRange(epoch); ok && m.State == CopySegmentFinished && (!found || e > end) {
				end, found = e, true
			}
		}
		return nil
	})
	return end, found, err
}

// SegmentForTimestamp returns the first segment, in offset order of the
// offsets it serves, that serves an offset at or after fromOffset and has
// a max timestamp at or after ts: where ListOffsets by timestamp continues
// its search (records below fromOffset, the log start, are not to be
// returned). Segments that serve no offset (every offset they hold is
// served by one Prefer picks over them) are skipped.
func (x *Index) SegmentForTimestamp(tp TopicIDPartition, ts, fromOffset int64) (SegmentMetadata, error) {
	v, err := x.resolved(tp)
	if err != nil {
		return SegmentMetadata{}, err
	}
	for i := v.from(fromOffset); i < len(v.pieces); i++ {
		if s := &v.segs[v.pieces[i].seg]; s.maxTS >= ts {
			return x.readable(tp, s, "timestamp %d", ts)
		}
	}
	return SegmentMetadata{}, fmt.Errorf("%w: %s timestamp %d", ErrNotFound, tp, ts)
}

// LogStart returns the remote log start offset: the least start offset of
// a readable segment (COPY_SEGMENT_FINISHED, not marked missing). ok is
// false when there is none.
func (x *Index) LogStart(tp TopicIDPartition) (int64, bool, error) {
	v, err := x.resolved(tp)
	if err != nil || len(v.segs) == 0 {
		return 0, false, err
	}
	return v.start, true, nil
}

// LogEnd returns the remote log end: the greatest end offset of a
// readable segment (COPY_SEGMENT_FINISHED, not marked missing): Kafka's
// highest remote offset, which LATEST_TIERED answers, up to which the
// leader has copied its log and below which local retention may delete.
// A segment marked missing does not count: when it is the last, the end
// moves back below it, and the leader copies that range again if its
// local log still holds it. ok is false when there is no readable
// segment. See "Overlapping segments" in the package doc for a missing
// segment below the end.
func (x *Index) LogEnd(tp TopicIDPartition) (int64, bool, error) {
	v, err := x.resolved(tp)
	if err != nil || len(v.segs) == 0 {
		return 0, false, err
	}
	return v.end, true, nil
}

// ContiguousEnd returns the last offset of the unbroken run of readable
// offsets that starts at from (or at the remote log start, when from lies
// below it): from-1 when no readable segment holds that first offset.
// Local retention deletes only what this covers, and the uploader copies
// from it on, so a gap in the remote log (a segment deleted while another
// overlapping it was kept, a refresh that has not seen an upload yet)
// never lets a local segment go that nothing in the bucket holds. ok is
// false when there is no readable segment.
func (x *Index) ContiguousEnd(tp TopicIDPartition, from int64) (int64, bool, error) {
	v, err := x.resolved(tp)
	if err != nil || len(v.segs) == 0 {
		return 0, false, err
	}
	from = max(from, v.start)
	i := v.from(from)
	if i == len(v.pieces) || v.pieces[i].from > from {
		return from - 1, true, nil
	}
	end := v.pieces[i].to
	for i++; i < len(v.pieces) && v.pieces[i].from == end+1; i++ {
		end = v.pieces[i].to
	}
	return end, true, nil
}

// epochEntry parses an 'e' key and its value.
func epochEntry(item *badger.Item) (start int64, id UUID, base int64, err error) {
	k := item.Key()
	if len(k) != epochKeyLen {
		return 0, id, 0, fmt.Errorf("remote segment index: malformed epoch key %x", k)
	}
	start = int64(binary.BigEndian.Uint64(k[epochKeyLen-16-8:]))
	copy(id[:], k[epochKeyLen-16:])
	err = item.Value(func(v []byte) error {
		if len(v) != 8 {
			return fmt.Errorf("remote segment index: epoch entry %x of %d bytes", k, len(v))
		}
		base = int64(binary.BigEndian.Uint64(v))
		return nil
	})
	return start, id, base, err
}
