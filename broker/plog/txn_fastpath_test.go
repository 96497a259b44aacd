package plog

import "testing"

// A log without transactions answers its last stable offset and its
// aborted transactions without the lock (unstableTxns 0, abortedTxns
// unset); the first transactional batch holds the LSO at once, and a
// completed transaction stops holding it once the high watermark passes
// its marker, as on the locked path.
func TestTxnStateFastPath(t *testing.T) {
	e := newMemEnv()
	l := e.open(t)
	for range 3 {
		mustAppend(t, l, testBatch{ts: 1_700_000_000_000, records: 2}.bytes())
	}
	if n := l.unstableTxns.Load(); n != 0 {
		t.Fatalf("unstable transactions %d in a log without transactions", n)
	}
	if lso := l.LastStableOffset(4); lso != 4 {
		t.Fatalf("LSO %d at high watermark 4, want 4", lso)
	}
	if ab := l.AbortedTransactions(0, 6); ab != nil || l.abortedTxns.Load() {
		t.Fatalf("aborted transactions %v in a log without transactions", ab)
	}

	first := txnData(t, l, 7, 0, 0, 2)
	if n := l.unstableTxns.Load(); n != 1 {
		t.Fatalf("unstable transactions %d after a transactional batch, want 1", n)
	}
	if lso := l.LastStableOffset(l.LogEndOffset()); lso != first {
		t.Fatalf("LSO %d with a transaction open at %d", lso, first)
	}
	m := marker(t, l, 7, 0, ControlCommit, 1)
	if lso := l.LastStableOffset(m); lso != first {
		t.Fatalf("LSO %d with the commit marker at %d not below the high watermark, want %d", lso, m, first)
	}
	if lso := l.LastStableOffset(m + 1); lso != m+1 || l.unstableTxns.Load() != 0 {
		t.Fatalf("LSO %d (unstable %d) once the high watermark passed the marker, want %d (0)", lso, l.unstableTxns.Load(), m+1)
	}
	if l.abortedTxns.Load() {
		t.Fatal("a committed transaction marked the log as holding aborted ones")
	}

	a := txnData(t, l, 8, 0, 0, 1)
	am := marker(t, l, 8, 0, ControlAbort, 1)
	if ab := l.AbortedTransactions(0, l.LogEndOffset()); len(ab) != 1 || ab[0].FirstOffset != a || ab[0].LastOffset != am {
		t.Fatalf("aborted transactions %+v, want producer 8 from %d to %d", ab, a, am)
	}
	l.Close()
	l = e.open(t) // the .txnindex read again
	if ab := l.AbortedTransactions(0, l.LogEndOffset()); len(ab) != 1 {
		t.Fatalf("after reopening: aborted transactions %+v, want 1", ab)
	}
}
