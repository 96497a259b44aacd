package plog

// The fault-injection suite: a filesystem that fails fsyncs (losing the
// dirty pages, as Linux does), writes short, or runs out of space, under
// a log taking appends; after each fault the machine crashes (keeping only
// what was fsynced) and the log is reopened. The outcomes checked every
// time (checkAfterCrash): nothing acknowledged is lost, nothing that was
// never written is served, the log is contiguous, and the leader-epoch
// cache matches the batches.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"strata/internal/vfs"
)

// written remembers every batch handed to the log: its CRC by base
// offset (what was written there, acknowledged or not) and the
// acknowledged ones with their last offsets.
type written struct {
	crc   map[int64][]uint32 // base offset -> CRCs of batches written there
	acked map[int64]ackedBatch
}

type ackedBatch struct {
	crc  uint32
	last int64
}

func newWritten() *written {
	return &written{crc: map[int64][]uint32{}, acked: map[int64]ackedBatch{}}
}

func (w *written) add(base int64, b []byte, acked bool) {
	crc := binary.BigEndian.Uint32(b[offCRC:])
	w.crc[base] = append(w.crc[base], crc)
	if acked {
		w.ack(base, b)
	}
}

// appendTenFlushed appends ten one-record batches in leader epoch 1 (offsets
// 0..9) as a follower does, notes them in w (when not nil) as written and
// not acknowledged, and flushes the log.
func appendTenFlushed(t *testing.T, l *Log, w *written) {
	t.Helper()
	for i := range 10 {
		b := replicatedBatch(int64(i), 1, 1)
		if _, err := l.AppendReplicated(b); err != nil {
			t.Fatal(err)
		}
		if w != nil {
			w.add(int64(i), b, false)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
}

func (w *written) ack(base int64, b []byte) {
	h := parseHeader(b)
	w.acked[base] = ackedBatch{crc: h.CRC, last: base + int64(h.LastOffsetDelta)}
}

// truncate forgets acknowledgements of batches reaching offset (a
// follower truncating to its leader's log drops them rightly).
func (w *written) truncate(offset int64) {
	for b, a := range w.acked {
		if a.last >= offset {
			delete(w.acked, b)
		}
	}
}

// epochsOf derives the leader-epoch cache from batches, as recovery and
// appends assign it (the first entry moved up to the log start).
func epochsOf(hs []batchHeader, logStart int64) []EpochEntry {
	var es []EpochEntry
	for _, h := range hs {
		if h.LeaderEpoch >= 0 {
			assignEpochEntry(&es, EpochEntry{Epoch: h.LeaderEpoch, StartOffset: max(h.BaseOffset, logStart)})
		}
	}
	return es
}

// checkEpochs fails unless the log's epoch cache matches its batches.
func checkEpochs(t *testing.T, what string, l *Log) {
	t.Helper()
	hs := readAll(t, l, l.LogStartOffset())
	want := epochsOf(hs, l.LogStartOffset())
	l.mu.Lock()
	got := l.epochs.Entries()
	l.mu.Unlock()
	if len(hs) == 0 && len(got) <= 1 {
		return // an empty log may keep the entry at its start
	}
	if !slices.Equal(got, want) {
		t.Fatalf("%s: epoch cache %v, batches say %v", what, got, want)
	}
}

// checkAfterCrash crashes the machine (torn tails when seed > 0), reopens
// and checks the outcomes; it returns the reopened log.
func checkAfterCrash(t *testing.T, what string, e *logEnv, w *written, seed uint64) *Log {
	t.Helper()
	crashed := e.mem.Crash()
	if seed > 0 {
		crashed = e.mem.CrashTorn(seed)
	}
	crashed.SetCapacity(0) // restarted with room
	c := &logEnv{fs: crashed, mem: crashed, dir: e.dir, clock: e.clock, cfg: e.cfg}
	l := c.open(t)
	hs := readAll(t, l, l.LogStartOffset())
	checkContiguous(t, hs, l.LogStartOffset(), l.LogEndOffset())
	got := map[int64]uint32{}
	for _, h := range hs {
		got[h.BaseOffset] = h.CRC
		if !slices.Contains(w.crc[h.BaseOffset], h.CRC) {
			t.Fatalf("%s: recovered a batch at %d that was never written there", what, h.BaseOffset)
		}
	}
	for base, a := range w.acked {
		if got[base] != a.crc {
			t.Fatalf("%s: acknowledged batch at %d lost (log %d..%d)", what, base, l.LogStartOffset(), l.LogEndOffset())
		}
	}
	checkEpochs(t, what, l)
	return l
}

func isStorageErr(err error) bool { return errors.Is(err, kerr.KafkaStorageError) }

// durableEnv is a MemFS log whose appends are acknowledged only once
// fsynced (flush.messages=1), so that every acknowledgement must survive a
// machine crash.
func durableEnv() *logEnv {
	e := newMemEnv()
	e.cfg.FlushMessages = 1
	e.cfg.SegmentBytes = 700
	e.cfg.IndexIntervalBytes = 150
	return e
}

func appendBatch(e *logEnv, l *Log, w *written, epoch int32) error {
	b := testBatch{records: 2, valueSize: 30, ts: e.clock.Ms()}.bytes()
	base := l.LogEndOffset()
	_, err := l.Append(b, epoch)
	w.add(base, b, err == nil)
	return err
}

// Issue 15: after a failed fsync the log must refuse everything. Before
// the fix it stayed writable, the next fsync succeeded and moved the
// recovery point over the bytes the kernel had dropped (zeros on disk),
// and recovery then cut the log there: acknowledged batches after it were
// lost.
func TestFailedFsyncFailsTheLog(t *testing.T) {
	e := durableEnv()
	l := e.open(t)
	var reported atomic.Int32
	var cause error
	var mu sync.Mutex
	done := make(chan struct{})
	l.OnFailure(func(err error) {
		mu.Lock()
		cause = err
		mu.Unlock()
		if reported.Add(1) == 1 {
			close(done)
		}
	})
	w := newWritten()
	for range 3 {
		if err := appendBatch(e, l, w, 0); err != nil {
			t.Fatal(err)
		}
	}
	rp := l.RecoveryPoint()
	e.mem.SetInjector(vfs.FailNthMatching(vfs.OpSync, ".log", 1, syscall.EIO))
	errB := appendBatch(e, l, w, 0)
	e.mem.SetInjector(nil) // the disk seems fine again: the log must not trust it
	var errC []error
	for range 3 {
		errC = append(errC, appendBatch(e, l, w, 0))
	}
	// First the outcome: whatever was acknowledged survives a crash.
	checkAfterCrash(t, "after a failed fsync", e, w, 0).Close()
	if !isStorageErr(errB) || !errors.Is(errB, ErrFailed) {
		t.Fatalf("append whose fsync failed: %v, want KAFKA_STORAGE_ERROR", errB)
	}
	for _, err := range errC {
		if !isStorageErr(err) {
			t.Fatalf("append after a failed fsync: %v, want KAFKA_STORAGE_ERROR", err)
		}
	}
	if _, err := l.AppendReplicated(replicatedBatch(l.LogEndOffset(), 0, 1)); !isStorageErr(err) {
		t.Fatalf("replicated append after a failed fsync: %v", err)
	}
	if err := l.Flush(); !isStorageErr(err) {
		t.Fatalf("flush after a failed fsync: %v", err)
	}
	if _, err := l.Read(0, 100, 1<<20, true); !isStorageErr(err) {
		t.Fatalf("read after a failed fsync: %v", err)
	}
	if l.RecoveryPoint() != rp {
		t.Fatalf("recovery point moved from %d to %d after a failed fsync", rp, l.RecoveryPoint())
	}
	<-done
	mu.Lock()
	if !errors.Is(cause, syscall.EIO) {
		t.Fatalf("failure handler told %v", cause)
	}
	mu.Unlock()
	l.Close()
	if reported.Load() != 1 {
		t.Fatalf("failure handler called %d times", reported.Load())
	}
	checkAfterCrash(t, "after a failed fsync", e, w, 0)
}

// Every fsync of the log's files failing in turn (the segment, its
// indexes, the directory, a checkpoint), with rolls under way: the
// outcomes hold after a machine crash, with and without torn tails.
func TestFailedFsyncAtEveryPoint(t *testing.T) {
	for _, target := range []string{".log", ".index", ".timeindex", "topic-0", "checkpoint", ".snapshot"} {
		for n := int64(1); n <= 12; n++ {
			what := fmt.Sprintf("fsync #%d of %s", n, target)
			e := durableEnv()
			l := e.open(t)
			w := newWritten()
			var syncs atomic.Int64
			e.mem.SetInjector(func(op vfs.Op, p string) error {
				if (op == vfs.OpSync || op == vfs.OpSyncDir) && strings.Contains(p, target) && syncs.Add(1) == n {
					return syscall.EIO
				}
				return nil
			})
			failedAt := -1
			for i := range 30 {
				err := appendBatch(e, l, w, int32(i/10))
				if err != nil && failedAt < 0 {
					failedAt = i
				}
				if err != nil && !isStorageErr(err) {
					t.Fatalf("%s: append: %v", what, err)
				}
				if err == nil && failedAt >= 0 {
					t.Fatalf("%s: append %d acknowledged after the log failed at %d", what, i, failedAt)
				}
			}
			l.abandon()
			e.mem.SetInjector(nil)
			for _, seed := range []uint64{0, uint64(n)} {
				checkAfterCrash(t, what, e, w, seed).Close()
			}
		}
	}
}

type pendingAck struct {
	base int64
	b    []byte
}

// Issue 15: a truncation is durable when Truncate returns.
// Before the fix the cut .log was not fsynced, so a power loss brought
// the truncated tail back.
func TestTruncateIsDurable(t *testing.T) {
	e := newMemEnv()
	l := e.open(t)
	appendTenFlushed(t, l, nil)
	if err := l.Truncate(5); err != nil {
		t.Fatal(err)
	}
	l.abandon()
	c := &logEnv{fs: e.mem.Crash(), dir: e.dir, clock: e.clock, cfg: e.cfg}
	l2 := c.open(t)
	if leo := l2.LogEndOffset(); leo != 5 {
		t.Fatalf("log end %d after a power loss following Truncate(5): the truncated tail came back", leo)
	}
}

// Issue 15: recovery rebuilds the epoch cache from the
// batches. The directory holds what a power loss after a non-durable
// truncation left: epoch 1 batches up to offset 10 and a cache saying
// epoch 2 started at 5 (the follower had truncated to 5 and appended
// epoch 2 batches that were lost). Before the fix recovery only trimmed
// the cache to the log end, filing epoch 1's offsets 5..9 under epoch 2.
func TestRecoveryRebuildsEpochCache(t *testing.T) {
	e := newMemEnv()
	l := e.open(t)
	appendTenFlushed(t, l, nil)
	l.abandon()
	c := &EpochCache{fs: e.fs, dir: e.dir, entries: []EpochEntry{{1, 0}, {2, 5}}}
	if err := c.persist(); err != nil {
		t.Fatal(err)
	}
	if err := writeFileAtomic(&Log{fs: e.fs, dir: e.dir}, checkpointName, checkpoint{recoveryPoint: 5}.encode()); err != nil {
		t.Fatal(err)
	}
	l = e.open(t)
	if got := l.epochs.Entries(); !slices.Equal(got, []EpochEntry{{1, 0}}) {
		t.Fatalf("epoch cache after recovery %v, want [{1 0}]", got)
	}
	if ep, end := l.EndOffsetForEpoch(1); ep != 1 || end != 10 {
		t.Fatalf("OffsetForLeaderEpoch(1) = %d, %d; want 1, 10", ep, end)
	}
	// The rewritten file says so too.
	l.Close()
	l = e.open(t)
	checkEpochs(t, "reopened", l)

	// A corrupt checkpoint is rebuilt from every batch, not a failed open.
	l.Close()
	rewriteFile(t, e.fs, e.dir+"/"+epochCheckpointName, func([]byte) []byte { return []byte("garbage\n") })
	l = e.open(t)
	checkEpochs(t, "after a corrupt checkpoint", l)
	if l.LatestEpoch() != 1 {
		t.Fatalf("latest epoch %d", l.LatestEpoch())
	}
}

// The follower's sequence behind the epoch-cache bug, crashed at every point: a
// divergent epoch 1 tail is truncated, epoch 2 batches follow; whatever
// the crash keeps, the epoch cache matches the batches.
func TestDivergentTailAfterPowerLoss(t *testing.T) {
	for step := 0; step < 5; step++ {
		for _, seed := range []uint64{0, 1, 2, 3} {
			e := newMemEnv()
			e.cfg.SegmentBytes = 400
			l := e.open(t)
			w := newWritten()
			appendTenFlushed(t, l, w)
			for i := range 10 {
				w.ack(int64(i), replicatedBatch(int64(i), 1, 1))
			}
			if step >= 1 {
				if err := l.Truncate(5); err != nil {
					t.Fatal(err)
				}
				w.truncate(5)
			}
			for i := 5; i < 5+step && step >= 2; i++ {
				b := replicatedBatch(int64(i), 2, 1)
				if _, err := l.AppendReplicated(b); err != nil {
					t.Fatal(err)
				}
				w.add(int64(i), b, false)
			}
			if step == 4 {
				if err := l.Flush(); err != nil {
					t.Fatal(err)
				}
				for i := 5; i < 9; i++ {
					w.ack(int64(i), replicatedBatch(int64(i), 2, 1))
				}
			}
			l.abandon()
			l2 := checkAfterCrash(t, fmt.Sprintf("step %d seed %d", step, seed), e, w, seed)
			if step == 1 && l2.LogEndOffset() != 5 {
				t.Fatalf("step %d: truncated tail back: log end %d", step, l2.LogEndOffset())
			}
			l2.Close()
		}
	}
}

// Issue 15: a full disk refuses appends with a retriable
// KAFKA_STORAGE_ERROR and loses nothing; appends resume when space
// returns. Before the fix the refusal was an unclassified error
// (UNKNOWN_SERVER_ERROR), and index entries cut short by ENOSPC were left
// half-written, misaligning the .index file.
func TestDiskFull(t *testing.T) {
	e := durableEnv()
	e.cfg.IndexIntervalBytes = 1
	l := e.open(t)
	w := newWritten()
	for range 3 {
		if err := appendBatch(e, l, w, 0); err != nil {
			t.Fatal(err)
		}
	}
	one := int64(len(testBatch{records: 2, valueSize: 30}.bytes()))
	leo, size := l.LogEndOffset(), l.Size()

	// The .log write does not fit: stored in part, undone, refused.
	e.mem.SetCapacity(e.mem.Used() + one/2)
	err := appendBatch(e, l, w, 0)
	if !isStorageErr(err) || !errors.Is(err, ErrNoSpace) || errors.Is(err, ErrFailed) {
		t.Fatalf("append on a full disk: %v, want a retriable KAFKA_STORAGE_ERROR", err)
	}
	if l.Err() != nil || l.LogEndOffset() != leo || l.Size() != size {
		t.Fatalf("after a refused append: err %v, log end %d (was %d), size %d (was %d)", l.Err(), l.LogEndOffset(), leo, l.Size(), size)
	}
	if fi, _ := e.fs.Stat(segmentPath(e.dir, l.Segments()[len(l.Segments())-1].BaseOffset, logSuffix)); fi.Size() != l.Segments()[len(l.Segments())-1].Size {
		t.Fatalf("partial write left in the file: %d bytes, segment %d", fi.Size(), l.Segments()[len(l.Segments())-1].Size)
	}
	checkContiguous(t, readAll(t, l, 0), 0, leo)

	// The batch fits, its index entry does not: the flush (and so the
	// acknowledgement) fails, the partial entry is undone.
	e.mem.SetCapacity(e.mem.Used() + one + 4)
	if err := appendBatch(e, l, w, 0); !isStorageErr(err) || !errors.Is(err, ErrNoSpace) {
		t.Fatalf("append whose index entry does not fit: %v", err)
	}
	checkIndexFiles(t, e, l)

	// Space returns: appends resume, the pending entries are written.
	e.mem.SetCapacity(0)
	for range 12 {
		if err := appendBatch(e, l, w, 1); err != nil {
			t.Fatalf("append after space returned: %v", err)
		}
	}
	checkIndexFiles(t, e, l)
	checkContiguous(t, readAll(t, l, 0), 0, l.LogEndOffset())
	l.abandon()
	checkAfterCrash(t, "after a full disk", e, w, 0).Close()
}

// checkIndexFiles checks that every .index file is whole entries that land
// on their batches.
func checkIndexFiles(t *testing.T, e *logEnv, l *Log) {
	t.Helper()
	for _, s := range l.Segments() {
		name := segmentPath(e.dir, s.BaseOffset, indexSuffix)
		f, err := e.fs.OpenFile(name, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := readAllFile(f)
		f.Close()
		if len(b)%offsetEntrySize != 0 {
			t.Fatalf("%s: %d bytes, not whole entries", name, len(b))
		}
		lf, _ := e.fs.OpenFile(segmentPath(e.dir, s.BaseOffset, logSuffix), 0, 0)
		for i := 0; i < len(b); i += offsetEntrySize {
			if en := decodeOffsetEntry(b[i:]); !entryLands(lf, s.BaseOffset, en) {
				t.Fatalf("%s: entry %d %+v does not land on its batch", name, i/offsetEntrySize, en)
			}
		}
		lf.Close()
	}
}

// A full disk at an epoch change: the epoch checkpoint cannot be written,
// the append is refused and the cache left as it was, so that the next
// append assigns the epoch again and it survives a clean restart.
func TestDiskFullAtEpochChange(t *testing.T) {
	e := durableEnv()
	l := e.open(t)
	w := newWritten()
	if err := appendBatch(e, l, w, 0); err != nil {
		t.Fatal(err)
	}
	e.mem.SetInjector(vfs.FailWith(vfs.OpWrite, epochCheckpointName, &vfs.ShortWrite{N: 3, Err: vfs.ErrNoSpace}))
	if err := appendBatch(e, l, w, 3); !errors.Is(err, ErrNoSpace) || l.Err() != nil {
		t.Fatalf("append at a new epoch on a full disk: %v (log err %v)", err, l.Err())
	}
	if l.LatestEpoch() != 0 {
		t.Fatalf("latest epoch %d after the refused append", l.LatestEpoch())
	}
	e.mem.SetInjector(nil)
	if err := appendBatch(e, l, w, 3); err != nil {
		t.Fatal(err)
	}
	l.Close()
	l = e.open(t)
	checkEpochs(t, "clean restart", l)
	if l.LatestEpoch() != 3 {
		t.Fatalf("latest epoch %d", l.LatestEpoch())
	}
}

// A write cut short by a device error (not a full disk) fails the log:
// it is an I/O error Kafka takes the directory offline for.
func TestShortWriteEIOFailsTheLog(t *testing.T) {
	e := durableEnv()
	l := e.open(t)
	w := newWritten()
	if err := appendBatch(e, l, w, 0); err != nil {
		t.Fatal(err)
	}
	e.mem.SetInjector(vfs.FailNthMatching(vfs.OpWrite, ".log", 1, &vfs.ShortWrite{N: 20, Err: syscall.EIO}))
	if err := appendBatch(e, l, w, 0); !errors.Is(err, ErrFailed) {
		t.Fatalf("short write with EIO: %v", err)
	}
	e.mem.SetInjector(nil)
	if err := appendBatch(e, l, w, 0); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after EIO: %v", err)
	}
	l.abandon()
	checkAfterCrash(t, "after a short write", e, w, 0).Close()
}

// A full disk at a follower's truncation: the truncation holds, appends
// wait until the checkpoint with the lowered recovery point is written,
// and resume when space returns.
func TestDiskFullAtTruncation(t *testing.T) {
	e := newMemEnv()
	l := e.open(t)
	w := newWritten()
	appendTenFlushed(t, l, w)
	e.mem.SetInjector(vfs.FailWith(vfs.OpWrite, checkpointName, vfs.ErrNoSpace))
	if err := l.Truncate(5); err != nil {
		t.Fatalf("truncate on a full disk: %v", err)
	}
	if l.LogEndOffset() != 5 || l.Err() != nil {
		t.Fatalf("log end %d, err %v", l.LogEndOffset(), l.Err())
	}
	if _, err := l.AppendReplicated(replicatedBatch(5, 2, 1)); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("append before the checkpoint is rewritten: %v", err)
	}
	e.mem.SetInjector(nil)
	for i := 5; i < 8; i++ {
		b := replicatedBatch(int64(i), 2, 1)
		if _, err := l.AppendReplicated(b); err != nil {
			t.Fatalf("append after space returned: %v", err)
		}
		w.add(int64(i), b, false)
	}
	l.abandon()
	checkAfterCrash(t, "after truncating on a full disk", e, w, 0).Close()
}

// The campaign: random faults (failing fsyncs, short writes with EIO or
// ENOSPC, a disk filling up and emptying) under leader appends with epoch
// changes and follower truncations, each run ending in a machine crash.
func TestFaultCampaign(t *testing.T) {
	runs := 150
	if testing.Short() {
		runs = 30
	}
	for seed := uint64(1); seed <= uint64(runs); seed++ {
		rnd := rand.New(rand.NewPCG(seed, 7))
		e := durableEnv()
		e.cfg.FlushMessages = int64(1 + rnd.IntN(3))
		l := e.open(t)
		w := newWritten()
		var ops atomic.Int64
		faultAt := int64(20 + rnd.IntN(200))
		kind := rnd.IntN(4)
		var imu sync.Mutex // the injector also runs in the log's background flushes
		irnd := rand.New(rand.NewPCG(seed, 11))
		keep := func() int {
			imu.Lock()
			defer imu.Unlock()
			return irnd.IntN(50)
		}
		e.mem.SetInjector(func(op vfs.Op, p string) error {
			if ops.Add(1) < faultAt {
				return nil
			}
			switch {
			case kind == 0 && op == vfs.OpSync:
				return syscall.EIO
			case kind == 1 && op == vfs.OpWrite:
				return &vfs.ShortWrite{N: keep(), Err: syscall.EIO}
			case kind == 2 && op == vfs.OpWrite:
				return &vfs.ShortWrite{N: keep(), Err: vfs.ErrNoSpace}
			}
			return nil
		})
		if kind == 3 {
			e.mem.SetCapacity(e.mem.Used() + int64(2000+rnd.IntN(4000)))
		}
		epoch := int32(0)
		var unflushed []pendingAck
		for i := range 60 {
			switch r := rnd.IntN(20); {
			case r == 0:
				epoch++
			case r == 1 && l.LogEndOffset() > 0:
				to := max(l.LogEndOffset()-int64(rnd.IntN(4)), 0)
				l.Truncate(to) // asked for: acknowledged batches there may go, failed or not
				w.truncate(to)
				unflushed = slices.DeleteFunc(unflushed, func(p pendingAck) bool { return p.base+int64(parseHeader(p.b).LastOffsetDelta) >= to })
			case r == 2 && kind == 3:
				e.mem.SetCapacity(0) // space returns
			}
			b := testBatch{records: 1 + rnd.IntN(3), valueSize: 20 + rnd.IntN(80), ts: e.clock.Ms()}.bytes()
			base := l.LogEndOffset()
			_, err := l.Append(b, epoch)
			if err != nil && !isStorageErr(err) {
				t.Fatalf("seed %d append %d: %v", seed, i, err)
			}
			w.add(base, b, false)
			if err == nil {
				unflushed = append(unflushed, pendingAck{base, b})
				if rp := l.RecoveryPoint(); rp > base {
					for _, p := range unflushed {
						w.ack(p.base, p.b)
					}
					unflushed = unflushed[:0]
				}
			}
		}
		l.abandon()
		e.mem.SetInjector(nil)
		checkAfterCrash(t, fmt.Sprintf("seed %d kind %d", seed, kind), e, w, seed%3).Close()
	}
}

// A segment that lost its unflushed tail in a crash while the next
// segment's entry survived (the roll's flush had not run) leaves no gap:
// the segments after it go, so that the log stays a prefix of what was
// written. Before, recovery kept them and the log had a hole. A compacted
// topic's gaps are the cleaner's and stay.
func TestLostTailDropsLaterSegments(t *testing.T) {
	for _, compact := range []bool{false, true} {
		e := newMemEnv()
		one := int64(len(testBatch{records: 1, valueSize: 20}.bytes()))
		e.cfg.SegmentBytes = 6 * one
		e.cfg.Compact = compact
		l := e.open(t)
		for range 12 { // one-record batches of one size
			b := testBatch{records: 1, valueSize: 20, ts: e.clock.Ms()}.bytes()
			if compact {
				b = kvBatchSpec{recs: kvs("k", "v"), ts: e.clock.Ms()}.bytes(t)
			}
			mustAppend(t, l, b)
		}
		segs := l.Segments()
		if len(segs) != 2 || segs[1].BaseOffset < 4 {
			t.Fatalf("segments %+v", segs)
		}
		l.Close()
		rewriteFile(t, e.fs, segmentPath(e.dir, 0, logSuffix), func(b []byte) []byte {
			h := parseHeader(b)
			return b[:4*h.size()] // batches 4 and on never reached the disk
		})
		if err := writeFileAtomic(&Log{fs: e.fs, dir: e.dir}, checkpointName, checkpoint{}.encode()); err != nil {
			t.Fatal(err)
		}
		l = e.open(t)
		want := int64(4)
		if compact {
			want = 12
		}
		if l.LogEndOffset() != want {
			t.Fatalf("compact=%v: log end %d after a lost tail, want %d", compact, l.LogEndOffset(), want)
		}
		if !compact {
			checkContiguous(t, readAll(t, l, 0), 0, 4)
		}
		l.Close()
	}
}
