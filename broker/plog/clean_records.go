package plog

// Records inside a batch, as the cleaner reads and rewrites them. A v2
// record:
//
//	varint length, int8 attributes, varint timestampDelta, varint
//	offsetDelta, varint keyLength (-1 = null), key, varint valueLength
//	(-1 = null), value, varint headerCount, headers.
//
// The cleaner reads a batch's records as a stream (clean_stream.go): its
// keys as MD5 digests for the offset map and the keep decision, its null
// values (tombstones). A rebuilt batch keeps the original base offset,
// last offset delta, producer id/epoch, base sequence, leader epoch,
// codec, timestamp type and transactional/control bits (so offsets and
// sequences never move, as in Kafka's MemoryRecords.filterTo), gets a new
// record count, base and max timestamp and CRC, and has its kept records
// recompressed with the batch's codec as they stream by: each keeps its
// bytes from the key length on verbatim, with its length, timestamp delta
// and offset delta written anew. Attribute bit 6 marks a delete horizon
// (KIP-534): the base timestamp then holds the time after which the
// batch's tombstones may be removed, and record timestamp deltas are
// relative to it.

import (
	"encoding/binary"
	"fmt"
)

const attrDeleteHorizon = 0x40

// rebuildOutputLimit bounds the compressed records of a batch rebuilt from
// a records section of n bytes: it keeps fewer records than the original,
// so more than twice its size means the records compress worse than they
// did (the original had a larger window); the original is kept instead.
func rebuildOutputLimit(n int) int {
	return max(2*n, 64<<10)
}

// rebuild writes the batch h (bytes b) with the records keep marks, read
// again from the batch's stream; baseTs and maxTs are the new batch's
// timestamps, deleteHorizon >= 0 sets the delete-horizon bit. ok is false
// when the kept records compress past rebuildOutputLimit.
func (c *cleaner) rebuild(b []byte, h *batchHeader, keep bitset, kept int32, baseTs, maxTs, deleteHorizon int64) (out []byte, ok bool, err error) {
	s, err := openRecordStream(b, h, nil, 0) // charged by filterBatch
	if err != nil {
		return nil, false, err
	}
	defer s.close()
	w, err := newRecordsWriter(h.codec(), rebuildOutputLimit(int(h.size()-batchHeaderSize)))
	if err != nil {
		return nil, false, fmt.Errorf("recompress batch at offset %d: %w", h.BaseOffset, err)
	}
	if deleteHorizon >= 0 {
		baseTs = deleteHorizon
	}
	var head []byte
	for i := int32(0); i < h.RecordCount; i++ {
		var r streamRecord
		if err := s.head(i, &r); err != nil {
			w.finish()
			return nil, false, err
		}
		if !keep.has(i) {
			if err := s.body(i, &r, nil); err != nil {
				w.finish()
				return nil, false, err
			}
			continue
		}
		tsDelta, offDelta := r.ts-baseTs, r.offset-h.BaseOffset
		length := r.length - int64(r.tsLen+r.offLen) + int64(varintLen(tsDelta)+varintLen(offDelta))
		head = binary.AppendVarint(head[:0], length)
		head = append(head, r.attrs)
		head = binary.AppendVarint(head, tsDelta)
		head = binary.AppendVarint(head, offDelta)
		w.Write(head)
		if err := s.body(i, &r, w); err != nil {
			w.finish()
			return nil, false, err
		}
		if w.err != nil {
			break // the output is full (finish says so): read no further
		}
	}
	recs, err := w.finish()
	if err == errOutputFull {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("recompress batch at offset %d: %w", h.BaseOffset, err)
	}
	if h.logAppendTime() {
		maxTs = h.MaxTimestamp
	}
	attrs := h.Attributes &^ attrDeleteHorizon
	if deleteHorizon >= 0 {
		attrs |= attrDeleteHorizon
	}
	return encodeBatch(h, attrs, baseTs, maxTs, kept, recs), true, nil
}

func varintLen(v int64) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutVarint(b[:], v)
}

// emptyBatch is the header-only batch Kafka keeps in place of a batch whose
// records were all removed but whose producer state must survive: no
// records, no codec, both timestamps the original max timestamp.
func emptyBatch(h *batchHeader) []byte {
	attrs := h.Attributes & (attrTimestampType | attrTransactional | attrControl)
	return encodeBatch(h, attrs, h.MaxTimestamp, h.MaxTimestamp, 0, nil)
}

func encodeBatch(h *batchHeader, attrs int16, baseTs, maxTs int64, count int32, recs []byte) []byte {
	b := make([]byte, batchHeaderSize, batchHeaderSize+len(recs))
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(h.BaseOffset))
	binary.BigEndian.PutUint32(b[offBatchLength:], uint32(batchHeaderSize-logOverhead+len(recs)))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(h.LeaderEpoch))
	b[offMagic] = 2
	binary.BigEndian.PutUint16(b[offAttributes:], uint16(attrs))
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(h.LastOffsetDelta))
	binary.BigEndian.PutUint64(b[offBaseTimestamp:], uint64(baseTs))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(maxTs))
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(h.ProducerID))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], uint16(h.ProducerEpoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], uint32(h.BaseSequence))
	binary.BigEndian.PutUint32(b[offRecordCount:], uint32(count))
	b = append(b, recs...)
	binary.BigEndian.PutUint32(b[offCRC:], batchCRC(b))
	return b
}
