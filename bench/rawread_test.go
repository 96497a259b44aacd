package bench

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// testBatch encodes a v2 record batch of n records of value size vsize
// from base, with a correct length and CRC32C.
func testBatch(base int64, n int, vsize int, attrs int16) []byte {
	var recs []byte
	for i := range n {
		r := kmsg.NewRecord()
		r.OffsetDelta = int32(i)
		r.Value = make([]byte, vsize)
		r.Value[0] = byte(i)
		body := r.AppendTo(nil)
		r.Length = int32(len(body) - 1) // a one-byte varint of the placeholder length
		recs = append(recs, r.AppendTo(nil)...)
	}
	b := kmsg.NewRecordBatch()
	b.FirstOffset = base
	b.Magic = 2
	b.Attributes = attrs
	b.LastOffsetDelta = int32(n - 1)
	b.NumRecords = int32(n)
	b.ProducerID, b.ProducerEpoch, b.FirstSequence = -1, -1, -1
	b.Records = recs
	out := b.AppendTo(nil)
	binary.BigEndian.PutUint32(out[batchLengthOffset:], uint32(len(out)-12))
	binary.BigEndian.PutUint32(out[batchCRCOffset:], crc32.Checksum(out[batchAttributesOffset:], castagnoli))
	return out
}

func TestWalkBatches(t *testing.T) {
	b1, b2, b3 := testBatch(0, 5, 10, 0), testBatch(5, 3, 10, 0), testBatch(8, 4, 10, 0)
	all := append(append(append([]byte{}, b1...), b2...), b3[:len(b3)-7]...) // the third is partial
	w, err := walkBatches(all, 0)
	if err != nil {
		t.Fatal(err)
	}
	if w.records != 8 || w.batches != 2 || w.bytes != int64(len(b1)+len(b2)) || w.next != 8 {
		t.Fatalf("walked %+v, want 8 records in 2 batches of %d bytes, next 8", w, len(b1)+len(b2))
	}

	// A fetch at offset 3 gets the whole first batch: only offsets 3 and 4 count.
	if w, err := walkBatches(all, 3); err != nil || w.records != 5 || w.next != 8 {
		t.Fatalf("from 3: %+v %v, want 5 records, next 8", w, err)
	}
	// A batch wholly before the fetch offset is skipped.
	if w, err := walkBatches(all, 5); err != nil || w.records != 3 || w.batches != 1 || w.next != 8 {
		t.Fatalf("from 5: %+v %v, want 3 records in 1 batch, next 8", w, err)
	}
	// Nothing whole: the fetch offset stays.
	if w, err := walkBatches(b3[:40], 8); err != nil || w.records != 0 || w.next != 8 {
		t.Fatalf("partial only: %+v %v", w, err)
	}
	// A control batch advances the offset without counting records.
	ctl := testBatch(12, 1, 4, batchControlFlag)
	if w, err := walkBatches(ctl, 12); err != nil || w.records != 0 || w.batches != 1 || w.next != 13 {
		t.Fatalf("control batch: %+v %v", w, err)
	}

	corrupt := append([]byte{}, b1...)
	corrupt[len(corrupt)-1] ^= 0xff
	if _, err := walkBatches(corrupt, 0); !errors.Is(err, kerr.CorruptMessage) {
		t.Fatalf("corrupt batch: %v, want CORRUPT_MESSAGE", err)
	}
	old := append([]byte{}, b1...)
	old[batchMagicOffset] = 1
	if _, err := walkBatches(old, 0); err == nil {
		t.Fatal("magic 1 batch walked")
	}
	short := append([]byte{}, b1...)
	binary.BigEndian.PutUint32(short[batchLengthOffset:], 10)
	if _, err := walkBatches(short, 0); err == nil {
		t.Fatal("batch shorter than its header walked")
	}
	gappy := testBatch(20, 2, 4, 0)
	binary.BigEndian.PutUint32(gappy[batchLastDeltaOffset:], 5) // offsets 20..25 hold 2 records: compacted
	binary.BigEndian.PutUint32(gappy[batchCRCOffset:], crc32.Checksum(gappy[batchAttributesOffset:], castagnoli))
	if w, err := walkBatches(gappy, 20); err != nil || w.records != 2 || w.next != 26 {
		t.Fatalf("compacted batch from its base: %+v %v", w, err)
	}
	if _, err := walkBatches(gappy, 22); err == nil {
		t.Fatal("counted a compacted batch from inside it")
	}
}

// FuzzWalkBatches feeds arbitrary bytes to the batch walker: it must
// return an error or a walk that stays within the input, never panic.
func FuzzWalkBatches(f *testing.F) {
	f.Add(testBatch(0, 3, 8, 0), int64(0))
	f.Add(append(testBatch(7, 2, 8, 0), testBatch(9, 1, 8, 0)[:30]...), int64(8))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, int64(0))
	f.Fuzz(func(t *testing.T, b []byte, from int64) {
		w, err := walkBatches(b, from)
		if err == nil && (w.bytes > int64(len(b)) || w.next < from || w.records < 0) {
			t.Fatalf("walk %+v of %d bytes from %d", w, len(b), from)
		}
	})
}
