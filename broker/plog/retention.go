package plog

import (
	"fmt"
	"time"
)

// EnforceRetention deletes the oldest sealed segments that lie wholly
// below the log start offset and, when cleanup.policy has delete, those
// past retention.ms (by their largest timestamp, or the file's
// modification time when they hold none, as Kafka does) or that
// retention.bytes does not leave room for. The active
// segment is never deleted. The log start offset moves to the first
// remaining segment.
func (l *Log) EnforceRetention() (int, error) {
	cfg := l.cfg.Load()
	return l.enforceRetention(cfg.RetentionMs, cfg.RetentionBytes, -1, false)
}

// TieredRetention is local retention of a partition whose segments are
// copied to remote storage (remote.storage.enable).
type TieredRetention struct {
	// LocalRetentionMs and LocalRetentionBytes are local.retention.ms and
	// local.retention.bytes with -2 resolved to retention.ms/bytes; -1 is
	// unlimited.
	LocalRetentionMs    int64
	LocalRetentionBytes int64
	// RemoteEnd is the last offset held by COPY_SEGMENT_FINISHED remote
	// segments (-1: none). Only segments whose last offset is at or below
	// it may be deleted for retention.
	RemoteEnd int64
}

// EnforceTieredRetention is EnforceRetention for a tiered partition:
// segments go by local.retention.ms/bytes (when cleanup.policy has
// delete), and never before they are wholly uploaded (last offset at or
// below RemoteEnd), except those wholly below the log start offset
// (DeleteRecords), as in Kafka. The log start offset moves to the first
// remaining local segment.
func (l *Log) EnforceTieredRetention(t TieredRetention) (int, error) {
	return l.enforceRetention(t.LocalRetentionMs, t.LocalRetentionBytes, t.RemoteEnd, true)
}

func (l *Log) enforceRetention(retentionMs, retentionBytes, remoteEnd int64, tiered bool) (int, error) {
	cfg := l.cfg.Load()
	nowMs := l.nowMs()
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	if l.failed != nil {
		l.mu.Unlock()
		return 0, nil // a failed log does no background work
	}
	if err := l.usableLocked(); err != nil {
		l.mu.Unlock()
		return 0, err
	}
	var total int64
	for _, s := range l.segs {
		total += s.size
	}
	n := 0
	for ; n < len(l.segs)-1; n++ {
		s := l.segs[n]
		breached := l.segs[n+1].base <= l.logStart
		if !breached && tiered && s.next-1 > remoteEnd {
			break // not uploaded yet
		}
		if !breached && cfg.Delete && retentionMs >= 0 {
			ts := s.maxTs
			if ts < 0 {
				if fi, err := l.fs.Stat(segmentPath(l.dir, s.base, logSuffix)); err == nil {
					ts = fi.ModTime().UnixMilli()
				}
			}
			breached = ts >= 0 && nowMs-ts > retentionMs
		}
		if !breached && cfg.Delete && retentionBytes >= 0 {
			breached = total-s.size >= retentionBytes
		}
		if !breached {
			break
		}
		total -= s.size
	}
	if n == 0 {
		l.mu.Unlock()
		return 0, nil
	}
	return n, l.deleteOldestLocked(n, max(l.logStart, l.segs[n].base))
}

// DeleteRecordsBefore moves the log start offset to offset (DeleteRecords),
// persists it before returning, and deletes the segments wholly below it.
func (l *Log) DeleteRecordsBefore(offset int64) (int64, error) {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	if err := l.usableLocked(); err != nil {
		l.mu.Unlock()
		return -1, err
	}
	if offset > l.leo() || offset < 0 {
		leo := l.leo()
		l.mu.Unlock()
		return -1, fmt.Errorf("%w: delete records before %d, log end %d", ErrOffsetOutOfRange, offset, leo)
	}
	if offset <= l.logStart {
		ls := l.logStart
		l.mu.Unlock()
		return ls, nil
	}
	n := 0
	for n < len(l.segs)-1 && l.segs[n+1].base <= offset {
		n++
	}
	if err := l.deleteOldestLocked(n, offset); err != nil {
		return -1, err
	}
	return offset, nil
}

// deleteOldestLocked drops the first n segments, sets the log start to
// logStart, persists the checkpoint and trims epochs and snapshots. It is
// called with flushMu and mu held and releases mu.
func (l *Log) deleteOldestLocked(n int, logStart int64) error {
	dead := append([]*segment(nil), l.segs[:n]...)
	l.segs = append([]*segment(nil), l.segs[n:]...)
	l.logStart = logStart
	// A file that cannot be rewritten or renamed for any reason but a
	// full disk fails the log (failure.go); on a full disk the stale
	// epoch checkpoint is rebuilt by recovery and the stale log start
	// only keeps deleted offsets' segments out of reach until retried.
	var firstErr error
	fail := func(err error) {
		if !isNoSpace(err) {
			err = l.failLocked(err)
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if err := l.epochs.TruncateFromStart(logStart); err != nil {
		fail(fmt.Errorf("truncate epoch cache from %d: %w", logStart, err))
	}
	for _, s := range dead {
		if err := l.scheduleDeleteLocked(s); err != nil {
			fail(err)
		}
	}
	cp := l.checkpointLocked(false)
	oldest := l.segs[0].base
	l.mu.Unlock()
	if err := l.writeCheckpoint(cp); err != nil {
		if !isNoSpace(err) {
			err = l.fail(err)
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	if err := DeleteSnapshotsBefore(l.fs, l.dir, oldest); err != nil {
		l.logger.Debug("delete producer snapshots", "dir", l.dir, "before", oldest, "err", err)
	}
	if len(dead) > 0 {
		l.logger.Debug("deleted segments", "dir", l.dir, "count", len(dead), "logStart", logStart)
	}
	return firstErr
}

// scheduleDeleteLocked renames a segment's files to *.deleted and closes
// and removes them after file.delete.delay.ms, so that FileSlices handed
// out before stay readable.
func (l *Log) scheduleDeleteLocked(s *segment) error {
	if err := s.renameDeleted(l.fs, l.dir); err != nil {
		return fmt.Errorf("delete segment %d: %w", s.base, err)
	}
	delay := l.cfg.Load().FileDeleteDelayMs
	if delay <= 0 {
		l.finishDelete(s)
		return nil
	}
	l.pending[s] = time.AfterFunc(time.Duration(delay)*time.Millisecond, func() {
		l.mu.Lock()
		_, ok := l.pending[s]
		delete(l.pending, s)
		l.mu.Unlock()
		if ok {
			l.finishDelete(s)
		}
	})
	return nil
}

func (l *Log) finishDelete(s *segment) {
	s.close()
	if err := removeSegmentFiles(l.fs, l.dir, s.base, deletedSuffix); err != nil {
		l.logger.Warn("remove deleted segment", "dir", l.dir, "segment", s.base, "err", err)
	}
}

// Truncate removes every offset >= offset (a follower diverging from its
// leader). Offsets inside a batch truncate the whole batch, as Kafka does.
// The truncation is durable when Truncate returns (the cut segment is
// fsynced, the directory too when segments went), and the checkpoint's
// recovery point is lowered to the new end before anything can be
// appended, so that a power loss can neither bring the divergent tail
// back nor leave it unchecked by recovery. Any failure once files changed
// fails the log (failure.go), except a checkpoint or epoch file that does
// not fit on a full disk: the epoch cache is right in memory and rebuilt
// from the batches by recovery, and appends wait until the checkpoint is
// rewritten.
func (l *Log) Truncate(offset int64) error {
	l.flushMu.Lock()
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return err
	}
	if offset < 0 {
		return fmt.Errorf("truncate to %d: %w", offset, ErrOffsetOutOfRange)
	}
	if offset >= l.leo() {
		return nil
	}
	l.truncGen++
	if l.cleanerOffset > offset {
		l.cleanerOffset = offset
	}
	cfg := l.cfg.Load()
	if offset < l.segs[0].base {
		// Nothing stays: start over at offset.
		for _, s := range l.segs {
			if err := l.scheduleDeleteLocked(s); err != nil {
				return l.failLocked(err)
			}
		}
		s, err := openSegmentFiles(l.fs, l.dir, offset, true)
		if err != nil {
			return l.failLocked(err)
		}
		s.createdMs = l.nowMs()
		l.segs = []*segment{s}
		l.logStart = offset
	} else {
		i := l.segmentFor(offset)
		for _, s := range l.segs[i+1:] {
			if err := l.scheduleDeleteLocked(s); err != nil {
				return l.failLocked(err)
			}
		}
		l.segs = l.segs[:i+1]
		if err := l.truncateSegmentLocked(l.segs[i], offset, cfg); err != nil {
			return l.failLocked(err)
		}
		if err := l.segs[i].syncAll(); err != nil {
			return l.failLocked(err)
		}
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.failLocked(syncErr(fmt.Errorf("truncate to %d: sync dir: %w", offset, err)))
	}
	leo := l.leo()
	l.logStart = min(l.logStart, leo)
	l.recoveryPoint = min(l.recoveryPoint, leo)
	if err := l.writeCheckpoint(l.checkpointLocked(false)); err != nil {
		if !isNoSpace(err) {
			return l.failLocked(err)
		}
		l.staleCheckpoint = true
		l.logger.Warn("log checkpoint not rewritten after truncation: disk full; appends wait for it", "dir", l.dir, "err", err)
	}
	if err := l.epochs.TruncateFromEnd(leo); err != nil {
		if !isNoSpace(err) {
			return l.failLocked(fmt.Errorf("truncate epoch cache to %d: %w", leo, err))
		}
		l.logger.Warn("leader epoch checkpoint not rewritten after truncation: disk full or no file descriptor left", "dir", l.dir, "err", err)
	}
	if err := l.reloadProducersLocked(-1); err != nil {
		return l.failLocked(err)
	}
	return nil
}

// truncateSegmentLocked cuts segment s before the batch holding offset and
// makes it the active segment again.
func (l *Log) truncateSegmentLocked(s *segment, offset int64, cfg *Config) error {
	v := s.snapshot()
	h, cut, found, err := v.findBatch(v.idx.lookup(offset), offset)
	if err != nil {
		return fmt.Errorf("truncate segment %d: %w", s.base, err)
	}
	if !found {
		cut, h.BaseOffset = s.size, s.next
	}
	// Bring the index entries into memory, keeping those before the cut.
	var idx []offsetEntry
	for i := 0; i < s.idx.n; i++ {
		e, ok := v.idx.entry(i)
		if !ok || int64(e.pos) >= cut {
			break
		}
		idx = append(idx, e)
	}
	var tidx []timeEntry
	for i := 0; i < s.tidx.n; i++ {
		e, ok := v.tidx.entry(i)
		if !ok || s.base+int64(e.rel) >= h.BaseOffset {
			break
		}
		tidx = append(tidx, e)
	}
	if err := s.log.Truncate(cut); err != nil {
		return fmt.Errorf("truncate segment %d to %d: %w", s.base, cut, err)
	}
	if err := s.idx.f.Truncate(int64(min(s.idx.onDisk, len(idx))) * offsetEntrySize); err != nil {
		return fmt.Errorf("truncate index %d: %w", s.base, err)
	}
	if err := s.tidx.f.Truncate(int64(min(s.tidx.onDisk, len(tidx))) * timeEntrySize); err != nil {
		return fmt.Errorf("truncate time index %d: %w", s.base, err)
	}
	s.idx = offsetIndex{f: s.idx.f, mem: append([]offsetEntry{}, idx...), n: len(idx), onDisk: min(s.idx.onDisk, len(idx)), check: s.idx.check}
	s.tidx = timeIndex{f: s.tidx.f, mem: append([]timeEntry{}, tidx...), n: len(tidx), onDisk: min(s.tidx.onDisk, len(tidx))}
	s.size, s.next = cut, h.BaseOffset
	s.sealed, s.flushed = false, false
	s.maxTs, s.maxTsOffset = -1, -1
	if len(tidx) > 0 {
		e := tidx[len(tidx)-1]
		s.maxTs, s.maxTsOffset = e.ts, s.base+int64(e.rel)
	}
	from := int64(0)
	if len(idx) > 0 {
		from = int64(idx[len(idx)-1].pos)
	}
	s.bytesSinceIndex = cut - from
	sc := newScanner(s.log, from, cut, false)
	for sc.next() {
		if sc.h.MaxTimestamp > s.maxTs {
			s.maxTs, s.maxTsOffset = sc.h.MaxTimestamp, sc.h.lastOffset()
		}
	}
	if cut == 0 {
		s.rollBaseMs, s.createdMs = -1, l.nowMs()
	}
	return sc.err
}
