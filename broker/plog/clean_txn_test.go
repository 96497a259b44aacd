package plog

import (
	"bytes"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/vfs"
)

// txnEnv is a compacted log where every Clean with new sealed data runs a
// pass.
func txnEnv() *logEnv {
	e := compactEnv()
	e.cfg.MinCleanableDirtyRatio = 0
	e.cfg.DeleteRetentionMs = 3_600_000
	return e
}

// txnKV appends a transactional batch of keyed records for pid.
func txnKV(t *testing.T, l *Log, e *logEnv, pid int64, epoch int16, seq int32, pairs ...string) AppendInfo {
	t.Helper()
	return mustAppend(t, l, kvBatchSpec{recs: kvs(pairs...), ts: e.clock.Ms(), pid: pid, epoch: epoch, seq: seq, txn: true}.bytes(t))
}

// committedView is what a read_committed consumer replaying the whole log
// ends with: each key's last committed value, with the records of the
// aborted transactions the log reports (AbortedTransactions) dropped and
// control batches skipped, as Kafka's consumer does.
func committedView(t *testing.T, l *Log) map[string]string {
	t.Helper()
	return committedViewBelow(t, l, l.LogEndOffset())
}

// committedViewBelow is committedView of the batches below limit (a
// read_committed consumer reads below the last stable offset).
func committedViewBelow(t *testing.T, l *Log, limit int64) map[string]string {
	t.Helper()
	aborted := l.AbortedTransactions(l.LogStartOffset(), l.LogEndOffset())
	isAborted := func(pid, off int64) bool {
		for _, a := range aborted {
			if a.ProducerID == pid && a.FirstOffset <= off && off < a.LastOffset {
				return true
			}
		}
		return false
	}
	var kept []gotBatch
	for _, b := range readBatchesKV(t, l) {
		if b.h.BaseOffset >= limit || b.h.isControl() || (b.h.isTransactional() && isAborted(b.h.ProducerID, b.h.BaseOffset)) {
			continue
		}
		kept = append(kept, b)
	}
	return latestByKey(kept)
}

// valuesOf lists every value of key in the log, in offset order.
func valuesOf(t *testing.T, l *Log, key string) []string {
	t.Helper()
	var out []string
	for _, b := range readBatchesKV(t, l) {
		if b.h.isControl() {
			continue
		}
		for _, r := range b.recs {
			if string(r.key) == key {
				out = append(out, string(r.value))
			}
		}
	}
	return out
}

// markerAt returns the batch at offset, if any.
func batchAt(t *testing.T, l *Log, off int64) (gotBatch, bool) {
	t.Helper()
	for _, b := range readBatchesKV(t, l) {
		if b.h.BaseOffset <= off && off <= b.h.lastOffset() {
			return b, true
		}
	}
	return gotBatch{}, false
}

func mustClean(t *testing.T, l *Log) CleanStats {
	t.Helper()
	st, err := l.Clean()
	if err != nil {
		t.Fatal(err)
	}
	if !st.Cleaned {
		t.Fatalf("no pass ran: %+v", st)
	}
	return st
}

// checkTxnIndexFiles checks that every segment's .txnindex file holds
// exactly the entries the log serves from memory.
func checkTxnIndexFiles(t *testing.T, e *logEnv, l *Log) {
	t.Helper()
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	var fromFiles []AbortedTxn
	for _, s := range l.Segments() {
		fromFiles = append(fromFiles, readTxnIndex(t, e.fs, e.dir, s.BaseOffset)...)
	}
	mem := l.AbortedTransactions(l.LogStartOffset(), l.LogEndOffset())
	if len(fromFiles) != len(mem) || (len(mem) > 0 && !reflect.DeepEqual(fromFiles, mem)) {
		t.Fatalf(".txnindex files hold %+v, the log serves %+v", fromFiles, mem)
	}
}

// forgetState removes the producer snapshots and the log checkpoint of a
// closed log, so that the next Open recovers every segment: it replays
// the whole log into producer state and rebuilds every .txnindex.
func forgetState(t *testing.T, e *logEnv) {
	t.Helper()
	names, err := e.fs.ReadDir(e.dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if strings.HasSuffix(n, ".snapshot") || n == checkpointName {
			if err := e.fs.Remove(filepath.Join(e.dir, n)); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// TestCleanAbortedNewestKeepsCommitted is the __consumer_offsets case: a
// group's committed offset, then a transactional offset commit for the
// same key that is aborted. The aborted record is the newest for its key,
// but it must not shadow the committed one: after cleaning, and after a
// reopen that replays the log, a read_committed replay finds the
// committed value, and the aborted record is gone.
func TestCleanAbortedNewestKeepsCommitted(t *testing.T) {
	for _, codec := range []kgo.CompressionCodecType{kgo.CodecNone, kgo.CodecZstd} {
		t.Run(fmt.Sprint(codec), func(t *testing.T) {
			e := txnEnv()
			l := e.open(t)
			const key = "offset:group/topic/0"
			mustAppend(t, l, kvBatchSpec{recs: kvs(key, "committed-41"), ts: e.clock.Ms(), codec: codec}.bytes(t))
			// A transactional commit of the same key, committed, then an
			// aborted one; the producer writes again afterwards, so the
			// aborted batch is not its last.
			txnKV(t, l, e, 5, 0, 0, key, "committed-42")
			marker(t, l, 5, 0, ControlCommit, 0)
			mustAppend(t, l, kvBatchSpec{recs: kvs(key, "aborted-43", "other", "aborted"), ts: e.clock.Ms(), codec: codec, pid: 5, seq: 1, txn: true}.bytes(t))
			abortAt := marker(t, l, 5, 0, ControlAbort, 0)
			txnKV(t, l, e, 5, 0, 3, "later", "x")
			marker(t, l, 5, 0, ControlCommit, 0)
			fillKeys(t, l, e, 60, codec)
			if got := committedView(t, l)[key]; got == "" || !bytes.HasPrefix([]byte(got), []byte("committed-42@")) {
				t.Fatalf("before cleaning the committed view has %q", got)
			}
			mustClean(t, l)
			if got := valuesOf(t, l, key); !reflect.DeepEqual(got, []string{"committed-42"}) {
				t.Fatalf("values of the key after cleaning: %q, want only the committed one", got)
			}
			if got := valuesOf(t, l, "other"); len(got) != 0 {
				t.Fatalf("aborted record of key other kept: %q", got)
			}
			// The ABORT marker stays (the transaction had data in this
			// pass) with its index entry.
			if b, ok := batchAt(t, l, abortAt); !ok || !b.h.isControl() || len(b.recs) != 1 {
				t.Fatalf("abort marker at %d: %+v %v", abortAt, b.h, ok)
			}
			want := committedView(t, l)
			if !bytes.HasPrefix([]byte(want[key]), []byte("committed-42@")) {
				t.Fatalf("after cleaning the committed view has %q", want[key])
			}
			checkTxnIndexFiles(t, e, l)
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			// A reopen that recovers (replays) every segment.
			for _, replay := range []bool{false, true} {
				if replay {
					forgetState(t, e)
				}
				l2 := e.open(t)
				if got := committedView(t, l2); !reflect.DeepEqual(got, want) {
					t.Fatalf("after reopen the committed view is %v, want %v", got, want)
				}
				if lso := l2.LastStableOffset(l2.LogEndOffset()); lso != l2.LogEndOffset() {
					t.Fatalf("a transaction hangs after reopen: LSO %d, log end %d", lso, l2.LogEndOffset())
				}
				checkTxnIndexFiles(t, e, l2)
				l2.Close()
			}
		})
	}
}

// TestCleanTxnMarkers walks an aborted transaction's marker through
// Kafka's passes: kept while the pass read data of its transaction (with
// its .txnindex entry), then given a delete horizon once nothing of the
// transaction is left (its index entry gone), then removed after
// delete.retention.ms. A COMMIT marker whose records stay is kept.
func TestCleanTxnMarkers(t *testing.T) {
	e := txnEnv()
	l := e.open(t)
	fillKeys(t, l, e, 5, kgo.CodecNone)
	ab := txnKV(t, l, e, 1, 0, 0, "a1", "aborted", "a2", "aborted")
	abortAt := marker(t, l, 1, 0, ControlAbort, 0)
	txnKV(t, l, e, 1, 0, 2, "c1", "committed")
	commitAt := marker(t, l, 1, 0, ControlCommit, 0)
	fillKeys(t, l, e, 60, kgo.CodecNone)
	entry := AbortedTxn{ProducerID: 1, FirstOffset: ab.FirstOffset, LastOffset: abortAt, LastStableOffset: abortAt + 1}
	if got := l.AbortedTransactions(0, l.LogEndOffset()); !reflect.DeepEqual(got, []AbortedTxn{entry}) {
		t.Fatalf("before cleaning: %+v", got)
	}

	// Pass 1: the aborted records go, the marker and its entry stay.
	mustClean(t, l)
	if b, ok := batchAt(t, l, ab.FirstOffset); ok {
		t.Fatalf("aborted batch still there: %+v", b.h)
	}
	m, ok := batchAt(t, l, abortAt)
	if !ok || len(m.recs) != 1 || m.h.Attributes&attrDeleteHorizon != 0 {
		t.Fatalf("pass 1: abort marker %+v %v, want it whole without a delete horizon", m.h, ok)
	}
	if got := l.AbortedTransactions(0, l.LogEndOffset()); !reflect.DeepEqual(got, []AbortedTxn{entry}) {
		t.Fatalf("pass 1: aborted transactions %+v", got)
	}
	checkTxnIndexFiles(t, e, l)

	// Pass 2: nothing of the transaction is left: the marker gets a
	// delete horizon, and its entry leaves the index.
	fillKeys(t, l, e, 30, kgo.CodecNone)
	mustClean(t, l)
	m, ok = batchAt(t, l, abortAt)
	if !ok || len(m.recs) != 1 || m.h.Attributes&attrDeleteHorizon == 0 || m.h.BaseTimestamp != e.clock.Ms()+e.cfg.DeleteRetentionMs {
		t.Fatalf("pass 2: abort marker %+v %v, want a delete horizon of now + delete.retention.ms", m.h, ok)
	}
	if mk, err := DecodeEndTxnMarker(m.recs[0].key, m.recs[0].value); err != nil || mk.Type != ControlAbort {
		t.Fatalf("pass 2: rebuilt marker %+v %v", mk, err)
	}
	if got := l.AbortedTransactions(0, l.LogEndOffset()); len(got) != 0 {
		t.Fatalf("pass 2: aborted transactions %+v, want none", got)
	}
	checkTxnIndexFiles(t, e, l)

	// Pass 3, inside delete.retention.ms: still there.
	e.clock.Add(30 * time.Minute)
	fillKeys(t, l, e, 30, kgo.CodecNone)
	mustClean(t, l)
	if _, ok := batchAt(t, l, abortAt); !ok {
		t.Fatal("abort marker removed before its delete horizon")
	}
	// Pass 4, past it: gone. The COMMIT marker, whose record c1 stays,
	// is kept throughout.
	e.clock.Add(31 * time.Minute)
	fillKeys(t, l, e, 30, kgo.CodecNone)
	mustClean(t, l)
	if b, ok := batchAt(t, l, abortAt); ok {
		t.Fatalf("abort marker kept past its delete horizon: %+v", b.h)
	}
	c, ok := batchAt(t, l, commitAt)
	if !ok || !c.h.isControl() || len(c.recs) != 1 || c.h.Attributes&attrDeleteHorizon != 0 {
		t.Fatalf("commit marker %+v %v, want it whole", c.h, ok)
	}
	if got := valuesOf(t, l, "c1"); !reflect.DeepEqual(got, []string{"committed"}) {
		t.Fatalf("committed record: %q", got)
	}
	checkTxnIndexFiles(t, e, l)
}

// TestCleanEmptyCommitMarker: the COMMIT marker of a transaction whose
// records were all compacted away goes too, after delete.retention.ms.
func TestCleanEmptyCommitMarker(t *testing.T) {
	e := txnEnv()
	l := e.open(t)
	txnKV(t, l, e, 2, 0, 0, "k", "old")
	commitAt := marker(t, l, 2, 0, ControlCommit, 0)
	// The producer's next transaction overwrites its key.
	txnKV(t, l, e, 2, 0, 1, "k", "new")
	marker(t, l, 2, 0, ControlCommit, 0)
	fillKeys(t, l, e, 60, kgo.CodecNone)
	mustClean(t, l) // the old record goes; the marker saw it this pass
	if got := valuesOf(t, l, "k"); !reflect.DeepEqual(got, []string{"new"}) {
		t.Fatalf("committed transactional records not deduplicated: %q", got)
	}
	if b, ok := batchAt(t, l, commitAt); !ok || b.h.Attributes&attrDeleteHorizon != 0 {
		t.Fatalf("pass 1: commit marker %+v %v", b.h, ok)
	}
	fillKeys(t, l, e, 30, kgo.CodecNone)
	mustClean(t, l)
	if b, ok := batchAt(t, l, commitAt); !ok || b.h.Attributes&attrDeleteHorizon == 0 {
		t.Fatalf("pass 2: commit marker %+v %v, want a delete horizon", b.h, ok)
	}
	e.clock.Add(2 * time.Hour)
	fillKeys(t, l, e, 30, kgo.CodecNone)
	mustClean(t, l)
	if b, ok := batchAt(t, l, commitAt); ok {
		t.Fatalf("empty transaction's commit marker kept past its horizon: %+v", b.h)
	}
	if got := committedView(t, l)["k"]; !bytes.HasPrefix([]byte(got), []byte("new@")) {
		t.Fatalf("committed view of k: %q", got)
	}
}

// TestCleanAbortedKeepsProducerState: an aborted batch that holds its
// producer's last sequence stays as a header-only batch, and so its
// ABORT marker and index entry stay; a marker that is its producer's last
// write (transaction version 2 bumps the epoch at the marker) stays
// header-only past its delete horizon. After a reopen that replays the
// log no transaction hangs and the producers' epochs and sequences are
// as they were.
func TestCleanAbortedKeepsProducerState(t *testing.T) {
	e := txnEnv()
	l := e.open(t)
	ab := txnKV(t, l, e, 3, 0, 0, "p3", "aborted", "q3", "aborted")
	abortAt := marker(t, l, 3, 0, ControlAbort, 0)
	// Producer 4, transaction version 2: the ABORT marker has the next
	// epoch, so its data is no longer its producer's last write.
	txnKV(t, l, e, 4, 0, 0, "p4", "aborted")
	info, err := l.AppendControl(4, 1, EndTxnMarker{Type: ControlAbort}, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	abort4 := info.FirstOffset
	fillKeys(t, l, e, 60, kgo.CodecNone)
	mustClean(t, l)
	b, ok := batchAt(t, l, ab.FirstOffset)
	if !ok || len(b.recs) != 0 || b.h.lastOffset() != ab.LastOffset || b.h.BaseSequence != 0 || b.h.ProducerID != 3 || !b.h.isTransactional() {
		t.Fatalf("producer 3's last batch: %+v %v, want it header-only", b.h, ok)
	}
	entry := AbortedTxn{ProducerID: 3, FirstOffset: ab.FirstOffset, LastOffset: abortAt, LastStableOffset: abortAt + 1}
	if got := l.AbortedTransactions(0, l.LogEndOffset()); len(got) == 0 || got[0] != entry {
		t.Fatalf("aborted transactions %+v, want %+v first", got, entry)
	}
	for range 2 {
		e.clock.Add(2 * time.Hour)
		fillKeys(t, l, e, 30, kgo.CodecNone)
		mustClean(t, l)
	}
	if got := l.AbortedTransactions(0, l.LogEndOffset()); !reflect.DeepEqual(got, []AbortedTxn{entry}) {
		t.Fatalf("aborted transactions %+v, want only %+v", got, entry)
	}
	m, ok := batchAt(t, l, abort4)
	if !ok || !m.h.isControl() || len(m.recs) != 0 || m.h.ProducerEpoch != 1 {
		t.Fatalf("producer 4's last marker: %+v %v, want it header-only", m.h, ok)
	}
	if valuesOf(t, l, "p4") != nil || valuesOf(t, l, "p3") != nil {
		t.Fatal("aborted records kept")
	}
	checkTxnIndexFiles(t, e, l)
	wantProducers := l.Producers()
	leo := l.LogEndOffset()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	for _, replay := range []bool{false, true} {
		if replay {
			forgetState(t, e)
		}
		l2 := e.open(t)
		if lso := l2.LastStableOffset(leo); lso != leo || l2.FirstUnstableOffset() != -1 {
			t.Fatalf("after reopen: LSO %d (log end %d), first unstable %d", lso, leo, l2.FirstUnstableOffset())
		}
		if got := l2.AbortedTransactions(0, leo); !reflect.DeepEqual(got, []AbortedTxn{entry}) {
			t.Fatalf("after reopen: aborted transactions %+v", got)
		}
		checkTxnIndexFiles(t, e, l2)
		for _, p := range wantProducers {
			epoch, seq, ok := l2.ProducerState(p.ProducerID)
			if !ok || epoch != p.ProducerEpoch || seq != p.LastSequence {
				t.Fatalf("after reopen: producer %d epoch %d seq %d (%v), want %+v", p.ProducerID, epoch, seq, ok, p)
			}
		}
		l2.Close()
	}
}

// TestCleanLeavesOpenTransaction: records at or after the last stable
// offset are never rewritten: an open transaction's batches, and an
// aborted transaction that ended after it began, stay byte for byte, and
// the segment holding the first unstable offset is not cleaned.
func TestCleanLeavesOpenTransaction(t *testing.T) {
	e := txnEnv()
	l := e.open(t)
	fillKeys(t, l, e, 40, kgo.CodecNone)
	open := txnKV(t, l, e, 8, 0, 0, "o1", "open", "o2", "open").FirstOffset
	txnKV(t, l, e, 9, 0, 0, "o1", "aborted-later")
	marker(t, l, 9, 0, ControlAbort, 0)
	fillKeys(t, l, e, 60, kgo.CodecNone)
	before := readBatchesKV(t, l)
	var floor int64
	for _, s := range l.Segments() {
		if s.BaseOffset <= open {
			floor = s.BaseOffset
		}
	}
	st := mustClean(t, l)
	if st.EndOffset > floor {
		t.Fatalf("cleaned to %d, past the base %d of the segment holding the open transaction at %d", st.EndOffset, floor, open)
	}
	after := readBatchesKV(t, l)
	var b1, b2 []gotBatch
	for _, b := range before {
		if b.h.BaseOffset >= floor {
			b1 = append(b1, b)
		}
	}
	for _, b := range after {
		if b.h.BaseOffset >= floor {
			b2 = append(b2, b)
		}
	}
	if !reflect.DeepEqual(b1, b2) {
		t.Fatalf("batches from %d changed by cleaning (%d before, %d after)", floor, len(b1), len(b2))
	}
	if got := valuesOf(t, l, "o2"); !reflect.DeepEqual(got, []string{"open"}) {
		t.Fatalf("open transaction's record: %q", got)
	}
	if len(l.AbortedTransactions(0, l.LogEndOffset())) != 1 {
		t.Fatal("aborted transaction above the LSO lost its index entry")
	}
	// Once the transaction commits, it is compacted like any other.
	marker(t, l, 8, 0, ControlCommit, 0)
	fillKeys(t, l, e, 60, kgo.CodecNone)
	mustClean(t, l)
	if got := valuesOf(t, l, "o1"); !reflect.DeepEqual(got, []string{"open"}) {
		t.Fatalf("key o1 after the commit: %q, want the committed record only", got)
	}
	if got := committedView(t, l)["o2"]; !bytes.HasPrefix([]byte(got), []byte("open@")) {
		t.Fatalf("committed o2: %q", got)
	}
	checkTxnIndexFiles(t, e, l)
}

// TestCleanTxnModel runs random workloads of plain writes and of
// transactions (committed and aborted, with transaction versions 0 and
// 2) interleaved across producers, cleaning between them as time passes.
// A read_committed replay of the log must always show, for every key,
// the value of its newest committed record; once everything ended and
// was cleaned, no aborted record is left, and a reopen that replays the
// whole log finds the same committed view, no transaction left open, and
// .txnindex files matching the log.
func TestCleanTxnModel(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 26))
			e := txnEnv()
			e.cfg.SegmentBytes = 900 + int64(rng.IntN(1200))
			l := e.open(t)
			type rec struct {
				off   int64
				value string
			}
			type krec struct {
				key string
				rec
			}
			type producer struct {
				pid     int64
				epoch   int16
				seq     int32
				open    bool
				pending []krec
			}
			committed := map[string][]rec{} // every committed record per key
			apply := func(k string, r rec) { committed[k] = append(committed[k], r) }
			var abortedValues []string
			ps := []*producer{{pid: 21}, {pid: 22}, {pid: 23}}
			// check compares what a read_committed replay sees below the
			// last stable offset with the newest committed record of
			// each key there.
			check := func(when string) {
				t.Helper()
				lso := l.LastStableOffset(l.LogEndOffset())
				want := map[string]rec{}
				for k, rs := range committed {
					for _, r := range rs {
						if cur, ok := want[k]; r.off < lso && (!ok || r.off > cur.off) {
							want[k] = r
						}
					}
				}
				got := committedViewBelow(t, l, lso)
				for k, r := range want {
					if g := got[k]; g != fmt.Sprintf("%s@%d", r.value, r.off) {
						logBatches(t, l)
						t.Fatalf("%s: key %s is %q, want %s@%d", when, k, g, r.value, r.off)
					}
				}
				if len(got) != len(want) {
					logBatches(t, l)
					t.Log(got, want)
					t.Fatalf("%s: %d keys, want %d", when, len(got), len(want))
				}
			}
			end := func(p *producer, abort bool) {
				typ, tv, epoch := ControlCommit, int16(0), p.epoch
				if abort {
					typ = ControlAbort
				}
				if rng.IntN(2) == 0 { // transaction version 2 bumps the epoch
					tv, epoch = 2, p.epoch+1
				}
				if _, err := l.AppendControl(p.pid, epoch, EndTxnMarker{Type: typ}, 0, tv); err != nil {
					t.Fatal(err)
				}
				if epoch != p.epoch {
					p.epoch, p.seq = epoch, 0
				}
				for _, r := range p.pending {
					if abort {
						abortedValues = append(abortedValues, r.value)
					} else {
						apply(r.key, r.rec)
					}
				}
				p.open, p.pending = false, nil
			}
			for step := range 300 {
				key := fmt.Sprintf("key%d", rng.IntN(12))
				value := fmt.Sprintf("s%d-%d", seed, step)
				switch x := rng.IntN(10); {
				case x < 3:
					info := mustAppend(t, l, kvBatchSpec{recs: kvs(key, value), ts: e.clock.Ms()}.bytes(t))
					apply(key, rec{info.FirstOffset, value})
				case x < 7:
					p := ps[rng.IntN(len(ps))]
					key2 := fmt.Sprintf("key%d", rng.IntN(12))
					info := txnKV(t, l, e, p.pid, p.epoch, p.seq, key, value, key2, value+"b")
					p.seq += 2
					p.open = true
					p.pending = append(p.pending, krec{key, rec{info.FirstOffset, value}}, krec{key2, rec{info.FirstOffset + 1, value + "b"}})
				default:
					if p := ps[rng.IntN(len(ps))]; p.open {
						end(p, rng.IntN(2) == 0)
					}
				}
				if step%25 == 24 {
					e.clock.Add(time.Duration(rng.IntN(40)) * time.Minute)
					if _, err := l.Clean(); err != nil {
						t.Fatal(err)
					}
					check(fmt.Sprintf("step %d", step))
				}
			}
			for _, p := range ps {
				if p.open {
					end(p, rng.IntN(2) == 0)
				}
			}
			for range 4 {
				fillUnique(t, l, e, 40)
				e.clock.Add(time.Hour)
				if _, err := l.Clean(); err != nil {
					t.Fatal(err)
				}
			}
			// fillUnique's keys join the view: add them.
			for _, b := range readBatchesKV(t, l) {
				for _, r := range b.recs {
					if bytes.HasPrefix(r.key, []byte("u")) {
						apply(string(r.key), rec{r.offset, string(r.value)})
					}
				}
			}
			check("after the last passes")
			for _, v := range abortedValues {
				for _, b := range readBatchesKV(t, l) {
					for _, r := range b.recs {
						if string(r.value) == v && !b.h.isControl() {
							t.Fatalf("aborted record %q kept at %d", v, r.offset)
						}
					}
				}
			}
			checkTxnIndexFiles(t, e, l)
			leo := l.LogEndOffset()
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			forgetState(t, e)
			l = e.open(t)
			defer l.Close()
			if lso := l.LastStableOffset(leo); lso != leo || l.FirstUnstableOffset() != -1 {
				t.Fatalf("after replay: LSO %d (log end %d), first unstable %d", lso, leo, l.FirstUnstableOffset())
			}
			check("after a reopen that replays the log")
			checkTxnIndexFiles(t, e, l)
			for _, p := range ps {
				if epoch, _, ok := l.ProducerState(p.pid); ok && epoch != p.epoch {
					t.Fatalf("producer %d has epoch %d after replay, want %d", p.pid, epoch, p.epoch)
				}
			}
		})
	}
}

// logBatches logs every batch of l, its aborted transactions and
// segments: what a failing model check needs to be understood.
func logBatches(t *testing.T, l *Log) {
	t.Helper()
	for _, b := range readBatchesKV(t, l) {
		s := fmt.Sprintf("%d-%d pid=%d ep=%d txn=%v ctl=%v n=%d:", b.h.BaseOffset, b.h.lastOffset(), b.h.ProducerID, b.h.ProducerEpoch, b.h.isTransactional(), b.h.isControl(), b.h.RecordCount)
		for _, r := range b.recs {
			s += fmt.Sprintf(" %s=%s", r.key, r.value)
		}
		t.Log(s)
	}
	t.Logf("aborted %+v lso %d", l.AbortedTransactions(0, l.LogEndOffset()), l.LastStableOffset(l.LogEndOffset()))
	for _, s := range l.Segments() {
		t.Logf("seg %+v", s)
	}
}

// FuzzCleanTxnBatch: the cleaner's reading of a stored transactional or
// control batch, whatever its records section holds, never panics; an
// aborted transaction's data batch is never kept with records, and a
// control batch it rebuilds (to give it a delete horizon) is whole and
// keeps its records.
func FuzzCleanTxnBatch(f *testing.F) {
	marker := ControlBatch(7, 0, EndTxnMarker{Type: ControlAbort}, 1000)
	f.Add(marker[batchHeaderSize:], int32(1), true, false)
	f.Add(ControlBatch(7, 0, EndTxnMarker{Type: ControlCommit, CoordinatorEpoch: 3}, 1000)[batchHeaderSize:], int32(1), true, true)
	f.Add(withLen(rawRec{key: []byte("a"), value: []byte("1")}.body()), int32(1), false, true)
	f.Add([]byte{}, int32(0), true, false)
	f.Fuzz(func(t *testing.T, records []byte, count int32, control, aborted bool) {
		attrs := int16(attrTransactional)
		if control {
			attrs |= attrControl
		}
		b := frame(records, count, attrs, 1000, 0, 7, 0)
		var txns []AbortedTxn
		if aborted {
			txns = []AbortedTxn{{ProducerID: 7, FirstOffset: 0, LastOffset: 10}}
		}
		c := &cleaner{l: &Log{logger: slog.New(slog.DiscardHandler)}, cfg: &Config{DeleteRetentionMs: 100}, now: 5000,
			offsets: offsetMap{m: map[[16]byte]int64{}, latest: 1}, txns: newCleanTxns(txns), upper: 100}
		out, err := c.filterBatch(b)
		if err != nil || out == nil {
			return
		}
		h := parseHeader(out)
		if aborted && !control && h.RecordCount != 0 {
			t.Fatalf("aborted batch kept with %d records", h.RecordCount)
		}
		if !control || bytes.Equal(out, b) || h.RecordCount == 0 {
			return
		}
		if _, err := checkFrame(out); err != nil {
			t.Fatalf("rebuilt control batch: %v", err)
		}
		if h.Attributes&attrDeleteHorizon == 0 || h.BaseTimestamp != 5100 || !h.isControl() {
			t.Fatalf("rebuilt control batch without its delete horizon: %+v", h)
		}
		if h.RecordCount != count {
			t.Fatalf("rebuilt control batch has %d records, want %d", h.RecordCount, count)
		}
		// Well-formed records are rebuilt well-formed (the cleaner
		// copies what it does not read).
		bh := parseHeader(b)
		if walkBatch(b, &bh, func(recordInfo) bool { return true }, true, maxDecompressedBatch) != nil {
			return
		}
		if err := walkBatch(out, &h, func(recordInfo) bool { return true }, false, maxDecompressedBatch); err != nil {
			t.Fatalf("rebuilt control batch's records: %v", err)
		}
	})
}

// TestCleanTxnCrashAtEveryStep: a failure at any step of a pass that
// removes aborted records (pass 1) or drops a .txnindex entry whose
// transaction has nothing left (pass 2, so the cleaned segment has no
// .txnindex where the one it replaces had), then a process or machine
// crash, reopens to a log whose read_committed replay is unchanged, with
// no transaction left open and .txnindex files matching the log.
func TestCleanTxnCrashAtEveryStep(t *testing.T) {
	ops := []vfs.Op{vfs.OpOpen, vfs.OpWrite, vfs.OpSync, vfs.OpRename, vfs.OpSyncDir, vfs.OpRemove}
	hit := 0
	for pass := 1; pass <= 2; pass++ {
		for _, op := range ops {
			for n := int64(1); n <= 10; n++ {
				for _, machine := range []bool{false, true} {
					e := txnEnv()
					l := e.open(t)
					for pid := int64(1); pid <= 3; pid++ {
						txnKV(t, l, e, pid, 0, 0, "a", fmt.Sprint("aborted", pid), "b", fmt.Sprint("aborted", pid))
						fillKeys(t, l, e, 4, kgo.CodecNone)
						marker(t, l, pid, 0, ControlAbort, 0)
						txnKV(t, l, e, pid, 0, 2, "a", fmt.Sprint("committed", pid))
						marker(t, l, pid, 0, ControlCommit, 0)
					}
					fillKeys(t, l, e, 40, kgo.CodecNone)
					if pass == 2 {
						mustClean(t, l)
						fillKeys(t, l, e, 30, kgo.CodecNone)
					}
					if err := l.Flush(); err != nil {
						t.Fatal(err)
					}
					want := committedView(t, l)
					leo := l.LogEndOffset()
					e.mem.SetInjector(vfs.FailNth(op, n))
					_, err := l.Clean()
					if err != nil {
						hit++
					}
					l.abandon()
					e.mem.SetInjector(nil)
					env := e
					if machine {
						env = &logEnv{fs: e.mem.Crash(), dir: e.dir, clock: e.clock, cfg: e.cfg}
					}
					l2 := env.open(t)
					where := fmt.Sprintf("pass %d, %v #%d, machine=%v", pass, op, n, machine)
					if got := committedView(t, l2); !reflect.DeepEqual(got, want) || l2.LogEndOffset() != leo {
						t.Fatalf("%s: read_committed view changed (leo %d, want %d)\n got %v\nwant %v", where, l2.LogEndOffset(), leo, got, want)
					}
					if lso := l2.LastStableOffset(leo); lso != leo {
						t.Fatalf("%s: LSO %d after reopen, want %d", where, lso, leo)
					}
					checkTxnIndexFiles(t, env, l2)
					if _, err := l2.Clean(); err != nil {
						t.Fatalf("%s: clean after reopen: %v", where, err)
					}
					if got := committedView(t, l2); !reflect.DeepEqual(got, want) {
						t.Fatalf("%s: read_committed view changed by the next pass\n got %v\nwant %v", where, got, want)
					}
					for _, v := range valuesOf(t, l2, "b") {
						if strings.HasPrefix(v, "aborted") {
							t.Fatalf("%s: aborted record %q left after a full pass", where, v)
						}
					}
					l2.Close()
				}
			}
		}
	}
	if hit == 0 {
		t.Fatal("no injected failure reached the cleaner")
	}
}
