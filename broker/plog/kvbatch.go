package plog

// Key/value record batches for the coordinators that keep their state in
// an internal topic (__consumer_offsets, __transaction_state): they write
// the records they must make durable together as one uncompressed v2
// record batch with base offset 0 (the log assigns offsets and stamps the
// leader epoch), and read batches back when they load a partition.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"
)

// KV is one record of a coordinator's batch; a nil Value is a tombstone.
type KV struct {
	Key, Value []byte
}

// BatchProducer is the producer a batch is written for: none (NoProducer),
// or a transactional offset commit's producer.
type BatchProducer struct {
	ID            int64
	Epoch         int16
	Seq           int32 // base sequence
	Transactional bool
}

// NoProducer writes a batch without a producer id.
var NoProducer = BatchProducer{ID: -1, Epoch: -1, Seq: -1}

// EncodeKVBatch builds one uncompressed v2 record batch of recs for p,
// with base offset 0 and every record stamped with now.
func EncodeKVBatch(recs []KV, now time.Time, p BatchProducer) []byte {
	ts := now.UnixMilli()
	b := make([]byte, batchHeaderSize, batchHeaderSize+64*len(recs))
	var body []byte
	for i, r := range recs {
		body = body[:0]
		body = append(body, 0)                     // attributes
		body = binary.AppendVarint(body, 0)        // timestamp delta
		body = binary.AppendVarint(body, int64(i)) // offset delta
		body = binary.AppendVarint(body, int64(len(r.Key)))
		body = append(body, r.Key...)
		if r.Value == nil {
			body = binary.AppendVarint(body, -1)
		} else {
			body = binary.AppendVarint(body, int64(len(r.Value)))
			body = append(body, r.Value...)
		}
		body = binary.AppendVarint(body, 0) // headers
		b = binary.AppendVarint(b, int64(len(body)))
		b = append(b, body...)
	}
	be := binary.BigEndian
	be.PutUint64(b[offBaseOffset:], 0)
	be.PutUint32(b[offBatchLength:], uint32(len(b)-logOverhead))
	be.PutUint32(b[offLeaderEpoch:], 0xffffffff) // the log stamps it
	b[offMagic] = 2
	var attrs uint16
	if p.Transactional {
		attrs = attrTransactional
	}
	be.PutUint16(b[offAttributes:], attrs)
	be.PutUint32(b[offLastOffsetDelta:], uint32(len(recs)-1))
	be.PutUint64(b[offBaseTimestamp:], uint64(ts))
	be.PutUint64(b[offMaxTimestamp:], uint64(ts))
	be.PutUint64(b[offProducerID:], uint64(p.ID))
	be.PutUint16(b[offProducerEpoch:], uint16(p.Epoch))
	be.PutUint32(b[offBaseSequence:], uint32(p.Seq))
	be.PutUint32(b[offRecordCount:], uint32(len(recs)))
	be.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], castagnoli))
	return b
}

// ErrShortBatch is a batch cut short of its length.
var ErrShortBatch = errors.New("truncated record batch")

// KVBatchHead is what a coordinator's loader needs of a batch's header.
type KVBatchHead struct {
	BaseOffset             int64
	ProducerID             int64
	ProducerEpoch          int16
	Transactional, Control bool
}

// WalkKVBatches calls fn with the header and bytes of every batch in data,
// which holds whole batches, after checking its frame, magic and CRC.
func WalkKVBatches(data []byte, fn func(h KVBatchHead, b []byte) error) error {
	be := binary.BigEndian
	for len(data) > 0 {
		if len(data) < logOverhead {
			return ErrShortBatch
		}
		n := int64(int32(be.Uint32(data[offBatchLength:])))
		if n < batchHeaderSize-logOverhead || n+logOverhead > int64(len(data)) {
			return ErrShortBatch
		}
		b := data[:logOverhead+n]
		data = data[logOverhead+n:]
		if b[offMagic] != 2 {
			return fmt.Errorf("record batch magic %d", b[offMagic])
		}
		if crc32.Checksum(b[offAttributes:], castagnoli) != be.Uint32(b[offCRC:]) {
			return errors.New("record batch CRC mismatch")
		}
		attrs := be.Uint16(b[offAttributes:])
		h := KVBatchHead{
			BaseOffset:    int64(be.Uint64(b[offBaseOffset:])),
			ProducerID:    int64(be.Uint64(b[offProducerID:])),
			ProducerEpoch: int16(be.Uint16(b[offProducerEpoch:])),
			Transactional: attrs&attrTransactional != 0,
			Control:       attrs&attrControl != 0,
		}
		if err := fn(h, b); err != nil {
			return err
		}
	}
	return nil
}

// DecodeKVBatches calls fn for every record of every data batch in data,
// which holds whole batches. Control batches are skipped; compressed
// batches are an error (the coordinators never write them).
func DecodeKVBatches(data []byte, fn func(KV) error) error {
	return WalkKVBatches(data, func(h KVBatchHead, b []byte) error {
		if h.Control {
			return nil
		}
		return KVBatchRecords(b, func(_ int64, r KV) error { return fn(r) })
	})
}

// KVBatchRecords calls fn with the offset delta and content of every
// record of a data batch b (whole, its frame checked by WalkKVBatches).
func KVBatchRecords(b []byte, fn func(offsetDelta int64, r KV) error) error {
	be := binary.BigEndian
	if attrs := be.Uint16(b[offAttributes:]); attrs&attrCompressionMask != 0 {
		return fmt.Errorf("compressed record batch (codec %d) in a coordinator's topic", attrs&attrCompressionMask)
	}
	count := int32(be.Uint32(b[offRecordCount:]))
	rest := b[batchHeaderSize:]
	for i := int32(0); i < count; i++ {
		r, delta, tail, err := decodeKV(rest)
		if err != nil {
			return err
		}
		rest = tail
		if err := fn(delta, r); err != nil {
			return err
		}
	}
	return nil
}

// decodeKV reads one record of a v2 batch and returns its offset delta
// and the bytes after it.
func decodeKV(b []byte) (KV, int64, []byte, error) {
	bad := errors.New("malformed record")
	l, n := binary.Varint(b)
	if n <= 0 || l < 0 || int64(len(b)-n) < l {
		return KV{}, 0, nil, bad
	}
	body, rest := b[n:n+int(l)], b[n+int(l):]
	if len(body) < 1 {
		return KV{}, 0, nil, bad
	}
	body = body[1:] // attributes
	var delta int64
	for i := range 2 { // timestamp delta, offset delta
		v, n := binary.Varint(body)
		if n <= 0 {
			return KV{}, 0, nil, bad
		}
		if i == 1 {
			delta = v
		}
		body = body[n:]
	}
	var r KV
	for i := range 2 {
		fl, n := binary.Varint(body)
		if n <= 0 || fl < -1 || int64(len(body)-n) < fl {
			return KV{}, 0, nil, bad
		}
		body = body[n:]
		var f []byte
		if fl >= 0 {
			f = body[:fl:fl]
			body = body[fl:]
		}
		if i == 0 {
			r.Key = f
		} else {
			r.Value = f
			if r.Value == nil && fl == 0 {
				r.Value = []byte{}
			}
		}
	}
	return r, delta, rest, nil
}
