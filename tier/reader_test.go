package tier

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"testing"

	"strata/index"
)

// fakeBatch is a record batch header (v2) of records offsets [base, last]
// padded to size bytes; ReadRemote reads headers only.
func fakeBatch(base, last int64, size int) []byte {
	b := make([]byte, size)
	binary.BigEndian.PutUint64(b[0:], uint64(base))
	binary.BigEndian.PutUint32(b[8:], uint32(size-12))
	b[16] = 2
	binary.BigEndian.PutUint32(b[23:], uint32(last-base))
	for i := 27; i < size; i++ {
		b[i] = byte(base)
	}
	return b
}

// remoteSegment puts a segment of batches of 1..3 records and sizes 100..
// 2000 bytes, with an offset index entry every other batch, in store.
func remoteSegment(t testing.TB, store ObjectStore, logb, idx []byte, end int64) *index.SegmentMetadata {
	t.Helper()
	m := &index.SegmentMetadata{
		Partition: index.TopicIDPartition{TopicID: index.NewUUID(), Partition: 3}, SegmentID: index.NewUUID(),
		StartOffset: 100, EndOffset: end, SegmentSize: int64(len(logb)), State: index.CopySegmentFinished,
		Objects: []index.ObjectEntry{{Kind: index.ObjectLog, Size: int64(len(logb))}, {Kind: index.ObjectOffsetIndex, Size: int64(len(idx))}},
	}
	ctx := context.Background()
	if err := store.Put(ctx, ObjectKey(m, index.ObjectLog), bytes.NewReader(logb), int64(len(logb))); err != nil {
		t.Fatal(err)
	}
	if err := store.Put(ctx, ObjectKey(m, index.ObjectOffsetIndex), bytes.NewReader(idx), int64(len(idx))); err != nil {
		t.Fatal(err)
	}
	return m
}

func TestReadRemote(t *testing.T) {
	var logb, idx []byte
	type batch struct{ base, last, pos, size int64 }
	var batches []batch
	off := int64(100)
	for i := range 40 {
		size, n := 100+i*47%1900, int64(1+i%3)
		if i%2 == 0 {
			idx = binary.BigEndian.AppendUint32(idx, uint32(off-100))
			idx = binary.BigEndian.AppendUint32(idx, uint32(len(logb)))
		}
		batches = append(batches, batch{off, off + n - 1, int64(len(logb)), int64(size)})
		logb = append(logb, fakeBatch(off, off+n-1, size)...)
		off += n
	}
	store := NewMemStore()
	m := remoteSegment(t, store, logb, idx, off-1)
	ctx := context.Background()
	for _, b := range batches {
		for o := b.base; o <= b.last; o++ {
			for _, maxBytes := range []int{1, 3000, 1 << 20} {
				got, err := ReadRemote(ctx, store, m, o, maxBytes)
				if err != nil {
					t.Fatalf("offset %d, max %d: %v", o, maxBytes, err)
				}
				// Whole batches from b's, b whole, within maxBytes after the first.
				wantEnd := b.pos + b.size
				for _, c := range batches {
					if c.pos >= wantEnd && c.pos+c.size-b.pos <= int64(maxBytes) {
						wantEnd = c.pos + c.size
					}
				}
				if !bytes.Equal(got, logb[b.pos:wantEnd]) {
					t.Fatalf("offset %d, max %d: got %d bytes, want [%d, %d)", o, maxBytes, len(got), b.pos, wantEnd)
				}
			}
		}
	}
	// The .index skips the log's head: a read at the last offset GETs no
	// more of the .log than the tail from the last index entry.
	before := store.Calls(OpGet)
	if _, err := ReadRemote(ctx, store, m, off-1, 1); err != nil {
		t.Fatal(err)
	}
	if n := store.Calls(OpGet) - before; n != 2 {
		t.Fatalf("%d GETs for a read at the end, want 2 (.index, .log)", n)
	}
	if _, err := ReadRemote(ctx, store, m, off, 1); !errors.Is(err, ErrInvalidRange) {
		t.Fatalf("read past the segment: %v, want ErrInvalidRange", err)
	}
}

// FuzzReadRemote: arbitrary .log and .index bytes give batches or an
// error, never a panic or bytes outside the object.
func FuzzReadRemote(f *testing.F) {
	f.Add(append(fakeBatch(100, 101, 60), fakeBatch(102, 102, 40)...), []byte{0, 0, 0, 2, 0, 0, 0, 60}, int64(102), 10)
	f.Add(fakeBatch(100, 100, 30), []byte{}, int64(100), 1)
	f.Add([]byte{1, 2, 3}, []byte{0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}, int64(100), 100)
	f.Fuzz(func(t *testing.T, logb, idx []byte, offset int64, maxBytes int) {
		store := NewMemStore()
		m := remoteSegment(t, store, logb, idx, 200)
		got, err := ReadRemote(context.Background(), store, m, offset, maxBytes)
		if err == nil && len(got) > len(logb) {
			t.Fatalf("%d bytes from a %d-byte object", len(got), len(logb))
		}
	})
}
