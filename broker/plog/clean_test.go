package plog

import (
	"errors"
	"fmt"
	"maps"

	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/vfs"
)

func compactEnv() *logEnv {
	e := newMemEnv()
	e.cfg.Compact, e.cfg.Delete = true, false
	e.cfg.SegmentBytes = 1500
	e.cfg.IndexIntervalBytes = 200
	return e
}

// fillKeys appends n batches of two keyed records each and returns the
// original batch offset ranges.
func fillKeys(t *testing.T, l *Log, e *logEnv, n int, codec kgo.CompressionCodecType) map[[2]int64]bool {
	t.Helper()
	orig := map[[2]int64]bool{}
	for i := 0; i < n; i++ {
		recs := kvs(fmt.Sprintf("k%d", i%7), fmt.Sprintf("v%d-%s", i, strings.Repeat("x", i%13)),
			fmt.Sprintf("j%d", (i*3)%11), fmt.Sprintf("w%d", i))
		info := mustAppend(t, l, kvBatchSpec{recs: recs, ts: e.clock.Ms(), codec: codec}.bytes(t))
		orig[[2]int64{info.FirstOffset, info.LastOffset}] = true
	}
	return orig
}

// fillUnique appends n batches of records with keys never used again.
func fillUnique(t *testing.T, l *Log, e *logEnv, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		mustAppend(t, l, kvBatchSpec{recs: kvs(fmt.Sprintf("u%d-%d", e.clock.Ms(), i), "value"), ts: e.clock.Ms()}.bytes(t))
	}
}

func activeBase(l *Log) int64 {
	s := l.Segments()
	return s[len(s)-1].BaseOffset
}

// checkCompacted verifies that below the offset below every key of bs (read
// from l) appears once, naming the segments holding a duplicate.
func checkCompacted(t *testing.T, l *Log, bs []gotBatch, below int64) {
	t.Helper()
	segs := l.Segments()
	segOf := func(off int64) string {
		for i := len(segs) - 1; i >= 0; i-- {
			if segs[i].BaseOffset <= off {
				return fmt.Sprintf("segment %d (%d..%d)", i, segs[i].BaseOffset, segs[i].NextOffset)
			}
		}
		return "no segment"
	}
	seen := map[string]int64{}
	for _, b := range bs {
		for _, r := range b.recs {
			if r.offset >= below {
				continue
			}
			if o, ok := seen[string(r.key)]; ok {
				t.Fatalf("key %s at offsets %d (%s) and %d (%s), both below %d", r.key, o, segOf(o), r.offset, segOf(r.offset), below)
			}
			seen[string(r.key)] = r.offset
		}
	}
}

func TestCleanKeepsLatestPerKey(t *testing.T) {
	for _, codec := range []kgo.CompressionCodecType{kgo.CodecNone, kgo.CodecGzip, kgo.CodecSnappy, kgo.CodecLz4, kgo.CodecZstd} {
		t.Run(fmt.Sprint(codec), func(t *testing.T) {
			e := compactEnv()
			l := e.open(t)
			orig := fillKeys(t, l, e, 80, codec)
			if n := len(l.Segments()); n < 4 {
				t.Fatalf("only %d segments", n)
			}
			before := readBatchesKV(t, l)
			want := latestByKey(before)
			size, leo := l.Size(), l.LogEndOffset()

			st, err := l.Clean()
			if err != nil {
				t.Fatal(err)
			}
			if !st.Cleaned || st.SegmentsCleaned == 0 || st.Aborted {
				t.Fatalf("stats %+v", st)
			}
			after := readBatchesKV(t, l)
			if got := latestByKey(after); !maps.Equal(got, want) {
				t.Fatalf("content changed:\n got %v\nwant %v", got, want)
			}
			checkCompacted(t, l, after, activeBase(l))
			for _, b := range after {
				if !orig[[2]int64{b.h.BaseOffset, b.h.lastOffset()}] {
					t.Fatalf("batch %d..%d is not an original batch's range", b.h.BaseOffset, b.h.lastOffset())
				}
				if b.h.RecordCount > 0 && b.h.codec() != int(codec) {
					t.Fatalf("batch at %d has codec %d, want %d", b.h.BaseOffset, b.h.codec(), codec)
				}
			}
			if l.Size() >= size || l.LogEndOffset() != leo {
				t.Fatalf("size %d -> %d, leo %d -> %d", size, l.Size(), leo, l.LogEndOffset())
			}
			// Nothing more to do right after a pass.
			if st, err := l.Clean(); err != nil || st.Cleaned {
				t.Fatalf("second pass %+v, %v", st, err)
			}

			// The result survives an OS crash and a clean restart.
			l.Flush()
			crashed := &logEnv{fs: e.mem.Crash(), dir: e.dir, clock: e.clock, cfg: e.cfg}
			l.Close()
			for _, env := range []*logEnv{crashed, e} {
				l2 := env.open(t)
				if got := latestByKey(readBatchesKV(t, l2)); !maps.Equal(got, want) {
					t.Fatalf("after reopen: got %v\nwant %v", got, want)
				}
				checkCompacted(t, l2, readBatchesKV(t, l2), activeBase(l2))
				l2.Close()
			}
		})
	}
}

func TestCleanRepeatedPasses(t *testing.T) {
	e := compactEnv()
	l := e.open(t)
	var want map[string]string
	for round := 0; round < 4; round++ {
		fillKeys(t, l, e, 40, kgo.CodecLz4)
		want = latestByKey(readBatchesKV(t, l))
		if _, err := l.Clean(); err != nil {
			t.Fatal(err)
		}
		got := readBatchesKV(t, l)
		if !maps.Equal(latestByKey(got), want) {
			t.Fatalf("round %d: content changed", round)
		}
		checkCompacted(t, l, got, activeBase(l))
	}
	// Reads from any offset return whole batches at or after it, also in
	// the gaps the cleaner left.
	for off := l.LogStartOffset(); off < l.LogEndOffset(); off++ {
		fs, err := l.Read(off, 1<<62, 300, true)
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		hs := sliceBatches(t, fs)
		if len(hs) == 0 || hs[len(hs)-1].lastOffset() < off {
			t.Fatalf("read %d: nothing at or after it", off)
		}
	}
}

func TestCompactedTopicRefusesNullKeys(t *testing.T) {
	e := compactEnv()
	l := e.open(t)
	for _, codec := range []kgo.CompressionCodecType{kgo.CodecNone, kgo.CodecZstd} {
		b := kvBatchSpec{recs: []kv{{key: []byte("a"), value: []byte("1")}, {value: []byte("2")}}, ts: e.clock.Ms(), codec: codec}.bytes(t)
		if _, err := l.Append(b, 0); !errors.Is(err, kerr.InvalidRecord) {
			t.Fatalf("codec %d: null key append: %v, want INVALID_RECORD", codec, err)
		}
	}
	// Corrupt compressed records behind a valid CRC are refused, not a panic.
	b := kvBatchSpec{recs: kvs("a", "1"), ts: e.clock.Ms(), codec: kgo.CodecGzip}.bytes(t)
	b[len(b)-3] ^= 0xff
	putCRC(b)
	if _, err := l.Append(b, 0); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("corrupt gzip: %v", err)
	}
	if l.LogEndOffset() != 0 {
		t.Fatalf("refused batches were written")
	}
	mustAppend(t, l, kvBatchSpec{recs: kvs("a", "1", "b", "<nil>"), ts: e.clock.Ms()}.bytes(t))
	// Without compact, null keys are fine.
	cfg := e.cfg
	cfg.Compact, cfg.Delete = false, true
	l.SetConfig(cfg)
	mustAppend(t, l, kvBatchSpec{recs: []kv{{value: []byte("x")}}, ts: e.clock.Ms()}.bytes(t))
}

// Tombstones stay for delete.retention.ms after the cleaner first saw
// them, then go with the next pass.
func TestCleanTombstones(t *testing.T) {
	e := compactEnv()
	e.cfg.DeleteRetentionMs = 3_600_000
	l := e.open(t)
	mustAppend(t, l, kvBatchSpec{recs: kvs("a", "1", "b", "1"), ts: e.clock.Ms()}.bytes(t))
	mustAppend(t, l, kvBatchSpec{recs: kvs("a", "<nil>"), ts: e.clock.Ms()}.bytes(t))
	fillKeys(t, l, e, 40, kgo.CodecNone)

	hasTombstone := func() (bool, bool) {
		for _, b := range readBatchesKV(t, l) {
			for _, r := range b.recs {
				if string(r.key) == "a" {
					return r.value == nil, b.h.Attributes&attrDeleteHorizon != 0
				}
			}
		}
		return false, false
	}
	if _, err := l.Clean(); err != nil {
		t.Fatal(err)
	}
	if tomb, horizon := hasTombstone(); !tomb || !horizon {
		t.Fatalf("after first pass: tombstone %v, delete horizon %v", tomb, horizon)
	}
	e.clock.Add(30 * time.Minute)
	fillKeys(t, l, e, 40, kgo.CodecNone)
	if st, err := l.Clean(); err != nil || !st.Cleaned {
		t.Fatalf("pass 2: %+v %v", st, err)
	}
	if tomb, _ := hasTombstone(); !tomb {
		t.Fatalf("tombstone removed before delete.retention.ms")
	}
	e.clock.Add(31 * time.Minute)
	fillKeys(t, l, e, 40, kgo.CodecNone)
	if st, err := l.Clean(); err != nil || !st.Cleaned {
		t.Fatalf("pass 3: %+v %v", st, err)
	}
	if tomb, _ := hasTombstone(); tomb {
		t.Fatalf("tombstone kept after delete.retention.ms")
	}
	for _, b := range readBatchesKV(t, l) {
		for _, r := range b.recs {
			if string(r.key) == "a" {
				t.Fatalf("key a still at %d", r.offset)
			}
		}
	}
}

func TestCleanDirtyRatio(t *testing.T) {
	e := compactEnv()
	e.cfg.MinCleanableDirtyRatio = 0.5
	l := e.open(t)
	fillUnique(t, l, e, 150)
	st, err := l.Clean()
	if err != nil || !st.Cleaned || st.DirtyRatio != 1 {
		t.Fatalf("first pass %+v, %v", st, err)
	}
	// A little new dirty data: not worth a pass.
	fillKeys(t, l, e, 12, kgo.CodecNone)
	st, err = l.Clean()
	if err != nil || st.Cleaned || st.DirtyRatio <= 0 || st.DirtyRatio > 0.5 {
		t.Fatalf("small dirty section: %+v, %v", st, err)
	}
	// Lower the bar and it runs.
	cfg := e.cfg
	cfg.MinCleanableDirtyRatio = st.DirtyRatio / 2
	l.SetConfig(cfg)
	if st, err = l.Clean(); err != nil || !st.Cleaned {
		t.Fatalf("low ratio: %+v, %v", st, err)
	}
	// Not compacted: never cleans.
	cfg.Compact = false
	l.SetConfig(cfg)
	fillKeys(t, l, e, 30, kgo.CodecNone)
	if st, err = l.Clean(); err != nil || st.Cleaned {
		t.Fatalf("delete policy: %+v, %v", st, err)
	}
}

func TestCleanCompactionLag(t *testing.T) {
	e := compactEnv()
	e.cfg.MinCompactionLagMs = 3_600_000
	l := e.open(t)
	fillUnique(t, l, e, 150)
	if st, err := l.Clean(); err != nil || st.Cleaned {
		t.Fatalf("inside min.compaction.lag.ms: %+v, %v", st, err)
	}
	e.clock.Add(2 * time.Hour)
	if st, err := l.Clean(); err != nil || !st.Cleaned {
		t.Fatalf("past min.compaction.lag.ms: %+v, %v", st, err)
	}

	// max.compaction.lag.ms forces a pass the dirty ratio would not.
	cfg := e.cfg
	cfg.MinCompactionLagMs = 0
	cfg.MinCleanableDirtyRatio = 0.99
	cfg.MaxCompactionLagMs = 10 * 3_600_000
	l.SetConfig(cfg)
	fillKeys(t, l, e, 15, kgo.CodecNone)
	// The oldest dirty batch (in the segment that was active during the
	// first pass) is two hours old.
	if st, err := l.Clean(); err != nil || st.Cleaned {
		t.Fatalf("inside max.compaction.lag.ms: %+v, %v", st, err)
	}
	e.clock.Add(9 * time.Hour)
	if st, err := l.Clean(); err != nil || !st.Cleaned {
		t.Fatalf("past max.compaction.lag.ms: %+v, %v", st, err)
	}
}

// The last batch of an idempotent producer stays (without records) so
// that its sequence survives; retries and gaps are still recognised after
// cleaning and after a restart that replays the log.
func TestCleanKeepsProducerState(t *testing.T) {
	e := compactEnv()
	l := e.open(t)
	const pid = 7
	var last AppendInfo
	for seq := int32(0); seq < 6; seq++ {
		last = mustAppend(t, l, kvBatchSpec{recs: kvs("p", fmt.Sprint(seq)), ts: e.clock.Ms(), pid: pid, epoch: 3, seq: seq}.bytes(t))
	}
	// Another writer overwrites the producer's key, then enough data to
	// roll a few segments.
	mustAppend(t, l, kvBatchSpec{recs: kvs("p", "other"), ts: e.clock.Ms()}.bytes(t))
	fillKeys(t, l, e, 50, kgo.CodecNone)
	if _, err := l.Clean(); err != nil {
		t.Fatal(err)
	}
	var kept *gotBatch
	for _, b := range readBatchesKV(t, l) {
		if b.h.ProducerID == pid {
			if kept != nil {
				t.Fatalf("two batches of producer %d kept", pid)
			}
			kept = &b
		}
	}
	if kept == nil || kept.h.RecordCount != 0 || kept.h.BaseOffset != last.FirstOffset || kept.h.BaseSequence != 5 || kept.h.ProducerEpoch != 3 {
		t.Fatalf("producer's last batch: %+v", kept)
	}

	check := func(l *Log) {
		t.Helper()
		if ep, seq, ok := l.ProducerState(pid); !ok || ep != 3 || seq != 5 {
			t.Fatalf("producer state %d %d %v", ep, seq, ok)
		}
		if _, err := l.Append(kvBatchSpec{recs: kvs("p", "gap"), ts: e.clock.Ms(), pid: pid, epoch: 3, seq: 9}.bytes(t), 0); !errors.Is(err, kerr.OutOfOrderSequenceNumber) {
			t.Fatalf("gap: %v", err)
		}
	}
	check(l)
	// Reopen without snapshots: state comes from replaying the cleaned log.
	l.abandon()
	names, _ := e.fs.ReadDir(e.dir)
	for _, n := range names {
		if strings.HasSuffix(n, producerSnapshotSuffix) {
			e.fs.Remove(e.dir + "/" + n)
		}
	}
	l = e.open(t)
	check(l)
	info := mustAppend(t, l, kvBatchSpec{recs: kvs("p", "6"), ts: e.clock.Ms(), pid: pid, epoch: 3, seq: 6}.bytes(t))
	if info.Duplicate {
		t.Fatalf("next sequence taken for a duplicate")
	}
}

func TestRetentionOnlyWithDeletePolicy(t *testing.T) {
	e := compactEnv()
	e.cfg.RetentionMs = 1000
	l := e.open(t)
	fillKeys(t, l, e, 40, kgo.CodecNone)
	e.clock.Add(time.Hour)
	if n, err := l.EnforceRetention(); err != nil || n != 0 {
		t.Fatalf("compact only: deleted %d, %v", n, err)
	}
	cfg := e.cfg
	cfg.Delete = true
	l.SetConfig(cfg)
	if n, err := l.EnforceRetention(); err != nil || n == 0 {
		t.Fatalf("compact,delete: deleted %d, %v", n, err)
	}
}

// A failure at any step of a pass, followed by a process or machine crash,
// reopens to a log with the same logical content.
func TestCleanCrashAtEveryStep(t *testing.T) {
	ops := []vfs.Op{vfs.OpOpen, vfs.OpWrite, vfs.OpSync, vfs.OpRename, vfs.OpSyncDir, vfs.OpRemove, vfs.OpRead}
	completed := 0
	for _, op := range ops {
		for n := int64(1); n <= 12; n++ {
			for _, machine := range []bool{false, true} {
				e := compactEnv()
				l := e.open(t)
				fillKeys(t, l, e, 60, kgo.CodecSnappy)
				if err := l.Flush(); err != nil {
					t.Fatal(err)
				}
				want := latestByKey(readBatchesKV(t, l))
				leo := l.LogEndOffset()
				e.mem.SetInjector(vfs.FailNth(op, n))
				l.Clean()
				l.abandon()
				e.mem.SetInjector(nil)
				env := e
				if machine {
					env = &logEnv{fs: e.mem.Crash(), dir: e.dir, clock: e.clock, cfg: e.cfg}
				}
				l2 := env.open(t)
				got := readBatchesKV(t, l2)
				if !maps.Equal(latestByKey(got), want) || l2.LogEndOffset() != leo {
					t.Fatalf("%v #%d machine=%v: content changed (leo %d, want %d)\n got %v\nwant %v", op, n, machine, l2.LogEndOffset(), leo, latestByKey(got), want)
				}
				if st, err := l2.Clean(); err != nil {
					t.Fatalf("%v #%d: clean after reopen: %v", op, n, err)
				} else if st.Cleaned {
					completed++
				}
				checkCompacted(t, l2, readBatchesKV(t, l2), activeBase(l2))
				names, _ := env.fs.ReadDir(env.dir)
				for _, name := range names {
					if strings.HasSuffix(name, ".swap") || strings.HasSuffix(name, ".cleaned") {
						t.Fatalf("%v #%d: leftover %s", op, n, name)
					}
				}
				l2.Close()
			}
		}
	}
	if completed == 0 {
		t.Fatalf("no failure left work for a later pass: the injection never hit the cleaner")
	}
}

// A crash after the swap committed (the .swap files are durable) but
// before they were renamed into place is completed by recovery.
func TestCleanSwapCompletedByRecovery(t *testing.T) {
	for _, machine := range []bool{false, true} {
		e := compactEnv()
		l := e.open(t)
		fillKeys(t, l, e, 60, kgo.CodecGzip)
		l.Flush()
		want := latestByKey(readBatchesKV(t, l))
		e.mem.SetInjector(func(op vfs.Op, path string) error {
			if op == vfs.OpRename && strings.HasSuffix(path, ".log.swap") {
				return vfs.ErrInjected
			}
			return nil
		})
		if _, err := l.Clean(); err == nil {
			t.Fatal("clean succeeded despite the failed rename")
		}
		if _, err := l.Append(kvBatchSpec{recs: kvs("z", "1"), ts: e.clock.Ms()}.bytes(t), 0); err == nil {
			t.Fatal("log still accepts appends after a half-done swap")
		}
		l.abandon()
		e.mem.SetInjector(nil)
		env := e
		if machine {
			env = &logEnv{fs: e.mem.Crash(), dir: e.dir, clock: e.clock, cfg: e.cfg}
		}
		names, _ := env.fs.ReadDir(env.dir)
		swaps := 0
		for _, n := range names {
			if strings.HasSuffix(n, ".log.swap") {
				swaps++
			}
		}
		if swaps == 0 {
			t.Fatalf("machine=%v: no .log.swap on disk to recover: %v", machine, names)
		}
		l2 := env.open(t)
		got := readBatchesKV(t, l2)
		if !maps.Equal(latestByKey(got), want) {
			t.Fatalf("machine=%v: content changed", machine)
		}
		// The first group's swap was completed: its keys are unique.
		segs := l2.Segments()
		checkCompacted(t, l2, got, segs[1].BaseOffset)
		l2.Close()
	}
}

func TestDecompressCorruptNeverPanics(t *testing.T) {
	src := []byte(strings.Repeat("compaction keeps the latest value per key ", 200))
	for codec := codecNone; codec <= codecZstd; codec++ {
		c, err := compressRecords(src, codec)
		if err != nil {
			t.Fatal(err)
		}
		// Round trip through franz-go's decompressor, as consumers do.
		got, err := testDecompressor.Decompress(c, kgo.CompressionCodecType(codec))
		if err != nil || string(got) != string(src) {
			t.Fatalf("codec %d: round trip: %v", codec, err)
		}
		if got, err := decompressWhole(c, codec); err != nil || string(got) != string(src) {
			t.Fatalf("codec %d: own round trip: %v", codec, err)
		}
		for i := 0; i < len(c); i += max(len(c)/50, 1) {
			bad := append([]byte(nil), c...)
			bad[i] ^= 0x5a
			decompressWhole(bad, codec)
			decompressWhole(bad[:i], codec)
		}
	}
	if _, err := decompressWhole([]byte{1, 2, 3}, 7); err == nil {
		t.Fatal("unknown codec accepted")
	}
}

// Cleaning runs while appends and reads go on.
func TestCleanConcurrentWithAppendAndRead(t *testing.T) {
	e := compactEnv()
	e.cfg.FileDeleteDelayMs = 60000 // readers keep replaced segments open
	l := e.open(t)
	fillKeys(t, l, e, 30, kgo.CodecNone)
	done := make(chan struct{})
	errs := make(chan error, 2)
	go func() {
		defer close(done)
		for i := 0; i < 300; i++ {
			b := kvBatchSpec{recs: kvs(fmt.Sprintf("c%d", i%17), fmt.Sprint(i)), ts: e.clock.Ms(), codec: kgo.CodecZstd}.bytes(t)
			if _, err := l.Append(b, 0); err != nil {
				errs <- err
				return
			}
		}
	}()
	go func() {
		for {
			select {
			case <-done:
				errs <- nil
				return
			default:
			}
			start := l.LogStartOffset()
			fs, err := l.Read(start, 1<<62, 4096, true)
			if err != nil {
				errs <- err
				return
			}
			if fs.Len == 0 && l.LogEndOffset() > start {
				errs <- fmt.Errorf("empty read at %d", start)
				return
			}
		}
	}()
	// passes records what each concurrent pass did, for failure messages.
	var passes []string
	defer func() {
		if t.Failed() {
			t.Logf("concurrent passes (dirty section [first, end)): %s", strings.Join(passes, "; "))
		}
	}()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		st, err := l.Clean()
		if err != nil {
			t.Fatalf("concurrent pass %d: %v", len(passes)+1, err)
		}
		if st.Cleaned {
			passes = append(passes, fmt.Sprintf("#%d [%d, %d) aborted=%v", len(passes)+1, st.FirstDirtyOffset, st.EndOffset, st.Aborted))
		}
	}
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	want := latestByKey(readBatchesKV(t, l))
	// The final pass must clean whatever the concurrent passes left,
	// however dirty the log is: with min.cleanable.dirty.ratio left at
	// its default it may rightly skip a log dirty below the ratio (Kafka's
	// grabFilthiestCompactedLog), leaving duplicates below the active
	// segment.
	cfg := l.Config()
	cfg.MinCleanableDirtyRatio = 0
	l.SetConfig(cfg)
	st, err := l.Clean()
	if err != nil {
		t.Fatalf("final pass after %d concurrent passes: %v", len(passes), err)
	}
	if !st.Cleaned && st.FirstDirtyOffset < activeBase(l) {
		t.Fatalf("final pass after %d concurrent passes did not clean: first dirty offset %d below active segment %d: %+v",
			len(passes), st.FirstDirtyOffset, activeBase(l), st)
	}
	got := readBatchesKV(t, l)
	if !maps.Equal(latestByKey(got), want) {
		t.Fatalf("content changed by the final pass %+v", st)
	}
	if st.Cleaned && st.EndOffset != activeBase(l) {
		t.Fatalf("final pass %+v ended at %d, not at the active segment %d", st, st.EndOffset, activeBase(l))
	}
	checkCompacted(t, l, got, activeBase(l))
	if len(passes) == 0 {
		t.Log("no pass overlapped the appends")
	}
}

// A Clean that finds nothing to do still reports the checkpoint it measured
// from, so that callers can tell "clean up to the active segment" from
// "below the ratio".
func TestCleanReportsCheckpointWhenIdle(t *testing.T) {
	e := compactEnv()
	l := e.open(t)
	fillKeys(t, l, e, 80, kgo.CodecNone)
	if st, err := l.Clean(); err != nil || !st.Cleaned || st.EndOffset != activeBase(l) {
		t.Fatalf("first pass %+v, %v; active segment %d", st, err, activeBase(l))
	}
	cfg := l.Config()
	cfg.MinCleanableDirtyRatio = 0
	l.SetConfig(cfg)
	st, err := l.Clean()
	if err != nil {
		t.Fatal(err)
	}
	if st.Cleaned || st.FirstDirtyOffset != activeBase(l) {
		t.Fatalf("second pass %+v, want no pass from the active segment %d", st, activeBase(l))
	}
}
