package plog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Layout of a record batch header (magic v2), all big-endian.
const (
	offBaseOffset      = 0  // int64
	offBatchLength     = 8  // int32: bytes after this field
	offLeaderEpoch     = 12 // int32
	offMagic           = 16 // int8
	offCRC             = 17 // uint32, CRC-32C of attributes..end
	offAttributes      = 21 // int16
	offLastOffsetDelta = 23 // int32
	offBaseTimestamp   = 27 // int64
	offMaxTimestamp    = 35 // int64
	offProducerID      = 43 // int64
	offProducerEpoch   = 51 // int16
	offBaseSequence    = 53 // int32
	offRecordCount     = 57 // int32
	batchHeaderSize    = 61

	logOverhead = 12 // baseOffset + batchLength

	attrCompressionMask = 0x07
	attrTimestampType   = 0x08
	attrTransactional   = 0x10
	attrControl         = 0x20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// batchHeader is the parsed fixed header of a v2 record batch.
type batchHeader struct {
	BaseOffset      int64
	Length          int32
	LeaderEpoch     int32
	Magic           int8
	CRC             uint32
	Attributes      int16
	LastOffsetDelta int32
	BaseTimestamp   int64
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	RecordCount     int32

	// Set by validateBatch from the records: the bounds of their
	// timestamps other than -1 (recTs false: every record has none), and
	// the batch's bytes, for per-record errors.
	recTs        bool
	recLo, recHi int64
	raw          []byte
}

// parseHeader decodes the header of b, which must hold batchHeaderSize bytes.
func parseHeader(b []byte) batchHeader {
	_ = b[batchHeaderSize-1]
	return batchHeader{
		BaseOffset:      int64(binary.BigEndian.Uint64(b[offBaseOffset:])),
		Length:          int32(binary.BigEndian.Uint32(b[offBatchLength:])),
		LeaderEpoch:     int32(binary.BigEndian.Uint32(b[offLeaderEpoch:])),
		Magic:           int8(b[offMagic]),
		CRC:             binary.BigEndian.Uint32(b[offCRC:]),
		Attributes:      int16(binary.BigEndian.Uint16(b[offAttributes:])),
		LastOffsetDelta: int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:])),
		BaseTimestamp:   int64(binary.BigEndian.Uint64(b[offBaseTimestamp:])),
		MaxTimestamp:    int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])),
		ProducerID:      int64(binary.BigEndian.Uint64(b[offProducerID:])),
		ProducerEpoch:   int16(binary.BigEndian.Uint16(b[offProducerEpoch:])),
		BaseSequence:    int32(binary.BigEndian.Uint32(b[offBaseSequence:])),
		RecordCount:     int32(binary.BigEndian.Uint32(b[offRecordCount:])),
	}
}

func (h *batchHeader) size() int64       { return logOverhead + int64(h.Length) }
func (h *batchHeader) lastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }
func (h *batchHeader) codec() int        { return int(h.Attributes & attrCompressionMask) }
func (h *batchHeader) isControl() bool   { return h.Attributes&attrControl != 0 }
func (h *batchHeader) isTransactional() bool {
	return h.Attributes&attrTransactional != 0
}
func (h *batchHeader) logAppendTime() bool { return h.Attributes&attrTimestampType != 0 }

// lastSeq is the sequence of the batch's last record (sequences wrap at
// MaxInt32, as in Kafka).
func (h *batchHeader) lastSeq() int32 {
	if h.BaseSequence < 0 {
		return -1
	}
	s := int64(h.BaseSequence) + int64(h.LastOffsetDelta)
	if s > math.MaxInt32 {
		s -= math.MaxInt32 + 1
	}
	return int32(s)
}

func (h *batchHeader) meta() BatchMeta {
	return BatchMeta{
		ProducerID:    h.ProducerID,
		ProducerEpoch: h.ProducerEpoch,
		FirstSeq:      h.BaseSequence,
		LastSeq:       h.lastSeq(),
		FirstOffset:   h.BaseOffset,
		LastOffset:    h.lastOffset(),
		MaxTimestamp:  h.MaxTimestamp,
		Transactional: h.isTransactional(),
	}
}

// batchCRC computes the CRC-32C a batch must carry.
func batchCRC(b []byte) uint32 {
	return crc32.Checksum(b[offAttributes:], castagnoli)
}

// checkFrame validates the framing, magic and CRC of the batch at the
// start of b (which may hold more bytes after it) and returns its header.
// It is shared by produce validation and segment recovery.
func checkFrame(b []byte) (batchHeader, error) {
	if len(b) < logOverhead {
		return batchHeader{}, fmt.Errorf("%w: %d bytes left, shorter than a batch", kerr.CorruptMessage, len(b))
	}
	length := int32(binary.BigEndian.Uint32(b[offBatchLength:]))
	if len(b) > offMagic {
		if m := int8(b[offMagic]); m != 2 {
			if m >= 0 && m < 2 {
				return batchHeader{}, fmt.Errorf("%w: magic %d", kerr.UnsupportedForMessageFormat, m)
			}
			return batchHeader{}, fmt.Errorf("%w: magic %d", kerr.CorruptMessage, m)
		}
	}
	if length < batchHeaderSize-logOverhead {
		return batchHeader{}, fmt.Errorf("%w: batch length %d too small", kerr.CorruptMessage, length)
	}
	if int64(len(b)) < logOverhead+int64(length) {
		return batchHeader{}, fmt.Errorf("%w: batch length %d exceeds the %d bytes left", kerr.CorruptMessage, length, len(b)-logOverhead)
	}
	h := parseHeader(b)
	if got := batchCRC(b[:h.size()]); got != h.CRC {
		return h, fmt.Errorf("%w: crc %08x, computed %08x", kerr.CorruptMessage, h.CRC, got)
	}
	return h, nil
}

// validateBatch checks a batch from a producer as Kafka's LogValidator
// does: framing, magic, CRC, size, codec, the header's record count and
// offset range, the sequence of an idempotent batch, then every record
// (validate.go), in one streamed pass that also refuses records without
// a key when requireKeys (a compacted topic) and bounds the decompressed
// size by max.message.bytes (decompressLimit, codec.go). b starts with the batch and may hold more. It sets the
// batch's max timestamp to its records' largest, as Kafka does,
// recomputing the CRC when that changes it.
func validateBatch(b []byte, maxMessageBytes int32, requireKeys bool) (batchHeader, error) {
	h, err := checkFrame(b)
	if err != nil {
		return h, err
	}
	if h.size() > int64(maxMessageBytes) {
		return h, fmt.Errorf("%w: batch of %d bytes, max.message.bytes %d", kerr.MessageTooLarge, h.size(), maxMessageBytes)
	}
	if h.codec() > 4 {
		return h, fmt.Errorf("%w: codec %d", kerr.UnsupportedCompressionType, h.codec())
	}
	if h.RecordCount <= 0 || h.LastOffsetDelta < 0 || int64(h.RecordCount) != int64(h.LastOffsetDelta)+1 {
		return h, fmt.Errorf("%w: inconsistent batch offset range [0, %d] and count of records %d", kerr.InvalidRecord, h.LastOffsetDelta, h.RecordCount)
	}
	if h.isControl() {
		return h, fmt.Errorf("%w: clients may not write control batches", kerr.InvalidRecord)
	}
	if h.ProducerID >= 0 && h.BaseSequence < 0 {
		return h, fmt.Errorf("%w: invalid sequence number %d in record batch with producer id %d", kerr.InvalidRecord, h.BaseSequence, h.ProducerID)
	}
	st, err := validateRecords(b, &h, decompressLimit(maxMessageBytes), requireKeys)
	if err != nil {
		return h, err
	}
	if st.maxTs != h.MaxTimestamp {
		binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(st.maxTs))
		h.MaxTimestamp = st.maxTs
		h.CRC = batchCRC(b[:h.size()])
		binary.BigEndian.PutUint32(b[offCRC:], h.CRC)
	}
	h.recTs, h.recLo, h.recHi = st.ok, st.lo, st.hi
	h.raw = b[:h.size()]
	return h, nil
}

// checkTimestamps applies message.timestamp.{before,after}.max.ms to a
// CreateTime batch checked by validateBatch: every record's timestamp
// other than -1 must be within [now - before, now + after], else the
// batch is refused with INVALID_TIMESTAMP and one RecordError per record
// outside (Kafka's LogValidator.validateTimestamp).
func checkTimestamps(h *batchHeader, nowMs int64, cfg *Config) error {
	lo, hi := int64(math.MinInt64), int64(math.MaxInt64)
	if before := max(cfg.MessageTimestampBeforeMaxMs, 0); nowMs >= 0 || before <= nowMs-math.MinInt64 {
		lo = nowMs - before
	}
	if after := max(cfg.MessageTimestampAfterMaxMs, 0); after <= math.MaxInt64-nowMs {
		hi = nowMs + after
	}
	recLo, recHi := h.recLo, h.recHi
	if h.raw == nil {
		// Not walked (a caller that checked only the header).
		recLo, recHi = min(h.BaseTimestamp, h.MaxTimestamp), h.MaxTimestamp
	} else if !h.recTs {
		return nil
	}
	if recLo >= lo && recHi <= hi {
		return nil
	}
	if h.raw != nil {
		if err := timestampRecordErrors(h.raw, h, lo, hi, decompressLimit(cfg.MaxMessageBytes)); err != nil {
			return err
		}
	}
	return fmt.Errorf("%w: timestamps %d..%d outside [%d, %d]", kerr.InvalidTimestamp, recLo, recHi, lo, hi)
}

// stampBatch sets the base offset and leader epoch of b in place (both
// outside the CRC) and, when the timestamp type must change, the
// attributes and max timestamp, recomputing the CRC.
func stampBatch(b []byte, baseOffset int64, epoch int32, tsType TimestampType, nowMs int64) {
	binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(baseOffset))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(epoch))
	attrs := binary.BigEndian.Uint16(b[offAttributes:])
	switch {
	case tsType == LogAppendTime:
		binary.BigEndian.PutUint16(b[offAttributes:], attrs|attrTimestampType)
		binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(nowMs))
	case attrs&attrTimestampType != 0:
		// A client asked for LogAppendTime on a CreateTime topic: Kafka
		// rewrites the type to the topic's.
		binary.BigEndian.PutUint16(b[offAttributes:], attrs&^attrTimestampType)
	default:
		return
	}
	size := logOverhead + int64(binary.BigEndian.Uint32(b[offBatchLength:]))
	binary.BigEndian.PutUint32(b[offCRC:], batchCRC(b[:size]))
}
