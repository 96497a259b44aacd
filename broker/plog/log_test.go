package plog

import (
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestAppendRead(t *testing.T) {
	forEachFS(t, func(t *testing.T, e *logEnv) {
		e.cfg.IndexIntervalBytes = 256
		l := e.open(t)
		for i := 0; i < 50; i++ {
			info := mustAppend(t, l, testBatch{records: 3, ts: e.clock.Ms() + int64(i), valueSize: 40}.bytes())
			if info.FirstOffset != int64(i*3) || info.LastOffset != int64(i*3+2) || info.NumRecords != 3 || info.LogAppendTime != -1 {
				t.Fatalf("append %d: %+v", i, info)
			}
		}
		if l.LogEndOffset() != 150 {
			t.Fatalf("LEO %d", l.LogEndOffset())
		}
		checkContiguous(t, readAll(t, l, 0), 0, 150)
		// Every offset finds the batch holding it.
		for off := int64(0); off < 150; off++ {
			fs, err := l.Read(off, 150, 1, true)
			if err != nil {
				t.Fatal(err)
			}
			hs := sliceBatches(t, fs)
			if len(hs) != 1 || hs[0].BaseOffset > off || hs[0].lastOffset() < off {
				t.Fatalf("read %d: %+v", off, hs)
			}
		}
		// maxOffset excludes batches reaching it.
		fs, _ := l.Read(0, 10, 1<<20, true)
		if hs := sliceBatches(t, fs); hs[len(hs)-1].lastOffset() != 8 {
			t.Fatalf("maxOffset 10: last %d", hs[len(hs)-1].lastOffset())
		}
		if fs, _ := l.Read(9, 10, 1<<20, true); fs.Len != 0 {
			t.Fatal("batch 9..11 served below maxOffset 10")
		}
		// maxBytes cuts at whole batches; minOne returns one oversized batch.
		one := int64(len(testBatch{records: 3, valueSize: 40}.bytes()))
		fs, _ = l.Read(0, 150, int(3*one+5), false)
		if hs := sliceBatches(t, fs); len(hs) != 3 {
			t.Fatalf("maxBytes: %d batches", len(hs))
		}
		if fs, _ := l.Read(0, 150, 10, false); fs.Len != 0 {
			t.Fatal("maxBytes 10 without minOne returned data")
		}
		if fs, _ := l.Read(0, 150, 10, true); len(sliceBatches(t, fs)) != 1 {
			t.Fatal("minOne did not return one batch")
		}
		if fs, err := l.Read(150, 150, 100, true); err != nil || fs.Len != 0 {
			t.Fatalf("read at LEO: %+v %v", fs, err)
		}
		if _, err := l.Read(151, 200, 100, true); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("read past LEO: %v", err)
		}
		// Reopen after a clean close: same contents.
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l = e.open(t)
		if l.LogEndOffset() != 150 {
			t.Fatalf("LEO after reopen %d", l.LogEndOffset())
		}
		checkContiguous(t, readAll(t, l, 0), 0, 150)
		mustAppend(t, l, testBatch{records: 1}.bytes())
		checkContiguous(t, readAll(t, l, 140), 140, 151)
	})
}

func TestAppendValidation(t *testing.T) {
	l := newMemEnv().open(t)
	good := testBatch{records: 2, valueSize: 10}.bytes()
	mut := func(f func(b []byte)) []byte {
		b := append([]byte(nil), good...)
		f(b)
		return b
	}
	cases := []struct {
		name string
		b    []byte
		want error
	}{
		{"crc", mut(func(b []byte) { b[len(b)-1] ^= 1 }), kerr.CorruptMessage},
		{"magic1", mut(func(b []byte) { b[offMagic] = 1 }), kerr.UnsupportedForMessageFormat},
		{"magic3", mut(func(b []byte) { b[offMagic] = 3 }), kerr.CorruptMessage},
		{"truncated", good[:len(good)-3], kerr.CorruptMessage},
		{"short", good[:20], kerr.CorruptMessage},
		{"codec", restamp(mut(func(b []byte) { b[offAttributes+1] |= 7 })), kerr.UnsupportedCompressionType},
		{"count", restamp(mut(func(b []byte) { b[offRecordCount+3] = 5 })), kerr.InvalidRecord},
		{"control", restamp(mut(func(b []byte) { b[offAttributes+1] |= attrControl })), kerr.InvalidRecord},
		{"empty", nil, kerr.InvalidRecord},
	}
	for _, c := range cases {
		if _, err := l.Append(c.b, 0); !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	cfg := l.Config()
	cfg.MaxMessageBytes = int32(len(good) - 1)
	l.SetConfig(cfg)
	if _, err := l.Append(append([]byte(nil), good...), 0); !errors.Is(err, kerr.MessageTooLarge) {
		t.Errorf("too large: %v", err)
	}
	cfg.MaxMessageBytes = 1 << 20
	cfg.MessageTimestampBeforeMaxMs = 1000
	l.SetConfig(cfg)
	if _, err := l.Append(testBatch{records: 1, ts: 5}.bytes(), 0); !errors.Is(err, kerr.InvalidTimestamp) {
		t.Errorf("old timestamp: %v", err)
	}
	if l.LogEndOffset() != 0 {
		t.Fatalf("refused batches were written: LEO %d", l.LogEndOffset())
	}
}

func restamp(b []byte) []byte {
	stampBatch(b, 0, -1, CreateTime, 0)
	putCRC(b)
	return b
}

func TestLogAppendTime(t *testing.T) {
	e := newMemEnv()
	e.cfg.TimestampType = LogAppendTime
	l := e.open(t)
	info := mustAppend(t, l, testBatch{records: 2, ts: 1}.bytes())
	if info.LogAppendTime != e.clock.Ms() {
		t.Fatalf("LogAppendTime %d", info.LogAppendTime)
	}
	fs, _ := l.Read(0, 10, 1000, true)
	hs := sliceBatches(t, fs) // checks the recomputed CRC
	if !hs[0].logAppendTime() || hs[0].MaxTimestamp != e.clock.Ms() {
		t.Fatalf("header %+v", hs[0])
	}
}

func TestLeaderEpochStamped(t *testing.T) {
	l := newMemEnv().open(t)
	if _, err := l.Append(testBatch{}.bytes(), 3); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(testBatch{}.bytes(), 5); err != nil {
		t.Fatal(err)
	}
	fs, _ := l.Read(0, 10, 1000, true)
	hs := sliceBatches(t, fs)
	if hs[0].LeaderEpoch != 3 || hs[1].LeaderEpoch != 5 {
		t.Fatalf("epochs %d %d", hs[0].LeaderEpoch, hs[1].LeaderEpoch)
	}
	if l.LatestEpoch() != 5 {
		t.Fatalf("latest epoch %d", l.LatestEpoch())
	}
	if ep, end := l.EndOffsetForEpoch(3); ep != 3 || end != 1 {
		t.Fatalf("EndOffsetForEpoch(3) = %d, %d", ep, end)
	}
}

func TestIdempotentAppend(t *testing.T) {
	e := newMemEnv()
	l := e.open(t)
	b0 := testBatch{records: 2, pid: 7, epoch: 1, seq: 0}
	i0 := mustAppend(t, l, b0.bytes())
	dup, err := l.Append(b0.bytes(), 0)
	if err != nil || !dup.Duplicate || dup.FirstOffset != i0.FirstOffset || dup.LastOffset != i0.LastOffset {
		t.Fatalf("duplicate: %+v %v", dup, err)
	}
	if _, err := l.Append(testBatch{records: 1, pid: 7, epoch: 1, seq: 5}.bytes(), 0); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
		t.Fatalf("gap: %v", err)
	}
	mustAppend(t, l, testBatch{records: 1, pid: 7, epoch: 1, seq: 2}.bytes())
	if ep, seq, ok := l.ProducerState(7); !ok || ep != 1 || seq != 2 {
		t.Fatalf("producer state %d %d %v", ep, seq, ok)
	}
	// Producer state survives a clean restart and a process crash.
	l.Close()
	l = e.open(t)
	if _, seq, ok := l.ProducerState(7); !ok || seq != 2 {
		t.Fatalf("after reopen: %d %v", seq, ok)
	}
	mustAppend(t, l, testBatch{records: 1, pid: 7, epoch: 1, seq: 3}.bytes())
	l.abandon() // a process crash: no Close
	l2 := e.open(t)
	if _, seq, ok := l2.ProducerState(7); !ok || seq != 3 {
		t.Fatalf("after process crash: %d %v", seq, ok)
	}
	if d, err := l2.Append(testBatch{records: 1, pid: 7, epoch: 1, seq: 3}.bytes(), 0); err != nil || !d.Duplicate {
		t.Fatalf("dup after crash: %+v %v", d, err)
	}
}

func TestRollBySize(t *testing.T) {
	forEachFS(t, func(t *testing.T, e *logEnv) {
		one := int64(len(testBatch{valueSize: 100}.bytes()))
		e.cfg.SegmentBytes = one*4 + 1
		l := e.open(t)
		appendN(t, l, e, 10, 1, 100)
		segs := l.Segments()
		if len(segs) != 3 || segs[0].BaseOffset != 0 || segs[1].BaseOffset != 4 || segs[2].BaseOffset != 8 {
			t.Fatalf("segments %+v", segs)
		}
		if !segs[0].Sealed || segs[2].Sealed || segs[0].NextOffset != 4 || segs[0].Size != 4*one {
			t.Fatalf("segment info %+v", segs)
		}
		if l.Size() != 10*one {
			t.Fatalf("size %d", l.Size())
		}
		checkContiguous(t, readAll(t, l, 0), 0, 10)
		// Rolled segments get flushed asynchronously; Close waits.
		l.Close()
		l = e.open(t)
		if len(l.Segments()) != 3 {
			t.Fatalf("after reopen %+v", l.Segments())
		}
		checkContiguous(t, readAll(t, l, 0), 0, 10)
	})
}

func TestRollByTime(t *testing.T) {
	e := newMemEnv()
	e.cfg.SegmentMs = 1000
	l := e.open(t)
	appendN(t, l, e, 2, 1, 10)
	e.clock.Add(500 * time.Millisecond)
	appendN(t, l, e, 1, 1, 10)
	if n := len(l.Segments()); n != 1 {
		t.Fatalf("rolled early: %d segments", n)
	}
	e.clock.Add(600 * time.Millisecond)
	appendN(t, l, e, 1, 1, 10)
	if segs := l.Segments(); len(segs) != 2 || segs[1].BaseOffset != 3 {
		t.Fatalf("no roll by time: %+v", segs)
	}
	// MaybeRoll rolls without appends.
	e.clock.Add(2 * time.Second)
	if err := l.MaybeRoll(); err != nil {
		t.Fatal(err)
	}
	if segs := l.Segments(); len(segs) != 3 || segs[2].BaseOffset != 4 || segs[2].Size != 0 {
		t.Fatalf("MaybeRoll: %+v", segs)
	}
	if err := l.MaybeRoll(); err != nil || len(l.Segments()) != 3 {
		t.Fatalf("empty segment rolled: %v", err)
	}
}

func TestRollByIndexFull(t *testing.T) {
	e := newMemEnv()
	e.cfg.IndexIntervalBytes = 1
	e.cfg.SegmentIndexBytes = 3 * timeEntrySize
	l := e.open(t)
	appendN(t, l, e, 12, 1, 10)
	if n := len(l.Segments()); n < 2 {
		t.Fatalf("index full did not roll: %d segments", n)
	}
	checkContiguous(t, readAll(t, l, 0), 0, 12)
}

func TestRetention(t *testing.T) {
	forEachFS(t, func(t *testing.T, e *logEnv) {
		one := int64(len(testBatch{valueSize: 100}.bytes()))
		e.cfg.SegmentBytes = one * 2
		e.cfg.RetentionMs = 10_000
		l := e.open(t)
		appendN(t, l, e, 4, 1, 100) // segments [0,1] [2,3]
		e.clock.Add(20 * time.Second)
		appendN(t, l, e, 3, 1, 100) // [4,5] [6]
		if n := len(l.Segments()); n != 4 {
			t.Fatalf("segments %+v", l.Segments())
		}
		n, err := l.EnforceRetention()
		if err != nil || n != 2 {
			t.Fatalf("retention by time deleted %d: %v", n, err)
		}
		if l.LogStartOffset() != 4 {
			t.Fatalf("log start %d", l.LogStartOffset())
		}
		if _, err := l.Read(3, 100, 100, true); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("read below log start: %v", err)
		}
		checkContiguous(t, readAll(t, l, 4), 4, 7)
		// The active segment is never deleted, even when expired.
		e.clock.Add(time.Hour)
		if n, _ := l.EnforceRetention(); n != 1 || len(l.Segments()) != 1 {
			t.Fatalf("deleted %d, left %+v", n, l.Segments())
		}
		// By bytes.
		cfg := l.Config()
		cfg.RetentionMs = -1
		cfg.RetentionBytes = 3 * one
		l.SetConfig(cfg)
		appendN(t, l, e, 6, 1, 100) // LEO 13
		if n, err := l.EnforceRetention(); err != nil || n != 2 {
			t.Fatalf("retention by bytes deleted %d: %v (%+v)", n, err, l.Segments())
		}
		if l.Size() > 3*one || l.LogStartOffset() != 10 {
			t.Fatalf("size %d start %d", l.Size(), l.LogStartOffset())
		}
		l.Close()
		l = e.open(t)
		if l.LogStartOffset() != 10 {
			t.Fatalf("log start after reopen %d", l.LogStartOffset())
		}
		names, _ := e.fs.ReadDir(e.dir)
		for _, n := range names {
			if n == "00000000000000000000.log" || n == "00000000000000000000.log.deleted" {
				t.Fatalf("deleted segment file left: %v", names)
			}
		}
	})
}

func TestDeletedSegmentStaysReadable(t *testing.T) {
	e := newMemEnv()
	one := int64(len(testBatch{valueSize: 10}.bytes()))
	e.cfg.SegmentBytes = one * 2
	e.cfg.FileDeleteDelayMs = 60_000
	l := e.open(t)
	appendN(t, l, e, 5, 1, 10)
	fs, err := l.Read(0, 10, 1000, true)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.DeleteRecordsBefore(4); err != nil {
		t.Fatal(err)
	}
	if len(l.Segments()) != 1 {
		t.Fatalf("segments %+v", l.Segments())
	}
	if hs := sliceBatches(t, fs); len(hs) != 2 {
		t.Fatalf("in-flight slice: %d batches", len(hs))
	}
	if _, err := e.fs.Stat(e.dir + "/00000000000000000000.log.deleted"); err != nil {
		t.Fatalf("deleted file not renamed: %v", err)
	}
}

func TestDeleteRecords(t *testing.T) {
	forEachFS(t, func(t *testing.T, e *logEnv) {
		one := int64(len(testBatch{valueSize: 10}.bytes()))
		e.cfg.SegmentBytes = one * 3
		l := e.open(t)
		appendN(t, l, e, 8, 1, 10) // [0-2] [3-5] [6-7]
		ls, err := l.DeleteRecordsBefore(4)
		if err != nil || ls != 4 {
			t.Fatalf("DeleteRecordsBefore: %d %v", ls, err)
		}
		if segs := l.Segments(); len(segs) != 2 || segs[0].BaseOffset != 3 {
			t.Fatalf("segments %+v", segs)
		}
		if _, err := l.Read(3, 100, 1000, true); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("read 3: %v", err)
		}
		if ls, _ := l.DeleteRecordsBefore(2); ls != 4 {
			t.Fatalf("lower DeleteRecords moved start to %d", ls)
		}
		if _, err := l.DeleteRecordsBefore(9); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("beyond LEO: %v", err)
		}
		// Persisted without a clean close (process crash).
		l.abandon()
		l2 := e.open(t)
		if l2.LogStartOffset() != 4 {
			t.Fatalf("log start after crash %d", l2.LogStartOffset())
		}
	})
}

func TestTruncate(t *testing.T) {
	forEachFS(t, func(t *testing.T, e *logEnv) {
		one := int64(len(testBatch{records: 2, valueSize: 10}.bytes()))
		e.cfg.SegmentBytes = one * 3
		e.cfg.IndexIntervalBytes = 1
		l := e.open(t)
		for i := 0; i < 8; i++ {
			if _, err := l.Append(testBatch{records: 2, valueSize: 10, ts: e.clock.Ms() + int64(i)}.bytes(), int32(i/3)); err != nil {
				t.Fatal(err)
			}
		}
		// 16 offsets; segments [0-5] [6-11] [12-15]
		if err := l.Truncate(9); err != nil { // inside batch 8..9
			t.Fatal(err)
		}
		if l.LogEndOffset() != 8 {
			t.Fatalf("LEO %d", l.LogEndOffset())
		}
		if segs := l.Segments(); len(segs) != 2 || segs[1].Sealed || segs[1].NextOffset != 8 {
			t.Fatalf("segments %+v", segs)
		}
		if l.LatestEpoch() != 1 { // epoch 2 started at offset 12
			t.Fatalf("latest epoch %d", l.LatestEpoch())
		}
		checkContiguous(t, readAll(t, l, 0), 0, 8)
		mustAppend(t, l, testBatch{records: 2}.bytes())
		checkContiguous(t, readAll(t, l, 0), 0, 10)
		l.Close()
		l = e.open(t)
		checkContiguous(t, readAll(t, l, 0), 0, 10)
		if err := l.Truncate(0); err != nil {
			t.Fatal(err)
		}
		if l.LogEndOffset() != 0 || l.Size() != 0 {
			t.Fatalf("after truncate to 0: LEO %d size %d", l.LogEndOffset(), l.Size())
		}
	})
}

func TestOffsetForTimestamp(t *testing.T) {
	forEachFS(t, func(t *testing.T, e *logEnv) {
		e.cfg.IndexIntervalBytes = 1
		e.cfg.SegmentBytes = 400
		l := e.open(t)
		base := e.clock.Ms()
		// batch i holds records with timestamps base+10i .. base+10i+4
		for i := 0; i < 20; i++ {
			mustAppend(t, l, testBatch{records: 5, ts: base + int64(10*i)}.bytes())
		}
		if len(l.Segments()) < 3 {
			t.Fatalf("want several segments, got %d", len(l.Segments()))
		}
		for _, c := range []struct{ ts, off, got int64 }{
			{0, 0, base},
			{base, 0, base},
			{base + 3, 3, base + 3},
			{base + 7, 5, base + 10},
			{base + 102, 52, base + 102},
			{base + 194, 99, base + 194},
		} {
			off, ts, _, ok := l.OffsetForTimestamp(c.ts)
			if !ok || off != c.off || ts != c.got {
				t.Errorf("OffsetForTimestamp(%d) = %d, %d, %v; want %d, %d", c.ts-base, off, ts-base, ok, c.off, c.got-base)
			}
		}
		if _, _, _, ok := l.OffsetForTimestamp(base + 195); ok {
			t.Error("found an offset past the max timestamp")
		}
		if off, ts, _ := l.MaxTimestamp(); off != 99 || ts != base+194 {
			t.Errorf("MaxTimestamp = %d, %d", off, ts-base)
		}
		l.Close()
		l = e.open(t)
		if off, _, _, ok := l.OffsetForTimestamp(base + 102); !ok || off != 52 {
			t.Errorf("after reopen: %d %v", off, ok)
		}
		if off, ts, _ := l.MaxTimestamp(); off != 99 || ts != base+194 {
			t.Errorf("MaxTimestamp after reopen = %d, %d", off, ts-base)
		}
	})
}

func TestMaxTimestampEmpty(t *testing.T) {
	l := newMemEnv().open(t)
	if off, ts, _ := l.MaxTimestamp(); off != -1 || ts != -1 {
		t.Fatalf("empty log: %d %d", off, ts)
	}
}

func TestFlushMessages(t *testing.T) {
	e := newMemEnv()
	e.cfg.FlushMessages = 3
	l := e.open(t)
	appendN(t, l, e, 2, 1, 10)
	if l.RecoveryPoint() != 0 {
		t.Fatalf("flushed early: %d", l.RecoveryPoint())
	}
	appendN(t, l, e, 1, 1, 10)
	if l.RecoveryPoint() != 3 {
		t.Fatalf("recovery point %d", l.RecoveryPoint())
	}
	appendN(t, l, e, 1, 1, 10)
	// An OS crash keeps exactly the flushed batches.
	c := &logEnv{fs: e.mem.Crash(), dir: e.dir, clock: e.clock, cfg: e.cfg}
	l2 := c.open(t)
	if l2.LogEndOffset() != 3 {
		t.Fatalf("after OS crash LEO %d, want 3", l2.LogEndOffset())
	}
	checkContiguous(t, readAll(t, l2, 0), 0, 3)
}

func TestFlushMs(t *testing.T) {
	e := newMemEnv()
	e.cfg.FlushMs = 1000
	l := e.open(t)
	appendN(t, l, e, 1, 1, 10)
	if err := l.MaybeFlush(); err != nil || l.RecoveryPoint() != 0 {
		t.Fatalf("flushed early: %d %v", l.RecoveryPoint(), err)
	}
	e.clock.Add(2 * time.Second)
	if err := l.MaybeFlush(); err != nil || l.RecoveryPoint() != 1 {
		t.Fatalf("flush.ms: %d %v", l.RecoveryPoint(), err)
	}
}

func TestIndexFilesKafkaLayout(t *testing.T) {
	forEachFS(t, func(t *testing.T, e *logEnv) {
		e.cfg.IndexIntervalBytes = 100
		l := e.open(t)
		for i := 0; i < 30; i++ {
			mustAppend(t, l, testBatch{records: 2, valueSize: 30, ts: e.clock.Ms() + int64(i)}.bytes())
		}
		l.Close()
		readFile := func(name string) []byte {
			f, err := e.fs.OpenFile(e.dir+"/"+name, os.O_RDONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			b, err := readAllFile(f)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		logb := readFile("00000000000000000000.log")
		idx := readFile("00000000000000000000.index")
		tidx := readFile("00000000000000000000.timeindex")
		if len(idx) == 0 || len(idx)%8 != 0 || len(tidx) == 0 || len(tidx)%12 != 0 {
			t.Fatalf("index sizes %d %d", len(idx), len(tidx))
		}
		for i := 0; i < len(idx); i += 8 {
			ent := decodeOffsetEntry(idx[i:])
			h := parseHeader(logb[ent.pos:])
			if h.lastOffset() != int64(ent.rel) {
				t.Fatalf("index entry %d: offset %d at %d holds batch ending %d", i/8, ent.rel, ent.pos, h.lastOffset())
			}
		}
		lastT := decodeTimeEntry(tidx[len(tidx)-12:])
		if lastT.rel != 59 || lastT.ts != e.clock.Ms()+29+1 {
			t.Fatalf("last time entry %+v", lastT)
		}
	})
}

func TestConcurrentReadAppend(t *testing.T) {
	e := newMemEnv()
	e.cfg.SegmentBytes = 4096
	e.cfg.IndexIntervalBytes = 128
	l := e.open(t)
	const n = 300
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		appendN(t, l, e, n, 2, 20)
	}()
	off := int64(0)
	for off < 2*n {
		fs, err := l.Read(off, 1<<62, 700, true)
		if err != nil {
			t.Errorf("read %d: %v", off, err)
			break
		}
		if fs.Len == 0 {
			continue
		}
		hs := sliceBatches(t, fs)
		if hs[0].BaseOffset != off {
			t.Fatalf("read %d got batch at %d", off, hs[0].BaseOffset)
		}
		off = fs.LastOffset + 1
	}
	wg.Wait()
}

func TestAppendReplicated(t *testing.T) {
	leader := newMemEnv().open(t)
	for i := 0; i < 5; i++ {
		if _, err := leader.Append(testBatch{records: 2}.bytes(), int32(1+i/3)); err != nil {
			t.Fatal(err)
		}
	}
	fs, _ := leader.Read(0, 100, 1<<20, true)
	b := make([]byte, fs.Len)
	fs.File.ReadAt(b, fs.Pos)
	f := newMemEnv().open(t)
	last, err := f.AppendReplicated(b)
	if err != nil || last != 9 {
		t.Fatalf("replicated: %d %v", last, err)
	}
	if f.LatestEpoch() != 2 || f.LogEndOffset() != 10 {
		t.Fatalf("follower epoch %d LEO %d", f.LatestEpoch(), f.LogEndOffset())
	}
	if _, err := f.AppendReplicated(b); err == nil {
		t.Fatal("replicated append below the log end accepted")
	}
}

func TestClosedLog(t *testing.T) {
	l := newMemEnv().open(t)
	l.Close()
	if _, err := l.Append(testBatch{}.bytes(), 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("append after close: %v", err)
	}
	if _, err := l.Read(0, 1, 1, true); !errors.Is(err, ErrClosed) {
		t.Fatalf("read after close: %v", err)
	}
}

func TestDelete(t *testing.T) {
	e := newMemEnv()
	l := e.open(t)
	appendN(t, l, e, 3, 1, 1)
	if err := l.Delete(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.fs.Stat(e.dir); err == nil {
		t.Fatal("directory still there")
	}
}

// ReadForFetch cuts at maxBytes, ending in a partial batch, and otherwise
// returns what Read returns.
func TestReadForFetchPartialBatch(t *testing.T) {
	forEachFS(t, func(t *testing.T, e *logEnv) {
		e.cfg.IndexIntervalBytes = 256
		l := e.open(t)
		for i := 0; i < 20; i++ {
			mustAppend(t, l, testBatch{records: 3, ts: e.clock.Ms(), valueSize: 40}.bytes())
		}
		one := int64(len(testBatch{records: 3, valueSize: 40}.bytes()))
		whole, err := l.Read(0, 60, 1<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		same, err := l.ReadForFetch(0, 60, 1<<20, true)
		if err != nil || same.Pos != whole.Pos || same.Len != whole.Len {
			t.Fatalf("under the limit: %+v %v, want %+v", same, err, whole)
		}
		limit := int(3*one + 5)
		fs, err := l.ReadForFetch(3, 60, limit, false)
		if err != nil || fs.Len != int64(limit) || fs.Pos != one {
			t.Fatalf("cut at maxBytes: %+v %v, want %d bytes from %d", fs, err, limit, one)
		}
		b := make([]byte, fs.Len)
		if _, err := fs.File.ReadAt(b, fs.Pos); err != nil {
			t.Fatal(err)
		}
		all := make([]byte, whole.Len)
		if _, err := whole.File.ReadAt(all, whole.Pos); err != nil {
			t.Fatal(err)
		}
		if string(b) != string(all[one:one+int64(limit)]) {
			t.Fatal("partial slice does not hold the log's bytes")
		}
		if fs, _ := l.ReadForFetch(0, 60, 10, false); fs.Len != 0 {
			t.Fatal("maxBytes 10 without minOne returned data")
		}
		if fs, _ := l.ReadForFetch(0, 60, 10, true); fs.Len != one {
			t.Fatalf("minOne returned %d bytes, want the whole first batch (%d)", fs.Len, one)
		}
		// Below a maxOffset inside the segment, whole batches as Read.
		a, _ := l.Read(0, 10, limit, false)
		c, _ := l.ReadForFetch(0, 10, limit, false)
		if a != c {
			t.Fatalf("maxOffset 10: %+v, Read gives %+v", c, a)
		}
	})
}

func TestRollIdle(t *testing.T) {
	e := newMemEnv()
	l := e.open(t)
	if rolled, err := l.RollIdle(0); err != nil || rolled {
		t.Fatalf("empty active segment rolled: %v %v", rolled, err)
	}
	appendN(t, l, e, 2, 1, 10)
	e.clock.Add(500 * time.Millisecond)
	appendN(t, l, e, 1, 1, 10)
	e.clock.Add(800 * time.Millisecond)
	if rolled, err := l.RollIdle(1000); err != nil || rolled {
		t.Fatalf("rolled 800 ms after the last write with a 1 s bound: %v %v", rolled, err)
	}
	e.clock.Add(300 * time.Millisecond)
	if rolled, err := l.RollIdle(1000); err != nil || !rolled {
		t.Fatalf("not rolled 1.1 s after the last write: %v %v", rolled, err)
	}
	if segs := l.Segments(); len(segs) != 2 || segs[1].BaseOffset != 3 || segs[1].Size != 0 {
		t.Fatalf("RollIdle: %+v", segs)
	}
	if rolled, err := l.RollIdle(0); err != nil || rolled {
		t.Fatalf("the new empty segment rolled: %v %v", rolled, err)
	}
	checkContiguous(t, readAll(t, l, 0), 0, 3)
}
