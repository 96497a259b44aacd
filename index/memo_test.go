package index

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
)

// bounds is what the memo answers for tp: LogStart, LogEnd and
// LogStartOffset (-1 where there is none).
func bounds(t *testing.T, x *Index, tp TopicIDPartition) [3]int64 {
	t.Helper()
	out := [3]int64{-1, -1, -1}
	for i, f := range []func(TopicIDPartition) (int64, bool, error){x.LogStart, x.LogEnd, x.LogStartOffset} {
		off, ok, err := f(tp)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			out[i] = off
		}
	}
	return out
}

// TestMemoSeesEveryWrite: each kind of write changes the answers of
// LogStart, LogEnd and LogStartOffset at once, although every answer was
// asked for (and memoized) before it; a write to one partition leaves the
// other's answers right; and after Close the lookups fail rather than
// answer from memory.
func TestMemoSeesEveryWrite(t *testing.T) {
	x := openMem(t)
	want := func(what string, tp TopicIDPartition, w [3]int64) {
		t.Helper()
		bounds(t, x, tp) // asked twice: the second answer is the memo's
		if got := bounds(t, x, tp); got != w {
			t.Fatalf("after %s: %v (log start, log end, log start offset), want %v", what, got, w)
		}
	}
	want("nothing", tpA0, [3]int64{-1, -1, -1})
	s0 := add(t, x, seg(tpA0, 0, 99, 10), CopySegmentStarted)
	want("a started upload", tpA0, [3]int64{-1, -1, -1})
	if _, err := x.UpdateSegment(SegmentUpdate{Partition: tpA0, SegmentID: s0.SegmentID, State: CopySegmentFinished}); err != nil {
		t.Fatal(err)
	}
	want("a finished upload", tpA0, [3]int64{0, 99, -1})
	add(t, x, seg(tpA0, 100, 199, 20), CopySegmentFinished)
	want("a second segment", tpA0, [3]int64{0, 199, -1})
	add(t, x, seg(tpA1, 0, 49, 10), CopySegmentFinished)
	want("a segment of the other partition", tpA1, [3]int64{0, 49, -1})
	want("a segment of the other partition", tpA0, [3]int64{0, 199, -1})
	if _, err := x.RaiseLogStartOffset(tpA0, 150); err != nil {
		t.Fatal(err)
	}
	want("DeleteRecords", tpA0, [3]int64{0, 199, 150})
	if _, err := x.UpdateSegment(SegmentUpdate{Partition: tpA0, SegmentID: s0.SegmentID, State: DeleteSegmentStarted}); err != nil {
		t.Fatal(err)
	}
	want("a deletion", tpA0, [3]int64{100, 199, 150})
	if err := x.ReplacePartition(tpA0, []SegmentMetadata{func() SegmentMetadata {
		m := seg(tpA0, 300, 399, 30)
		m.State = CopySegmentFinished
		return m
	}()}); err != nil {
		t.Fatal(err)
	}
	want("a rebuild", tpA0, [3]int64{300, 399, 150})
	if err := x.ForgetTopic(topicA); err != nil {
		t.Fatal(err)
	}
	want("forgetting the topic", tpA0, [3]int64{-1, -1, -1})
	want("forgetting the topic", tpA1, [3]int64{-1, -1, -1})

	add(t, x, seg(tpA0, 0, 9, 1), CopySegmentFinished)
	bounds(t, x, tpA0)
	x.Close()
	if _, _, err := x.LogEnd(tpA0); !errors.Is(err, ErrClosed) {
		t.Fatalf("LogEnd after Close: %v, want ErrClosed", err)
	}
}

// TestMemoConcurrentReaders: while readers ask for LogEnd as fast as they
// can (so that answers computed from snapshots older than a write race to
// be stored), a writer that adds a segment reads its own write every time.
func TestMemoConcurrentReaders(t *testing.T) {
	x := openMem(t)
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				if _, _, err := x.LogEnd(tpA0); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	for i := range int64(200) {
		add(t, x, seg(tpA0, i*10, i*10+9, i), CopySegmentFinished)
		if end, ok, err := x.LogEnd(tpA0); err != nil || !ok || end != i*10+9 {
			stop.Store(true)
			wg.Wait()
			t.Fatalf("after segment %d: LogEnd %d %v %v, want %d", i, end, ok, err, i*10+9)
		}
	}
	stop.Store(true)
	wg.Wait()
}
