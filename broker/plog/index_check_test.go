package plog

// Index entries read from disk are checked where lookups land, and a
// legitimately empty index is not taken for a lost one.

import (
	"context"
	"encoding/binary"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"strata/internal/vfs"
)

// corruptIndexEntry rewrites entry i of a .index file to point at pos.
func corruptIndexEntry(t *testing.T, fsys vfs.FS, name string, i int, pos int32) {
	t.Helper()
	rewriteFile(t, fsys, name, func(b []byte) []byte {
		binary.BigEndian.PutUint32(b[i*offsetEntrySize+4:], uint32(pos))
		return b
	})
}

// Issue 15: a corrupt middle .index entry that points at a real but later
// batch made reads answer from the wrong offset (offset 4 answered from
// 21), in sealed segments, whose files Open checks only by their last
// entry, and in the active one, whose entries need only increase.
func TestCorruptMiddleIndexEntry(t *testing.T) {
	forEachFS(t, func(t *testing.T, e *logEnv) {
		one := int64(len(testBatch{records: 2, valueSize: 20}.bytes()))
		e.cfg.IndexIntervalBytes = int32(2 * one) // an entry every third batch: b3, b6, b9
		e.cfg.SegmentBytes = one * 12
		l := e.open(t)
		appendN(t, l, e, 24, 2, 20) // segments [0,24) sealed, [24,48) active
		if segs := l.Segments(); len(segs) != 2 || segs[1].BaseOffset != 24 {
			t.Fatalf("segments %+v", segs)
		}
		l.Close()
		// Sealed: entry 0 (batch 3, offsets 6..7) points at batch 10
		// (20..21); Open checks only the last entry.
		corruptIndexEntry(t, e.fs, segmentPath(e.dir, 0, indexSuffix), 0, int32(10*one))
		// Active: entry 1 (batch 6, offsets 36..37) points at batch 7
		// (38..39): positions still increase.
		corruptIndexEntry(t, e.fs, segmentPath(e.dir, 24, indexSuffix), 1, int32(7*one))
		l = e.open(t)
		for off := int64(0); off < l.LogEndOffset(); off++ {
			fs, err := l.Read(off, l.LogEndOffset(), 1, true)
			if err != nil {
				t.Fatal(err)
			}
			if h := sliceBatches(t, fs)[0]; h.BaseOffset > off || h.lastOffset() < off {
				t.Fatalf("read at %d answered %d..%d", off, h.BaseOffset, h.lastOffset())
			}
		}
		checkContiguous(t, readAll(t, l, 0), 0, 48)
	})
}

// logCapture is a slog handler that keeps warnings and errors.
type logCapture struct {
	mu   sync.Mutex
	msgs []string
}

func (c *logCapture) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }

func (c *logCapture) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, r.Message)
	return nil
}

func (c *logCapture) WithAttrs([]slog.Attr) slog.Handler { return c }
func (c *logCapture) WithGroup(string) slog.Handler      { return c }

func (c *logCapture) warnings() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.msgs)
}

func (e *logEnv) openLogged(t *testing.T, h slog.Handler) *Log {
	t.Helper()
	l, err := Open(Options{FS: e.fs, Dir: e.dir, Config: e.cfg, Now: e.clock.Now, Logger: slog.New(h)})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// The related bug: a sealed segment of one batch larger than twice
// index.interval.bytes has, rightly, no index entry (one is added only
// once index.interval.bytes were appended since the last), and every
// Open called its empty index lost, rebuilt it (empty again) and warned.
func TestEmptyIndexOfBigBatchNotRebuilt(t *testing.T) {
	forEachFS(t, func(t *testing.T, e *logEnv) {
		e.cfg.SegmentBytes = 12000
		l := e.open(t)
		for range 4 { // ~10 KB batches: one per segment
			mustAppend(t, l, testBatch{records: 5, valueSize: 2000, ts: e.clock.Ms()}.bytes())
		}
		if n := len(l.Segments()); n != 4 {
			t.Fatalf("%d segments", n)
		}
		for range 2 {
			l.Close()
			logs := &logCapture{}
			l = e.openLogged(t, logs)
			if w := logs.warnings(); len(w) > 0 {
				t.Fatalf("reopen warned: %v", w)
			}
		}
		// A segment of several big batches whose index was lost is still
		// rebuilt (and stays rebuilt).
		l.Close()
		e.cfg.SegmentBytes = 1 << 20
		l = e.open(t)
		for range 3 {
			mustAppend(t, l, testBatch{records: 5, valueSize: 2000, ts: e.clock.Ms()}.bytes())
		}
		l.Close()
		e.cfg.SegmentBytes = 12000
		l = e.open(t) // rolls the big segment at the next append
		mustAppend(t, l, testBatch{records: 1, valueSize: 10, ts: e.clock.Ms()}.bytes())
		segs := l.Segments()
		big := segs[len(segs)-2].BaseOffset
		l.Close()
		rewriteFile(t, e.fs, segmentPath(e.dir, big, indexSuffix), func([]byte) []byte { return nil })
		logs := &logCapture{}
		l = e.openLogged(t, logs)
		if w := logs.warnings(); len(w) != 1 || !strings.Contains(w[0], "rebuilding segment indexes") {
			t.Fatalf("a lost index was not rebuilt: %v", w)
		}
		l.Close()
		logs = &logCapture{}
		l = e.openLogged(t, logs)
		if w := logs.warnings(); len(w) > 0 {
			t.Fatalf("rebuilt again: %v", w)
		}
		checkContiguous(t, readAll(t, l, 0), 0, l.LogEndOffset())
	})
}
