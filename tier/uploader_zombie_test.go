package tier

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"strata/index"
)

// zombieHook blocks the second write of the manifest of the upload of the
// segment at base offset 0 whose manifest is written first (the zombie's:
// its STARTED manifest, then its FINISHED one) after the zombie's lease
// check, as a leader frozen between its check and its write is. With
// holdDelete, the cleanup's DeleteMany of the zombie's objects waits too,
// so the zombie can wake between the cleanup's fence and its deletions.
type zombieHook struct {
	mu          sync.Mutex
	key         string // the zombie's manifest key
	puts        int
	frozen      chan struct{} // closed when the FINISHED write waits
	wake        chan struct{} // close to let it go on
	holdDelete  bool
	deleting    chan struct{} // closed when the cleanup's DeleteMany waits
	deleteGo    chan struct{} // close to let it go on
	frozenOnce  sync.Once
	deleteOnce  sync.Once
	deleteStems string
}

func newZombieHook(holdDelete bool) *zombieHook {
	return &zombieHook{frozen: make(chan struct{}), wake: make(chan struct{}), holdDelete: holdDelete,
		deleting: make(chan struct{}), deleteGo: make(chan struct{})}
}

func (h *zombieHook) fault(op Op, key string) error {
	h.mu.Lock()
	switch {
	case op == OpPut && strings.HasSuffix(key, ManifestSuffix) && strings.Contains(key, "/00000000000000000000-") && h.key == "":
		h.key, h.puts = key, 1
		h.deleteStems = strings.TrimSuffix(key, ManifestSuffix)
		h.mu.Unlock()
		return nil
	case op == OpPut && key == h.key:
		h.puts++
		if h.puts == 2 {
			h.mu.Unlock()
			h.frozenOnce.Do(func() { close(h.frozen) })
			<-h.wake
			return nil
		}
	case op == OpDeleteMany && h.holdDelete && h.deleteStems != "" && strings.HasPrefix(key, h.deleteStems):
		h.mu.Unlock()
		first := false
		h.deleteOnce.Do(func() { first = true; close(h.deleting) })
		if first { // the cleanup's; the zombie's own abandon goes on
			<-h.deleteGo
		}
		return nil
	}
	h.mu.Unlock()
	return nil
}

// Regression (issue 22): a leader frozen between its lease check and its
// COPY_SEGMENT_FINISHED write woke after the new leader had cleaned up its
// upload (deleted its objects) and uploaded the range itself; its FINISHED
// manifest then landed, naming objects that were gone, and readers chose
// it. A check followed by a write is no fence on an object store: the
// FINISHED write is now conditional on the ETag of the upload's own last
// manifest, which the cleanup's DELETE_SEGMENT_STARTED replaced (or
// removed). The zombie wakes after the cleanup, and, in the second case,
// between the cleanup's fence and its deletions.
func TestZombieFinishedWriteLosesToTheCleanup(t *testing.T) {
	for _, during := range []bool{false, true} {
		name := "after the cleanup"
		if during {
			name = "between the cleanup's fence and its deletions"
		}
		t.Run(name, func(t *testing.T) {
			l, _ := testLog(t, 20)
			store := NewMemStore()
			alive := func(int32) bool { return true }
			zombie, leader := fenceBroker(t, store, 3, alive), fenceBroker(t, store, 1, alive)
			clock := newTestClock()
			zombie.Now, leader.Now = clock.now, clock.now
			zombie.SettleGrace, leader.SettleGrace = time.Minute, time.Minute
			zombie.Heartbeat = time.Hour // no heartbeat within the test: the lease is the first manifest
			ctx := context.Background()
			hook := newZombieHook(during)
			store.SetFault(hook.fault)

			zDone := make(chan error, 1)
			go func() {
				_, err := zombie.CopyPartition(ctx, upTP, "t", l, l.LogEndOffset(), Leadership{Epoch: 2})
				zDone <- err
			}()
			select {
			case <-hook.frozen:
			case err := <-zDone:
				t.Fatalf("the zombie's pass ended before its FINISHED write: %v", err)
			}

			// The zombie's session expires; the new leader, at epoch 3,
			// finds its uploads a grace old and cleans them up.
			clock.advance(2 * time.Minute)
			if _, err := RefreshPartition(ctx, store, leader.Index, upTP); err != nil {
				t.Fatal(err)
			}
			lDone := make(chan error, 1)
			go func() {
				st, err := leader.CopyPartition(ctx, upTP, "t", l, l.LogEndOffset(), Leadership{Epoch: 3})
				if err == nil && (st.Abandoned == 0 || st.Copied != len(sealed(l))) {
					err = errors.New("the new leader's pass did not clean up and copy everything")
				}
				lDone <- err
			}()
			if during {
				<-hook.deleting // the cleanup has fenced the manifest; its deletions wait
			} else if err := <-lDone; err != nil {
				t.Fatal(err)
			}
			close(hook.wake) // the zombie wakes and writes its FINISHED state
			err := <-zDone
			if !errors.Is(err, ErrNotLeading) || !strings.Contains(err.Error(), "fenced on the store") {
				t.Fatalf("the zombie's pass: %v, want it fenced on the store", err)
			}
			if during {
				close(hook.deleteGo)
				if err := <-lDone; err != nil {
					t.Fatal(err)
				}
			}
			store.SetFault(nil)
			if n := checkFinishedWhole(t, store); n != len(sealed(l)) {
				t.Fatalf("%d finished manifests, want the new leader's %d", n, len(sealed(l)))
			}
			for _, k := range store.Keys() {
				if !strings.HasSuffix(k, ManifestSuffix) {
					continue
				}
				m, err := readManifest(ctx, store, k)
				if err != nil {
					t.Fatal(err)
				}
				if m.BrokerID != leader.BrokerID || m.UploadEpoch != 3 {
					t.Fatalf("manifest %s by broker %d at epoch %d in %v, want only the new leader's", k, m.BrokerID, m.UploadEpoch, m.State)
				}
			}
			// Every offset of the sealed segments reads from the new
			// leader's segments, in the leader's index and in a fresh
			// one refreshed from the bucket.
			for _, idx := range []*index.Index{leader.Index, refreshedIndex(t, store)} {
				for _, seg := range sealed(l) {
					for off := seg.BaseOffset; off < seg.NextOffset; off++ {
						m, err := idx.SegmentForOffset(upTP, off)
						if err != nil || m.BrokerID != leader.BrokerID {
							t.Fatalf("offset %d: segment of broker %d, %v", off, m.BrokerID, err)
						}
						if _, err := store.Head(ctx, ObjectKey(&m, index.ObjectLog)); err != nil {
							t.Fatalf("offset %d: %v", off, err)
						}
					}
				}
			}
		})
	}
}
