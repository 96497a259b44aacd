package tier

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"strata/index"
)

// testClock is a settable clock for Uploader.Now, in milliseconds.
type testClock struct{ ms atomic.Int64 }

func newTestClock() *testClock {
	c := &testClock{}
	c.ms.Store(time.Now().UnixMilli())
	return c
}

func (c *testClock) now() time.Time          { return time.UnixMilli(c.ms.Load()) }
func (c *testClock) advance(d time.Duration) { c.ms.Add(d.Milliseconds()) }

// waitBeats waits until n COPY_SEGMENT_STARTED manifests in the bucket
// were written at or after at (ms): the uploads under way heartbeat.
func waitBeats(t *testing.T, store *MemStore, at int64, n int) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := 0
		for _, k := range store.Keys() {
			if !strings.HasSuffix(k, ManifestSuffix) {
				continue
			}
			m, err := readManifest(ctx, store, k)
			if err == nil && m.State == index.CopySegmentStarted && m.EventTimestamp >= at {
				got++
			}
		}
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d uploads heartbeat at or after %d, want %d", got, at, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// holdManifests is one broker's view of a shared store whose manifest
// PUTs can be made to hang (hold), as a broker frozen mid-request sees
// them; the other brokers reach the bucket directly.
type holdManifests struct {
	ObjectStore
	mu     sync.Mutex
	gate   chan struct{} // nil: not holding
	held   atomic.Int32  // PUTs waiting at the gate
	landed atomic.Int32  // held PUTs that went on afterwards
}

func (h *holdManifests) hold() {
	h.mu.Lock()
	h.gate = make(chan struct{})
	h.mu.Unlock()
}

func (h *holdManifests) release() {
	h.mu.Lock()
	close(h.gate)
	h.gate = nil
	h.mu.Unlock()
}

// wait holds a manifest write at the gate while it is closed; the
// returned func counts the write as landed once it went on.
func (h *holdManifests) wait(key string) func() {
	h.mu.Lock()
	gate := h.gate
	h.mu.Unlock()
	if gate == nil || !strings.HasSuffix(key, ManifestSuffix) {
		return func() {}
	}
	h.held.Add(1)
	<-gate
	return func() { h.landed.Add(1) }
}

func (h *holdManifests) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	defer h.wait(key)()
	return h.ObjectStore.Put(ctx, key, r, size)
}

func (h *holdManifests) PutIf(ctx context.Context, key string, r io.Reader, size int64, cond Cond) (string, error) {
	defer h.wait(key)()
	return h.ObjectStore.PutIf(ctx, key, r, size, cond)
}

// Regression (issue 15, the known gap of the leadership fence): an upload
// could write its FINISHED state only within half the settle grace of its
// start, so with a backlog behind one throttle every upload outlived it,
// was abandoned, and local retention waited for ever. Now an upload whose
// broker leads heartbeats its STARTED manifest, and both its own deadline
// and a new leader's cleanup age it by the latest heartbeat: an upload
// four times the grace long finishes, and a peer meanwhile leaves it
// alone.
func TestSlowUploadHeartbeatsPastTheGrace(t *testing.T) {
	l, _ := testLog(t, 20)
	store := NewMemStore()
	alive := func(int32) bool { return true }
	a, b := fenceBroker(t, store, 1, alive), fenceBroker(t, store, 2, alive)
	clock := newTestClock()
	a.Now, b.Now = clock.now, clock.now
	a.SettleGrace, b.SettleGrace = time.Minute, time.Minute
	a.Heartbeat = time.Millisecond // real time; the grace is on the test clock
	ctx := context.Background()

	started, release := blockPut(store) // the first segment's .log is slow
	aDone := make(chan error, 1)
	go func() {
		_, err := a.CopyPartition(ctx, upTP, "t", l, l.LogEndOffset(), Leadership{Epoch: 3})
		aDone <- err
	}()
	<-started
	waitUploads(t, store, 2)
	// Another broker learns the uploads now (a leadership move A has not
	// learned yet): its index holds them with their start time.
	if _, err := RefreshPartition(ctx, store, b.Index, upTP); err != nil {
		t.Fatal(err)
	}
	for range 12 { // 4 minutes, each step within half the grace
		clock.advance(20 * time.Second)
		waitBeats(t, store, clock.ms.Load(), 2)
	}

	// Its pass ages them by their manifests' heartbeats, not by what its
	// index says, and finds them alive.
	st, err := b.CopyPartition(ctx, upTP, "t", l, l.LogEndOffset(), Leadership{Epoch: 4})
	if err != nil || st.Unsettled != 2 || st.Abandoned != 0 || st.Copied != 0 {
		t.Fatalf("B's pass four graces into A's heartbeating upload: %+v, %v; want it left alone", st, err)
	}

	close(release)
	if err := <-aDone; err != nil {
		t.Fatalf("A's pass with an upload four times the settle grace long: %v, want it finished", err)
	}
	if n := checkFinishedWhole(t, store); n != len(sealed(l)) {
		t.Fatalf("%d finished manifests, want %d", n, len(sealed(l)))
	}
	segs, _ := a.Index.Segments(upTP)
	for _, m := range segs {
		if m.State != index.CopySegmentFinished {
			t.Fatalf("segment %d in %v in A's index, want finished", m.StartOffset, m.State)
		}
	}
	if len(segs) != len(sealed(l)) {
		t.Fatalf("%d segments in A's index, want %d", len(segs), len(sealed(l)))
	}
}

// An upload that stops heartbeating is settled a grace after its last
// heartbeat, and its uploader then never writes FINISHED: when its broker
// stops leading (it stops heartbeating), and when it froze with a
// heartbeat in flight that lands only after the new leader deleted the
// upload.
func TestUploadWithoutHeartbeatIsSettled(t *testing.T) {
	for _, frozen := range []bool{false, true} {
		name := "lost leadership"
		if frozen {
			name = "frozen mid-heartbeat"
		}
		t.Run(name, func(t *testing.T) {
			l, _ := testLog(t, 20)
			store := NewMemStore()
			alive := func(int32) bool { return true }
			a, b := fenceBroker(t, store, 1, alive), fenceBroker(t, store, 2, alive)
			view := &holdManifests{ObjectStore: store}
			a.Store = view
			clock := newTestClock()
			a.Now, b.Now = clock.now, clock.now
			a.SettleGrace, b.SettleGrace = time.Minute, time.Minute
			a.Heartbeat = time.Millisecond
			ctx := context.Background()

			started, release := blockPut(store)
			var leadingA atomic.Bool
			leadingA.Store(true)
			aDone := make(chan error, 1)
			go func() {
				_, err := a.CopyPartition(ctx, upTP, "t", l, l.LogEndOffset(), Leadership{Epoch: 3, Leading: leadingA.Load})
				aDone <- err
			}()
			<-started
			waitUploads(t, store, 2)
			clock.advance(20 * time.Second)
			lastBeat := clock.ms.Load()
			waitBeats(t, store, lastBeat, 2)

			if frozen {
				// A goes on believing it leads, but its next heartbeats
				// hang in flight.
				view.hold()
				clock.advance(20 * time.Second)
				waitFor(t, func() bool { return view.held.Load() == 2 })
			} else {
				leadingA.Store(false) // the pass's context stays: only the heartbeat notices
				clock.advance(20 * time.Second)
			}

			// 50 s after the last heartbeat that landed: still A's.
			clock.advance(30 * time.Second)
			if _, err := RefreshPartition(ctx, store, b.Index, upTP); err != nil {
				t.Fatal(err)
			}
			st, err := b.CopyPartition(ctx, upTP, "t", l, l.LogEndOffset(), Leadership{Epoch: 4})
			if err != nil || st.Unsettled != 2 || st.Abandoned != 0 {
				t.Fatalf("B's pass within the grace of A's last heartbeat: %+v, %v; want it left alone", st, err)
			}
			// More than a grace after it: B deletes A's uploads and
			// copies everything.
			clock.advance(15 * time.Second)
			st, err = b.CopyPartition(ctx, upTP, "t", l, l.LogEndOffset(), Leadership{Epoch: 4})
			if err != nil || st.Unsettled != 0 || st.Abandoned != 2 || st.Copied != len(sealed(l)) {
				t.Fatalf("B's pass a grace after A's last heartbeat: %+v, %v; want A's uploads deleted and everything copied", st, err)
			}

			if frozen {
				// A wakes: its heartbeats land (after B's deletion, so
				// they must not extend its lease), then its objects.
				view.release()
				waitFor(t, func() bool { return view.landed.Load() == 2 })
			}
			close(release)
			if err := <-aDone; !errors.Is(err, ErrNotLeading) {
				t.Fatalf("A's pass: %v, want ErrNotLeading", err)
			}
			if n := checkFinishedWhole(t, store); n != len(sealed(l)) {
				t.Fatalf("%d finished manifests, want B's %d", n, len(sealed(l)))
			}
			manifests := 0
			for _, k := range store.Keys() {
				if strings.HasSuffix(k, ManifestSuffix) {
					manifests++
				}
			}
			if manifests != len(sealed(l)) {
				t.Fatalf("%d manifests in the bucket, want only B's %d (A abandons its own)", manifests, len(sealed(l)))
			}
		})
	}
}
