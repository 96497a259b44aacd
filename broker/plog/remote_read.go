package plog

// What the tier's reader (package tier) parses of a remote segment: the
// segment's .index, .timeindex and record batches come back from the
// bucket as bytes, and are searched with the same code as local segments.

// OffsetIndex is a segment's offset index (.index, Kafka's format) parsed
// from its bytes.
type OffsetIndex struct{ v offsetView }

// ParseOffsetIndex parses and checks the .index bytes of a segment with
// base offset base, offsets below next and a .log of logSize bytes: whole
// entries, relative offsets and positions strictly increasing, inside the
// segment. A malformed index is an error.
func ParseOffsetIndex(b []byte, base, next, logSize int64) (OffsetIndex, error) {
	es, err := parseOffsetIndex(b, base, next, logSize)
	if err != nil {
		return OffsetIndex{}, err
	}
	return OffsetIndex{offsetView{base: base, mem: es, n: len(es)}}, nil
}

// Lookup returns the position of the last indexed batch whose last
// offset is <= offset, or 0: a batch boundary at or before the batch
// holding offset.
func (x OffsetIndex) Lookup(offset int64) int64 { return x.v.lookup(offset) }

// Bytes is the memory the parsed index holds.
func (x OffsetIndex) Bytes() int64 { return int64(x.v.n) * offsetEntrySize }

// TimeIndex is a segment's time index (.timeindex, Kafka's format: 8-byte
// timestamp, 4-byte relative offset) parsed from its bytes.
type TimeIndex struct{ v timeView }

// ParseTimeIndex parses and checks the .timeindex bytes of a segment with
// base offset base and offsets below next: whole entries, timestamps and
// offsets never decreasing, offsets inside the segment.
func ParseTimeIndex(b []byte, base, next int64) (TimeIndex, error) {
	es, err := parseTimeIndex(b, base, next)
	if err != nil {
		return TimeIndex{}, err
	}
	return TimeIndex{timeView{base: base, mem: es, n: len(es)}}, nil
}

// LookupBefore returns the offset of the last entry whose timestamp is
// < ts (every batch up to it has timestamps below ts); ok is false when
// there is none.
func (x TimeIndex) LookupBefore(ts int64) (offset int64, ok bool) { return x.v.lookupBefore(ts) }

// Bytes is the memory the parsed index holds.
func (x TimeIndex) Bytes() int64 { return int64(x.v.n) * 16 } // timeEntry: int64 + int32, padded

// BatchHeaderSize is the size of a v2 record batch header.
const BatchHeaderSize = batchHeaderSize

// BatchOffsetForTimestamp is one batch's share of a search by timestamp
// (ListOffsets, Kafka's LogSegment.findOffsetByTimestamp): for the batch
// b (its whole bytes, v2), ok is false when its max timestamp is below
// ts, it ends below from, it holds no record, or b is not a whole v2
// batch; otherwise the answer is the first record at or after from whose
// timestamp is >= ts (decompressing the records when needed; unreadable
// records answer with the batch's base offset and max timestamp), with
// the batch's leader epoch.
func BatchOffsetForTimestamp(b []byte, ts, from int64) (offset, timestamp int64, epoch int32, ok bool) {
	return BatchOffsetForTimestampCharged(b, ts, from, nil)
}

// BatchOffsetForTimestampCharged is BatchOffsetForTimestamp charging what
// decompressing the batch takes to mem (records.go).
func BatchOffsetForTimestampCharged(b []byte, ts, from int64, mem Memory) (offset, timestamp int64, epoch int32, ok bool) {
	if len(b) < batchHeaderSize || b[offMagic] != 2 {
		return -1, -1, -1, false
	}
	h := parseHeader(b)
	if h.Length < batchHeaderSize-logOverhead || h.size() != int64(len(b)) {
		return -1, -1, -1, false
	}
	if !mayHoldTimestamp(&h, ts, from) {
		return -1, -1, -1, false
	}
	off, rts := recordForTimestamp(b, &h, ts, from, mem)
	return off, rts, h.LeaderEpoch, true
}
