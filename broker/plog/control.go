package plog

// Control batches: Kafka's transaction markers (EndTransactionMarker). A
// control batch has the transactional and control attribute bits set,
// base sequence -1, and exactly one record, never compressed in practice
// (Kafka writes it uncompressed; a compressed one is still read):
//
//	key    int16 version (0), int16 type (ABORT = 0, COMMIT = 1)
//	value  int16 version (0), int32 coordinatorEpoch
//
// As Kafka's ControlRecordType.parse and EndTransactionMarker.deserialize,
// a key or value of a higher version is read by its version-0 fields (the
// extra bytes ignored); a key shorter than 4 bytes, a value shorter than 6,
// a null key or value, or a type other than ABORT or COMMIT is refused.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ControlType is a control record's type (Kafka's ControlRecordType).
type ControlType int16

const (
	ControlAbort  ControlType = 0
	ControlCommit ControlType = 1
)

func (t ControlType) String() string {
	switch t {
	case ControlAbort:
		return "ABORT"
	case ControlCommit:
		return "COMMIT"
	}
	return fmt.Sprintf("UNKNOWN(%d)", int16(t))
}

// EndTxnMarker is the content of a transaction marker's control record.
type EndTxnMarker struct {
	Type             ControlType
	CoordinatorEpoch int32
}

const (
	controlKeySize   = 4 // version, type
	controlValueSize = 6 // version, coordinatorEpoch
)

// errBadControl marks a control record that does not decode.
var errBadControl = errors.New("malformed control record")

// EncodeControlKey returns the control record key of t.
func EncodeControlKey(t ControlType) []byte {
	b := binary.BigEndian.AppendUint16(nil, 0)
	return binary.BigEndian.AppendUint16(b, uint16(t))
}

// EncodeEndTxnMarkerValue returns the control record value of an end
// transaction marker.
func EncodeEndTxnMarkerValue(coordinatorEpoch int32) []byte {
	b := binary.BigEndian.AppendUint16(nil, 0)
	return binary.BigEndian.AppendUint32(b, uint32(coordinatorEpoch))
}

// DecodeEndTxnMarker decodes a control record's key and value as an end
// transaction marker. Errors wrap kerr.CorruptMessage.
func DecodeEndTxnMarker(key, value []byte) (EndTxnMarker, error) {
	if len(key) < controlKeySize {
		return EndTxnMarker{}, fmt.Errorf("%w: %w: control key of %d bytes, want at least %d", kerr.CorruptMessage, errBadControl, len(key), controlKeySize)
	}
	if v := int16(binary.BigEndian.Uint16(key)); v < 0 {
		return EndTxnMarker{}, fmt.Errorf("%w: %w: control key version %d", kerr.CorruptMessage, errBadControl, v)
	}
	t := ControlType(binary.BigEndian.Uint16(key[2:]))
	if t != ControlAbort && t != ControlCommit {
		return EndTxnMarker{}, fmt.Errorf("%w: %w: control type %d is not an end transaction marker", kerr.CorruptMessage, errBadControl, int16(t))
	}
	if len(value) < controlValueSize {
		return EndTxnMarker{}, fmt.Errorf("%w: %w: end transaction marker value of %d bytes, want at least %d", kerr.CorruptMessage, errBadControl, len(value), controlValueSize)
	}
	if v := int16(binary.BigEndian.Uint16(value)); v < 0 {
		return EndTxnMarker{}, fmt.Errorf("%w: %w: end transaction marker version %d", kerr.CorruptMessage, errBadControl, v)
	}
	return EndTxnMarker{Type: t, CoordinatorEpoch: int32(binary.BigEndian.Uint32(value[2:]))}, nil
}

// ControlBatch builds a transaction marker batch as Kafka's
// MemoryRecords.withEndTransactionMarker does: base offset 0, leader
// epoch -1 (Append stamps both), one uncompressed record, timestamp ts.
func ControlBatch(producerID int64, producerEpoch int16, m EndTxnMarker, ts int64) []byte {
	key := EncodeControlKey(m.Type)
	value := EncodeEndTxnMarkerValue(m.CoordinatorEpoch)
	var body []byte
	body = append(body, 0)              // attributes
	body = binary.AppendVarint(body, 0) // timestamp delta
	body = binary.AppendVarint(body, 0) // offset delta
	body = binary.AppendVarint(body, int64(len(key)))
	body = append(body, key...)
	body = binary.AppendVarint(body, int64(len(value)))
	body = append(body, value...)
	body = binary.AppendVarint(body, 0) // headers
	rec := binary.AppendVarint(nil, int64(len(body)))
	rec = append(rec, body...)

	b := make([]byte, batchHeaderSize, batchHeaderSize+len(rec))
	binary.BigEndian.PutUint64(b[offBaseOffset:], 0)
	binary.BigEndian.PutUint32(b[offBatchLength:], uint32(batchHeaderSize-logOverhead+len(rec)))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], 0xffffffff)
	b[offMagic] = 2
	binary.BigEndian.PutUint16(b[offAttributes:], attrTransactional|attrControl)
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], 0)
	binary.BigEndian.PutUint64(b[offBaseTimestamp:], uint64(ts))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(ts))
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(producerID))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], uint16(producerEpoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], 0xffffffff)
	binary.BigEndian.PutUint32(b[offRecordCount:], 1)
	b = append(b, rec...)
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// DecodeControlBatch decodes the marker of a control batch b (whole batch
// bytes, frame already checked). It never panics; errors wrap
// kerr.CorruptMessage.
func DecodeControlBatch(b []byte) (EndTxnMarker, error) {
	if len(b) < batchHeaderSize {
		return EndTxnMarker{}, fmt.Errorf("%w: %w: %d bytes is shorter than a batch header", kerr.CorruptMessage, errBadControl, len(b))
	}
	h := parseHeader(b)
	if !h.isControl() {
		return EndTxnMarker{}, fmt.Errorf("%w: %w: not a control batch", kerr.CorruptMessage, errBadControl)
	}
	if h.size() > int64(len(b)) || h.size() < batchHeaderSize {
		return EndTxnMarker{}, fmt.Errorf("%w: %w: batch length %d does not fit %d bytes", kerr.CorruptMessage, errBadControl, h.Length, len(b))
	}
	if h.RecordCount != 1 {
		// Kafka's control batches hold one record; more is refused
		// rather than guessed at.
		return EndTxnMarker{}, fmt.Errorf("%w: %w: control batch with %d records", kerr.CorruptMessage, errBadControl, h.RecordCount)
	}
	if h.codec() != codecNone {
		return EndTxnMarker{}, fmt.Errorf("%w: %w: compressed control batch (codec %d)", kerr.CorruptMessage, errBadControl, h.codec())
	}
	key, value, err := firstRecordKeyValue(b[batchHeaderSize:h.size()])
	if err != nil {
		return EndTxnMarker{}, fmt.Errorf("%w: %w: %v", kerr.CorruptMessage, errBadControl, err)
	}
	return DecodeEndTxnMarker(key, value)
}

// firstRecordKeyValue returns the key and value of the first record in an
// uncompressed records section (nil for a null key or value).
func firstRecordKeyValue(data []byte) (key, value []byte, err error) {
	r := data
	varint := func(what string) (int64, error) {
		v, n := binary.Varint(r)
		if n <= 0 {
			return 0, fmt.Errorf("bad %s varint", what)
		}
		r = r[n:]
		return v, nil
	}
	length, err := varint("record length")
	if err != nil {
		return nil, nil, err
	}
	if length < minRecordSize-1 || length > int64(len(r)) {
		return nil, nil, fmt.Errorf("record length %d outside the %d bytes left", length, len(r))
	}
	r = r[:length]
	if len(r) < 1 {
		return nil, nil, errors.New("record without attributes")
	}
	r = r[1:] // attributes
	if _, err := varint("timestamp delta"); err != nil {
		return nil, nil, err
	}
	if _, err := varint("offset delta"); err != nil {
		return nil, nil, err
	}
	bytesField := func(what string) ([]byte, error) {
		n, err := varint(what + " length")
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, nil
		}
		if n > int64(len(r)) {
			return nil, fmt.Errorf("%s length %d exceeds the %d bytes left", what, n, len(r))
		}
		v := r[:n]
		r = r[n:]
		return v, nil
	}
	if key, err = bytesField("key"); err != nil {
		return nil, nil, err
	}
	if value, err = bytesField("value"); err != nil {
		return nil, nil, err
	}
	return key, value, nil
}
