package plog

// What the tier uploader (package tier) reads of a sealed segment.

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"strata/internal/vfs"
)

// ErrSegmentNotReady is returned by OpenSealedSegment for a segment that is
// active, not yet flushed (its index files are not final) or gone.
var ErrSegmentNotReady = errors.New("segment not sealed and flushed")

// SealedSegment is a sealed, flushed segment opened for copying: its
// three files opened read-only by their own handles (they stay readable
// if retention renames or removes the files meanwhile), the producer
// snapshot at its end, its aborted transactions (.txnindex) and its
// leader epochs.
type SealedSegment struct {
	BaseOffset   int64
	NextOffset   int64 // one past its last offset
	Size         int64 // bytes of .log holding whole batches
	MaxTimestamp int64 // -1 if none

	Log, Index, TimeIndex vfs.File
	// Snapshot is the producer snapshot file at NextOffset (written at the
	// roll); nil when it no longer exists.
	Snapshot []byte
	// TxnIndex is the segment's .txnindex (the aborted transactions whose
	// marker it holds, EncodeTxnIndex); empty when it has none.
	TxnIndex []byte
	// LeaderEpochs are the epochs of the segment's offsets, ascending, the
	// first moved to BaseOffset (empty if the log has no epochs).
	LeaderEpochs []EpochEntry
}

// EpochCheckpoint is the segment's epochs in leader-epoch-checkpoint's
// format.
func (s *SealedSegment) EpochCheckpoint() []byte { return encodeEpochCheckpoint(s.LeaderEpochs) }

// Close closes the files.
func (s *SealedSegment) Close() error {
	var errs []error
	for _, f := range []vfs.File{s.Log, s.Index, s.TimeIndex} {
		if f != nil {
			errs = append(errs, f.Close())
		}
	}
	return errors.Join(errs...)
}

// OpenSealedSegment opens the sealed segment at base for copying. It is
// ErrSegmentNotReady unless the segment exists, is sealed and its indexes
// (the .txnindex included) are on disk in full.
func (l *Log) OpenSealedSegment(base int64) (*SealedSegment, error) {
	l.flushMu.Lock() // index files are written under flushMu
	defer l.flushMu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.usableLocked(); err != nil {
		return nil, err
	}
	i := l.segmentFor(base)
	if len(l.segs) == 0 || l.segs[i].base != base || i == len(l.segs)-1 {
		return nil, fmt.Errorf("%w: %d", ErrSegmentNotReady, base)
	}
	s := l.segs[i]
	if !s.sealed || s.next > l.recoveryPoint || s.idx.onDisk != s.idx.n || s.tidx.onDisk != s.tidx.n || s.txn.needsWrite() {
		return nil, fmt.Errorf("%w: %d", ErrSegmentNotReady, base)
	}
	out := &SealedSegment{BaseOffset: s.base, NextOffset: s.next, Size: s.size, MaxTimestamp: s.maxTs}
	if len(s.txn.entries) > 0 {
		out.TxnIndex = EncodeTxnIndex(s.txn.entries)
	}
	var err error
	open := func(suffix string) vfs.File {
		if err != nil {
			return nil
		}
		var f vfs.File
		f, err = l.fs.OpenFile(segmentPath(l.dir, s.base, suffix), os.O_RDONLY, 0)
		return f
	}
	out.Log, out.Index, out.TimeIndex = open(logSuffix), open(indexSuffix), open(timeIndexSuffix)
	if err != nil {
		out.Close()
		return nil, fmt.Errorf("open segment %d: %w", base, err)
	}
	snap, err := psReadFile(l.fs, filepath.Join(l.dir, producerSnapshotName(s.next)))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		out.Close()
		return nil, fmt.Errorf("read producer snapshot %d: %w", s.next, err)
	}
	out.Snapshot = snap
	for _, e := range l.epochs.Entries() {
		switch {
		case e.StartOffset >= s.next:
		case e.StartOffset <= s.base:
			out.LeaderEpochs = []EpochEntry{{Epoch: e.Epoch, StartOffset: s.base}}
		default:
			out.LeaderEpochs = append(out.LeaderEpochs, e)
		}
	}
	return out, nil
}

// SnapshotOpenTransactions returns the open transactions that a producer
// snapshot (a remote segment's .snapshot object) records: producer id to
// the first offset of its transaction. Bad input is an error; it never
// panics.
func SnapshotOpenTransactions(b []byte) (map[int64]int64, error) {
	entries, err := decodeProducerSnapshot(b)
	if err != nil {
		return nil, err
	}
	out := map[int64]int64{}
	for id, e := range entries {
		if e.txnFirst >= 0 {
			out[id] = e.txnFirst
		}
	}
	return out, nil
}
