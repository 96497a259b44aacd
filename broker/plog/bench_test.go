package plog

import (
	"log/slog"
	"path/filepath"
	"testing"

	"strata/internal/vfs"
)

func benchAppend(b *testing.B, fsys vfs.FS, dir string, records, valueSize int) {
	benchAppendTo(b, fsys, dir, testBatch{records: records, valueSize: valueSize, ts: 1_700_000_000_000}.bytes())
}

// benchAppendTo appends one prebuilt batch again and again to a log in
// dir on fsys.
func benchAppendTo(b *testing.B, fsys vfs.FS, dir string, batch []byte) {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 64 << 20
	l, err := Open(Options{FS: fsys, Dir: dir, Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	b.SetBytes(int64(len(batch)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := l.Append(batch, 0); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendOS1x1KB(b *testing.B) {
	benchAppend(b, vfs.OS, filepath.Join(b.TempDir(), "t-0"), 1, 1024)
}

func BenchmarkAppendOS16x1KB(b *testing.B) {
	benchAppend(b, vfs.OS, filepath.Join(b.TempDir(), "t-0"), 16, 1024)
}

func BenchmarkAppendMem16x1KB(b *testing.B) {
	benchAppend(b, vfs.NewCrashableMem(), "t-0", 16, 1024)
}

func BenchmarkRead(b *testing.B) {
	cfg := DefaultConfig()
	l, err := Open(Options{FS: vfs.OS, Dir: filepath.Join(b.TempDir(), "t-0"), Config: cfg, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	batch := testBatch{records: 4, valueSize: 1024}.bytes()
	for i := 0; i < 4000; i++ {
		if _, err := l.Append(batch, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		off := int64(i*4) % 16000
		if _, err := l.Read(off, 16000, 1<<20, true); err != nil {
			b.Fatal(err)
		}
	}
}
