package plog

// Storage failures (Kafka's log-dir failure handling, LogDirFailureChannel).
//
// Two kinds of I/O error reach the log:
//
//   - No file descriptor left (EMFILE, ENFILE: the process or the system
//     ran out, say under many idle connections or partitions with a low
//     ulimit -n) is treated as a full disk: it comes from opening a file
//     (a new segment, a checkpoint's temporary file), before anything
//     was written, says nothing of the disk, and passes once descriptors
//     are closed. The operation is refused with ErrNoDescriptors
//     (KAFKA_STORAGE_ERROR, which clients retry); the log is not failed
//     and the log directory stays online.
//   - A full disk (ENOSPC, EDQUOT) while appending: the partial write is
//     truncated away and the append is refused with ErrNoSpace; the log
//     stays usable and appends succeed again once there is room. The same
//     holds for index entries a flush could not write (they stay pending)
//     and for a checkpoint a flush could not rewrite (a stale recovery
//     point only costs recovery work).
//   - Anything else that changes the log's files and fails (a failed
//     fsync of a segment or the directory, EIO on write, a truncation or
//     undo that fails): the log is failed. After a failed fsync the kernel
//     may have dropped the dirty pages and will not report it again, so no
//     later fsync can be trusted to cover them: a failed log never fsyncs,
//     appends, reads or moves its recovery point again until it is
//     reopened, and Open recovers it from the last good recovery point.
//     The failure handler (OnFailure) is told once, so that the broker can
//     take the whole log directory offline.
//   - A read of a segment file that fails with an I/O error (EIO, or
//     anything but the end of the file or a file closed because its
//     segment was deleted) fails the log too, as Kafka takes a directory
//     offline for any IOException: the disk can no longer be trusted to
//     give back what was written. Reads inside the log (Read, the
//     timestamp searches) and reads of the files of the FileSlices it
//     hands out are watched (watchedFile). A read that ends early is not
//     a failure: a segment truncated or deleted under a reader ends
//     early, and such a read answers as before (errBadBatch inside the
//     log, io.EOF to a FileSlice's reader); nor is an offset out of range.
//   - Rewriting the files beside the segments (the recovery-point
//     checkpoint, the leader-epoch checkpoint, a producer snapshot) fails
//     the log when it fails with anything but a full disk before its
//     fsync, as Kafka takes the directory offline when a checkpoint
//     cannot be written.
//
// Both errors wrap kerr.KafkaStorageError, which is what Kafka answers for
// a partition in an offline log directory and what its clients retry.

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"syscall"

	"github.com/twmb/franz-go/pkg/kerr"
)

var (
	// ErrFailed marks errors of a log that failed (see the file comment).
	ErrFailed = errors.New("log failed")
	// ErrNoSpace marks an append refused because the disk is full.
	ErrNoSpace = errors.New("no space left on device")
	// ErrNoDescriptors marks an operation refused because the process
	// had no file descriptor left (EMFILE, ENFILE): transient, as a full
	// disk is.
	ErrNoDescriptors = errors.New("no file descriptor left")
	// errFsync tags fsync failures, which are never a mere full disk.
	errFsync = errors.New("fsync failed")
	// errUndo tags a failed write that could not be undone.
	errUndo = errors.New("undo failed")
)

// isNoSpace tells whether err is a full disk, or no file descriptor
// left, and nothing worse: a transient lack of a resource, not a disk
// failure.
func isNoSpace(err error) bool {
	return (errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || IsNoDescriptors(err)) &&
		!errors.Is(err, errFsync) && !errors.Is(err, errUndo)
}

// IsNoDescriptors tells whether err is the process or the system out of
// file descriptors (EMFILE, ENFILE).
func IsNoDescriptors(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)
}

// noSpace wraps a full-disk (or no-descriptor) error for the caller:
// retriable.
func noSpace(err error) error {
	if IsNoDescriptors(err) {
		return fmt.Errorf("%w: %w: %w", kerr.KafkaStorageError, ErrNoDescriptors, err)
	}
	return fmt.Errorf("%w: %w: %w", kerr.KafkaStorageError, ErrNoSpace, err)
}

// isReadFailure tells whether err, from reading a segment file, is a
// disk failure: an I/O error, not the end of the file (a read past a
// truncation or of a deleted segment), a closed file (a segment deleted
// after file.delete.delay.ms), a torn batch, or an offset out of range.
func isReadFailure(err error) bool {
	switch {
	case err == nil,
		errors.Is(err, io.EOF),
		errors.Is(err, io.ErrUnexpectedEOF),
		errors.Is(err, fs.ErrClosed),
		errors.Is(err, errBadBatch),
		errors.Is(err, ErrOffsetOutOfRange),
		errors.Is(err, ErrClosed),
		errors.Is(err, ErrFailed),
		IsNoDescriptors(err): // opening a file, not reading the disk
		return false
	}
	return true
}

// readFailed fails the log when err is a disk failure (isReadFailure)
// and returns the error for the caller: the failed log's error then,
// which wraps KAFKA_STORAGE_ERROR, else err as it is. l.mu not held.
func (l *Log) readFailed(err error) error {
	if !isReadFailure(err) {
		return err
	}
	return l.fail(fmt.Errorf("read: %w", err))
}

// syncErr tags an fsync failure.
func syncErr(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", errFsync, err)
}

// OnFailure installs fn, called once (in its own goroutine) when the log
// fails, with the cause. The broker takes the log directory offline.
func (l *Log) OnFailure(fn func(cause error)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.onFailure = fn
	if l.failed != nil {
		l.reportLocked()
	}
}

// Fail marks the log failed with cause, as if one of its own operations
// had failed (the log directory went offline because of another log). It
// does not wait for an fsync under way (a dead disk may hang it); such a
// flush ends without moving the recovery point.
func (l *Log) Fail(cause error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.failed == nil {
		l.failed = cause
		l.logger.Debug("partition log failed with its directory", "dir", l.dir, "err", cause)
	}
	l.reportLocked()
}

// Err returns the cause of the failure of a failed log, else nil.
func (l *Log) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failed
}

// failLocked fails the log with cause (the first cause stays) and returns
// the error for the caller. l.mu held.
func (l *Log) failLocked(cause error) error {
	if l.failed == nil {
		l.failed = cause
		l.logger.Error("partition log failed: no fsync, append or read until it is reopened", "dir", l.dir, "err", cause)
	}
	l.reportLocked()
	return l.failedErrLocked()
}

// fail is failLocked taking l.mu.
func (l *Log) fail(cause error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failLocked(cause)
}

// failedErrLocked is the error operations of a failed log return.
func (l *Log) failedErrLocked() error {
	return fmt.Errorf("%w: log %s: %w: %w", kerr.KafkaStorageError, l.dir, ErrFailed, l.failed)
}

// reportLocked calls the failure handler once, without l.mu (it may call
// back into logs).
func (l *Log) reportLocked() {
	if l.reported || l.onFailure == nil || l.failed == nil {
		return
	}
	l.reported = true
	go l.onFailure(l.failed)
}
