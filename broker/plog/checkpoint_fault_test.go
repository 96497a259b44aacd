package plog

// The files beside the segments failing to be written (issue 15): a
// producer snapshot at a roll, the leader-epoch checkpoint and the log
// checkpoint when retention moves the log start. An I/O error fails the
// log, as Kafka takes the directory offline when a checkpoint or snapshot
// cannot be written; a full disk before the fsync does not, and an fsync
// failing with ENOSPC is a failed fsync, not a full disk. Nor does a file
// that cannot be opened for lack of descriptors (EMFILE, ENFILE).

import (
	"errors"
	"syscall"
	"testing"

	"strata/internal/vfs"
)

func TestSideFileWriteFailures(t *testing.T) {
	type step func(t *testing.T, e *logEnv, l *Log) error
	// appendUntilError appends batches past two rolls, stopping at the
	// first error.
	appendUntilError := func(t *testing.T, e *logEnv, l *Log) error {
		w := newWritten()
		for range 12 {
			if err := appendBatch(e, l, w, 0); err != nil {
				return err
			}
		}
		return nil
	}
	// deleteRecords moves the log start into the last segment (the epoch
	// cache and the log checkpoint are rewritten).
	deleteRecords := func(t *testing.T, e *logEnv, l *Log) error {
		_, err := l.DeleteRecordsBefore(l.LogEndOffset() - 1)
		return err
	}
	for _, c := range []struct {
		name   string
		inject vfs.Injector
		setup  bool // append (and roll) before injecting
		do     step
		fails  bool
	}{
		{"producer snapshot write EIO at roll", vfs.FailWith(vfs.OpWrite, ".snapshot", syscall.EIO), false, appendUntilError, true},
		{"producer snapshot rename EIO at roll", vfs.FailWith(vfs.OpRename, ".snapshot", syscall.EIO), false, appendUntilError, true},
		{"producer snapshot fsync ENOSPC at roll", vfs.FailWith(vfs.OpSync, ".snapshot", syscall.ENOSPC), false, appendUntilError, true},
		{"producer snapshot disk full at roll", vfs.FailWith(vfs.OpWrite, ".snapshot", syscall.ENOSPC), false, appendUntilError, false},
		{"epoch checkpoint write EIO at retention", vfs.FailWith(vfs.OpWrite, epochCheckpointName, syscall.EIO), true, deleteRecords, true},
		{"log checkpoint write EIO at retention", vfs.FailWith(vfs.OpWrite, checkpointName, syscall.EIO), true, deleteRecords, true},
		{"log checkpoint fsync ENOSPC at retention", vfs.FailWith(vfs.OpSync, checkpointName, syscall.ENOSPC), true, deleteRecords, true},
		{"log checkpoint disk full at retention", vfs.FailWith(vfs.OpWrite, checkpointName, syscall.ENOSPC), true, deleteRecords, false},
		// No file descriptor left (issue 25: idle connections or many
		// partitions under a low ulimit -n) is not a disk failure.
		{"producer snapshot EMFILE at roll", vfs.FailWith(vfs.OpOpen, ".snapshot", syscall.EMFILE), false, appendUntilError, false},
		{"new segment EMFILE at roll", vfs.FailWith(vfs.OpOpen, ".log", syscall.EMFILE), false, appendUntilError, false},
		{"new segment index ENFILE at roll", vfs.FailWith(vfs.OpOpen, ".timeindex", syscall.ENFILE), false, appendUntilError, false},
		{"epoch checkpoint EMFILE at retention", vfs.FailWith(vfs.OpOpen, epochCheckpointName, syscall.EMFILE), true, deleteRecords, false},
		{"log checkpoint EMFILE at retention", vfs.FailWith(vfs.OpOpen, checkpointName, syscall.EMFILE), true, deleteRecords, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := durableEnv()
			l := e.open(t)
			seen := failureSeen(l)
			if c.setup {
				if err := appendUntilError(t, e, l); err != nil {
					t.Fatal(err)
				}
			}
			e.mem.SetInjector(c.inject)
			err := c.do(t, e, l)
			e.mem.SetInjector(nil)
			if !c.fails {
				if l.Err() != nil {
					t.Fatalf("the log failed on a full disk: %v (step: %v)", l.Err(), err)
				}
				if cause := seen(); cause != nil {
					t.Fatalf("failure handler told: %v", cause)
				}
				// Once the resource is back, the log goes on.
				if _, err := l.Append(testBatch{records: 1, ts: e.clock.Ms()}.bytes(), 0); err != nil {
					t.Fatalf("append after: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrFailed) || !isStorageErr(err) {
				t.Fatalf("step: %v, want the failed log's KAFKA_STORAGE_ERROR", err)
			}
			if cause := seen(); cause == nil {
				t.Fatal("failure handler not told")
			}
			if _, err := l.Append(testBatch{records: 1, ts: e.clock.Ms()}.bytes(), 0); !errors.Is(err, ErrFailed) {
				t.Fatalf("append after: %v", err)
			}
		})
	}
}
