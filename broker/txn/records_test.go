package txn

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestKeyBytes(t *testing.T) {
	got := EncodeKey("tx-1")
	want := []byte{0, 0, 0, 4, 't', 'x', '-', '1'}
	if !bytes.Equal(got, want) {
		t.Fatalf("EncodeKey = %x, want %x", got, want)
	}
	id, err := DecodeKey(got)
	if err != nil || id != "tx-1" {
		t.Fatalf("DecodeKey = %q, %v", id, err)
	}
	// Offsets keys of __consumer_offsets start with version 0-2 too, but
	// a transaction key of another version is not ours.
	if _, err := DecodeKey([]byte{0, 1, 0, 0}); !errors.Is(err, ErrUnknownKeyVersion) {
		t.Fatalf("key version 1: %v", err)
	}
	for _, bad := range [][]byte{nil, {0}, {0, 0}, {0, 0, 0, 5, 'a'}, {0, 0, 0xff, 0xff}} {
		if _, err := DecodeKey(bad); err == nil {
			t.Errorf("DecodeKey(%x) accepted", bad)
		}
	}
}

func sampleValues() []Value {
	v0 := NewValue(0)
	v0.ProducerID, v0.ProducerEpoch, v0.TimeoutMs, v0.Status = 7, 3, 60000, Ongoing
	v0.Partitions = []TopicPartitions{{"a", []int32{0, 2}}, {"b", []int32{}}}
	v0.LastUpdateMs, v0.StartMs = 1700000000123, 1700000000000

	empty0 := NewValue(0)
	empty0.ProducerID, empty0.Status, empty0.StartMs = 1, Empty, -1

	v1 := v0
	v1.Version = 1
	v1.PreviousProducerID, v1.NextProducerID, v1.ClientTransactionVersion, v1.NextProducerEpoch = 6, 9, 2, 4

	v1def := v0
	v1def.Version = 1 // tags at their defaults: none written
	v1def.Status = PrepareCommit

	empty1 := empty0
	empty1.Version = 1
	empty1.Partitions = []TopicPartitions{} // empty, not null
	return []Value{v0, empty0, v1, v1def, empty1}
}

func TestValueRoundTrip(t *testing.T) {
	for i, v := range sampleValues() {
		b := EncodeValue(v)
		got, err := DecodeValue(b)
		if err != nil {
			t.Fatalf("%d: decode: %v", i, err)
		}
		if !reflect.DeepEqual(got, v) {
			t.Fatalf("%d: round trip\n got %+v\nwant %+v", i, got, v)
		}
		if !bytes.Equal(EncodeValue(got), b) {
			t.Fatalf("%d: re-encoding differs", i)
		}
		// Every strict prefix is refused, never a panic.
		for n := range len(b) {
			if _, err := DecodeValue(b[:n]); err == nil {
				t.Fatalf("%d: prefix of %d/%d bytes accepted", i, n, len(b))
			}
		}
	}
}

// The layout, byte by byte, of a v1 value (compact arrays and strings,
// tagged fields in tag order), as Kafka's generated TransactionLogValue
// writes it.
func TestValueV1Bytes(t *testing.T) {
	v := NewValue(1)
	v.ProducerID, v.ProducerEpoch, v.TimeoutMs, v.Status = 1, 2, 3, PrepareAbort
	v.Partitions = []TopicPartitions{{"t", []int32{5}}}
	v.LastUpdateMs, v.StartMs = 4, 5
	v.NextProducerID, v.ClientTransactionVersion = 8, 2
	want := "0001" + // version
		"0000000000000001" + "0002" + "00000003" + "03" + // pid, epoch, timeout, status
		"02" + "02" + "74" + "02" + "00000005" + "00" + // [ {"t", [5]} ] with its empty tag section
		"0000000000000004" + "0000000000000005" + // last update, start
		"02" + "01" + "08" + "0000000000000008" + "02" + "02" + "0002" // tags 1 and 2
	if got := hex.EncodeToString(EncodeValue(v)); got != want {
		t.Fatalf("EncodeValue =\n %s\nwant\n %s", got, want)
	}
}

// kmsg (franz-go) implements the same schema independently: each side
// must read what the other writes.
func TestValueMatchesKmsg(t *testing.T) {
	for i, v := range sampleValues() {
		var k kmsg.TxnMetadataValue
		if err := k.ReadFrom(EncodeValue(v)); err != nil {
			t.Fatalf("%d: kmsg reads ours: %v", i, err)
		}
		if k.Version != v.Version || k.ProducerID != v.ProducerID || k.ProducerEpoch != v.ProducerEpoch ||
			k.TimeoutMillis != v.TimeoutMs || int8(k.State) != int8(v.Status) || k.LastUpdateTimestamp != v.LastUpdateMs ||
			k.StartTimestamp != v.StartMs || len(k.Topics) != len(v.Partitions) {
			t.Fatalf("%d: kmsg read %+v from %+v", i, k, v)
		}
		if v.Version >= 1 && (k.PreviousProducerID != v.PreviousProducerID || k.NextProducerID != v.NextProducerID ||
			k.ClientTransactionVersion != v.ClientTransactionVersion || k.NextProducerEpoch != v.NextProducerEpoch) {
			t.Fatalf("%d: kmsg tagged fields %+v, want %+v", i, k, v)
		}
		for j, tp := range v.Partitions {
			if k.Topics[j].Topic != tp.Topic || !reflect.DeepEqual(append([]int32{}, k.Topics[j].Partitions...), append([]int32{}, tp.Partitions...)) {
				t.Fatalf("%d: kmsg topic %d = %+v, want %+v", i, j, k.Topics[j], tp)
			}
		}
		got, err := DecodeValue(k.AppendTo(nil))
		if err != nil {
			t.Fatalf("%d: we read kmsg's: %v", i, err)
		}
		if !bytes.Equal(EncodeValue(got), EncodeValue(v)) {
			t.Fatalf("%d: kmsg's bytes read as %+v, want %+v", i, got, v)
		}
	}
	// A null partition array (Empty), as kmsg writes it.
	k := kmsg.NewTxnMetadataValue()
	k.Version, k.ProducerID = 1, 3
	got, err := DecodeValue(k.AppendTo(nil))
	if err != nil || got.Partitions != nil || got.ProducerID != 3 || got.PreviousProducerID != -1 {
		t.Fatalf("null partitions: %+v, %v", got, err)
	}
}

func TestValueRefused(t *testing.T) {
	v := sampleValues()[2]
	good := EncodeValue(v)
	ver2 := append([]byte{0, 2}, good[2:]...)
	if _, err := DecodeValue(ver2); !errors.Is(err, ErrUnknownValueVersion) {
		t.Errorf("version 2: %v", err)
	}
	neg := append([]byte{0xff, 0xff}, good[2:]...)
	if _, err := DecodeValue(neg); !errors.Is(err, ErrUnknownValueVersion) {
		t.Errorf("version -1: %v", err)
	}
	badStatus := bytes.Clone(good)
	badStatus[2+8+2+4] = 8
	if _, err := DecodeValue(badStatus); err == nil {
		t.Error("status 8 accepted")
	}
	// A known tag of the wrong size.
	w := NewValue(1)
	b := EncodeValue(w)
	b = append(b[:len(b)-1], 1, tagPreviousProducerID, 2, 0, 1)
	if _, err := DecodeValue(b); err == nil {
		t.Error("2-byte previous_producer_id accepted")
	}
	// An unknown tag is skipped.
	b = EncodeValue(w)
	b = append(b[:len(b)-1], 1, 9, 3, 1, 2, 3)
	if got, err := DecodeValue(b); err != nil || !reflect.DeepEqual(got, w) {
		t.Errorf("unknown tag: %+v, %v", got, err)
	}
	// A partition count that cannot fit is refused before allocating.
	huge := EncodeValue(NewValue(0))
	copy(huge[2+8+2+4+1:], []byte{0x7f, 0xff, 0xff, 0xff})
	if _, err := DecodeValue(huge); err == nil {
		t.Error("2^31 partitions accepted")
	}
	// A null string (topic) is refused.
	nullTopic := NewValue(0)
	nullTopic.Partitions = []TopicPartitions{{"x", nil}}
	nb := EncodeValue(nullTopic)
	copy(nb[2+8+2+4+1+4:], []byte{0xff, 0xff})
	if _, err := DecodeValue(nb); err == nil {
		t.Error("null topic accepted")
	}
}

func TestTxnStateValue(t *testing.T) {
	st := txnState{
		producerID: 10, prevProducerID: 9, nextProducerID: -1, producerEpoch: 4, lastProducerEpoch: 3, nextProducerEpoch: -1,
		timeoutMs: 1000, state: Ongoing, startMs: 5, lastUpdateMs: 6, clientTV: 2,
		partitions: map[TopicPartition]struct{}{tp("b", 1): {}, tp("a", 2): {}, tp("a", 0): {}},
	}
	v := st.value(2)
	want := []TopicPartitions{{"a", []int32{0, 2}}, {"b", []int32{1}}}
	if v.Version != 1 || !reflect.DeepEqual(v.Partitions, want) || v.PreviousProducerID != 9 || v.ClientTransactionVersion != 2 {
		t.Fatalf("value(2) = %+v", v)
	}
	if v0 := st.value(0); v0.Version != 0 || v0.PreviousProducerID != -1 || v0.ClientTransactionVersion != 0 {
		t.Fatalf("value(0) = %+v", v0)
	}
	back := stateFromValue(v)
	st.lastProducerEpoch = noEpoch // not persisted
	if !reflect.DeepEqual(back, st) {
		t.Fatalf("stateFromValue\n got %+v\nwant %+v", back, st)
	}
	// Empty: partitions are written null and ignored when read.
	st.state, st.startMs = Empty, -1
	if v := st.value(2); v.Partitions != nil {
		t.Fatalf("Empty value partitions %v", v.Partitions)
	}
	v.Status = Empty
	if back := stateFromValue(v); len(back.partitions) != 0 {
		t.Fatalf("Empty loaded with partitions %v", back.partitions)
	}
}
