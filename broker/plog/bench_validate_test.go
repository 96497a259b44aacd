package plog

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/vfs"
)

// benchAppendBatch appends one prebuilt batch again and again to an
// in-memory log: the cost of validation (every record walked, compressed
// records decompressed as a stream) beside the write.
func benchAppendBatch(b *testing.B, batch []byte) {
	benchAppendTo(b, vfs.NewCrashableMem(), "t-0", batch)
}

func BenchmarkAppendMem100x100B(b *testing.B) {
	benchAppendBatch(b, testBatch{records: 100, valueSize: 100, ts: 1_700_000_000_000}.bytes())
}

func BenchmarkAppendMemZstd100x100B(b *testing.B) {
	var recs []kv
	for i := 0; i < 100; i++ {
		recs = append(recs, kv{key: []byte{byte(i)}, value: testBatch{records: 1, valueSize: 100}.bytes()[61:]})
	}
	benchAppendBatch(b, kvBatchSpec{recs: recs, ts: 1_700_000_000_000, codec: kgo.CodecZstd}.bytes(b))
}

// BenchmarkValidateBatch is validateBatch alone: the frame, CRC and header
// checks and the record walk.
func BenchmarkValidateBatch(b *testing.B) {
	var zrecs []kv
	for i := 0; i < 100; i++ {
		zrecs = append(zrecs, kv{key: []byte{byte(i)}, value: testBatch{records: 1, valueSize: 100}.bytes()[61:]})
	}
	for _, c := range []struct {
		name  string
		batch []byte
	}{
		{"16x1KB", testBatch{records: 16, valueSize: 1024, ts: 1_700_000_000_000}.bytes()},
		{"100x100B", testBatch{records: 100, valueSize: 100, ts: 1_700_000_000_000}.bytes()},
		{"zstd100x100B", kvBatchSpec{recs: zrecs, ts: 1_700_000_000_000, codec: kgo.CodecZstd}.bytes(b)},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(c.batch)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if _, err := validateBatch(c.batch, 1<<20, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
