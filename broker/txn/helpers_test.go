package txn

import (
	"io"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// memLog is an in-memory __transaction_state partition: every append is
// kept (until truncate), and failures are injected on demand.
type memLog struct {
	mu         sync.Mutex
	batches    [][]byte
	appendErr  error         // Append fails with it
	waitErr    error         // WaitDurable fails with it (the batch stays appended)
	onWait     func()        // runs inside WaitDurable (no coordinator lock held)
	replayGate chan struct{} // Replay waits for it to close
	replayErr  error
}

func (l *memLog) Append(b []byte) (int64, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.appendErr != nil {
		return 0, l.appendErr
	}
	l.batches = append(l.batches, slices.Clone(b))
	return int64(len(l.batches)), nil
}

func (l *memLog) WaitDurable(int64) error {
	l.mu.Lock()
	hook, err := l.onWait, l.waitErr
	l.onWait = nil
	l.mu.Unlock()
	if hook != nil {
		hook()
	}
	return err
}

func (l *memLog) Replay(fn func([]byte) error) error {
	if l.replayGate != nil {
		<-l.replayGate
	}
	l.mu.Lock()
	bs := slices.Clone(l.batches)
	err := l.replayErr
	l.mu.Unlock()
	if err != nil {
		return err
	}
	for _, b := range bs {
		if err := fn(b); err != nil {
			return err
		}
	}
	return nil
}

// records lists every record in the log, in order.
func (l *memLog) records(t *testing.T) []Record {
	t.Helper()
	var out []Record
	if err := l.Replay(func(b []byte) error {
		return decodeBatches(b, func(r Record) error { out = append(out, r); return nil })
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// fixture is a coordinator on a fake clock leading partition 0 of a
// one-partition __transaction_state.
type fixture struct {
	t   *testing.T
	c   *Coordinator
	log *memLog

	mu      sync.Mutex
	now     time.Time
	nextPID int64
	pidErr  error
	markers []Markers
	// refuse is the coordinator's RefuseNewTransactions (a drain).
	refuse atomic.Bool
}

func newFixture(t *testing.T, tv int16) *fixture {
	t.Helper()
	f := &fixture{t: t, log: &memLog{}, now: time.UnixMilli(1_700_000_000_000), nextPID: 1000}
	f.c = f.coordinator(tv)
	f.elect(f.c, f.log)
	return f
}

func (f *fixture) coordinator(tv int16) *Coordinator {
	c := New(Config{
		NumPartitions:      1,
		MaxTimeoutMs:       60000,
		TransactionVersion: tv,
		NextProducerID: func() (int64, error) {
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.pidErr != nil {
				return 0, f.pidErr
			}
			f.nextPID++
			return f.nextPID - 1, nil
		},
		RefuseNewTransactions: f.refuse.Load,
		SendMarkers: func(m Markers) {
			f.mu.Lock()
			f.markers = append(f.markers, m)
			f.mu.Unlock()
		},
		Now: func() time.Time {
			f.mu.Lock()
			defer f.mu.Unlock()
			return f.now
		},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	})
	f.t.Cleanup(c.Close)
	return c
}

// elect hands c partition 0 at epoch 5 and waits for it to load.
func (f *fixture) elect(c *Coordinator, l *memLog) {
	f.t.Helper()
	c.Elect(0, 5, l)
	waitFor(f.t, "partition 0 loaded", func() bool { return c.Loaded(0) })
}

// advance moves the clock by ms milliseconds.
func (f *fixture) advance(ms int64) {
	f.mu.Lock()
	f.now = f.now.Add(time.Duration(ms) * time.Millisecond)
	f.mu.Unlock()
}

// takeMarkers returns and clears the markers handed out so far.
func (f *fixture) takeMarkers() []Markers {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.markers
	f.markers = nil
	return out
}

func (f *fixture) describe(id string) Metadata {
	f.t.Helper()
	md, code := f.c.Describe(id)
	if code != 0 {
		f.t.Fatalf("Describe(%s): %v", id, errName(code))
	}
	return md
}

// init runs InitProducerId for a new producer and fails on error.
func (f *fixture) init(id string) InitResult {
	f.t.Helper()
	r := f.c.InitProducerID(id, 10000, -1, -1)
	if r.Err != 0 {
		f.t.Fatalf("InitProducerID(%s): %v", id, errName(r.Err))
	}
	return r
}

func (f *fixture) add(id string, r InitResult, parts ...TopicPartition) {
	f.t.Helper()
	if code := f.c.AddPartitions(id, r.ProducerID, r.ProducerEpoch, parts, 0); code != 0 {
		f.t.Fatalf("AddPartitions(%s): %v", id, errName(code))
	}
}

// complete writes the markers: CompleteTxn for each handed out.
func (f *fixture) completeAll() {
	f.t.Helper()
	for _, m := range f.takeMarkers() {
		if code := f.c.CompleteTxn(m); code != 0 {
			f.t.Fatalf("CompleteTxn(%+v): %v", m, errName(code))
		}
	}
}

func tp(topic string, p int32) TopicPartition { return TopicPartition{topic, p} }

func errName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	return kerr.ErrorForCode(code).Error()
}

func wantCode(t *testing.T, what string, got, want int16) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: %s, want %s", what, errName(got), errName(want))
	}
}

// waitFor polls cond until it holds (at most 10s).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
