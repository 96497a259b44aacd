package group

// Record batches of __consumer_offsets: the coordinator writes each group
// of records it must make durable together as one uncompressed record
// batch (magic 2, no producer id), and reads batches back when it loads a
// partition.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"
)

// Record is one __consumer_offsets record; a nil Value is a tombstone.
type Record struct {
	Key, Value []byte
}

var crc32c = crc32.MakeTable(crc32.Castagnoli)

const (
	batchHeaderLen    = 61 // baseOffset .. recordCount
	attrCodecMask     = 0x07
	attrTransactional = 0x10
	attrControl       = 0x20
)

// encodeBatch builds one uncompressed v2 record batch with base offset 0
// (the log assigns offsets) and every record stamped with now.
func encodeBatch(recs []Record, now time.Time) []byte {
	return encodeProducerBatch(recs, now, batchProducer{id: -1, epoch: -1, seq: -1})
}

// batchProducer is the producer a batch is written for: none (id -1), or
// a transactional offset commit's producer (txn_offsets.go).
type batchProducer struct {
	id    int64
	epoch int16
	seq   int32 // base sequence
	txn   bool  // the transactional attribute
}

// encodeProducerBatch is encodeBatch with the producer fields of p.
func encodeProducerBatch(recs []Record, now time.Time, p batchProducer) []byte {
	ts := now.UnixMilli()
	b := make([]byte, batchHeaderLen, batchHeaderLen+64*len(recs))
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
	be.PutUint64(b[0:], 0)                 // base offset
	be.PutUint32(b[8:], uint32(len(b)-12)) // batch length
	be.PutUint32(b[12:], 0xffffffff)       // partition leader epoch (the log stamps it)
	b[16] = 2                              // magic
	var attrs uint16
	if p.txn {
		attrs = attrTransactional
	}
	be.PutUint16(b[21:], attrs)               // attributes
	be.PutUint32(b[23:], uint32(len(recs)-1)) // last offset delta
	be.PutUint64(b[27:], uint64(ts))          // first timestamp
	be.PutUint64(b[35:], uint64(ts))          // max timestamp
	be.PutUint64(b[43:], uint64(p.id))        // producer id
	be.PutUint16(b[51:], uint16(p.epoch))     // producer epoch
	be.PutUint32(b[53:], uint32(p.seq))       // base sequence
	be.PutUint32(b[57:], uint32(len(recs)))   // record count
	be.PutUint32(b[17:], crc32.Checksum(b[21:], crc32c))
	return b
}

var errShortBatch = errors.New("truncated record batch")

// batchHead is what the loader needs of a batch's header.
type batchHead struct {
	baseOffset    int64
	producerID    int64
	producerEpoch int16
	txn, control  bool
}

// decodeBatches calls fn for every record of every data batch in data,
// which holds whole batches. Control batches are skipped; compressed
// batches are an error (the coordinator never writes them).
func decodeBatches(data []byte, fn func(Record) error) error {
	return walkBatches(data, func(h batchHead, b []byte) error {
		if h.control {
			return nil
		}
		return batchRecords(b, func(_ int64, r Record) error { return fn(r) })
	})
}

// walkBatches calls fn with the header and bytes of every batch in data,
// which holds whole batches, after checking its frame and CRC.
func walkBatches(data []byte, fn func(h batchHead, b []byte) error) error {
	be := binary.BigEndian
	for len(data) > 0 {
		if len(data) < 12 {
			return errShortBatch
		}
		n := int64(int32(be.Uint32(data[8:])))
		if n < batchHeaderLen-12 || n+12 > int64(len(data)) {
			return errShortBatch
		}
		b := data[:12+n]
		data = data[12+n:]
		if b[16] != 2 {
			return fmt.Errorf("record batch magic %d", b[16])
		}
		if crc32.Checksum(b[21:], crc32c) != be.Uint32(b[17:]) {
			return errors.New("record batch CRC mismatch")
		}
		attrs := be.Uint16(b[21:])
		h := batchHead{
			baseOffset:    int64(be.Uint64(b[0:])),
			producerID:    int64(be.Uint64(b[43:])),
			producerEpoch: int16(be.Uint16(b[51:])),
			txn:           attrs&attrTransactional != 0,
			control:       attrs&attrControl != 0,
		}
		if err := fn(h, b); err != nil {
			return err
		}
	}
	return nil
}

// batchRecords calls fn with the offset delta and content of every record
// of a data batch b (whole, frame checked by walkBatches).
func batchRecords(b []byte, fn func(offsetDelta int64, r Record) error) error {
	be := binary.BigEndian
	if attrs := be.Uint16(b[21:]); attrs&attrCodecMask != 0 {
		return fmt.Errorf("compressed record batch (codec %d) in __consumer_offsets", attrs&attrCodecMask)
	}
	count := int32(be.Uint32(b[57:]))
	rest := b[batchHeaderLen:]
	for i := int32(0); i < count; i++ {
		r, delta, tail, err := decodeRecord(rest)
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

// decodeRecord reads one record of a v2 batch and returns its offset
// delta and the bytes after it.
func decodeRecord(b []byte) (Record, int64, []byte, error) {
	bad := errors.New("malformed record")
	l, n := binary.Varint(b)
	if n <= 0 || l < 0 || int64(len(b)-n) < l {
		return Record{}, 0, nil, bad
	}
	body, rest := b[n:n+int(l)], b[n+int(l):]
	if len(body) < 1 {
		return Record{}, 0, nil, bad
	}
	body = body[1:] // attributes
	var delta int64
	for i := range 2 { // timestamp delta, offset delta
		v, n := binary.Varint(body)
		if n <= 0 {
			return Record{}, 0, nil, bad
		}
		if i == 1 {
			delta = v
		}
		body = body[n:]
	}
	var r Record
	for i := range 2 {
		fl, n := binary.Varint(body)
		if n <= 0 || fl < -1 || int64(len(body)-n) < fl {
			return Record{}, 0, nil, bad
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
