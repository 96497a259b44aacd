package plog

import (
	"bytes"
	"os"
	"testing"

	"strata/internal/vfs"
)

func rewriteFile(t *testing.T, fsys vfs.FS, name string, f func([]byte) []byte) {
	t.Helper()
	fl, err := fsys.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer fl.Close()
	b, err := readAllFile(fl)
	if err != nil {
		t.Fatal(err)
	}
	b = f(b)
	if err := fl.Truncate(0); err != nil {
		t.Fatal(err)
	}
	if _, err := fl.Write(b); err != nil {
		t.Fatal(err)
	}
	fl.Sync()
}

func TestProcessCrashKeepsEverythingWritten(t *testing.T) {
	forEachFS(t, func(t *testing.T, e *logEnv) {
		e.cfg.SegmentBytes = 2000
		e.cfg.IndexIntervalBytes = 200
		l := e.open(t)
		appendN(t, l, e, 60, 2, 50)
		l.abandon()
		l = e.open(t)
		if l.LogEndOffset() != 120 {
			t.Fatalf("LEO after process crash %d", l.LogEndOffset())
		}
		checkContiguous(t, readAll(t, l, 0), 0, 120)
		appendN(t, l, e, 1, 2, 50)
		checkContiguous(t, readAll(t, l, 100), 100, 122)
	})
}

func TestOSCrashKeepsFlushed(t *testing.T) {
	e := newMemEnv()
	e.cfg.SegmentBytes = 1500
	l := e.open(t)
	appendN(t, l, e, 30, 2, 30)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	appendN(t, l, e, 10, 2, 30) // written, not synced (unless a roll flushed it)
	l.abandon()
	want := l.RecoveryPoint()
	if want < 60 {
		t.Fatalf("recovery point %d below the flush", want)
	}
	c := &logEnv{fs: e.mem.Crash(), dir: e.dir, clock: e.clock, cfg: e.cfg}
	l2 := c.open(t)
	if l2.LogEndOffset() != want {
		t.Fatalf("LEO after OS crash %d, want %d", l2.LogEndOffset(), want)
	}
	checkContiguous(t, readAll(t, l2, 0), 0, want)
	appendN(t, l2, c, 3, 2, 30)
	checkContiguous(t, readAll(t, l2, 0), 0, want+6)
}

func TestTornTailTruncated(t *testing.T) {
	for seed := uint64(0); seed < 25; seed++ {
		e := newMemEnv()
		e.cfg.SegmentBytes = 3000
		l := e.open(t)
		appendN(t, l, e, 20, 3, 40)
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		appendN(t, l, e, 20, 3, 40)
		c := &logEnv{fs: e.mem.CrashTorn(seed), dir: e.dir, clock: e.clock, cfg: e.cfg}
		l2 := c.open(t)
		leo := l2.LogEndOffset()
		if leo < 60 || leo > 120 || leo%3 != 0 {
			t.Fatalf("seed %d: LEO %d", seed, leo)
		}
		checkContiguous(t, readAll(t, l2, 0), 0, leo)
		appendN(t, l2, c, 1, 3, 40)
		checkContiguous(t, readAll(t, l2, 0), 0, leo+3)
		l2.Close()
	}
}

func TestCorruptCRCInTailTruncated(t *testing.T) {
	forEachFS(t, func(t *testing.T, e *logEnv) {
		l := e.open(t)
		appendN(t, l, e, 10, 1, 20)
		one := int64(len(testBatch{valueSize: 20}.bytes()))
		l.abandon()
		rewriteFile(t, e.fs, segmentPath(e.dir, 0, logSuffix), func(b []byte) []byte {
			b[7*one+batchHeaderSize+3] ^= 0xff // a record byte of batch 7
			return b
		})
		l = e.open(t)
		if l.LogEndOffset() != 7 {
			t.Fatalf("LEO %d, want 7", l.LogEndOffset())
		}
		checkContiguous(t, readAll(t, l, 0), 0, 7)
		if l.Size() != 7*one {
			t.Fatalf("size %d", l.Size())
		}
	})
}

func TestCorruptIndexRebuilt(t *testing.T) {
	forEachFS(t, func(t *testing.T, e *logEnv) {
		e.cfg.SegmentBytes = 3000
		e.cfg.IndexIntervalBytes = 100
		l := e.open(t)
		appendN(t, l, e, 40, 2, 40)
		segs := l.Segments()
		if len(segs) < 3 {
			t.Fatalf("segments %+v", segs)
		}
		l.Close()
		// A sealed segment's index gets a torn size, the active one's
		// decreasing entries, and another sealed one loses its index.
		rewriteFile(t, e.fs, segmentPath(e.dir, segs[0].BaseOffset, indexSuffix), func(b []byte) []byte { return b[:len(b)-3] })
		rewriteFile(t, e.fs, segmentPath(e.dir, segs[len(segs)-1].BaseOffset, indexSuffix), func(b []byte) []byte {
			return append(b, bytes.Repeat([]byte{0, 0, 0, 1, 0, 0, 0, 1}, 2)...)
		})
		rewriteFile(t, e.fs, segmentPath(e.dir, segs[1].BaseOffset, timeIndexSuffix), func(b []byte) []byte { return b[:5] })
		l = e.open(t)
		checkContiguous(t, readAll(t, l, 0), 0, 80)
		for off := int64(0); off < 80; off += 7 {
			fs, err := l.Read(off, 80, 1, true)
			if err != nil {
				t.Fatal(err)
			}
			if h := sliceBatches(t, fs)[0]; h.BaseOffset > off || h.lastOffset() < off {
				t.Fatalf("read %d got %d..%d", off, h.BaseOffset, h.lastOffset())
			}
		}
		// A sealed segment's index pointing into the middle of batches is
		// survived by the readers' fallback scan.
		l.Close()
		rewriteFile(t, e.fs, segmentPath(e.dir, segs[1].BaseOffset, indexSuffix), func(b []byte) []byte {
			for i := 4; i < len(b); i += 8 {
				b[i+3] ^= 1
			}
			return b
		})
		l = e.open(t)
		checkContiguous(t, readAll(t, l, 0), 0, 80)
	})
}

func TestStrayFilesRemoved(t *testing.T) {
	e := newMemEnv()
	l := e.open(t)
	appendN(t, l, e, 3, 1, 1)
	l.Close()
	for _, n := range []string{"00000000000000000000.log.deleted", "00000000000000000007.log.swap", "00000000000000000009.index", "x.cleaned", "log-checkpoint.tmp"} {
		f, _ := e.fs.OpenFile(e.dir+"/"+n, os.O_CREATE|os.O_RDWR, 0o644)
		f.Close()
	}
	l = e.open(t)
	names, _ := e.fs.ReadDir(e.dir)
	for _, n := range names {
		switch n {
		case "00000000000000000000.log", "00000000000000000000.index", "00000000000000000000.timeindex",
			checkpointName, "leader-epoch-checkpoint":
		default:
			if !bytes.HasSuffix([]byte(n), []byte(".snapshot")) {
				t.Errorf("stray file %s left", n)
			}
		}
	}
	checkContiguous(t, readAll(t, l, 0), 0, 3)
}

// Every failure at any point of a workload leaves a directory that opens
// after an OS crash and holds a contiguous log with every batch that was
// flushed before the failure.
func TestCrashAtAnyFailure(t *testing.T) {
	for _, op := range []vfs.Op{vfs.OpWrite, vfs.OpSync, vfs.OpRename, vfs.OpSyncDir, vfs.OpTruncate} {
		for n := int64(1); n <= 30; n += 3 {
			e := newMemEnv()
			e.cfg.SegmentBytes = 600
			e.cfg.FlushMessages = 4
			l := e.open(t)
			e.mem.SetInjector(vfs.FailNth(op, n))
			durable := int64(0)
			for i := 0; i < 25; i++ {
				if _, err := l.Append(testBatch{records: 1, valueSize: 30, ts: e.clock.Ms()}.bytes(), 0); err != nil {
					continue
				}
				if rp := l.RecoveryPoint(); rp > durable {
					durable = rp
				}
			}
			l.abandon()
			e.mem.SetInjector(nil)
			c := &logEnv{fs: e.mem.Crash(), dir: e.dir, clock: e.clock, cfg: e.cfg}
			l2 := c.open(t)
			if l2.LogEndOffset() < durable {
				t.Fatalf("%v #%d: LEO %d below durable %d", op, n, l2.LogEndOffset(), durable)
			}
			checkContiguous(t, readAll(t, l2, l2.LogStartOffset()), l2.LogStartOffset(), l2.LogEndOffset())
			l2.Close()
		}
	}
}
