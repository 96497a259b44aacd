package plog

// The transaction index: <base>.txnindex beside a segment, Kafka's
// TransactionIndex. One 34-byte entry per aborted transaction whose ABORT
// marker lies in the segment, in marker order, all integers big-endian:
//
//	version           int16  (0)
//	producerId        int64
//	firstOffset       int64  first offset of the transaction in this partition
//	lastOffset        int64  offset of the ABORT marker
//	lastStableOffset  int64  the partition's LSO once the marker was appended
//
// The file exists only for segments that hold an ABORT marker of a
// non-empty transaction (Kafka creates it lazily too, and KIP-1058 lets
// the tier mark an empty one). Entries are kept in memory; new ones are
// written to the file when the segment is flushed, with its other
// indexes, so that a flushed segment's .txnindex is durable. Recovery
// rebuilds the entries of every segment it reads from the producer state
// (recovery.go); a segment's .txnindex is renamed, deleted and truncated
// with its segment.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"strata/internal/vfs"
)

const (
	txnIndexSuffix    = ".txnindex"
	abortedTxnSize    = 34
	abortedTxnVersion = 0
)

// AbortedTxn is one entry of a .txnindex (Kafka's AbortedTxn).
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

// errCorruptTxnIndex marks a .txnindex that does not decode.
var errCorruptTxnIndex = errors.New("corrupt transaction index")

func appendAbortedTxn(b []byte, t AbortedTxn) []byte {
	b = binary.BigEndian.AppendUint16(b, abortedTxnVersion)
	b = binary.BigEndian.AppendUint64(b, uint64(t.ProducerID))
	b = binary.BigEndian.AppendUint64(b, uint64(t.FirstOffset))
	b = binary.BigEndian.AppendUint64(b, uint64(t.LastOffset))
	return binary.BigEndian.AppendUint64(b, uint64(t.LastStableOffset))
}

// EncodeTxnIndex returns the .txnindex bytes of entries.
func EncodeTxnIndex(entries []AbortedTxn) []byte {
	b := make([]byte, 0, len(entries)*abortedTxnSize)
	for _, t := range entries {
		b = appendAbortedTxn(b, t)
	}
	return b
}

// DecodeTxnIndex parses .txnindex bytes of the segment at base, with
// Kafka's sanity checks: whole entries of version 0, every marker at or
// after the segment base, markers in increasing order, and first offsets
// not after their marker. It never panics; errors wrap errCorruptTxnIndex.
func DecodeTxnIndex(b []byte, base int64) ([]AbortedTxn, error) {
	if len(b)%abortedTxnSize != 0 {
		return nil, fmt.Errorf("%w: %d bytes is not a whole number of %d-byte entries", errCorruptTxnIndex, len(b), abortedTxnSize)
	}
	out := make([]AbortedTxn, 0, len(b)/abortedTxnSize)
	for i := 0; len(b) > 0; i, b = i+1, b[abortedTxnSize:] {
		if v := int16(binary.BigEndian.Uint16(b)); v != abortedTxnVersion {
			return nil, fmt.Errorf("%w: entry %d has version %d", errCorruptTxnIndex, i, v)
		}
		t := AbortedTxn{
			ProducerID:       int64(binary.BigEndian.Uint64(b[2:])),
			FirstOffset:      int64(binary.BigEndian.Uint64(b[10:])),
			LastOffset:       int64(binary.BigEndian.Uint64(b[18:])),
			LastStableOffset: int64(binary.BigEndian.Uint64(b[26:])),
		}
		if t.ProducerID < 0 || t.FirstOffset < 0 || t.LastOffset < base || t.FirstOffset > t.LastOffset {
			return nil, fmt.Errorf("%w: entry %d (producer %d, offsets %d..%d) does not belong to the segment at %d",
				errCorruptTxnIndex, i, t.ProducerID, t.FirstOffset, t.LastOffset, base)
		}
		if len(out) > 0 && t.LastOffset <= out[len(out)-1].LastOffset {
			return nil, fmt.Errorf("%w: entry %d marker %d does not follow %d", errCorruptTxnIndex, i, t.LastOffset, out[len(out)-1].LastOffset)
		}
		out = append(out, t)
	}
	return out, nil
}

// txnIndex is a segment's aborted transactions. Guarded by the log's
// mutex; file writes happen under the flush mutex (as for the other
// indexes), the file opened only for them.
type txnIndex struct {
	entries []AbortedTxn
	// onDisk is how many entries the file holds; entries after it are
	// pending. dirty: the file holds more than entries (a truncation to
	// apply at the next write).
	onDisk int
	dirty  bool
}

// add appends an aborted transaction (its marker after every other).
func (x *txnIndex) add(t AbortedTxn) {
	x.entries = append(x.entries, t)
}

// truncateFrom drops the entries whose marker is at or after offset.
func (x *txnIndex) truncateFrom(offset int64) {
	n := len(x.entries)
	for n > 0 && x.entries[n-1].LastOffset >= offset {
		n--
	}
	if n == len(x.entries) {
		return
	}
	x.entries = x.entries[:n]
	if x.onDisk > n {
		x.onDisk = n
		x.dirty = true
	}
}

// pending returns what a flush must do: the size the file must have
// before the new entries (-1: nothing to truncate), the bytes of the
// entries not yet in the file, and the entry count once written.
func (x *txnIndex) pending() (truncTo int64, b []byte, n int) {
	truncTo = -1
	if x.dirty {
		truncTo = int64(x.onDisk) * abortedTxnSize
	}
	if len(x.entries) > x.onDisk {
		b = EncodeTxnIndex(x.entries[x.onDisk:])
	}
	return truncTo, b, len(x.entries)
}

// needsWrite tells whether the file is behind the entries.
func (x *txnIndex) needsWrite() bool { return x.dirty || len(x.entries) > x.onDisk }

// collect appends the entries overlapping [from, upper) to out, and
// reports whether the search is complete (an entry's last stable offset
// reached upper): Kafka's TransactionIndex.collectAbortedTxns.
func (x *txnIndex) collect(from, upper int64, out []AbortedTxn) ([]AbortedTxn, bool) {
	for _, t := range x.entries {
		if t.LastOffset >= from && t.FirstOffset < upper {
			out = append(out, t)
		}
		if t.LastStableOffset >= upper {
			return out, true
		}
	}
	return out, false
}

// writeTxnIndexFile brings the segment's .txnindex file up to date: it
// truncates the file to truncTo (when >= 0), appends b and fsyncs. The
// file is created when needed; the caller fsyncs the directory.
func writeTxnIndexFile(fsys vfs.FS, dir string, base, truncTo int64, b []byte) error {
	if truncTo < 0 && len(b) == 0 {
		return nil
	}
	name := segmentPath(dir, base, txnIndexSuffix)
	flag := os.O_RDWR | os.O_APPEND
	if len(b) > 0 {
		flag |= os.O_CREATE
	}
	f, err := fsys.OpenFile(name, flag, 0o644)
	if errors.Is(err, fs.ErrNotExist) && len(b) == 0 {
		return nil // nothing to truncate
	}
	if err != nil {
		return fmt.Errorf("open transaction index %d: %w", base, err)
	}
	size, err := f.Size()
	if err != nil {
		f.Close()
		return fmt.Errorf("size of transaction index %d: %w", base, err)
	}
	if truncTo >= 0 && truncTo < size {
		if err := f.Truncate(truncTo); err != nil {
			f.Close()
			return fmt.Errorf("truncate transaction index %d: %w", base, err)
		}
		size = truncTo
	}
	if len(b) > 0 {
		if _, err := f.Write(b); err != nil {
			// A partial entry would misalign the file: undo.
			werr := fmt.Errorf("write transaction index %d: %w", base, err)
			if terr := f.Truncate(size); terr != nil {
				f.Close()
				return fmt.Errorf("%w: %w; undo: %w", errUndo, werr, terr)
			}
			f.Close()
			return werr
		}
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return syncErr(fmt.Errorf("sync transaction index %d: %w", base, err))
	}
	return f.Close()
}

// readTxnIndexFile returns the entries of the segment's .txnindex (none
// when it does not exist).
func readTxnIndexFile(fsys vfs.FS, dir string, base int64) ([]AbortedTxn, error) {
	b, err := psReadFile(fsys, segmentPath(dir, base, txnIndexSuffix))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return DecodeTxnIndex(b, base)
}
