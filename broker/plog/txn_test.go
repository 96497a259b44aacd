package plog

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"strata/internal/vfs"
)

// txnData appends a transactional batch of recs records for pid and
// returns its first offset.
func txnData(t *testing.T, l *Log, pid int64, epoch int16, seq int32, recs int) int64 {
	t.Helper()
	info, err := l.Append(testBatch{ts: 1_700_000_000_000, records: recs, pid: pid, epoch: epoch, seq: seq, txn: true}.bytes(), 0)
	if err != nil {
		t.Fatalf("append transactional batch of %d: %v", pid, err)
	}
	return info.FirstOffset
}

func marker(t *testing.T, l *Log, pid int64, epoch int16, typ ControlType, coordEpoch int32) int64 {
	t.Helper()
	info, err := l.AppendControl(pid, epoch, EndTxnMarker{Type: typ, CoordinatorEpoch: coordEpoch}, 0, 0)
	if err != nil {
		t.Fatalf("append %s marker of %d: %v", typ, pid, err)
	}
	return info.FirstOffset
}

func readTxnIndex(t *testing.T, fsys vfs.FS, dir string, base int64) []AbortedTxn {
	t.Helper()
	entries, err := readTxnIndexFile(fsys, dir, base)
	if err != nil {
		t.Fatalf("read .txnindex %d: %v", base, err)
	}
	return entries
}

// TestTxnLastStableOffsetAndAbortIndex walks two overlapping transactions
// through the log: the LSO stays at the oldest open one (and at a
// completed one until the high watermark passes its marker), the abort
// is indexed with Kafka's fields, the commit is not, and both survive a
// clean reopen.
func TestTxnLastStableOffsetAndAbortIndex(t *testing.T) {
	forEachFS(t, func(t *testing.T, e *logEnv) {
		l := e.open(t)
		mustAppend(t, l, testBatch{ts: 1_700_000_000_000, records: 2}.bytes()) // 0-1, plain
		if got := l.LastStableOffset(2); got != 2 || l.FirstUnstableOffset() != -1 {
			t.Fatalf("no transaction: LSO %d, first unstable %d", got, l.FirstUnstableOffset())
		}
		a := txnData(t, l, 1, 0, 0, 2) // 2-3
		b := txnData(t, l, 2, 0, 0, 1) // 4
		txnData(t, l, 1, 0, 2, 1)      // 5
		if a != 2 || b != 4 {
			t.Fatalf("offsets %d %d", a, b)
		}
		if got := l.LastStableOffset(l.LogEndOffset()); got != 2 {
			t.Fatalf("LSO with open transactions at 2 and 4: %d", got)
		}
		if got := l.LastStableOffset(1); got != 1 {
			t.Fatalf("LSO is capped by the high watermark: %d", got)
		}
		if first, ok := l.OpenTransaction(1); !ok || first != 2 {
			t.Fatalf("open transaction of 1: %d %v", first, ok)
		}
		abort := marker(t, l, 1, 0, ControlAbort, 5) // 6
		if _, ok := l.OpenTransaction(1); ok {
			t.Fatal("transaction of 1 still open after its abort")
		}
		// The marker is not below the high watermark yet: readers must
		// not pass the aborted transaction's start.
		if got := l.LastStableOffset(abort); got != 2 {
			t.Fatalf("LSO before the abort marker is replicated: %d, want 2", got)
		}
		if got := l.LastStableOffset(abort + 1); got != 4 {
			t.Fatalf("LSO after the abort is replicated: %d, want 4 (producer 2 open)", got)
		}
		commit := marker(t, l, 2, 0, ControlCommit, 5)                         // 7
		mustAppend(t, l, testBatch{ts: 1_700_000_000_000, records: 1}.bytes()) // 8
		leo := l.LogEndOffset()
		if got := l.LastStableOffset(leo); got != leo {
			t.Fatalf("LSO with every transaction over: %d, want %d", got, leo)
		}
		want := []AbortedTxn{{ProducerID: 1, FirstOffset: 2, LastOffset: abort, LastStableOffset: 4}}
		if got := l.AbortedTransactions(0, leo); !reflect.DeepEqual(got, want) {
			t.Fatalf("aborted transactions %+v, want %+v", got, want)
		}
		for _, c := range []struct{ from, upper int64 }{{0, 2}, {7, leo}, {abort + 1, commit}} {
			if got := l.AbortedTransactions(c.from, c.upper); len(got) != 0 {
				t.Fatalf("[%d, %d) overlaps no aborted transaction, got %+v", c.from, c.upper, got)
			}
		}
		if got := l.AbortedTransactions(3, 4); !reflect.DeepEqual(got, want) {
			t.Fatalf("[3, 4) inside the aborted transaction: %+v", got)
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		if got := readTxnIndex(t, e.fs, e.dir, l.Segments()[l.segmentFor(abort)].BaseOffset); !reflect.DeepEqual(got, want) {
			t.Fatalf(".txnindex holds %+v, want %+v", got, want)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l2 := e.open(t)
		if got := l2.AbortedTransactions(0, leo); !reflect.DeepEqual(got, want) {
			t.Fatalf("after reopen: %+v", got)
		}
		if got := l2.LastStableOffset(leo); got != leo {
			t.Fatalf("LSO after reopen %d", got)
		}
	})
}

// TestTxnEmptyTransactionMarker: a marker of a producer that wrote
// nothing here completes nothing and indexes nothing (Kafka's rule), but
// still moves its epochs.
func TestTxnEmptyTransactionMarker(t *testing.T) {
	e := newMemEnv()
	l := e.open(t)
	marker(t, l, 9, 4, ControlAbort, 2)
	if got := l.AbortedTransactions(0, l.LogEndOffset()); len(got) != 0 {
		t.Fatalf("empty abort indexed: %+v", got)
	}
	if _, err := l.AppendControl(9, 3, EndTxnMarker{ControlAbort, 2}, 0, 0); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("older epoch after an empty marker: %v", err)
	}
}

// TestTxnMarkerFencing: markers with an older producer epoch are
// INVALID_PRODUCER_EPOCH, with an older coordinator epoch
// TRANSACTION_COORDINATOR_FENCED; a producer in a transaction may not
// write outside it (INVALID_TXN_STATE); with transaction version 2 only a
// bumped epoch is accepted (KIP-890, KIP-1228), but for a retry of the
// last marker while no transaction is open (KAFKA-19999). Refused markers
// change nothing.
func TestTxnMarkerFencing(t *testing.T) {
	e := newMemEnv()
	l := e.open(t)
	txnData(t, l, 1, 3, 0, 1)
	if _, err := l.Append(testBatch{ts: 1_700_000_000_000, records: 1, pid: 1, epoch: 3, seq: 1}.bytes(), 0); !errors.Is(err, kerr.InvalidTxnState) {
		t.Fatalf("non-transactional write inside a transaction: %v", err)
	}
	if _, err := l.AppendControl(1, 2, EndTxnMarker{ControlCommit, 0}, 0, 0); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("marker with an older producer epoch: %v", err)
	}
	marker(t, l, 1, 3, ControlCommit, 5)
	txnData(t, l, 1, 3, 1, 1)
	leo := l.LogEndOffset()
	if _, err := l.AppendControl(1, 3, EndTxnMarker{ControlAbort, 4}, 0, 0); !errors.Is(err, kerr.TransactionCoordinatorFenced) {
		t.Fatalf("marker from an older coordinator: %v", err)
	}
	if _, err := l.AppendControl(-1, 0, EndTxnMarker{ControlAbort, 4}, 0, 0); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("marker without producer id: %v", err)
	}
	if _, err := l.AppendControl(1, 3, EndTxnMarker{ControlType(3), 4}, 0, 0); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("marker of unknown type: %v", err)
	}
	if l.LogEndOffset() != leo {
		t.Fatalf("refused markers were written: log end %d, want %d", l.LogEndOffset(), leo)
	}
	if _, ok := l.OpenTransaction(1); !ok {
		t.Fatal("a refused marker ended the transaction")
	}
	// Transaction version 2: the marker's epoch must be newer than the
	// producer's (a late marker of the same epoch is refused).
	if _, err := l.AppendControl(1, 3, EndTxnMarker{ControlAbort, 5}, 0, 2); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("transaction version 2 marker with the current epoch: %v", err)
	}
	if _, err := l.AppendControl(1, 4, EndTxnMarker{ControlAbort, 5}, 0, 2); err != nil { // epoch bumped by the coordinator
		t.Fatalf("transaction version 2 marker with a bumped epoch: %v", err)
	}
	if epoch, _, _ := l.ProducerState(1); epoch != 4 {
		t.Fatalf("epoch after a bumped marker %d", epoch)
	}
	// The same marker again, no transaction open: a retry of a marker
	// already written (a new coordinator completing the prepared
	// transaction); written, it ends nothing and indexes nothing.
	leo = l.LogEndOffset()
	aborted := l.AbortedTransactions(0, leo)
	if _, err := l.AppendControl(1, 4, EndTxnMarker{ControlAbort, 6}, 0, 2); err != nil {
		t.Fatalf("repeated transaction version 2 marker with no transaction open: %v", err)
	}
	if l.LogEndOffset() != leo+1 || !slices.Equal(l.AbortedTransactions(0, leo+1), aborted) {
		t.Fatalf("repeated marker: log end %d (want %d), aborted transactions %+v (want %+v)",
			l.LogEndOffset(), leo+1, l.AbortedTransactions(0, leo+1), aborted)
	}
	// The new epoch starts at sequence 0.
	if _, err := l.Append(testBatch{ts: 1_700_000_000_000, records: 1, pid: 1, epoch: 4, seq: 0, txn: true}.bytes(), 0); err != nil {
		t.Fatalf("first batch of the new epoch: %v", err)
	}
	// With the new epoch's transaction open, a late marker of that epoch
	// would end it: refused.
	if _, err := l.AppendControl(1, 4, EndTxnMarker{ControlAbort, 6}, 0, 2); !errors.Is(err, kerr.InvalidProducerEpoch) {
		t.Fatalf("late transaction version 2 marker with a transaction of its epoch open: %v", err)
	}
	// Control batches from producers are still refused.
	if _, err := l.Append(ControlBatch(1, 4, EndTxnMarker{ControlCommit, 5}, 0), 0); !errors.Is(err, kerr.InvalidRecord) {
		t.Fatalf("control batch from a producer: %v", err)
	}
}

// TestTxnRecoveredAfterCrash: after kill -9 (no snapshot, no checkpoint)
// and after an OS crash (only synced bytes), the open transaction, the
// LSO and the .txnindex are rebuilt from the batches; a lost or corrupt
// .txnindex is rebuilt too.
func TestTxnRecoveredAfterCrash(t *testing.T) {
	e := newMemEnv()
	e.cfg.SegmentBytes = 400
	l := e.open(t)
	var aborts []AbortedTxn
	open := int64(-1)
	for i := range 6 {
		pid := int64(10 + i)
		first := txnData(t, l, pid, 0, 0, 2)
		mustAppend(t, l, testBatch{ts: 1_700_000_000_000, records: 1, valueSize: 40}.bytes())
		if i == 5 {
			open = first // left open
			break
		}
		typ := ControlAbort
		if i%2 == 1 {
			typ = ControlCommit
		}
		m := marker(t, l, pid, 0, typ, 1)
		if typ == ControlAbort {
			aborts = append(aborts, AbortedTxn{ProducerID: pid, FirstOffset: first, LastOffset: m, LastStableOffset: m + 1})
		}
	}
	if len(l.Segments()) < 3 {
		t.Fatalf("want several segments, got %d", len(l.Segments()))
	}
	leo := l.LogEndOffset()
	check := func(t *testing.T, l *Log, what string) {
		t.Helper()
		if l.LogEndOffset() != leo {
			t.Fatalf("%s: log end %d, want %d", what, l.LogEndOffset(), leo)
		}
		if got := l.AbortedTransactions(0, leo); !reflect.DeepEqual(got, aborts) {
			t.Fatalf("%s: aborted transactions\n%+v, want\n%+v", what, got, aborts)
		}
		if got := l.LastStableOffset(leo); got != open {
			t.Fatalf("%s: LSO %d, want the open transaction at %d", what, got, open)
		}
		if first, ok := l.OpenTransaction(15); !ok || first != open {
			t.Fatalf("%s: open transaction %d %v", what, first, ok)
		}
	}
	check(t, l, "before crash")
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	l.abandon()

	// Process crash: everything written is there, nothing of Close ran.
	l2 := e.open(t)
	check(t, l2, "after kill -9")
	l2.abandon()

	// OS crash: only synced bytes (everything was flushed above).
	c := &logEnv{fs: e.mem.Crash(), dir: e.dir, clock: e.clock, cfg: e.cfg}
	l3 := c.open(t)
	check(t, l3, "after OS crash")
	if err := l3.Close(); err != nil {
		t.Fatal(err)
	}

	// A .txnindex lost or torn with an unclean checkpoint, or corrupt
	// with a clean one: rebuilt.
	var bases []int64
	for _, s := range l3.Segments() {
		if len(readTxnIndex(t, c.fs, c.dir, s.BaseOffset)) > 0 {
			bases = append(bases, s.BaseOffset)
		}
	}
	if len(bases) < 2 {
		t.Fatalf("aborts in %d segments, want at least 2", len(bases))
	}
	if err := c.fs.Remove(filepath.Join(c.dir, producerSnapshotName(leo))); err != nil {
		t.Fatal(err)
	}
	name := segmentPath(c.dir, bases[1], txnIndexSuffix)
	f, err := c.fs.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(abortedTxnSize + 3); err != nil {
		t.Fatal(err)
	}
	f.Close()
	l4 := c.open(t)
	check(t, l4, "after a torn .txnindex")
	if err := l4.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.fs.Remove(segmentPath(c.dir, bases[0], txnIndexSuffix)); err != nil {
		t.Fatal(err)
	}
	writeTestCheckpoint(t, c, false)
	l5 := c.open(t)
	check(t, l5, "after a lost .txnindex and an unclean shutdown")
}

// writeTestCheckpoint rewrites log-checkpoint with recovery point 0, so
// that the next Open recovers every segment.
func writeTestCheckpoint(t *testing.T, e *logEnv, clean bool) {
	t.Helper()
	l := &Log{fs: e.fs, dir: e.dir}
	if err := l.writeCheckpoint(checkpoint{recoveryPoint: 0, logStartOffset: 0, clean: clean}); err != nil {
		t.Fatal(err)
	}
}

// TestTxnIndexFollowsSegments: the .txnindex rolls, is searched across
// segments, is deleted with its segment by retention, and a truncation
// below an abort marker drops its entry and reopens the transaction.
func TestTxnIndexFollowsSegments(t *testing.T) {
	forEachFS(t, func(t *testing.T, e *logEnv) {
		e.cfg.SegmentBytes = 300
		l := e.open(t)
		first1 := txnData(t, l, 1, 0, 0, 1)
		first2 := txnData(t, l, 2, 0, 0, 1)
		for range 4 {
			mustAppend(t, l, testBatch{ts: 1_700_000_000_000, records: 1, valueSize: 80}.bytes())
		}
		m1 := marker(t, l, 1, 0, ControlAbort, 0)
		for range 4 {
			mustAppend(t, l, testBatch{ts: 1_700_000_000_000, records: 1, valueSize: 80}.bytes())
		}
		m2 := marker(t, l, 2, 0, ControlAbort, 0)
		mustAppend(t, l, testBatch{ts: 1_700_000_000_000, records: 1, valueSize: 80}.bytes())
		segs := l.Segments()
		if len(segs) < 3 {
			t.Fatalf("want several segments, got %d", len(segs))
		}
		want := []AbortedTxn{
			{ProducerID: 1, FirstOffset: first1, LastOffset: m1, LastStableOffset: first2},
			{ProducerID: 2, FirstOffset: first2, LastOffset: m2, LastStableOffset: m2 + 1},
		}
		leo := l.LogEndOffset()
		if got := l.AbortedTransactions(0, leo); !reflect.DeepEqual(got, want) {
			t.Fatalf("aborted %+v, want %+v", got, want)
		}
		// Fetching from offset 1 up to 2: both overlap; the first
		// entry's LSO (first2 = 1) does not reach 2, so the search goes
		// on to the second marker's segment.
		if got := l.AbortedTransactions(1, 2); !reflect.DeepEqual(got, want) {
			t.Fatalf("aborted in [1, 2): %+v", got)
		}
		// Fetching past the first marker: only the second.
		if got := l.AbortedTransactions(m1+1, leo); !reflect.DeepEqual(got, want[1:]) {
			t.Fatalf("aborted after the first marker: %+v", got)
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}

		// Truncation below the second marker: its entry goes, the
		// transaction is open again.
		if err := l.Truncate(m2); err != nil {
			t.Fatal(err)
		}
		if got := l.AbortedTransactions(0, l.LogEndOffset()); !reflect.DeepEqual(got, want[:1]) {
			t.Fatalf("after truncation: %+v", got)
		}
		if first, ok := l.OpenTransaction(2); !ok || first != first2 {
			t.Fatalf("transaction of 2 after truncation: %d %v", first, ok)
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		for _, s := range l.Segments() {
			for _, x := range readTxnIndex(t, e.fs, e.dir, s.BaseOffset) {
				if x.LastOffset >= m2 {
					t.Fatalf("truncated entry still in .txnindex %d: %+v", s.BaseOffset, x)
				}
			}
		}

		// Retention of the segment holding the first marker deletes its
		// .txnindex.
		i := l.segmentFor(m1)
		seg, next := l.Segments()[i].BaseOffset, l.Segments()[i+1].BaseOffset
		if _, err := e.fs.Stat(segmentPath(e.dir, seg, txnIndexSuffix)); err != nil {
			t.Fatalf(".txnindex of segment %d: %v", seg, err)
		}
		if _, err := l.DeleteRecordsBefore(next); err != nil {
			t.Fatal(err)
		}
		if _, err := l.EnforceRetention(); err != nil {
			t.Fatal(err)
		}
		if l.Segments()[0].BaseOffset <= seg {
			t.Fatalf("segment %d not deleted (first is %d)", seg, l.Segments()[0].BaseOffset)
		}
		names, err := e.fs.ReadDir(e.dir)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(names, filepath.Base(segmentPath(e.dir, seg, txnIndexSuffix))) {
			t.Fatalf(".txnindex of deleted segment %d left: %v", seg, names)
		}
	})
}

// TestTxnReplicatedMarkers: a follower appending the leader's batches
// (markers included, unchecked) ends with the same transactions and
// .txnindex entries.
func TestTxnReplicatedMarkers(t *testing.T) {
	e := newMemEnv()
	leader := e.open(t)
	txnData(t, leader, 1, 0, 0, 2)
	txnData(t, leader, 2, 0, 0, 1)
	marker(t, leader, 1, 0, ControlAbort, 1)
	txnData(t, leader, 3, 0, 0, 1)
	marker(t, leader, 2, 0, ControlCommit, 1)
	leo := leader.LogEndOffset()

	f := &logEnv{fs: e.fs, mem: e.mem, dir: "data/topic-0-follower", clock: e.clock, cfg: e.cfg}
	follower := f.open(t)
	for off := int64(0); off < leo; {
		fs, err := leader.Read(off, leo, 1<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, fs.Len)
		if _, err := fs.File.ReadAt(b, fs.Pos); err != nil {
			t.Fatal(err)
		}
		if _, err := follower.AppendReplicated(b); err != nil {
			t.Fatal(err)
		}
		off = fs.LastOffset + 1
	}
	if got, want := follower.AbortedTransactions(0, leo), leader.AbortedTransactions(0, leo); !reflect.DeepEqual(got, want) || len(got) != 1 {
		t.Fatalf("follower aborted %+v, leader %+v", got, want)
	}
	if got, want := follower.LastStableOffset(leo), leader.LastStableOffset(leo); got != want || got != 4 {
		t.Fatalf("follower LSO %d, leader %d, want 4", got, want)
	}
}

// TestTxnSnapshotCarriesTransactions: the producer snapshot holds each
// producer's open transaction and coordinator epoch in Kafka's fields, a
// snapshot written before transactions (-1 in both) still loads, and
// recovery from a snapshot inside a transaction finds it open.
func TestTxnSnapshotCarriesTransactions(t *testing.T) {
	p := NewProducerState()
	p.Update(BatchMeta{ProducerID: 1, ProducerEpoch: 2, FirstSeq: 0, LastSeq: 1, FirstOffset: 10, LastOffset: 11, MaxTimestamp: 5, Transactional: true})
	p.Update(BatchMeta{ProducerID: 1, ProducerEpoch: 2, FirstSeq: 2, LastSeq: 2, FirstOffset: 14, LastOffset: 14, MaxTimestamp: 6, Transactional: true})
	p.Update(BatchMeta{ProducerID: 2, ProducerEpoch: 0, FirstSeq: 0, LastSeq: 0, FirstOffset: 12, LastOffset: 12, MaxTimestamp: 5})
	p.endTxn(3, 1, EndTxnMarker{ControlCommit, 7}, 13, 5)
	buf := encodeProducerSnapshot(p)
	// Kafka's layout: the last entry of producer 1 (sorted first) holds
	// coordinatorEpoch -1 and currentTxnFirstOffset 10.
	entry := buf[producerSnapshotHeader+producerSnapshotEntrySize:]
	if ce, tf := int32(uint32(entry[34])<<24|uint32(entry[35])<<16|uint32(entry[36])<<8|uint32(entry[37])), int64(entry[45]); ce != -1 || tf != 10 {
		t.Fatalf("producer 1 snapshot entry: coordinatorEpoch %d, currentTxnFirstOffset low byte %d", ce, tf)
	}
	m, err := decodeProducerSnapshot(buf)
	if err != nil {
		t.Fatal(err)
	}
	q := NewProducerState()
	q.setProducers(m)
	if first, ok := q.OpenTxn(1); !ok || first != 10 {
		t.Fatalf("open transaction after decode: %d %v", first, ok)
	}
	if _, ok := q.OpenTxn(2); ok {
		t.Fatal("producer 2 has no transaction")
	}
	if q.producers[3].coordEpoch != 7 {
		t.Fatalf("coordinator epoch of 3: %d", q.producers[3].coordEpoch)
	}
	if got := q.lastStableOffset(100); got != 10 {
		t.Fatalf("LSO after decode %d", got)
	}

	// A pre-transactions snapshot (both fields -1).
	old := NewProducerState()
	old.Update(BatchMeta{ProducerID: 4, ProducerEpoch: 0, FirstSeq: 0, LastSeq: 0, FirstOffset: 1, LastOffset: 1})
	m, err = decodeProducerSnapshot(encodeProducerSnapshot(old))
	if err != nil {
		t.Fatal(err)
	}
	if e := m[4]; e == nil || e.txnFirst != -1 || e.coordEpoch != -1 {
		t.Fatalf("old snapshot entry %+v", e)
	}

	// In a log: a roll's snapshot inside a transaction, then a crash.
	env := newMemEnv()
	env.cfg.SegmentBytes = 200
	l := env.open(t)
	first := txnData(t, l, 7, 0, 0, 1)
	for range 5 {
		mustAppend(t, l, testBatch{ts: 1_700_000_000_000, records: 1, valueSize: 80}.bytes())
	}
	if len(l.Segments()) < 2 {
		t.Fatal("no roll")
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	l.abandon()
	l2 := env.open(t)
	if got, ok := l2.OpenTransaction(7); !ok || got != first {
		t.Fatalf("open transaction after crash: %d %v", got, ok)
	}
}

// TestExpireProducersKeepsOpenTransactions: producer.id.expiration.ms
// never drops a producer in a transaction; once it ends, it expires.
func TestExpireProducersKeepsOpenTransactions(t *testing.T) {
	e := newMemEnv()
	l := e.open(t)
	txnData(t, l, 1, 0, 0, 1)
	mustAppend(t, l, testBatch{ts: 1_700_000_000_000, records: 1, pid: 2, seq: 0}.bytes())
	e.clock.Add(48 * time.Hour)
	l.ExpireProducers(86400000)
	if _, _, ok := l.ProducerState(2); ok {
		t.Fatal("idle producer without a transaction not expired")
	}
	if _, ok := l.OpenTransaction(1); !ok {
		t.Fatal("producer with an open transaction expired")
	}
	if got := l.LastStableOffset(l.LogEndOffset()); got != 0 {
		t.Fatalf("LSO after expiry %d, want 0", got)
	}
	want := []ProducerInfo{{ProducerID: 1, ProducerEpoch: 0, LastSequence: 0, LastTimestamp: 1_700_000_000_000,
		CoordinatorEpoch: -1, CurrentTxnStartOffset: 0}}
	if got := l.Producers(); !reflect.DeepEqual(got, want) {
		t.Fatalf("producers %+v, want %+v", got, want)
	}
	marker(t, l, 1, 0, ControlCommit, 3)
	want[0].CoordinatorEpoch, want[0].CurrentTxnStartOffset, want[0].LastTimestamp = 3, -1, e.clock.Ms()
	if got := l.Producers(); !reflect.DeepEqual(got, want) {
		t.Fatalf("producers after the commit %+v, want %+v", got, want)
	}
	e.clock.Add(48 * time.Hour)
	l.ExpireProducers(86400000)
	if _, _, ok := l.ProducerState(1); ok {
		t.Fatal("producer not expired after its transaction ended")
	}
}

// TestCleanKeepsTxnIndex: a cleaned segment keeps the aborted
// transactions of the segments it replaces, in its .txnindex, through a
// clean restart and an OS crash.
func TestCleanKeepsTxnIndex(t *testing.T) {
	e := compactEnv()
	l := e.open(t)
	var want []AbortedTxn
	for i := range 3 {
		pid := int64(i + 1)
		info := mustAppend(t, l, kvBatchSpec{recs: kvs("k1", "aborted", "k2", "aborted"), ts: e.clock.Ms(), pid: pid, txn: true}.bytes(t))
		fillKeys(t, l, e, 10, 0)
		m := marker(t, l, pid, 0, ControlAbort, 0)
		want = append(want, AbortedTxn{ProducerID: pid, FirstOffset: info.FirstOffset, LastOffset: m, LastStableOffset: m + 1})
		fillKeys(t, l, e, 10, 0)
	}
	fillKeys(t, l, e, 30, 0)
	leo := l.LogEndOffset()
	if got := l.AbortedTransactions(0, leo); !reflect.DeepEqual(got, want) {
		t.Fatalf("before cleaning %+v, want %+v", got, want)
	}
	st, err := l.Clean()
	if err != nil {
		t.Fatal(err)
	}
	if !st.Cleaned || st.SegmentsCleaned < 2 {
		t.Fatalf("stats %+v", st)
	}
	if got := l.AbortedTransactions(0, leo); !reflect.DeepEqual(got, want) {
		t.Fatalf("after cleaning %+v, want %+v", got, want)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	crashed := &logEnv{fs: e.mem.Crash(), dir: e.dir, clock: e.clock, cfg: e.cfg}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, env := range []*logEnv{crashed, e} {
		l2 := env.open(t)
		if got := l2.AbortedTransactions(0, leo); !reflect.DeepEqual(got, want) {
			t.Fatalf("after reopen %+v, want %+v", got, want)
		}
		l2.Close()
	}
}

// TestCleanStopsAtOpenTransaction: the cleaner never cleans at or past
// the first offset of an unfinished transaction (Kafka's first
// uncleanable offset); once it ends, the rest is cleaned.
func TestCleanStopsAtOpenTransaction(t *testing.T) {
	e := compactEnv()
	l := e.open(t)
	fillKeys(t, l, e, 20, 0)
	open := mustAppend(t, l, kvBatchSpec{recs: kvs("k1", "open"), ts: e.clock.Ms(), pid: 1, txn: true}.bytes(t)).FirstOffset
	fillKeys(t, l, e, 60, 0)
	st, err := l.Clean()
	if err != nil {
		t.Fatal(err)
	}
	if st.Cleaned && st.EndOffset > open {
		t.Fatalf("cleaned up to %d, past the open transaction at %d", st.EndOffset, open)
	}
	marker(t, l, 1, 0, ControlCommit, 0)
	fillKeys(t, l, e, 20, 0)
	if st, err = l.Clean(); err != nil {
		t.Fatal(err)
	}
	if !st.Cleaned || st.EndOffset <= open {
		t.Fatalf("after the commit: %+v, want cleaning past %d", st, open)
	}
}

// TestTxnTornCrash: after OS crashes that keep a random part of the
// unsynced tail, the recovered log's transactions match its batches: a
// transaction whose marker survived is over (indexed if aborted), one
// whose marker was lost is open again and holds the LSO.
func TestTxnTornCrash(t *testing.T) {
	type txn struct {
		pid         int64
		first, mark int64
		abort       bool
	}
	for seed := uint64(1); seed <= 20; seed++ {
		e := newMemEnv()
		e.cfg.SegmentBytes = 600
		l := e.open(t)
		var txns []txn
		for i := range 16 {
			if i == 8 {
				if err := l.Flush(); err != nil {
					t.Fatal(err)
				}
			}
			pid := int64(100 + i)
			x := txn{pid: pid, first: txnData(t, l, pid, 0, 0, 2), abort: i%3 != 0}
			mustAppend(t, l, testBatch{ts: 1_700_000_000_000, records: 1, valueSize: 30}.bytes())
			typ := ControlCommit
			if x.abort {
				typ = ControlAbort
			}
			x.mark = marker(t, l, pid, 0, typ, 0)
			txns = append(txns, x)
		}
		l.abandon()
		c := &logEnv{fs: e.mem.CrashTorn(seed), dir: e.dir, clock: e.clock, cfg: e.cfg}
		l2 := c.open(t)
		leo := l2.LogEndOffset()
		var want []AbortedTxn
		lso := leo
		for _, x := range txns {
			switch {
			case x.mark < leo && x.abort:
				want = append(want, AbortedTxn{ProducerID: x.pid, FirstOffset: x.first, LastOffset: x.mark, LastStableOffset: x.mark + 1})
			case x.mark >= leo && x.first < leo:
				lso = min(lso, x.first)
			}
		}
		if got := l2.AbortedTransactions(0, leo); !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d (log end %d): aborted %+v, want %+v", seed, leo, got, want)
		}
		if got := l2.LastStableOffset(leo); got != lso {
			t.Fatalf("seed %d (log end %d): LSO %d, want %d", seed, leo, got, lso)
		}
		l2.Close()
	}
}

// TestTxnCarriedByReset: a follower restarting at its leader's local log
// start (ResetTo with the leader's producer snapshot, a tail-only move)
// knows the transaction open there, and ends it with the leader's marker.
func TestTxnCarriedByReset(t *testing.T) {
	e := newMemEnv()
	e.cfg.SegmentBytes = 300
	leader := e.open(t)
	first := txnData(t, leader, 5, 1, 0, 1)
	for range 4 {
		mustAppend(t, leader, testBatch{ts: 1_700_000_000_000, records: 1, valueSize: 80}.bytes())
	}
	segs := leader.Segments()
	if len(segs) < 2 {
		t.Fatal("no roll")
	}
	at := segs[len(segs)-1].BaseOffset
	snap, err := psReadFile(e.fs, filepath.Join(e.dir, producerSnapshotName(at)))
	if err != nil {
		t.Fatal(err)
	}
	mark := marker(t, leader, 5, 1, ControlAbort, 2)

	f := &logEnv{fs: e.fs, mem: e.mem, dir: "data/topic-0-follower", clock: e.clock, cfg: e.cfg}
	follower := f.open(t)
	if err := follower.ResetTo(Reset{Offset: at, ProducerSnapshot: snap}); err != nil {
		t.Fatal(err)
	}
	if got, ok := follower.OpenTransaction(5); !ok || got != first {
		t.Fatalf("open transaction after reset: %d %v, want %d", got, ok, first)
	}
	if got := follower.LastStableOffset(at); got != first {
		t.Fatalf("LSO after reset %d, want %d", got, first)
	}
	for off := at; off < leader.LogEndOffset(); {
		fs, err := leader.Read(off, leader.LogEndOffset(), 1<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, fs.Len)
		if _, err := fs.File.ReadAt(b, fs.Pos); err != nil {
			t.Fatal(err)
		}
		if _, err := follower.AppendReplicated(b); err != nil {
			t.Fatal(err)
		}
		off = fs.LastOffset + 1
	}
	want := []AbortedTxn{{ProducerID: 5, FirstOffset: first, LastOffset: mark, LastStableOffset: mark + 1}}
	if got := follower.AbortedTransactions(at, follower.LogEndOffset()); !reflect.DeepEqual(got, want) {
		t.Fatalf("follower aborted %+v, want %+v", got, want)
	}
}
