package txn

import (
	"bytes"
	"reflect"
	"testing"
	"time"
)

// FuzzDecodeValue: any bytes decode or fail cleanly; what decodes
// encodes back to a value that decodes the same.
func FuzzDecodeValue(f *testing.F) {
	for _, v := range sampleValues() {
		f.Add(EncodeValue(v))
	}
	f.Add([]byte{0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := DecodeValue(b)
		if err != nil {
			return
		}
		again, err := DecodeValue(EncodeValue(v))
		if err != nil {
			t.Fatalf("re-encoded value refused: %v", err)
		}
		if !reflect.DeepEqual(again, v) {
			t.Fatalf("round trip\n got %+v\nwant %+v", again, v)
		}
	})
}

func FuzzDecodeKey(f *testing.F) {
	f.Add(EncodeKey("tx"))
	f.Add([]byte{0, 1, 0, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, err := DecodeKey(b)
		if err != nil {
			return
		}
		if !bytes.HasPrefix(b, EncodeKey(id)) {
			t.Fatalf("key %x read as %q", b, id)
		}
	})
}

// FuzzLoad feeds the partition loader arbitrary batches, and arbitrary
// key/value pairs inside a valid batch: nothing panics, and what loads
// is a state the coordinator can serve and write back.
func FuzzLoad(f *testing.F) {
	v := sampleValues()[2]
	f.Add(EncodeKey("a"), EncodeValue(v), encodeBatch([]Record{{Key: EncodeKey("b"), Value: EncodeValue(sampleValues()[0])}}, time.Unix(0, 0)))
	f.Add(EncodeKey("a"), []byte(nil), []byte{0, 0, 0})
	f.Fuzz(func(t *testing.T, key, value, raw []byte) {
		loaded := map[string]txnState{}
		apply := func(r Record) error { applyRecord(loaded, r); return nil }
		decodeBatches(raw, apply)
		decodeBatches(encodeBatch([]Record{{Key: key, Value: value}}, time.Unix(0, 0)), apply)
		for id, st := range loaded {
			m := &meta{id: id, txnState: st}
			m.copy()
			for _, tv := range []int16{0, 2} {
				if _, err := DecodeValue(EncodeValue(st.value(tv))); err != nil {
					t.Fatalf("loaded state of %q does not encode: %v", id, err)
				}
			}
			// Transitions from a loaded state are checked, never a panic.
			if tr, err := m.prepareAddPartitions([]TopicPartition{{"t", 0}}, 1, 0); err == nil {
				m.complete(tr)
			}
			m.abandon()
			m.prepareIncrementEpoch(1000, nil, 1)
		}
	})
}
