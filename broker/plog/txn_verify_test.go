package plog

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// A transactional batch whose transaction is not open needs the guard the
// leader took before verifying it; a marker written meanwhile drops the
// guard (KIP-890's VerificationGuard), and an open transaction needs none.
func TestAppendVerifiedGuard(t *testing.T) {
	forEachFS(t, func(t *testing.T, e *logEnv) {
		l := e.open(t)
		batch := func(seq int32) []byte {
			return testBatch{ts: 1_700_000_000_000, records: 1, pid: 7, epoch: 0, seq: seq, txn: true}.bytes()
		}
		wantRefused := func(what string, err error) {
			t.Helper()
			if !errors.Is(err, kerr.InvalidTxnState) {
				t.Errorf("%s: %v, want INVALID_TXN_STATE", what, err)
			}
		}
		_, err := l.AppendVerified(batch(0), 0, 7, 0, 0)
		wantRefused("no guard, no open transaction", err)
		g := l.StartTxnVerification(7)
		if g2 := l.StartTxnVerification(7); g2 != g {
			t.Errorf("second verification of the producer: guard %d, want the first's %d", g2, g)
		}
		_, err = l.AppendVerified(batch(0), 0, 7, 0, g+1)
		wantRefused("another guard", err)
		if _, err := l.AppendVerified(batch(0), 0, 7, 0, g); err != nil {
			t.Fatalf("append with the guard: %v", err)
		}
		if !l.HasOngoingTransaction(7, 0) || l.HasOngoingTransaction(7, 1) {
			t.Error("HasOngoingTransaction: want true at epoch 0 only")
		}
		if _, err := l.AppendVerified(batch(1), 0, 7, 0, 0); err != nil {
			t.Fatalf("append in the open transaction: %v", err)
		}
		// Verified, then the transaction ends before the append.
		g = l.StartTxnVerification(7)
		marker(t, l, 7, 0, ControlCommit, 0)
		_, err = l.AppendVerified(batch(2), 0, 7, 0, g)
		wantRefused("guard taken before the marker", err)
		if l.HasOngoingTransaction(7, 0) {
			t.Error("transaction open after the refused append")
		}
	})
}
