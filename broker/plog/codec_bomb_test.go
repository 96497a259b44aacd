package plog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"runtime"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// zstdBomb is a records section of one record, key "k" and a value of
// size zero bytes, as one zstd frame of RLE blocks (a few KB for
// hundreds of MiB). With single, the frame is single-segment and
// declares its content size (what EncodeAll writes: the decoder's
// window is then the whole content); else it declares a window of
// window bytes and no content size.
func zstdBomb(size int, single bool, window uint64) []byte {
	body := rawRec{key: []byte("k")}.body()
	// body ends with value length -1 (null) and header count 0: rebuild
	// the record's head by hand with the value length set.
	head := []byte{0, 0, 0, 2, 'k'} // attributes, ts delta, offset delta, key length 1, key
	head = binary.AppendVarint(head, int64(size))
	recLen := len(head) + size + 1 // + header count 0
	prefix := append(binary.AppendVarint(nil, int64(recLen)), head...)
	_ = body
	total := uint64(len(prefix) + size + 1)

	out := []byte{0x28, 0xb5, 0x2f, 0xfd}
	if single {
		out = append(out, 0xe0) // 8-byte content size, single segment
		out = binary.LittleEndian.AppendUint64(out, total)
	} else {
		// Window descriptor: exponent and mantissa; no content size.
		exp := 0
		for (uint64(1) << (10 + exp)) < window {
			exp++
		}
		out = append(out, 0x00, byte(exp<<3))
	}
	block := func(last bool, typ, size int) {
		v := uint32(size)<<3 | uint32(typ)<<1
		if last {
			v |= 1
		}
		out = append(out, byte(v), byte(v>>8), byte(v>>16))
	}
	block(false, 0, len(prefix)) // raw
	out = append(out, prefix...)
	const maxBlock = 128 << 10
	for left := size + 1; left > 0; {
		n := min(left, maxBlock)
		left -= n
		block(left == 0, 1, n) // RLE of zeros (the last zero is the header count)
		out = append(out, 0)
	}
	return out
}

// The zstd bomb of issue 25: a batch of a few KB holding one 200 MiB
// record, produced to a compacted topic, took the broker from 23 MB to
// 740 MB (the key check decompressed it whole, and a single-segment
// frame's window is its whole content). It is refused with
// MESSAGE_TOO_LARGE, and refusing it allocates little: whether the frame
// declares its 200 MiB (refused from its header) or a small window and
// no size (refused once past the topic's bound, read as a stream).
func TestAppendRefusesZstdBombOnCompactedTopic(t *testing.T) {
	const size = 200 << 20
	for _, tc := range []struct {
		name   string
		single bool
		window uint64
	}{{"single-segment", true, 0}, {"windowed", false, 1 << 20}, {"large window", false, 128 << 20}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newMemEnv()
			e.cfg.Compact = true
			l := e.open(t)
			b := frame(zstdBomb(size, tc.single, tc.window), 1, int16(kgo.CodecZstd), 1000, 0, 0, 0)
			if len(b) > 32<<10 {
				t.Fatalf("bomb of %d bytes", len(b))
			}
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := l.Append(b, 0)
			runtime.ReadMemStats(&after)
			if !errors.Is(err, kerr.MessageTooLarge) {
				t.Fatalf("%d-byte batch of a 200 MiB record: %v, want MESSAGE_TOO_LARGE", len(b), err)
			}
			if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
				t.Fatalf("refusing a %d-byte bomb allocated %d MiB", len(b), got>>20)
			}
			if l.LogEndOffset() != 0 {
				t.Fatal("bomb written")
			}
			t.Logf("%s: %d bytes refused: %v", tc.name, len(b), err)
		})
	}
}

// The bound follows max.message.bytes: a batch may decompress to 32 times
// it (at least 1 MiB); one past it is MESSAGE_TOO_LARGE for every codec,
// one within it is accepted, on a compacted topic too. (Snappy expands
// at most about 21 times: a snappy batch within max.message.bytes never
// reaches the bound, and is left out.)
func TestAppendDecompressBoundFollowsMaxMessageBytes(t *testing.T) {
	for _, codec := range allCodecs[1:] {
		if codec == kgo.CodecSnappy {
			continue
		}
		e := newMemEnv()
		e.cfg.Compact = true
		e.cfg.MaxMessageBytes = 64 << 10 // bound: 2 MiB
		l := e.open(t)
		ok := rawBatch{records: withLen(rawRec{key: []byte("k"), value: make([]byte, 1900<<10)}.body()), count: 1, codec: codec, ts: 1000}.bytes(t)
		if _, err := l.Append(ok, 0); err != nil {
			t.Fatalf("codec %d: a batch decompressing to 1.9 MiB under a 2 MiB bound: %v", codec, err)
		}
		big := rawBatch{records: withLen(rawRec{key: []byte("k"), value: make([]byte, 2100<<10)}.body()), count: 1, codec: codec, ts: 1000}.bytes(t)
		if _, err := l.Append(big, 0); !errors.Is(err, kerr.MessageTooLarge) {
			t.Fatalf("codec %d: a batch decompressing to 2.1 MiB past a 2 MiB bound: %v, want MESSAGE_TOO_LARGE", codec, err)
		}
		keyless := rawBatch{records: append(withLen(rawRec{key: []byte("k"), value: []byte("v")}.body()),
			withLen(rawRec{offDelta: 1, value: []byte("v")}.body())...), count: 2, codec: codec, ts: 1000}.bytes(t)
		if _, err := l.Append(keyless, 0); !errors.Is(err, kerr.InvalidRecord) {
			t.Fatalf("codec %d: a record without a key on a compacted topic: %v, want INVALID_RECORD", codec, err)
		}
	}
}

// DecompressMemory reads what a stream will hold from the batch headers:
// the zstd window a frame declares (200 MiB for a single-segment bomb,
// refused by the log before it is allocated but charged as declared),
// lz4's blocks, a plain snappy block's decoded size.
func TestDecompressMemory(t *testing.T) {
	if got := DecompressMemory(frame(zstdBomb(200<<20, true, 0), 1, int16(kgo.CodecZstd), 1000, 0, 0, 0)); got < 200<<20 {
		t.Errorf("single-segment 200 MiB frame: %d", got)
	}
	if got := DecompressMemory(frame(zstdBomb(200<<20, false, 4<<20), 1, int16(kgo.CodecZstd), 1000, 0, 0, 0)); got < 4<<20 || got > 6<<20 {
		t.Errorf("frame with a 4 MiB window: %d", got)
	}
	small := rawBatch{records: recs(10), count: 10, codec: kgo.CodecZstd, ts: 1000}.bytes(t)
	if got := DecompressMemory(small); got > 3<<20 {
		t.Errorf("small zstd batch: %d", got)
	}
	plain := rawBatch{records: recs(10), count: 10, ts: 1000}.bytes(t)
	if got := DecompressMemory(plain); got != 0 {
		t.Errorf("uncompressed batch: %d", got)
	}
	both := append(append([]byte(nil), small...), frame(zstdBomb(100<<20, true, 0), 1, int16(kgo.CodecZstd), 1000, 0, 0, 0)...)
	if got := DecompressMemory(both); got < 100<<20 {
		t.Errorf("two batches, the second declaring 100 MiB: %d", got)
	}
	for _, codec := range allCodecs[1:] {
		b := rawBatch{records: withLen(rawRec{key: []byte("k"), value: bytes.Repeat([]byte("ab"), 1<<20)}.body()), count: 1, codec: codec, ts: 1000}.bytes(t)
		if got := DecompressMemory(b); got <= 0 || got > 12<<20 {
			t.Errorf("codec %d: a 2 MiB record: %d", codec, got)
		}
	}
	// The bomb decodes as built (its size is right).
	d, _ := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	defer d.Close()
	if err := d.Reset(bytes.NewReader(zstdBomb(1<<20, true, 0))); err != nil {
		t.Fatal(err)
	}
	n, err := bytes.NewBuffer(nil).ReadFrom(d)
	if err != nil || n < 1<<20 {
		t.Fatalf("bomb of 1 MiB decodes to %d: %v", n, err)
	}
}
