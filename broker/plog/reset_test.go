package plog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sync/atomic"
	"testing"

	"strata/internal/vfs"
)

// resetFixture is the state TestResetTo* reset to: offset 1000, epochs 3
// from 500 and 5 from 900, producer 7 at epoch 2 with last sequence 41.
func resetFixture(t *testing.T) Reset {
	t.Helper()
	ps := NewProducerState()
	ps.Update(BatchMeta{ProducerID: 7, ProducerEpoch: 2, FirstSeq: 40, LastSeq: 41, FirstOffset: 990, LastOffset: 991, MaxTimestamp: 1})
	return Reset{
		Offset:           1000,
		EpochCheckpoint:  encodeEpochCheckpoint([]EpochEntry{{Epoch: 3, StartOffset: 500}, {Epoch: 5, StartOffset: 900}}),
		ProducerSnapshot: encodeProducerSnapshot(ps),
	}
}

// checkResetState checks that l is the fixture's new log.
func checkResetState(t *testing.T, l *Log) {
	t.Helper()
	if s, e := l.LogStartOffset(), l.LogEndOffset(); s != 1000 || e != 1000 {
		t.Fatalf("after reset: log start %d, end %d; want 1000, 1000", s, e)
	}
	if got := l.LatestEpoch(); got != 5 {
		t.Fatalf("latest epoch %d, want 5", got)
	}
	if ep, seq, ok := l.ProducerState(7); !ok || ep != 2 || seq != 41 {
		t.Fatalf("producer 7: epoch %d seq %d ok %v; want 2, 41, true", ep, seq, ok)
	}
	if segs := l.Segments(); len(segs) != 1 || segs[0].BaseOffset != 1000 {
		t.Fatalf("segments %+v, want one at 1000", segs)
	}
}

// replicatedBatch is a batch at base in leader epoch epoch.
func replicatedBatch(base int64, epoch int32, records int) []byte {
	b := testBatch{records: records, ts: 1_700_000_000_000}.bytes()
	binary.BigEndian.PutUint64(b[0:], uint64(base))
	binary.BigEndian.PutUint32(b[12:], uint32(epoch))
	return b
}

func TestResetToStartsEmptyAtOffset(t *testing.T) {
	forEachFS(t, func(t *testing.T, e *logEnv) {
		l := e.open(t)
		for i := range 20 {
			if _, err := l.AppendReplicated(replicatedBatch(int64(i*5), 1, 5)); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.ResetTo(resetFixture(t)); err != nil {
			t.Fatalf("reset: %v", err)
		}
		checkResetState(t, l)
		if _, err := l.Read(10, 100, 1<<20, true); !errors.Is(err, ErrOffsetOutOfRange) {
			t.Fatalf("read below the new start: %v, want out of range", err)
		}
		if _, err := l.AppendReplicated(replicatedBatch(1000, 6, 3)); err != nil {
			t.Fatalf("append after reset: %v", err)
		}
		if got := l.LatestEpoch(); got != 6 {
			t.Fatalf("latest epoch after append %d, want 6", got)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		l2 := e.open(t)
		if s, end := l2.LogStartOffset(), l2.LogEndOffset(); s != 1000 || end != 1003 {
			t.Fatalf("reopened: start %d end %d, want 1000, 1003", s, end)
		}
		if _, seq, ok := l2.ProducerState(7); !ok || seq != 41 {
			t.Fatalf("reopened: producer 7 lost (seq %d ok %v)", seq, ok)
		}
		if hs := readAll(t, l2, 1000); len(hs) != 1 || hs[0].BaseOffset != 1000 {
			t.Fatalf("reopened: batches %+v", hs)
		}
	})
}

func TestResetToRefusesBadInput(t *testing.T) {
	e := newMemEnv()
	l := e.open(t)
	mustAppend(t, l, testBatch{records: 3}.bytes())
	for name, r := range map[string]Reset{
		"negative offset":  {Offset: -1},
		"bad checkpoint":   {Offset: 10, EpochCheckpoint: []byte("0\n2\n1 0\n")},
		"corrupt snapshot": {Offset: 10, ProducerSnapshot: []byte("not a snapshot")},
	} {
		if err := l.ResetTo(r); err == nil {
			t.Errorf("%s: reset accepted", name)
		}
	}
	if s, end := l.LogStartOffset(), l.LogEndOffset(); s != 0 || end != 3 {
		t.Fatalf("a refused reset changed the log: start %d end %d", s, end)
	}
}

// TestResetToCrashSafe stops the filesystem at every operation of a reset
// in turn (every later operation fails, as if the process died there),
// crashes it (keeping only durable state) and reopens: the log must be the
// old one, whole, or the new one.
func TestResetToCrashSafe(t *testing.T) {
	sawOld, sawNew := false, false
	for n := int64(1); ; n++ {
		e := newMemEnv()
		l := e.open(t)
		for i := range 12 {
			if _, err := l.AppendReplicated(replicatedBatch(int64(i*5), 1, 5)); err != nil {
				t.Fatal(err)
			}
		}
		if err := l.Flush(); err != nil {
			t.Fatal(err)
		}
		var ops atomic.Int64
		e.mem.SetInjector(func(op vfs.Op, path string) error {
			if ops.Add(1) >= n {
				return vfs.ErrInjected
			}
			return nil
		})
		err := l.ResetTo(resetFixture(t))
		e.mem.SetInjector(nil)
		done := err == nil
		crashed := &logEnv{fs: e.mem.Crash(), dir: e.dir, clock: e.clock, cfg: e.cfg}
		l2 := crashed.open(t)
		switch start := l2.LogStartOffset(); start {
		case 0:
			sawOld = true
			if done {
				t.Fatalf("op %d: reset returned nil but the old log came back", n)
			}
			if end := l2.LogEndOffset(); end != 60 {
				t.Fatalf("op %d: old log recovered to end %d, want 60", n, end)
			}
			checkContiguous(t, readAll(t, l2, 0), 0, 60)
			if ep := l2.LatestEpoch(); ep != 1 {
				t.Fatalf("op %d: old log has latest epoch %d, want 1", n, ep)
			}
		case 1000:
			sawNew = true
			checkResetState(t, l2)
		default:
			t.Fatalf("op %d: recovered log starts at %d: neither old nor new", n, start)
		}
		if done {
			break
		}
		if n > 500 {
			t.Fatal("reset never completed")
		}
	}
	if !sawOld || !sawNew {
		t.Fatalf("crash points covered old=%v new=%v; want both", sawOld, sawNew)
	}
}

func FuzzParseReset(f *testing.F) {
	ps := NewProducerState()
	ps.Update(BatchMeta{ProducerID: 1, ProducerEpoch: 0, FirstSeq: 0, LastSeq: 0, FirstOffset: 0, LastOffset: 0})
	good, err := Reset{Offset: 10, EpochCheckpoint: []byte("0\n1\n2 4\n"), ProducerSnapshot: encodeProducerSnapshot(ps)}.normalize()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good.encode())
	f.Add([]byte("0\n5\n0\n0\n"))
	f.Add([]byte("0\n5\n99\n0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		rs, err := parseReset(b)
		if err != nil {
			return
		}
		again, err := parseReset(rs.encode())
		if err != nil {
			t.Fatalf("re-encoded reset does not parse: %v", err)
		}
		if again.offset != rs.offset || !bytes.Equal(again.snapshot, rs.snapshot) || len(again.epochs) != len(rs.epochs) {
			t.Fatalf("round trip changed the reset: %+v vs %+v", rs, again)
		}
	})
}
