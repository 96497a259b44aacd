package tier

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"strata/index"
)

// fenceBroker is one broker's uploader over a shared bucket, with its own
// index, as two brokers of a cluster have.
func fenceBroker(t *testing.T, store *MemStore, id int32, alive func(int32) bool) *Uploader {
	t.Helper()
	idx, err := index.Open(index.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { idx.Close() })
	return &Uploader{Store: store, Index: idx, BrokerID: id, PeerAlive: alive}
}

// blockPut makes the first PUT of the .log object of the segment at base
// offset 0 wait until release is closed, and reports on started when it
// begins waiting.
func blockPut(store *MemStore) (started <-chan string, release chan struct{}) {
	st := make(chan string, 1)
	release = make(chan struct{})
	var once sync.Once
	store.SetFault(func(op Op, key string) error {
		if op == OpPut && strings.HasSuffix(key, ".log") && strings.Contains(key, "/00000000000000000000-") {
			blocked := false
			once.Do(func() { blocked = true; st <- key })
			if blocked {
				<-release
			}
		}
		return nil
	})
	return st, release
}

// waitUploads waits until A has n uploads under way (n STARTED manifests
// in the bucket; a partition's uploads go two segments deep).
func waitUploads(t *testing.T, store *MemStore, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := 0
		for _, k := range store.Keys() {
			if strings.HasSuffix(k, ".manifest") {
				got++
			}
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d manifests in the bucket, want A's %d uploads under way", got, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// checkFinishedWhole fails the test if a COPY_SEGMENT_FINISHED manifest in
// the bucket names an object that is not there: the invariant that local
// retention and every reader rely on.
func checkFinishedWhole(t *testing.T, store *MemStore) int {
	t.Helper()
	ctx := context.Background()
	finished := 0
	for _, k := range store.Keys() {
		if !strings.HasSuffix(k, ".manifest") {
			continue
		}
		m, err := readManifest(ctx, store, k)
		if err != nil {
			t.Fatalf("manifest %s: %v", k, err)
		}
		if m.State != index.CopySegmentFinished {
			continue
		}
		finished++
		for _, o := range m.Objects {
			if o.Packed {
				continue
			}
			if _, err := store.Head(ctx, ObjectKey(&m, o.Kind)); err != nil {
				t.Fatalf("finished manifest %s names %s, which is missing: %v", k, o.Kind.Suffix(), err)
			}
		}
	}
	return finished
}

// Regression (issue 15): broker A is uploading segment X when leadership
// moves to B. B used to delete X's objects while cleaning up what its
// refresh found in COPY_SEGMENT_STARTED, and A then wrote a FINISHED
// manifest naming objects that were gone. Now A's pass is fenced (its
// context is cancelled, and it checks its leadership before the FINISHED
// state) and abandons X itself, and B leaves a live peer's young upload
// alone until it is settled.
func TestUploadFencedWhenLeadershipMoves(t *testing.T) {
	l, _ := testLog(t, 20)
	store := NewMemStore()
	alive := func(int32) bool { return true }
	a, b := fenceBroker(t, store, 1, alive), fenceBroker(t, store, 2, alive)
	ctx := context.Background()

	started, release := blockPut(store)
	var leadingA atomic.Bool
	leadingA.Store(true)
	actx, cancelA := context.WithCancel(ctx)
	defer cancelA()
	aDone := make(chan error, 1)
	go func() {
		_, err := a.CopyPartition(actx, upTP, "t", l, l.LogEndOffset(), Leadership{Epoch: 3, Leading: leadingA.Load})
		aDone <- err
	}()
	<-started // A is uploading X
	waitUploads(t, store, 2)

	// Leadership moves to B at epoch 4: B refreshes from the bucket and
	// finds A's upload in COPY_SEGMENT_STARTED.
	if _, err := RefreshPartition(ctx, store, b.Index, upTP); err != nil {
		t.Fatal(err)
	}
	st, err := b.CopyPartition(ctx, upTP, "t", l, l.LogEndOffset(), Leadership{Epoch: 4})
	// Two of A's uploads are under way (a partition's uploads go two
	// segments deep).
	if err != nil || st.Unsettled != 2 || st.Copied != 0 || st.Abandoned != 0 {
		t.Fatalf("B's pass while A's upload may finish: %+v, %v; want it left alone, nothing copied", st, err)
	}
	if n := len(store.Keys()); n == 0 {
		t.Fatal("B deleted A's upload")
	}

	// A learns it no longer leads; its blocked PUT goes on, and then it
	// must not write FINISHED.
	leadingA.Store(false)
	cancelA()
	close(release)
	if err := <-aDone; !errors.Is(err, ErrNotLeading) {
		t.Fatalf("A's pass after losing leadership: %v, want ErrNotLeading", err)
	}
	if n := checkFinishedWhole(t, store); n != 0 {
		t.Fatalf("%d finished manifests after A lost leadership mid-upload, want none", n)
	}
	if keys := store.Keys(); len(keys) != 0 {
		t.Fatalf("A left objects of its abandoned upload: %v", keys)
	}

	// B's next pass settles the entry and uploads everything.
	st, err = b.CopyPartition(ctx, upTP, "t", l, l.LogEndOffset(), Leadership{Epoch: 4})
	if err != nil || st.Unsettled != 0 || st.Abandoned != 2 || st.Copied != len(sealed(l)) {
		t.Fatalf("B's pass once A's upload was settled: %+v, %v", st, err)
	}
	if n := checkFinishedWhole(t, store); n != len(sealed(l)) {
		t.Fatalf("%d finished manifests, want %d", n, len(sealed(l)))
	}
	segs, _ := b.Index.Segments(upTP)
	for _, m := range segs {
		if m.UploadEpoch != 4 || m.BrokerID != 2 {
			t.Fatalf("segment %d uploaded at epoch %d by %d, want epoch 4 by 2", m.StartOffset, m.UploadEpoch, m.BrokerID)
		}
	}
}

// A frozen leader (A does not know it lost leadership) finishes its
// upload: B must not have deleted its objects meanwhile, and adopts the
// finished segment instead of uploading the range again.
func TestUploadOfFrozenLeaderIsAdopted(t *testing.T) {
	l, _ := testLog(t, 20)
	store := NewMemStore()
	alive := func(int32) bool { return true }
	a, b := fenceBroker(t, store, 1, alive), fenceBroker(t, store, 2, alive)
	ctx := context.Background()

	started, release := blockPut(store)
	aDone := make(chan error, 1)
	go func() {
		_, err := a.CopyPartition(ctx, upTP, "t", l, sealed(l)[0].NextOffset, Leadership{Epoch: 3})
		aDone <- err
	}()
	<-started
	waitUploads(t, store, 1)
	if _, err := RefreshPartition(ctx, store, b.Index, upTP); err != nil {
		t.Fatal(err)
	}
	if st, err := b.CopyPartition(ctx, upTP, "t", l, l.LogEndOffset(), Leadership{Epoch: 4}); err != nil || st.Unsettled == 0 {
		t.Fatalf("B's pass: %+v, %v", st, err)
	}
	close(release) // A wakes up, still believing it leads
	if err := <-aDone; err != nil {
		t.Fatalf("A's pass: %v", err)
	}
	checkFinishedWhole(t, store)
	st, err := b.CopyPartition(ctx, upTP, "t", l, l.LogEndOffset(), Leadership{Epoch: 4})
	if err != nil || st.Finished != 1 || st.Copied != len(sealed(l))-1 {
		t.Fatalf("B's pass after A finished: %+v, %v; want A's segment adopted and the rest copied", st, err)
	}
	if n := checkFinishedWhole(t, store); n != len(sealed(l)) {
		t.Fatalf("%d finished manifests, want %d (no range uploaded twice)", n, len(sealed(l)))
	}
}

// An unfinished upload of a broker that is no longer registered cannot
// finish: the new leader deletes it at once. One of a live broker is
// deleted once the settle grace has passed, and by then its uploader may
// no longer write FINISHED (half the grace).
func TestUploadSettledByLivenessAndGrace(t *testing.T) {
	for _, c := range []struct {
		name  string
		alive bool
		age   time.Duration // how long after the upload started B looks
	}{
		{"dead peer", false, 0},
		{"live peer past the grace", true, 2 * time.Minute},
	} {
		t.Run(c.name, func(t *testing.T) {
			l, _ := testLog(t, 20)
			store := NewMemStore()
			var clock atomic.Int64
			clock.Store(time.Now().UnixMilli())
			now := func() time.Time { return time.UnixMilli(clock.Load()) }
			a := fenceBroker(t, store, 1, func(int32) bool { return true })
			b := fenceBroker(t, store, 2, func(id int32) bool { return id != 1 || c.alive })
			a.Now, b.Now = now, now
			a.SettleGrace, b.SettleGrace = time.Minute, time.Minute
			ctx := context.Background()

			started, release := blockPut(store)
			aDone := make(chan error, 1)
			go func() {
				_, err := a.CopyPartition(ctx, upTP, "t", l, l.LogEndOffset(), Leadership{Epoch: 3})
				aDone <- err
			}()
			<-started
			waitUploads(t, store, 2)
			waitUploads(t, store, 2)
			clock.Add(c.age.Milliseconds())
			if _, err := RefreshPartition(ctx, store, b.Index, upTP); err != nil {
				t.Fatal(err)
			}
			st, err := b.CopyPartition(ctx, upTP, "t", l, l.LogEndOffset(), Leadership{Epoch: 4})
			if err != nil || st.Unsettled != 0 || st.Abandoned != 2 || st.Copied != len(sealed(l)) {
				t.Fatalf("B's pass: %+v, %v; want A's upload deleted and everything copied", st, err)
			}
			close(release)
			err = <-aDone
			if c.alive && !errors.Is(err, ErrNotLeading) {
				t.Fatalf("A's pass past half the grace: %v, want ErrNotLeading", err)
			}
			// The dead peer stands for a process that is gone: what it
			// does after waking is not the point; with both, nothing
			// finished may name a missing object.
			if c.alive {
				checkFinishedWhole(t, store)
			}
		})
	}
}

// Uploads left by this broker in a partition it no longer leads are
// deleted by SettleOwn; finished ones are left for the leader to adopt.
func TestSettleOwn(t *testing.T) {
	l, _ := testLog(t, 20)
	store := NewMemStore()
	a := fenceBroker(t, store, 1, nil)
	ctx := context.Background()
	down := errors.New("bucket down")
	second := fmt.Sprintf("/%020d-", sealed(l)[1].BaseOffset)
	store.SetFault(func(op Op, key string) error {
		// The first segment finishes; the second's .log fails, with the
		// third under way beside it.
		if op == OpPut && strings.HasSuffix(key, ".log") && strings.Contains(key, second) {
			return down
		}
		return nil
	})
	if _, err := a.CopyPartition(ctx, upTP, "t", l, l.LogEndOffset(), Leadership{Epoch: 1}); !errors.Is(err, down) {
		t.Fatalf("CopyPartition: %v", err)
	}
	store.SetFault(nil)
	n, err := a.SettleOwn(ctx, upTP)
	if err != nil || n != 2 {
		t.Fatalf("SettleOwn = %d, %v; want the 2 unfinished uploads deleted", n, err)
	}
	if got := checkFinishedWhole(t, store); got != 1 {
		t.Fatalf("%d finished manifests, want the 1 that finished", got)
	}
	segs, _ := a.Index.Segments(upTP)
	if len(segs) != 1 || segs[0].State != index.CopySegmentFinished {
		t.Fatalf("index after SettleOwn: %+v", segs)
	}
}
