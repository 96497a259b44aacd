package txn

// The records of __transaction_state, byte for byte as Kafka writes them
// (TransactionLogKey and TransactionLogValue). See doc.go for the layout.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

// Record versions.
const (
	keyVersion      int16 = 0 // TransactionLogKey, the only one
	maxValueVersion int16 = 1 // TransactionLogValue v1: flexible (KIP-915)
)

// Tags of the value's tagged fields (v1+).
const (
	tagPreviousProducerID       = 0
	tagNextProducerID           = 1
	tagClientTransactionVersion = 2
	tagNextProducerEpoch        = 3 // KIP-939; read and written, not used
)

// Errors of the decoders. A record whose key has another version is not
// a transaction's (the loader skips it, as Kafka does).
var (
	ErrUnknownKeyVersion   = errors.New("unknown __transaction_state key version")
	ErrUnknownValueVersion = errors.New("unknown __transaction_state value version")
	errTruncated           = errors.New("truncated __transaction_state record")
)

// TopicPartitions is one topic's partitions in a transaction, as the value
// lists them.
type TopicPartitions struct {
	Topic      string
	Partitions []int32
}

// Value is TransactionLogValue. Partitions nil is a null array (what
// Kafka writes for an Empty transaction).
type Value struct {
	Version            int16
	ProducerID         int64
	PreviousProducerID int64 // tag 0, v1+; default -1
	NextProducerID     int64 // tag 1, v1+; default -1
	ProducerEpoch      int16
	TimeoutMs          int32
	Status             State // int8
	Partitions         []TopicPartitions
	LastUpdateMs       int64
	StartMs            int64
	// ClientTransactionVersion is the transaction.version feature level
	// the client used (tag 2, v1+; default 0).
	ClientTransactionVersion int16
	NextProducerEpoch        int16 // tag 3, v1+; default -1
}

// NewValue returns a Value with the tagged fields at their defaults.
func NewValue(version int16) Value {
	return Value{Version: version, PreviousProducerID: -1, NextProducerID: -1, NextProducerEpoch: -1}
}

// EncodeKey is TransactionLogKey v0: the version, then the transactional
// id as a string with an int16 length.
func EncodeKey(transactionalID string) []byte {
	b := make([]byte, 0, 4+len(transactionalID))
	b = binary.BigEndian.AppendUint16(b, uint16(keyVersion))
	b = binary.BigEndian.AppendUint16(b, uint16(len(transactionalID)))
	return append(b, transactionalID...)
}

// DecodeKey reads a key; ErrUnknownKeyVersion for keys of other versions.
// Bytes after the transactional id are ignored, as Kafka ignores them.
func DecodeKey(b []byte) (string, error) {
	r := reader{b: b}
	v := r.i16()
	if r.err == nil && v != keyVersion {
		return "", fmt.Errorf("%w %d", ErrUnknownKeyVersion, v)
	}
	id := r.str(false)
	return id, r.err
}

// EncodeValue writes v at v.Version (0 or 1). Version 0 has no tagged
// fields: they are not written.
func EncodeValue(v Value) []byte {
	flex := v.Version >= 1
	b := make([]byte, 0, 64)
	be := binary.BigEndian
	b = be.AppendUint16(b, uint16(v.Version))
	b = be.AppendUint64(b, uint64(v.ProducerID))
	b = be.AppendUint16(b, uint16(v.ProducerEpoch))
	b = be.AppendUint32(b, uint32(v.TimeoutMs))
	b = append(b, byte(v.Status))
	b = appendArrayLen(b, flex, v.Partitions == nil, len(v.Partitions))
	for _, tp := range v.Partitions {
		b = appendString(b, flex, tp.Topic)
		b = appendArrayLen(b, flex, false, len(tp.Partitions))
		for _, p := range tp.Partitions {
			b = be.AppendUint32(b, uint32(p))
		}
		if flex {
			b = append(b, 0) // no tagged fields
		}
	}
	b = be.AppendUint64(b, uint64(v.LastUpdateMs))
	b = be.AppendUint64(b, uint64(v.StartMs))
	if !flex {
		return b
	}
	// Tagged fields in tag order, only those off their default.
	type tagged struct {
		tag  uint64
		data []byte
	}
	var tags []tagged
	if v.PreviousProducerID != -1 {
		tags = append(tags, tagged{tagPreviousProducerID, be.AppendUint64(nil, uint64(v.PreviousProducerID))})
	}
	if v.NextProducerID != -1 {
		tags = append(tags, tagged{tagNextProducerID, be.AppendUint64(nil, uint64(v.NextProducerID))})
	}
	if v.ClientTransactionVersion != 0 {
		tags = append(tags, tagged{tagClientTransactionVersion, be.AppendUint16(nil, uint16(v.ClientTransactionVersion))})
	}
	if v.NextProducerEpoch != -1 {
		tags = append(tags, tagged{tagNextProducerEpoch, be.AppendUint16(nil, uint16(v.NextProducerEpoch))})
	}
	b = binary.AppendUvarint(b, uint64(len(tags)))
	for _, t := range tags {
		b = binary.AppendUvarint(b, t.tag)
		b = binary.AppendUvarint(b, uint64(len(t.data)))
		b = append(b, t.data...)
	}
	return b
}

// DecodeValue reads a value of version 0 or 1 (ErrUnknownValueVersion
// otherwise). Unknown tagged fields are skipped; bytes after the value
// are ignored, as Kafka ignores them. A status that is no state of
// Kafka's is an error.
func DecodeValue(b []byte) (Value, error) {
	r := reader{b: b}
	ver := r.i16()
	if r.err != nil {
		return Value{}, r.err
	}
	if ver < 0 || ver > maxValueVersion {
		return Value{}, fmt.Errorf("%w %d", ErrUnknownValueVersion, ver)
	}
	flex := ver >= 1
	v := NewValue(ver)
	v.ProducerID = r.i64()
	v.ProducerEpoch = r.i16()
	v.TimeoutMs = r.i32()
	v.Status = State(r.i8())
	// A partitions entry takes at least 6 bytes (3 flexible).
	n, null := r.arrayLen(flex, true, 3)
	if !null {
		v.Partitions = make([]TopicPartitions, 0, n)
		for range n {
			var tp TopicPartitions
			tp.Topic = r.str(flex)
			m, _ := r.arrayLen(flex, false, 4)
			tp.Partitions = make([]int32, m)
			for i := range tp.Partitions {
				tp.Partitions[i] = r.i32()
			}
			if flex {
				r.skipTags()
			}
			if r.err != nil {
				return Value{}, r.err
			}
			v.Partitions = append(v.Partitions, tp)
		}
	}
	v.LastUpdateMs = r.i64()
	v.StartMs = r.i64()
	if flex {
		r.tags(func(tag uint64, data []byte) error {
			be := binary.BigEndian
			switch tag {
			case tagPreviousProducerID, tagNextProducerID:
				if len(data) != 8 {
					return fmt.Errorf("tagged field %d of %d bytes, want 8", tag, len(data))
				}
				if tag == tagPreviousProducerID {
					v.PreviousProducerID = int64(be.Uint64(data))
				} else {
					v.NextProducerID = int64(be.Uint64(data))
				}
			case tagClientTransactionVersion, tagNextProducerEpoch:
				if len(data) != 2 {
					return fmt.Errorf("tagged field %d of %d bytes, want 2", tag, len(data))
				}
				if tag == tagClientTransactionVersion {
					v.ClientTransactionVersion = int16(be.Uint16(data))
				} else {
					v.NextProducerEpoch = int16(be.Uint16(data))
				}
			}
			return nil
		})
	}
	if r.err != nil {
		return Value{}, r.err
	}
	if !v.Status.valid() {
		return Value{}, fmt.Errorf("unknown transaction status %d", int8(v.Status))
	}
	return v, nil
}

func appendArrayLen(b []byte, flex, null bool, n int) []byte {
	switch {
	case flex && null:
		return append(b, 0)
	case flex:
		return binary.AppendUvarint(b, uint64(n)+1)
	case null:
		return binary.BigEndian.AppendUint32(b, math.MaxUint32)
	}
	return binary.BigEndian.AppendUint32(b, uint32(n))
}

func appendString(b []byte, flex bool, s string) []byte {
	if flex {
		b = binary.AppendUvarint(b, uint64(len(s))+1)
	} else {
		b = binary.BigEndian.AppendUint16(b, uint16(len(s)))
	}
	return append(b, s...)
}

// reader reads Kafka's primitive types; the first error sticks and later
// reads return zero values.
type reader struct {
	b   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = errTruncated
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) i8() int8 {
	if b := r.take(1); b != nil {
		return int8(b[0])
	}
	return 0
}

func (r *reader) i16() int16 {
	if b := r.take(2); b != nil {
		return int16(binary.BigEndian.Uint16(b))
	}
	return 0
}

func (r *reader) i32() int32 {
	if b := r.take(4); b != nil {
		return int32(binary.BigEndian.Uint32(b))
	}
	return 0
}

func (r *reader) i64() int64 {
	if b := r.take(8); b != nil {
		return int64(binary.BigEndian.Uint64(b))
	}
	return 0
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errors.New("malformed varint in __transaction_state record")
		return 0
	}
	r.b = r.b[n:]
	return v
}

// str reads a non-nullable string.
func (r *reader) str(flex bool) string {
	var n int64
	if flex {
		n = int64(r.uvarint()) - 1
	} else {
		n = int64(r.i16())
	}
	if r.err != nil {
		return ""
	}
	if n < 0 {
		r.err = errors.New("null string in __transaction_state record")
		return ""
	}
	if n > int64(len(r.b)) {
		r.err = errTruncated
		return ""
	}
	return string(r.take(int(n)))
}

// arrayLen reads an array length; an array of n entries of at least min
// bytes each must fit in what is left.
func (r *reader) arrayLen(flex, nullable bool, min int) (n int, null bool) {
	var l int64
	if flex {
		u := r.uvarint()
		if u > math.MaxInt32+1 {
			r.err = errTruncated
			return 0, false
		}
		l = int64(u) - 1
	} else {
		l = int64(r.i32())
	}
	if r.err != nil {
		return 0, false
	}
	if l < 0 {
		if !nullable || l != -1 {
			r.err = errors.New("null or negative array length in __transaction_state record")
		}
		return 0, true
	}
	if l*int64(min) > int64(len(r.b)) {
		r.err = errTruncated
		return 0, false
	}
	return int(l), false
}

// tags reads a tagged-field section, calling fn for each field.
func (r *reader) tags(fn func(tag uint64, data []byte) error) {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)) {
		r.err = errTruncated
	}
	for i := uint64(0); i < n && r.err == nil; i++ {
		tag := r.uvarint()
		size := r.uvarint()
		if r.err == nil && size > uint64(len(r.b)) {
			r.err = errTruncated
			return
		}
		data := r.take(int(size))
		if r.err == nil {
			if err := fn(tag, data); err != nil {
				r.err = err
			}
		}
	}
}

func (r *reader) skipTags() { r.tags(func(uint64, []byte) error { return nil }) }
