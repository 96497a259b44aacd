package plog

// Record-level validation of a producer's batch, after its frame and CRC
// (batch.go): Kafka's LogValidator and DefaultRecord.readFrom for magic
// v2. Every record is read once, in order, from the batch bytes or, for a
// compressed batch, from a bounded decompression stream (codec.go):
//
//   - the batch holds exactly recordCount records, which end exactly at
//     the end of the records section (decompressed); no record is assumed
//     from the header alone, so a batch cannot move the log end by more
//     offsets than it carries records;
//   - record i has offset delta i, so lastOffsetDelta = recordCount-1
//     holds for the records too (Strata stores batches verbatim and never
//     rewrites inner offsets);
//   - every length is inside the record that holds it: the record's own
//     length, key and value lengths (-1 is null), the header count and
//     each header's key (>= 0) and value (-1 is null) lengths; varints of
//     32-bit fields take at most 5 bytes and fit in 32 bits; a record's
//     fields use exactly its length.
//
// Failures are INVALID_RECORD, as Kafka's InvalidRecordException; the
// walk also yields the records' timestamps, for the CreateTime bounds and
// the batch's max timestamp (batch.go).

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/twmb/franz-go/pkg/kerr"
)

// minRecordSize is the smallest encoded record: a one-byte length, then
// attributes, timestamp delta, offset delta, key length, value length and
// header count of one byte each.
const minRecordSize = 7

// recordsError is a records section that does not hold what its header
// claims: INVALID_RECORD to a producer, errBadRecords to readers.
type recordsError struct{ msg string }

func (e *recordsError) Error() string   { return e.msg }
func (e *recordsError) Unwrap() []error { return []error{kerr.InvalidRecord, errBadRecords} }

func badRecords(format string, args ...any) error {
	return &recordsError{msg: fmt.Sprintf(format, args...)}
}

// RecordError is one refused record of a produced batch: its index in the
// batch and why (Kafka's ProduceResponse RecordErrors).
type RecordError struct {
	BatchIndex int32
	Message    string
}

// RecordErrors is returned (wrapped) by Append when records of a batch
// were refused one by one, as Kafka's RecordValidationException: Code is
// the partition's error (errors.Is works through it), Message Kafka's
// summary, Records the refused records (at most maxRecordErrors).
type RecordErrors struct {
	Code    *kerr.Error
	Message string
	Records []RecordError
}

func (e *RecordErrors) Error() string { return e.Message }
func (e *RecordErrors) Unwrap() error { return e.Code }

// maxRecordErrors bounds the RecordErrors of one batch, so that a batch of
// many tiny bad records does not make a response many times its size.
const maxRecordErrors = 1000

// recordInfo is what a walk reads of one record.
type recordInfo struct {
	index       int32
	tsDelta     int64
	offsetDelta int32
	keyNull     bool
}

// recordsStats is what validating a batch's records found.
type recordsStats struct {
	// maxTs is the largest record timestamp, at least -1: the batch's
	// max timestamp as Kafka computes it.
	maxTs int64
	// lo and hi bound the record timestamps other than -1 (no
	// timestamp); ok is false when every record has none.
	lo, hi int64
	ok     bool
}

// validateRecords reads every record of the batch b (whole batch bytes,
// frame checked, h its header) and checks it; see the file comment. A
// compressed batch may decompress to at most limit bytes
// (decompressLimit). With requireKeys (a compacted topic), a record
// without a key is refused, as Kafka's LogValidator does, in the same
// walk.
func validateRecords(b []byte, h *batchHeader, limit int, requireKeys bool) (recordsStats, error) {
	st := recordsStats{maxTs: -1}
	keyless := int32(-1)
	err := walkBatch(b, h, func(r recordInfo) bool {
		if requireKeys && r.keyNull {
			keyless = r.index
			return false
		}
		ts := h.BaseTimestamp + r.tsDelta
		st.maxTs = max(st.maxTs, ts)
		if ts != -1 {
			if !st.ok {
				st.lo, st.hi, st.ok = ts, ts, true
			}
			st.lo, st.hi = min(st.lo, ts), max(st.hi, ts)
		}
		return true
	}, true, limit)
	if err == nil && keyless >= 0 {
		err = fmt.Errorf("%w: compacted topic cannot accept message without key (offset delta %d)", kerr.InvalidRecord, keyless)
	}
	return st, err
}

// walkBatch reads the records of batch b (header h) in order, calling fn
// with each; fn returns false to stop. With strict, the walk also refuses
// records whose offset delta is not their index, and bytes left after
// the last record. A compressed batch is read as a stream with a
// decompression slot held (codec.go), and may decompress to at most limit
// bytes.
func walkBatch(b []byte, h *batchHeader, fn func(recordInfo) bool, strict bool, limit int) (err error) {
	data := b[batchHeaderSize:h.size()]
	if h.RecordCount < 0 {
		return badRecords("invalid record count %d", h.RecordCount)
	}
	// Every record takes minRecordSize bytes: a count that cannot fit is
	// refused before any work.
	room := int64(len(data))
	if h.codec() != codecNone {
		room = int64(min(limit, maxDecompressedBatch))
	}
	if int64(h.RecordCount) > room/minRecordSize {
		return badRecords("incorrect declared batch size, premature EOF reached: %d records cannot fit in %d bytes of records",
			h.RecordCount, room)
	}
	r := recReader{buf: data}
	if h.codec() != codecNone {
		src, done, err := openRecords(data, h.codec(), limit)
		if err != nil {
			return decompressError(err)
		}
		defer done()
		defer func() {
			// The codec libraries are not expected to panic, but the
			// bytes come from outside.
			if p := recover(); p != nil {
				err = badRecords("decompress records: %s: %v", codecName(h.codec()), p)
			}
		}()
		r = recReader{src: src, back: recBufPool.Get().(*[]byte)}
		defer recBufPool.Put(r.back)
		r.buf = (*r.back)[:0]
	}
	var rec recordInfo
	for i := int32(0); i < h.RecordCount; i++ {
		rec.index = i
		if err := r.record(&rec); err != nil {
			return err
		}
		if strict && rec.offsetDelta != i {
			return badRecords("record %d has offset delta %d: offset deltas are not consecutive from 0", i, rec.offsetDelta)
		}
		if !fn(rec) {
			return nil
		}
	}
	if !strict {
		return nil
	}
	if !r.atEnd() {
		if r.err != nil {
			return r.err
		}
		return badRecords("incorrect declared batch size, records still remaining after the %d declared", h.RecordCount)
	}
	return r.err
}

// decompressError is the error of a walk whose decompression failed:
// MESSAGE_TOO_LARGE for a batch past its bound, else INVALID_RECORD.
func decompressError(err error) error {
	var tl *tooLargeError
	if errors.As(err, &tl) {
		return tl
	}
	return badRecords("decompress records: %v", err)
}

// recBufPool holds the read buffers of compressed walks.
var recBufPool = sync.Pool{New: func() any { b := make([]byte, 0, 32<<10); return &b }}

// recReader reads a records section: buf is what is at hand; src, when
// set, is a decompression stream with the rest, read into back.
type recReader struct {
	buf  []byte
	src  io.Reader
	back *[]byte
	err  error // a decompression error (errBadRecords)
	lim  int   // bytes left in the current record
}

// fill makes buf hold at least n bytes (n at most cap(back)) if the
// stream has them.
func (r *recReader) fill(n int) {
	if r.src == nil || len(r.buf) >= n || r.err != nil {
		return
	}
	back := (*r.back)[:cap(*r.back)]
	k := copy(back, r.buf)
	for k < n {
		m, err := r.src.Read(back[k:])
		k += m
		if err != nil {
			if err != io.EOF {
				r.err = decompressError(err)
			}
			r.src = nil
			break
		}
		if m == 0 {
			break
		}
	}
	r.buf = back[:k]
}

// atEnd reports whether the records section has no bytes left.
func (r *recReader) atEnd() bool {
	r.fill(1)
	return len(r.buf) == 0
}

// varint reads a zigzag varint; n is its size, 0 when the bytes ran out,
// < 0 on overflow.
func (r *recReader) varint() (int64, int) {
	if len(r.buf) > 0 && r.buf[0] < 0x80 {
		// One byte: most fields of most records.
		u := r.buf[0]
		r.buf = r.buf[1:]
		return int64(u>>1) ^ -int64(u&1), 1
	}
	return r.varintSlow()
}

func (r *recReader) varintSlow() (int64, int) {
	if len(r.buf) < binary.MaxVarintLen64 {
		r.fill(binary.MaxVarintLen64)
	}
	v, n := binary.Varint(r.buf)
	if n > 0 {
		r.buf = r.buf[n:]
	}
	return v, n
}

// field reads a varint of the current record; with int32 it must fit in
// 32 bits and 5 bytes, as Kafka's readVarint.
func (r *recReader) field(idx int32, what string, int32Field bool) (int64, error) {
	v, n := r.varint()
	if n == 1 && r.lim > 0 {
		r.lim--
		return v, nil
	}
	return r.checkField(v, n, idx, what, int32Field)
}

func (r *recReader) checkField(v int64, n int, idx int32, what string, int32Field bool) (int64, error) {
	switch {
	case n == 0:
		if r.err != nil {
			return 0, r.err
		}
		return 0, badRecords("record %d: invalid record structure: the records end inside its %s", idx, what)
	case n < 0 || int32Field && (n > 5 || v < math.MinInt32 || v > math.MaxInt32):
		return 0, badRecords("record %d: invalid record structure: bad varint for its %s", idx, what)
	case n > r.lim:
		return 0, badRecords("record %d: invalid record structure: its %s runs past its size", idx, what)
	}
	r.lim -= n
	return v, nil
}

// skip passes n bytes of the current record.
func (r *recReader) skip(idx int32, what string, n int64) error {
	if n > int64(r.lim) {
		return badRecords("record %d: invalid record structure: %s of %d bytes with %d left in the record", idx, what, n, r.lim)
	}
	r.lim -= int(n)
	if n <= int64(len(r.buf)) {
		r.buf = r.buf[n:]
		return nil
	}
	for n > 0 {
		if len(r.buf) == 0 {
			r.fill(1)
			if len(r.buf) == 0 {
				if r.err != nil {
					return r.err
				}
				return badRecords("record %d: invalid record structure: the records end inside its %s", idx, what)
			}
		}
		k := min(n, int64(len(r.buf)))
		r.buf = r.buf[k:]
		n -= k
	}
	return nil
}

// record reads one record into rec (rec.index set by the caller). A
// well-formed record wholly at hand is parsed by fastRecord; anything else
// (a record spanning the stream buffer, or one with a fault, whose exact
// fault the careful path below names) is read field by field.
func (r *recReader) record(rec *recordInfo) error {
	if r.src != nil && len(r.buf) < 4<<10 {
		r.fill(cap(*r.back))
	}
	if length, n := binary.Varint(r.buf); n > 0 && n <= 5 && length >= 0 && length <= int64(len(r.buf)-n) {
		end := n + int(length)
		if ts, off, keyNull, ok := fastRecord(r.buf[n:end]); ok {
			rec.tsDelta, rec.offsetDelta, rec.keyNull = ts, off, keyNull
			r.buf = r.buf[end:]
			return nil
		}
	}
	return r.carefulRecord(rec)
}

// carefulRecord reads one record field by field, naming its first fault.
func (r *recReader) carefulRecord(rec *recordInfo) error {
	i := rec.index
	length, n := r.varint()
	switch {
	case n == 0:
		if r.err != nil {
			return r.err
		}
		return badRecords("incorrect declared batch size, premature EOF reached: record %d of the declared count is missing", i)
	case n < 0 || n > 5 || length < 0 || length > math.MaxInt32:
		return badRecords("record %d: invalid record size %d", i, length)
	}
	if r.src == nil && length > int64(len(r.buf)) {
		return badRecords("record %d: invalid record size: expected %d bytes in record payload, but only %d bytes remain",
			i, length, len(r.buf))
	}
	r.lim = int(length)
	if err := r.skip(i, "attributes", 1); err != nil {
		return err
	}
	ts, err := r.field(i, "timestamp delta", false)
	if err != nil {
		return err
	}
	off, err := r.field(i, "offset delta", true)
	if err != nil {
		return err
	}
	rec.tsDelta, rec.offsetDelta = ts, int32(off)
	for j, what := range [2]string{"key", "value"} {
		l, err := r.field(i, [2]string{"key length", "value length"}[j], true)
		if err != nil {
			return err
		}
		if l < -1 {
			return badRecords("record %d: invalid %s length %d", i, what, l)
		}
		if j == 0 {
			rec.keyNull = l < 0
		}
		if err := r.skip(i, what, max(l, 0)); err != nil {
			return err
		}
	}
	headers, err := r.field(i, "header count", true)
	if err != nil {
		return err
	}
	if headers < 0 {
		return badRecords("record %d: found invalid number of record headers %d", i, headers)
	}
	if headers > int64(r.lim/2) {
		return badRecords("record %d: found invalid number of record headers %d, larger than the %d bytes left in the record", i, headers, r.lim)
	}
	for j := int64(0); j < headers; j++ {
		kl, err := r.field(i, "header key length", true)
		if err != nil {
			return err
		}
		if kl < 0 {
			return badRecords("record %d: invalid negative header key size %d", i, kl)
		}
		if err := r.skip(i, "header key", kl); err != nil {
			return err
		}
		vl, err := r.field(i, "header value length", true)
		if err != nil {
			return err
		}
		if vl < -1 {
			return badRecords("record %d: invalid header value length %d", i, vl)
		}
		if err := r.skip(i, "header value", max(vl, 0)); err != nil {
			return err
		}
	}
	if r.lim != 0 {
		return badRecords("record %d: invalid record size: expected to read %d bytes in record payload, but instead read %d",
			i, length, length-int64(r.lim))
	}
	return nil
}

// fastRecord parses a record body (without its length) that is wholly in
// b; ok is false unless it is well formed by the rules of record.
func fastRecord(b []byte) (tsDelta int64, offDelta int32, keyNull, ok bool) {
	if len(b) < minRecordSize-1 {
		return 0, 0, false, false
	}
	i := 1 // attributes
	ts, n := binary.Varint(b[i:])
	if n <= 0 {
		return 0, 0, false, false
	}
	i += n
	var off, l int64
	if off, i, ok = varint32At(b, i); !ok {
		return 0, 0, false, false
	}
	for f := 0; f < 2; f++ { // key, value
		if l, i, ok = varint32At(b, i); !ok || l < -1 || l > int64(len(b)-i) {
			return 0, 0, false, false
		}
		if f == 0 {
			keyNull = l < 0
		}
		i += int(max(l, 0))
	}
	headers, i, ok := varint32At(b, i)
	if !ok || headers < 0 || headers > int64(len(b)-i)/2 {
		return 0, 0, false, false
	}
	for h := int64(0); h < headers; h++ {
		if l, i, ok = varint32At(b, i); !ok || l < 0 || l > int64(len(b)-i) {
			return 0, 0, false, false
		}
		i += int(l)
		if l, i, ok = varint32At(b, i); !ok || l < -1 || l > int64(len(b)-i) {
			return 0, 0, false, false
		}
		i += int(max(l, 0))
	}
	return ts, int32(off), keyNull, i == len(b)
}

// varint32At reads the zigzag varint of a 32-bit field at b[i:]: at most 5
// bytes, within 32 bits.
func varint32At(b []byte, i int) (int64, int, bool) {
	if i < len(b) && b[i] < 0x80 {
		u := b[i]
		return int64(u>>1) ^ -int64(u&1), i + 1, true
	}
	if i >= len(b) {
		return 0, i, false
	}
	v, n := binary.Varint(b[i:])
	if n <= 0 || n > 5 || v < math.MinInt32 || v > math.MaxInt32 {
		return 0, i, false
	}
	return v, i + n, true
}

// timestampRecordErrors builds the RecordErrors of a CreateTime batch whose
// records' timestamps fall outside [lo, hi] (Kafka's INVALID_TIMESTAMP
// with one RecordError per record), decompressing within limit as the
// validation did.
func timestampRecordErrors(b []byte, h *batchHeader, lo, hi int64, limit int) error {
	re := &RecordErrors{Code: kerr.InvalidTimestamp, Message: "One or more records have been rejected due to invalid timestamp"}
	_ = walkBatch(b, h, func(r recordInfo) bool {
		ts := h.BaseTimestamp + r.tsDelta
		if ts != -1 && (ts < lo || ts > hi) {
			re.Records = append(re.Records, RecordError{BatchIndex: r.index, Message: fmt.Sprintf(
				"Timestamp %d of message with offset %d is out of range. The timestamp should be within [%d, %d]",
				ts, h.BaseOffset+int64(r.offsetDelta), lo, hi)})
		}
		return len(re.Records) < maxRecordErrors
	}, false, limit)
	if len(re.Records) == 0 {
		return nil
	}
	return re
}
