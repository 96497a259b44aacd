package plog

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// Record-level access, used only off the hot path (ListOffsets by
// timestamp and max timestamp): the timestamps of the records inside one
// batch, decompressing when needed.

var errBadRecords = errors.New("malformed records")

// walkRecords calls fn with the offset and timestamp of each record of the
// batch b (whole batch bytes) at or after offset from, in order, until fn
// returns false.
func walkRecords(b []byte, from int64, fn func(offset, ts int64) bool) error {
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
	// Bounded (maxDecompressedBatch) and panic-free: the batch may come
	// from a corrupt remote object.
	data, err := decompressRecords(b[batchHeaderSize:h.size()], h.codec())
	if err != nil {
		return fmt.Errorf("decompress batch at offset %d: %w", h.BaseOffset, err)
	}
	for i := int32(0); i < h.RecordCount && len(data) > 0; i++ {
		length, n := binary.Varint(data)
		if n <= 0 || length < 0 || int64(len(data)-n) < length {
			return errBadRecords
		}
		rec := data[n : n+int(length)]
		data = data[n+int(length):]
		if len(rec) < 1 {
			return errBadRecords
		}
		rec = rec[1:] // attributes
		tsDelta, n := binary.Varint(rec)
		if n <= 0 {
			return errBadRecords
		}
		rec = rec[n:]
		offDelta, n := binary.Varint(rec)
		if n <= 0 {
			return errBadRecords
		}
		if h.BaseOffset+offDelta < from {
			continue
		}
		if !fn(h.BaseOffset+offDelta, h.BaseTimestamp+tsDelta) {
			return nil
		}
	}
	return nil
}
