package plog

// Reads that fail (issue 15, disks that fail): an I/O error reading a
// segment fails the log, as Kafka takes the log directory offline for any
// IOException; a read that merely ends early (a truncated or deleted
// segment) or an offset out of range does not.

import (
	"errors"
	"io"
	"io/fs"
	"syscall"
	"testing"
	"time"

	"strata/internal/vfs"
)

// failureSeen installs a failure handler on l and returns a function that
// waits for it (up to a second) and returns its cause, nil if it was not
// called.
func failureSeen(l *Log) func() error {
	ch := make(chan error, 1)
	l.OnFailure(func(cause error) { ch <- cause })
	return func() error {
		select {
		case err := <-ch:
			return err
		case <-time.After(time.Second):
			return nil
		}
	}
}

// Before the fix an EIO reading a segment was answered as an unknown
// error and the log stayed in use, its directory online.
func TestReadEIOFailsTheLog(t *testing.T) {
	e := newMemEnv()
	l := e.open(t)
	seen := failureSeen(l)
	appendN(t, l, e, 5, 2, 20)

	e.mem.SetInjector(vfs.FailWith(vfs.OpRead, ".log", syscall.EIO))
	_, err := l.Read(0, 100, 1<<20, true)
	e.mem.SetInjector(nil)
	if !isStorageErr(err) || !errors.Is(err, ErrFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("read on EIO: %v, want KAFKA_STORAGE_ERROR of a failed log", err)
	}
	if cause := seen(); !errors.Is(cause, syscall.EIO) {
		t.Fatalf("failure handler told %v, want the EIO", cause)
	}
	if _, err := l.Read(0, 100, 1<<20, true); !errors.Is(err, ErrFailed) {
		t.Fatalf("read once the disk answers again: %v, want the failed log's error", err)
	}
	if _, err := l.Append(testBatch{records: 1, ts: e.clock.Ms()}.bytes(), 0); !errors.Is(err, ErrFailed) {
		t.Fatalf("append after a failed read: %v", err)
	}
}

// A FileSlice's file read by the broker (the fetch response's copy) fails
// the log on EIO, and keeps returning the error to its reader.
func TestSliceReadEIOFailsTheLog(t *testing.T) {
	e := newMemEnv()
	l := e.open(t)
	seen := failureSeen(l)
	appendN(t, l, e, 5, 2, 20)
	sl, err := l.ReadForFetch(0, l.LogEndOffset(), 1<<20, true)
	if err != nil || sl.Len == 0 {
		t.Fatalf("read: %v, %d bytes", err, sl.Len)
	}
	e.mem.SetInjector(vfs.FailWith(vfs.OpRead, ".log", syscall.EIO))
	_, err = io.Copy(io.Discard, io.NewSectionReader(sl.File, sl.Pos, sl.Len))
	e.mem.SetInjector(nil)
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("slice read on EIO: %v", err)
	}
	if cause := seen(); !errors.Is(cause, syscall.EIO) {
		t.Fatalf("failure handler told %v, want the EIO", cause)
	}
	if l.Err() == nil {
		t.Fatal("log not failed after a slice read failed with EIO")
	}
}

// ListOffsets by timestamp reads batches too: an EIO there fails the log.
func TestOffsetForTimestampEIOFailsTheLog(t *testing.T) {
	e := newMemEnv()
	l := e.open(t)
	seen := failureSeen(l)
	ts := e.clock.Ms()
	appendN(t, l, e, 5, 2, 20)
	e.mem.SetInjector(vfs.FailWith(vfs.OpRead, ".log", syscall.EIO))
	_, _, _, found := l.OffsetForTimestamp(ts + 1)
	e.mem.SetInjector(nil)
	if found {
		t.Fatal("OffsetForTimestamp found an offset in a segment it could not read")
	}
	if cause := seen(); !errors.Is(cause, syscall.EIO) {
		t.Fatalf("failure handler told %v, want the EIO", cause)
	}
}

// What is not a disk failure: an offset out of range, a slice read short
// because a follower truncated the segment under it, a slice of a segment
// deleted (and its file closed) since, and a read of a segment's tail
// that is not there any more.
func TestReadEndsEarlyIsNoFailure(t *testing.T) {
	e := newMemEnv()
	e.cfg.SegmentBytes = 300
	l := e.open(t)
	for i := range 12 {
		if _, err := l.AppendReplicated(replicatedBatch(int64(i), 1, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Read(l.LogEndOffset()+5, 1<<62, 1<<20, true); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read past the end: %v, want out of range", err)
	}

	// Truncated under the reader: the slice of the active segment ends early.
	leo := l.LogEndOffset()
	tail, err := l.Read(leo-2, leo, 1<<20, true)
	if err != nil || tail.Len == 0 {
		t.Fatalf("read tail: %v, %d bytes", err, tail.Len)
	}
	if err := l.Truncate(leo - 2); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, tail.Len)
	if _, err := tail.File.ReadAt(buf, tail.Pos); !errors.Is(err, io.EOF) {
		t.Fatalf("read of a truncated slice: %v, want EOF", err)
	}

	// Deleted under the reader: file.delete.delay.ms is 0, so the file
	// is closed at once.
	head, err := l.Read(0, 1, 1<<20, true)
	if err != nil || head.Len == 0 {
		t.Fatalf("read head: %v, %d bytes", err, head.Len)
	}
	if _, err := l.DeleteRecordsBefore(l.LogEndOffset() - 1); err != nil {
		t.Fatal(err)
	}
	if _, err := head.File.ReadAt(buf[:head.Len], head.Pos); !errors.Is(err, fs.ErrClosed) {
		t.Fatalf("read of a deleted segment's slice: %v, want a closed file", err)
	}

	if err := l.Err(); err != nil {
		t.Fatalf("the log failed: %v", err)
	}
	if _, err := l.Read(l.LogStartOffset(), 1<<62, 1<<20, true); err != nil {
		t.Fatalf("read after: %v", err)
	}
}
