package plog

// Records inside a batch, decoded far enough to compact them: keys (for
// the offset map and the null-key check), null values (tombstones), and
// the bytes needed to write a kept record back unchanged. A v2 record:
//
//	varint length, int8 attributes, varint timestampDelta, varint
//	offsetDelta, varint keyLength (-1 = null), key, varint valueLength
//	(-1 = null), value, varint headerCount, headers.
//
// A rebuilt batch keeps the original base offset, last offset delta,
// producer id/epoch, base sequence, leader epoch, codec, timestamp type and
// transactional/control bits (so offsets and sequences never move, as in
// Kafka's MemoryRecords.filterTo), gets a new record count, base and max
// timestamp and CRC, and has its records recompressed with the batch's
// codec. Attribute bit 6 marks a delete horizon (KIP-534): the base
// timestamp then holds the time after which the batch's tombstones may be
// removed, and record timestamp deltas are relative to it.

import (
	"encoding/binary"
	"fmt"
	"math"
)

const attrDeleteHorizon = 0x40

// rawRecord is one record of a batch.
type rawRecord struct {
	offset    int64 // absolute offset
	ts        int64 // absolute timestamp (base timestamp + delta)
	attrs     byte
	key       []byte // nil when the key is null
	valueNull bool
	tail      []byte // key length, key, value length, value, headers: copied verbatim
}

// decodeRecords decodes every record of the batch b (whole batch bytes,
// CRC already checked), decompressing as needed.
func decodeRecords(b []byte) (batchHeader, []rawRecord, error) {
	h := parseHeader(b)
	if h.RecordCount < 0 || h.size() > int64(len(b)) {
		return h, nil, fmt.Errorf("%w: record count %d", errBadRecords, h.RecordCount)
	}
	data, err := decompressRecords(b[batchHeaderSize:h.size()], h.codec())
	if err != nil {
		return h, nil, fmt.Errorf("batch at offset %d: %w", h.BaseOffset, err)
	}
	// Each record takes at least 7 bytes; do not trust the count for the
	// allocation.
	recs := make([]rawRecord, 0, min(int(h.RecordCount), len(data)/7+1))
	for i := int32(0); i < h.RecordCount; i++ {
		r, n, err := decodeRecord(data, &h)
		if err != nil {
			return h, nil, fmt.Errorf("batch at offset %d record %d: %w", h.BaseOffset, i, err)
		}
		recs = append(recs, r)
		data = data[n:]
	}
	if len(data) != 0 {
		return h, nil, fmt.Errorf("%w: %d bytes after the last record of batch at offset %d", errBadRecords, len(data), h.BaseOffset)
	}
	return h, recs, nil
}

func decodeRecord(data []byte, h *batchHeader) (rawRecord, int, error) {
	length, n := binary.Varint(data)
	if n <= 0 || length < 1 || length > int64(len(data)-n) {
		return rawRecord{}, 0, errBadRecords
	}
	total := n + int(length)
	rec := data[n:total]
	r := rawRecord{attrs: rec[0]}
	rec = rec[1:]
	tsDelta, n := binary.Varint(rec)
	if n <= 0 {
		return rawRecord{}, 0, errBadRecords
	}
	rec = rec[n:]
	offDelta, n := binary.Varint(rec)
	if n <= 0 || offDelta < 0 || offDelta > int64(h.LastOffsetDelta) {
		return rawRecord{}, 0, errBadRecords
	}
	rec = rec[n:]
	r.offset, r.ts, r.tail = h.BaseOffset+offDelta, h.BaseTimestamp+tsDelta, rec
	keyLen, n := binary.Varint(rec)
	if n <= 0 || keyLen < -1 || keyLen > int64(len(rec)-n) {
		return rawRecord{}, 0, errBadRecords
	}
	rec = rec[n:]
	if keyLen >= 0 {
		r.key = rec[:keyLen:keyLen]
		rec = rec[keyLen:]
	}
	valLen, n := binary.Varint(rec)
	if n <= 0 || valLen < -1 || valLen > int64(len(rec)-n) {
		return rawRecord{}, 0, errBadRecords
	}
	r.valueNull = valLen < 0
	return r, total, nil
}

// rebuildBatch writes a batch holding the kept records of the original
// batch h. deleteHorizon >= 0 sets the delete-horizon bit and base
// timestamp.
func rebuildBatch(h *batchHeader, kept []rawRecord, deleteHorizon int64) ([]byte, error) {
	base := kept[0].ts
	if deleteHorizon >= 0 {
		base = deleteHorizon
	}
	maxTs := int64(math.MinInt64)
	var recs []byte
	for _, r := range kept {
		maxTs = max(maxTs, r.ts)
		var body []byte
		body = append(body, r.attrs)
		body = binary.AppendVarint(body, r.ts-base)
		body = binary.AppendVarint(body, r.offset-h.BaseOffset)
		body = append(body, r.tail...)
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	if h.logAppendTime() {
		maxTs = h.MaxTimestamp
	}
	recs, err := compressRecords(recs, h.codec())
	if err != nil {
		return nil, fmt.Errorf("recompress batch at offset %d: %w", h.BaseOffset, err)
	}
	attrs := h.Attributes &^ attrDeleteHorizon
	if deleteHorizon >= 0 {
		attrs |= attrDeleteHorizon
	}
	return encodeBatch(h, attrs, base, maxTs, int32(len(kept)), recs), nil
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
