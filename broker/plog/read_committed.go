package plog

// Reads of read_committed fetches: the slice and the offset that bounds
// the search of its aborted transactions.

import "sort"

// ReadCommittedForFetch is ReadForFetch for a read_committed fetch, whose
// maxOffset is the last stable offset. It also returns upper, an offset
// above every offset of a non-empty slice, by which the fetch bounds its
// search of aborted transactions (AbortedTransactions(offset, upper)): the
// slice's last offset + 1, or for a slice cut in a partial batch the last
// offset of the first indexed batch starting at or after the slice's end,
// else its segment's next offset, as Kafka's
// LogSegment.fetchUpperBoundOffset does. Any of these is above every
// offset of the slice, partial batch included; the index keeps the bound
// within index.interval.bytes of the slice's end without reading it. For
// an empty slice upper is maxOffset.
func (l *Log) ReadCommittedForFetch(offset, maxOffset int64, maxBytes int, minOne bool) (FileSlice, int64, error) {
	upper := maxOffset
	sl, err := l.read(offset, maxOffset, maxBytes, minOne, true, &upper)
	return sl, upper, err
}

// upperBoundAt returns the last offset of the first indexed batch that
// starts at or after byte pos of the segment, or the segment's next
// offset when there is none (or the entry found does not land on its
// batch).
func (v segView) upperBoundAt(pos int64) int64 {
	ok := true
	i := sort.Search(v.idx.n, func(i int) bool {
		e, good := v.idx.entry(i)
		ok = ok && good
		return int64(e.pos) >= pos
	})
	if ok && i < v.idx.n {
		if e, good := v.idx.entry(i); good && v.idx.lands(e) {
			return v.base + int64(e.rel)
		}
	}
	return v.next
}
