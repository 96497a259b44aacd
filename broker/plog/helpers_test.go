package plog

import (
	"encoding/binary"
	"hash/crc32"
	"io"
	"log/slog"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/internal/vfs"
)

// testBatch describes a record batch to build.
type testBatch struct {
	records   int
	ts        int64 // first record's timestamp; record i has ts+i
	valueSize int
	pid       int64 // -1: not idempotent
	epoch     int16
	seq       int32
	txn       bool // transactional attribute
}

func (b testBatch) bytes() []byte {
	if b.records == 0 {
		b.records = 1
	}
	if b.pid == 0 {
		b.pid = -1
	}
	var recs []byte
	for i := 0; i < b.records; i++ {
		var body []byte
		body = append(body, 0)                               // attributes
		body = binary.AppendVarint(body, int64(i))           // timestamp delta
		body = binary.AppendVarint(body, int64(i))           // offset delta
		body = binary.AppendVarint(body, -1)                 // null key
		body = binary.AppendVarint(body, int64(b.valueSize)) // value
		for j := 0; j < b.valueSize; j++ {
			body = append(body, byte('a'+(i+j)%26))
		}
		body = binary.AppendVarint(body, 0) // headers
		recs = binary.AppendVarint(recs, int64(len(body)))
		recs = append(recs, body...)
	}
	seq := b.seq
	if b.pid < 0 {
		seq = -1
	}
	var attrs int16
	if b.txn {
		attrs = attrTransactional
	}
	rb := kmsg.RecordBatch{
		FirstOffset:          0,
		Attributes:           attrs,
		Length:               int32(batchHeaderSize - logOverhead + len(recs)),
		PartitionLeaderEpoch: -1,
		Magic:                2,
		LastOffsetDelta:      int32(b.records - 1),
		FirstTimestamp:       b.ts,
		MaxTimestamp:         b.ts + int64(b.records-1),
		ProducerID:           b.pid,
		ProducerEpoch:        b.epoch,
		FirstSequence:        seq,
		NumRecords:           int32(b.records),
		Records:              recs,
	}
	out := rb.AppendTo(nil)
	crc := crc32.Checksum(out[offAttributes:], crc32.MakeTable(crc32.Castagnoli))
	binary.BigEndian.PutUint32(out[offCRC:], crc)
	return out
}

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.UnixMilli(1_700_000_000_000)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func (c *fakeClock) Ms() int64 { return c.Now().UnixMilli() }

// logEnv is one filesystem and directory the suite runs on.
type logEnv struct {
	fs    vfs.FS
	mem   *vfs.MemFS // nil for the OS filesystem
	dir   string
	clock *fakeClock
	cfg   Config
}

func testConfig() Config {
	c := DefaultConfig()
	c.FileDeleteDelayMs = 0
	return c
}

// forEachFS runs f on the OS filesystem and on a MemFS.
func forEachFS(t *testing.T, f func(t *testing.T, e *logEnv)) {
	t.Run("os", func(t *testing.T) {
		f(t, &logEnv{fs: vfs.OS, dir: filepath.Join(t.TempDir(), "topic-0"), clock: newFakeClock(), cfg: testConfig()})
	})
	t.Run("mem", func(t *testing.T) {
		m := vfs.NewCrashableMem()
		f(t, &logEnv{fs: m, mem: m, dir: "data/topic-0", clock: newFakeClock(), cfg: testConfig()})
	})
}

func newMemEnv() *logEnv {
	m := vfs.NewCrashableMem()
	m.MkdirAll("data", 0o755)
	m.SyncDir("")
	return &logEnv{fs: m, mem: m, dir: "data/topic-0", clock: newFakeClock(), cfg: testConfig()}
}

func (e *logEnv) open(t *testing.T) *Log {
	t.Helper()
	l, err := Open(Options{FS: e.fs, Dir: e.dir, Config: e.cfg, Now: e.clock.Now, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func mustAppend(t *testing.T, l *Log, b []byte) AppendInfo {
	t.Helper()
	info, err := l.Append(b, 0)
	if err != nil {
		t.Fatalf("append: %v", err)
	}
	return info
}

// appendN appends n batches of recs records with timestamps from the clock.
func appendN(t *testing.T, l *Log, e *logEnv, n, recs, valueSize int) {
	t.Helper()
	for i := 0; i < n; i++ {
		mustAppend(t, l, testBatch{records: recs, ts: e.clock.Ms(), valueSize: valueSize}.bytes())
	}
}

// sliceBatches reads a FileSlice and returns its batch headers, checking
// that it holds whole, CRC-valid batches.
func sliceBatches(t *testing.T, fs FileSlice) []batchHeader {
	t.Helper()
	if fs.Len == 0 {
		return nil
	}
	b := make([]byte, fs.Len)
	if _, err := fs.File.ReadAt(b, fs.Pos); err != nil && err != io.EOF {
		t.Fatalf("read slice: %v", err)
	}
	var hs []batchHeader
	for len(b) > 0 {
		h, err := checkFrame(b)
		if err != nil {
			t.Fatalf("slice holds a bad batch: %v", err)
		}
		hs = append(hs, h)
		b = b[h.size():]
	}
	if last := hs[len(hs)-1].lastOffset(); last != fs.LastOffset {
		t.Fatalf("slice LastOffset %d, last batch ends at %d", fs.LastOffset, last)
	}
	return hs
}

// readAll reads every batch from offset to the log end.
func readAll(t *testing.T, l *Log, from int64) []batchHeader {
	t.Helper()
	var out []batchHeader
	for off := from; off < l.LogEndOffset(); {
		fs, err := l.Read(off, 1<<62, 1<<20, true)
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		hs := sliceBatches(t, fs)
		if len(hs) == 0 {
			t.Fatalf("empty read at %d below log end %d", off, l.LogEndOffset())
		}
		out = append(out, hs...)
		off = fs.LastOffset + 1
	}
	return out
}

// checkContiguous verifies that batches cover [from, end) without gaps.
func checkContiguous(t *testing.T, hs []batchHeader, from, end int64) {
	t.Helper()
	next := from
	for i, h := range hs {
		if i == 0 && h.BaseOffset <= from && h.lastOffset() >= from {
			next = h.lastOffset() + 1
			continue
		}
		if h.BaseOffset != next {
			t.Fatalf("batch %d starts at %d, want %d", i, h.BaseOffset, next)
		}
		next = h.lastOffset() + 1
	}
	if next != end {
		t.Fatalf("batches end at %d, want %d", next, end)
	}
}

func putCRC(b []byte) {
	binary.BigEndian.PutUint32(b[offCRC:], batchCRC(b[:logOverhead+int64(binary.BigEndian.Uint32(b[offBatchLength:]))]))
}
