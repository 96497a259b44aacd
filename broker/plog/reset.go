package plog

// Reset: truncate the log fully and start it again, empty, at an offset,
// with a given leader-epoch history and producer state. A follower of a
// tiered partition does this when the leader's local log starts above its
// own log end (OFFSET_MOVED_TO_TIERED_STORAGE): the offsets below stay in
// the bucket, and only the epochs and producers that the segment just
// below the leader's local log start ended with are needed here (Kafka's
// truncateFullyAndStartAt after buildRemoteLogAuxState).
//
// Crash safety: ResetTo first writes the whole new state into one file,
// log-reset, crash-safely (temp, fsync, rename, fsync directory); that
// rename is the commit point. Before it, the directory is untouched
// apart from log-reset.tmp (removed as a stray at Open): a crash
// recovers the old log. After it, every step (segment files removed, the
// empty segment created, the producer snapshot, leader-epoch-checkpoint
// and log-checkpoint written, log-reset removed) is idempotent and Open
// redoes them all when it finds log-reset: a crash recovers the new log.
//
// log-reset format (all lengths decimal, lines end in "\n"):
//
//	0               version
//	<offset>        the new log start and end offset
//	<E>             bytes of the leader-epoch checkpoint that follows
//	<S>             bytes of the producer snapshot that follows (0: none)
//	E bytes         leader-epoch-checkpoint (Kafka's text format)
//	S bytes         producer snapshot (producerstate_snapshot.go)
//
// Nothing may follow; parseReset accepts exactly this and never panics
// (FuzzParseReset).

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
)

const (
	resetName    = "log-reset"
	resetVersion = 0
	// maxResetSize bounds log-reset (an epoch checkpoint and a producer
	// snapshot are small: a snapshot entry is 46 bytes).
	maxResetSize = 64 << 20
)

// Reset is the state ResetTo starts the log with.
type Reset struct {
	// Offset is the new log start and log end offset.
	Offset int64
	// EpochCheckpoint is a leader-epoch-checkpoint (Kafka's text format;
	// a remote segment's .leader-epoch-checkpoint object). Entries after
	// Offset are dropped; those at or below collapse to the one that
	// covers Offset, as for any log whose start is Offset. Empty: no
	// epochs.
	EpochCheckpoint []byte
	// ProducerSnapshot is the producer state as of Offset (a remote
	// segment's .snapshot object, written at its end offset + 1); nil:
	// no producers.
	ProducerSnapshot []byte
}

var errBadReset = errors.New("malformed log-reset")

type resetState struct {
	offset   int64
	epochs   []EpochEntry
	snapshot []byte
}

// normalize validates r and cuts its epochs to a log starting at r.Offset.
func (r Reset) normalize() (resetState, error) {
	if r.Offset < 0 {
		return resetState{}, fmt.Errorf("reset to %d: %w", r.Offset, ErrOffsetOutOfRange)
	}
	entries, err := parseEpochCheckpoint(r.EpochCheckpoint)
	if err != nil {
		return resetState{}, fmt.Errorf("reset to %d: %w", r.Offset, err)
	}
	if len(r.ProducerSnapshot) > 0 {
		if _, err := decodeProducerSnapshot(r.ProducerSnapshot); err != nil {
			return resetState{}, fmt.Errorf("reset to %d: %w", r.Offset, err)
		}
	}
	c := &EpochCache{entries: entries}
	_ = c.TruncateFromEnd(r.Offset + 1) // in memory only: no error; an entry at Offset stays (idempotent)
	_ = c.TruncateFromStart(r.Offset)
	return resetState{offset: r.Offset, epochs: c.entries, snapshot: r.ProducerSnapshot}, nil
}

func (rs resetState) encode() []byte {
	ck := encodeEpochCheckpoint(rs.epochs)
	var b bytes.Buffer
	fmt.Fprintf(&b, "%d\n%d\n%d\n%d\n", resetVersion, rs.offset, len(ck), len(rs.snapshot))
	b.Write(ck)
	b.Write(rs.snapshot)
	return b.Bytes()
}

// parseReset decodes log-reset.
func parseReset(b []byte) (resetState, error) {
	if len(b) > maxResetSize {
		return resetState{}, fmt.Errorf("%w: %d bytes", errBadReset, len(b))
	}
	var v [4]int64
	rest := b
	for i := range v {
		line, after, ok := bytes.Cut(rest, []byte{'\n'})
		if !ok || len(line) > 20 {
			return resetState{}, fmt.Errorf("%w: header line %d", errBadReset, i+1)
		}
		n, err := strconv.ParseInt(string(line), 10, 64)
		if err != nil || n < 0 || strings.HasPrefix(string(line), "+") {
			return resetState{}, fmt.Errorf("%w: header line %d", errBadReset, i+1)
		}
		v[i], rest = n, after
	}
	if v[0] != resetVersion {
		return resetState{}, fmt.Errorf("%w: version %d", errBadReset, v[0])
	}
	if v[2] > int64(len(rest)) || v[3] != int64(len(rest))-v[2] {
		return resetState{}, fmt.Errorf("%w: sections of %d and %d bytes in %d", errBadReset, v[2], v[3], len(rest))
	}
	rs, err := Reset{Offset: v[1], EpochCheckpoint: rest[:v[2]], ProducerSnapshot: rest[v[2]:]}.normalize()
	if err != nil {
		return resetState{}, fmt.Errorf("%w: %v", errBadReset, err)
	}
	if len(rs.snapshot) == 0 {
		rs.snapshot = nil
	}
	return rs, nil
}

// ResetTo truncates the log fully and starts it again at r.Offset, empty,
// with r's leader epochs and producer state (see the file comment for its
// crash safety). Readers holding FileSlices of old segments keep them
// (deleted segments are removed after file.delete.delay.ms). A failure
// after the commit point leaves the log unusable until it is reopened,
// which completes the reset.
func (l *Log) ResetTo(r Reset) error {
	rs, err := r.normalize()
	if err != nil {
		return err
	}
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	if err := writeFileAtomic(l, resetName, rs.encode()); err != nil {
		return fmt.Errorf("reset to %d: %w", rs.offset, err)
	}
	// Committed: from here a failure leaves the reset to Open (the old
	// segments stay in memory, closed by Close, until then).
	l.truncGen++
	l.cleanerOffset = -1
	fail := func(err error) error {
		return l.failLocked(fmt.Errorf("reset to %d: %w", rs.offset, err))
	}
	for _, s := range l.segs {
		if err := s.renameDeleted(l.fs, l.dir); err != nil {
			return fail(err)
		}
	}
	if err := l.finishReset(rs, false); err != nil {
		return fail(err)
	}
	s, err := openSegmentFiles(l.fs, l.dir, rs.offset, false)
	if err != nil {
		return fail(err)
	}
	s.createdMs = l.nowMs()
	old := l.segs
	l.segs = []*segment{s}
	for _, o := range old {
		if err := l.scheduleDeleteLocked(o); err != nil {
			return fail(err)
		}
	}
	l.logStart, l.recoveryPoint = rs.offset, rs.offset
	if l.epochs, err = OpenEpochCache(l.fs, l.dir); err != nil {
		return fail(err)
	}
	if err := l.reloadProducersLocked(-1); err != nil {
		return fail(err)
	}
	l.logger.Debug("reset log", "dir", l.dir, "offset", rs.offset, "epochs", len(rs.epochs), "producers", l.producers.Len())
	return nil
}

// finishReset does the steps after the commit point: every segment,
// snapshot, swap and cleaner file goes (at Open also *.deleted: live,
// those still pending are left to their timers), then the empty segment,
// the producer snapshot, the epoch checkpoint and the log checkpoint are
// written and log-reset removed. Idempotent.
func (l *Log) finishReset(rs resetState, atOpen bool) error {
	names, err := l.fs.ReadDir(l.dir)
	if err != nil {
		return fmt.Errorf("list: %w", err)
	}
	for _, n := range names {
		_, isLog := parseBase(n, logSuffix)
		_, isIdx := parseBase(n, indexSuffix)
		_, isTidx := parseBase(n, timeIndexSuffix)
		_, isTxn := parseBase(n, txnIndexSuffix)
		_, isSnap := parseProducerSnapshotName(n)
		drop := isLog || isIdx || isTidx || isTxn || isSnap || n == cleanerCheckpointName ||
			strings.HasSuffix(n, swapSuffix) || strings.HasSuffix(n, cleanedSuffix) ||
			atOpen && strings.HasSuffix(n, deletedSuffix)
		if !drop {
			continue
		}
		if err := l.fs.Remove(filepath.Join(l.dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", n, err)
		}
	}
	s, err := openSegmentFiles(l.fs, l.dir, rs.offset, true)
	if err != nil {
		return err
	}
	if err := s.close(); err != nil {
		return fmt.Errorf("close segment %d: %w", rs.offset, err)
	}
	if rs.snapshot != nil {
		if err := replaceFileDurably(l.fs, l.dir, filepath.Join(l.dir, producerSnapshotName(rs.offset)), rs.snapshot); err != nil {
			return fmt.Errorf("write producer snapshot: %w", err)
		}
	}
	if err := replaceFileDurably(l.fs, l.dir, filepath.Join(l.dir, epochCheckpointName), encodeEpochCheckpoint(rs.epochs)); err != nil {
		return fmt.Errorf("write leader epoch checkpoint: %w", err)
	}
	if err := l.writeCheckpoint(checkpoint{recoveryPoint: rs.offset, logStartOffset: rs.offset}); err != nil {
		return err
	}
	if err := l.fs.Remove(filepath.Join(l.dir, resetName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", resetName, err)
	}
	return l.fs.SyncDir(l.dir)
}

// completeReset finishes a committed reset at Open.
func (l *Log) completeReset() error {
	b, err := psReadFile(l.fs, filepath.Join(l.dir, resetName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	rs, err := parseReset(b)
	if err != nil {
		// Written by rename after an fsync: only outside damage gets here.
		l.logger.Warn("ignoring unreadable log-reset", "dir", l.dir, "err", err)
		return l.fs.Remove(filepath.Join(l.dir, resetName))
	}
	l.logger.Info("completing interrupted log reset", "dir", l.dir, "offset", rs.offset)
	return l.finishReset(rs, true)
}
