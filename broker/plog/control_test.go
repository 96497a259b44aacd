package plog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestControlBatchMatchesKafka: a marker batch is framed and CRC'd as a
// v2 batch with the transactional and control bits, base sequence -1, one
// record whose key and value are Kafka's ControlRecordKey and
// EndTxnMarker (as franz-go's generated types encode them), and it
// decodes back.
func TestControlBatchMatchesKafka(t *testing.T) {
	for _, m := range []EndTxnMarker{{ControlCommit, 7}, {ControlAbort, 0}, {ControlAbort, -1}} {
		b := ControlBatch(42, 3, m, 1_700_000_000_000)
		h, err := checkFrame(b)
		if err != nil {
			t.Fatalf("%v: frame: %v", m, err)
		}
		if !h.isControl() || h.Attributes&attrTransactional == 0 || h.BaseSequence != -1 || h.RecordCount != 1 ||
			h.ProducerID != 42 || h.ProducerEpoch != 3 || h.codec() != codecNone {
			t.Fatalf("%v: header %+v", m, h)
		}
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(b); err != nil {
			t.Fatalf("%v: franz-go cannot read the batch: %v", m, err)
		}
		n, w := binary.Varint(rb.Records)
		var rec kmsg.Record
		if w <= 0 || rec.ReadFrom(rb.Records[:w+int(n)]) != nil {
			t.Fatalf("%v: franz-go cannot read the record", m)
		}
		typ := kmsg.ControlRecordKeyTypeAbort
		if m.Type == ControlCommit {
			typ = kmsg.ControlRecordKeyTypeCommit
		}
		wantKey := (&kmsg.ControlRecordKey{Version: 0, Type: typ}).AppendTo(nil)
		wantValue := (&kmsg.EndTxnMarker{Version: 0, CoordinatorEpoch: m.CoordinatorEpoch}).AppendTo(nil)
		if !bytes.Equal(rec.Key, wantKey) || !bytes.Equal(rec.Value, wantValue) {
			t.Fatalf("%v: key %x value %x, want %x %x", m, rec.Key, rec.Value, wantKey, wantValue)
		}
		got, err := DecodeControlBatch(b)
		if err != nil || got != m {
			t.Fatalf("decode: %v %v, want %v", got, err, m)
		}
	}
}

// TestDecodeEndTxnMarkerRefuses: short, unknown or negative-version keys
// and values get a clear error, and a newer version is read by its
// version-0 fields, as Kafka reads it.
func TestDecodeEndTxnMarkerRefuses(t *testing.T) {
	good := EncodeEndTxnMarkerValue(9)
	for _, c := range []struct {
		name       string
		key, value []byte
	}{
		{"null key", nil, good},
		{"short key", []byte{0, 0, 0}, good},
		{"negative key version", []byte{0xff, 0xff, 0, 1}, good},
		{"leader change type", []byte{0, 0, 0, 2}, good},
		{"negative type", []byte{0, 0, 0xff, 0xff}, good},
		{"null value", EncodeControlKey(ControlCommit), nil},
		{"short value", EncodeControlKey(ControlCommit), []byte{0, 0, 0, 0, 1}},
		{"negative value version", EncodeControlKey(ControlCommit), []byte{0x80, 0, 0, 0, 0, 1}},
	} {
		if _, err := DecodeEndTxnMarker(c.key, c.value); !errors.Is(err, kerr.CorruptMessage) {
			t.Errorf("%s: err %v, want CORRUPT_MESSAGE", c.name, err)
		}
	}
	m, err := DecodeEndTxnMarker([]byte{0, 1, 0, 0, 0xaa}, []byte{0, 1, 0, 0, 0, 5, 0xbb})
	if err != nil || m != (EndTxnMarker{ControlAbort, 5}) {
		t.Fatalf("newer versions: %v %v", m, err)
	}

	// A batch that is not a marker: not control, two records, compressed.
	if _, err := DecodeControlBatch(testBatch{records: 1}.bytes()); err == nil {
		t.Fatal("a data batch decoded as a marker")
	}
	b := ControlBatch(1, 0, EndTxnMarker{ControlCommit, 0}, 0)
	two := bytes.Clone(b)
	binary.BigEndian.PutUint32(two[offRecordCount:], 2)
	if _, err := DecodeControlBatch(two); err == nil {
		t.Fatal("a control batch of two records decoded")
	}
	gz := bytes.Clone(b)
	binary.BigEndian.PutUint16(gz[offAttributes:], attrTransactional|attrControl|1)
	if _, err := DecodeControlBatch(gz); err == nil {
		t.Fatal("a compressed control batch decoded")
	}
	if _, err := DecodeControlBatch(b[:len(b)-1]); err == nil {
		t.Fatal("a truncated control batch decoded")
	}
}

// FuzzDecodeControlBatch: the marker decoder never panics, and what it
// accepts encodes back to a batch that decodes to the same marker.
func FuzzDecodeControlBatch(f *testing.F) {
	f.Add(ControlBatch(1, 0, EndTxnMarker{ControlCommit, 3}, 1000))
	f.Add(ControlBatch(7, 2, EndTxnMarker{ControlAbort, -1}, 0))
	f.Add(testBatch{records: 1}.bytes())
	f.Add([]byte{})
	f.Add(make([]byte, batchHeaderSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeControlBatch(b)
		if err != nil {
			if !errors.Is(err, kerr.CorruptMessage) {
				t.Fatalf("error without CORRUPT_MESSAGE: %v", err)
			}
			return
		}
		again, err := DecodeControlBatch(ControlBatch(5, 1, m, 0))
		if err != nil || again != m {
			t.Fatalf("re-encoded %v decodes to %v, %v", m, again, err)
		}
	})
}
