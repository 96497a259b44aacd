package plog

import (
	"errors"
	"fmt"
)

// Record-level access, used only off the hot path (ListOffsets by
// timestamp and max timestamp): the timestamps of the records inside one
// batch, decompressing when needed. A search decompresses at most the one
// batch whose max timestamp first reaches the target (read.go,
// remote_read.go), reads it as a stream and stops at the answer; it takes
// a lookup slot, then a decompression slot (codec.go), so that however
// often clients repeat it, searches use at most half the decompression
// slots. What the stream holds (streamMemory: the codec's window and
// buffers) is charged to the caller's Memory first, the requesting
// connection's share of queued.max.request.bytes; a batch whose charge is
// refused is not decompressed, and answers as unreadable records do (its
// base offset and max timestamp).

var errBadRecords = errors.New("malformed records")

// walkRecords calls fn with the offset and timestamp of each record of the
// batch b (whole batch bytes) at or after offset from, in order, until fn
// returns false. What decompressing holds is charged to mem first (a
// refused charge is a *MemoryError, and nothing is decompressed).
func walkRecords(b []byte, from int64, mem Memory, fn func(offset, ts int64) bool) error {
	h := parseHeader(b)
	if h.logAppendTime() {
		// Every record carries the batch's max timestamp.
		for o := max(h.BaseOffset, from); o <= h.lastOffset(); o++ {
			if !fn(o, h.MaxTimestamp) {
				return nil
			}
		}
		return nil
	}
	if h.codec() != codecNone {
		if h.size() < batchHeaderSize || h.size() > int64(len(b)) {
			return fmt.Errorf("%w: batch at offset %d: bad length", errBadRecords, h.BaseOffset)
		}
		release, err := mem.charge(streamMemory(b[batchHeaderSize:h.size()], h.codec()))
		if err != nil {
			return fmt.Errorf("records of batch at offset %d: %w", h.BaseOffset, err)
		}
		defer release()
		defer acquire(lookupSlots)()
	}
	// Bounded (maxDecompressedBatch) and panic-free: the batch may come
	// from a corrupt remote object.
	err := walkBatch(b, &h, func(r recordInfo) bool {
		o := h.BaseOffset + int64(r.offsetDelta)
		if o < from {
			return true
		}
		return fn(o, h.BaseTimestamp+r.tsDelta)
	}, false, maxDecompressedBatch)
	if err != nil {
		return fmt.Errorf("records of batch at offset %d: %w", h.BaseOffset, err)
	}
	return nil
}
