package plog

// Producer state snapshots: <20-digit offset>.snapshot beside the segments,
// in Kafka's producer snapshot format (version 1), all integers big-endian:
//
//	version  int16   = 1
//	crc      uint32  CRC-32C of everything after this field
//	count    int32   number of entries
//	entries  count × {
//	    producerId            int64
//	    epoch                 int16
//	    lastSequence          int32
//	    lastOffset            int64  (-1: the producer has no batch)
//	    offsetDelta           int32  lastOffset - firstOffset of the batch
//	    timestamp             int64  max timestamp of the batch
//	    coordinatorEpoch      int32  coordinator epoch of the producer's last transaction marker (-1: none)
//	    currentTxnFirstOffset int64  first offset of the producer's open transaction (-1: none)
//	}
//
// Kafka writes one entry per producer (its last batch). Strata writes one
// entry per cached batch (up to five per producer, oldest first, same
// producer id), so that after a restart every cached batch can still be
// recognised as a duplicate. The byte layout is unchanged: Kafka reading such
// a file keeps the last entry of each producer, which is exactly what it
// would have written itself. Every entry of a producer carries its
// coordinatorEpoch and currentTxnFirstOffset (the last one counts when
// reading). Snapshots written before transactions existed hold -1 in both
// and read as producers without a transaction. A snapshot named N holds
// the state after every batch below offset N.

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"strata/internal/vfs"
)

const (
	producerSnapshotSuffix    = ".snapshot"
	producerSnapshotTmpSuffix = ".snapshot.tmp"
	producerSnapshotVersion   = 1
	producerSnapshotHeader    = 2 + 4 + 4                     // version, crc, count
	producerSnapshotEntrySize = 8 + 2 + 4 + 8 + 4 + 8 + 4 + 8 // 46
)

var producerSnapshotCRCTable = crc32.MakeTable(crc32.Castagnoli)

// errCorruptProducerSnapshot marks a snapshot that cannot be decoded.
var errCorruptProducerSnapshot = errors.New("corrupt producer snapshot")

// producerSnapshotName is the file name of the snapshot at offset.
func producerSnapshotName(offset int64) string {
	return fmt.Sprintf("%020d%s", offset, producerSnapshotSuffix)
}

// parseProducerSnapshotName returns the offset of a snapshot file name.
func parseProducerSnapshotName(name string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, producerSnapshotSuffix)
	if !ok || digits == "" {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	off, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, false
	}
	return off, true
}

// encodeProducerSnapshot serialises the state (producers sorted by id).
func encodeProducerSnapshot(p *ProducerState) []byte {
	ids := make([]int64, 0, len(p.producers))
	n := 0
	for id, e := range p.producers {
		ids = append(ids, id)
		n += max(1, len(e.batches))
	}
	slices.Sort(ids)

	buf := make([]byte, producerSnapshotHeader, producerSnapshotHeader+n*producerSnapshotEntrySize)
	binary.BigEndian.PutUint16(buf[0:], producerSnapshotVersion)
	binary.BigEndian.PutUint32(buf[6:], uint32(n))
	var e *producerEntry
	put := func(id int64, epoch int16, lastSeq int32, lastOffset int64, delta int32, ts int64) {
		buf = binary.BigEndian.AppendUint64(buf, uint64(id))
		buf = binary.BigEndian.AppendUint16(buf, uint16(epoch))
		buf = binary.BigEndian.AppendUint32(buf, uint32(lastSeq))
		buf = binary.BigEndian.AppendUint64(buf, uint64(lastOffset))
		buf = binary.BigEndian.AppendUint32(buf, uint32(delta))
		buf = binary.BigEndian.AppendUint64(buf, uint64(ts))
		buf = binary.BigEndian.AppendUint32(buf, uint32(e.coordEpoch))
		buf = binary.BigEndian.AppendUint64(buf, uint64(e.txnFirst))
	}
	for _, id := range ids {
		e = p.producers[id]
		if len(e.batches) == 0 {
			put(id, e.epoch, -1, -1, 0, e.lastTimestamp)
			continue
		}
		for _, b := range e.batches {
			put(id, e.epoch, b.LastSeq, b.LastOffset, int32(b.LastOffset-b.FirstOffset), b.MaxTimestamp)
		}
	}
	binary.BigEndian.PutUint32(buf[2:], crc32.Checksum(buf[6:], producerSnapshotCRCTable))
	return buf
}

// decodeProducerSnapshot parses a snapshot file's bytes. It never panics;
// every malformed input is an error wrapping errCorruptProducerSnapshot.
func decodeProducerSnapshot(buf []byte) (map[int64]*producerEntry, error) {
	if len(buf) < producerSnapshotHeader {
		return nil, fmt.Errorf("%w: %d bytes is shorter than the header", errCorruptProducerSnapshot, len(buf))
	}
	if v := int16(binary.BigEndian.Uint16(buf[0:])); v != producerSnapshotVersion {
		return nil, fmt.Errorf("%w: unknown version %d", errCorruptProducerSnapshot, v)
	}
	if want, got := binary.BigEndian.Uint32(buf[2:]), crc32.Checksum(buf[6:], producerSnapshotCRCTable); want != got {
		return nil, fmt.Errorf("%w: crc %08x, computed %08x", errCorruptProducerSnapshot, want, got)
	}
	count := int64(int32(binary.BigEndian.Uint32(buf[6:])))
	rest := buf[producerSnapshotHeader:]
	if count < 0 || count*producerSnapshotEntrySize != int64(len(rest)) {
		return nil, fmt.Errorf("%w: %d entries do not fill %d bytes", errCorruptProducerSnapshot, count, len(rest))
	}
	ps := &ProducerState{producers: make(map[int64]*producerEntry)}
	for ; len(rest) > 0; rest = rest[producerSnapshotEntrySize:] {
		id := int64(binary.BigEndian.Uint64(rest[0:]))
		epoch := int16(binary.BigEndian.Uint16(rest[8:]))
		lastSeq := int32(binary.BigEndian.Uint32(rest[10:]))
		lastOffset := int64(binary.BigEndian.Uint64(rest[14:]))
		delta := int32(binary.BigEndian.Uint32(rest[22:]))
		ts := int64(binary.BigEndian.Uint64(rest[26:]))
		coordEpoch := int32(binary.BigEndian.Uint32(rest[34:]))
		txnFirst := max(int64(binary.BigEndian.Uint64(rest[38:])), -1)
		if id < 0 {
			return nil, fmt.Errorf("%w: producer id %d", errCorruptProducerSnapshot, id)
		}
		if lastOffset < 0 {
			// A producer without a batch (Kafka: only its epoch is known).
			e := ps.producers[id]
			if e == nil {
				e = newProducerEntry(epoch)
				ps.producers[id] = e
			}
			e.epoch, e.batches, e.lastTimestamp = epoch, e.batches[:0], ts
			e.coordEpoch, e.txnFirst = coordEpoch, txnFirst
			continue
		}
		if delta < 0 || lastSeq < 0 || int64(delta) > lastOffset {
			return nil, fmt.Errorf("%w: producer %d batch lastSeq %d lastOffset %d delta %d",
				errCorruptProducerSnapshot, id, lastSeq, lastOffset, delta)
		}
		ps.Update(BatchMeta{
			ProducerID:    id,
			ProducerEpoch: epoch,
			FirstSeq:      producerSeqMinus(lastSeq, delta),
			LastSeq:       lastSeq,
			FirstOffset:   lastOffset - int64(delta),
			LastOffset:    lastOffset,
			MaxTimestamp:  ts,
		})
		e := ps.producers[id]
		e.coordEpoch, e.txnFirst = coordEpoch, txnFirst
	}
	return ps.producers, nil
}

// producerSeqMinus returns seq - delta in the producer's wrapping sequence
// space (0 follows math.MaxInt32). seq and delta are >= 0.
func producerSeqMinus(seq, delta int32) int32 {
	if seq < delta {
		return int32(int64(1<<31-1) - int64(delta-seq) + 1)
	}
	return seq - delta
}

// WriteSnapshot writes the state as of offset (the log end offset at the
// time) to dir/<20-digit offset>.snapshot, crash-safe (temp, fsync, rename,
// fsync dir).
func (p *ProducerState) WriteSnapshot(fsys vfs.FS, dir string, offset int64) error {
	if offset < 0 {
		return fmt.Errorf("write producer snapshot: negative offset %d", offset)
	}
	name := filepath.Join(dir, producerSnapshotName(offset))
	if err := replaceFileDurably(fsys, dir, name, encodeProducerSnapshot(p)); err != nil {
		return fmt.Errorf("write producer snapshot: %w", err)
	}
	return nil
}

// replaceFileDurably replaces name (in dir) by data so that after a crash the
// file holds either its old contents or data: write a temp file, fsync it,
// rename it over name, fsync the directory.
func replaceFileDurably(fsys vfs.FS, dir, name string, data []byte) (err error) {
	tmp := name + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	defer func() {
		if err != nil {
			_ = fsys.Remove(tmp)
		}
	}()
	if _, err := f.Write(data); err != nil {
		_ = f.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err := f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("sync %s: %w", tmp, syncErr(err))
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err := fsys.Rename(tmp, name); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		// The rename happened; the file must stay. Report only.
		return fmt.Errorf("sync dir %s: %w", dir, syncErr(err))
	}
	return nil
}

// listProducerSnapshots returns the snapshot offsets in dir, ascending, and
// the names of leftover temp files. A missing dir has none.
func listProducerSnapshots(fsys vfs.FS, dir string) (offsets []int64, tmps []string, err error) {
	names, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("list %s: %w", dir, err)
	}
	for _, n := range names {
		if off, ok := parseProducerSnapshotName(n); ok {
			offsets = append(offsets, off)
		} else if strings.HasSuffix(n, producerSnapshotTmpSuffix) {
			tmps = append(tmps, n)
		}
	}
	sort.Slice(offsets, func(i, j int) bool { return offsets[i] < offsets[j] })
	return offsets, tmps, nil
}

// LoadSnapshot replaces the state by the newest readable snapshot in dir whose
// offset is <= maxOffset, deletes snapshots newer than maxOffset, and returns
// the snapshot's offset (-1 and empty state when there is none; a corrupt
// snapshot is skipped in favour of an older one).
//
// Like Kafka, a corrupt snapshot (bad CRC, version, or length) is deleted
// and logged at warn; an I/O error is returned and the state is left as it
// was. Leftover *.snapshot.tmp files of an interrupted WriteSnapshot are
// removed. The caller then replays every batch from the returned offset (or
// from the log start when -1) up to the log end through Update, and calls
// truncateHead(logStartOffset) and ExpireProducers as Kafka does on load.
func (p *ProducerState) LoadSnapshot(fsys vfs.FS, dir string, maxOffset int64) (int64, error) {
	return p.loadSnapshotUpTo(fsys, dir, maxOffset, maxOffset)
}

// loadSnapshotUpTo is LoadSnapshot loading the newest snapshot at or below
// upTo (<= maxOffset); those between upTo and maxOffset are kept.
func (p *ProducerState) loadSnapshotUpTo(fsys vfs.FS, dir string, maxOffset, upTo int64) (int64, error) {
	offsets, tmps, err := listProducerSnapshots(fsys, dir)
	if err != nil {
		return -1, fmt.Errorf("load producer snapshot: %w", err)
	}
	removed := false
	for _, t := range tmps {
		if err := fsys.Remove(filepath.Join(dir, t)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return -1, fmt.Errorf("load producer snapshot: remove %s: %w", t, err)
		}
		removed = true
	}
	for len(offsets) > 0 && offsets[len(offsets)-1] > maxOffset {
		name := filepath.Join(dir, producerSnapshotName(offsets[len(offsets)-1]))
		if err := fsys.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return -1, fmt.Errorf("load producer snapshot: remove %s: %w", name, err)
		}
		removed = true
		offsets = offsets[:len(offsets)-1]
	}
	for i := len(offsets) - 1; i >= 0; i-- {
		if offsets[i] > upTo {
			continue
		}
		name := filepath.Join(dir, producerSnapshotName(offsets[i]))
		buf, err := psReadFile(fsys, name)
		if err != nil {
			return -1, fmt.Errorf("load producer snapshot: %w", err)
		}
		producers, err := decodeProducerSnapshot(buf)
		if err != nil {
			slog.Warn("deleting corrupt producer snapshot", "file", name, "err", err)
			if err := fsys.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return -1, fmt.Errorf("load producer snapshot: remove %s: %w", name, err)
			}
			removed = true
			continue
		}
		if removed {
			if err := fsys.SyncDir(dir); err != nil {
				return -1, fmt.Errorf("load producer snapshot: sync dir: %w", err)
			}
		}
		p.setProducers(producers)
		return offsets[i], nil
	}
	if removed {
		if err := fsys.SyncDir(dir); err != nil {
			return -1, fmt.Errorf("load producer snapshot: sync dir: %w", err)
		}
	}
	p.setProducers(make(map[int64]*producerEntry))
	return -1, nil
}

// psReadFile returns the contents of name.
func psReadFile(fsys vfs.FS, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", name, err)
	}
	defer f.Close()
	buf, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return buf, nil
}

// DeleteSnapshotsBefore removes snapshot files with offset < offset
// (keeping the newest one below it is the caller's choice: it passes the
// offset of the oldest snapshot to keep).
func DeleteSnapshotsBefore(fsys vfs.FS, dir string, offset int64) error {
	offsets, _, err := listProducerSnapshots(fsys, dir)
	if err != nil {
		return fmt.Errorf("delete producer snapshots: %w", err)
	}
	for _, off := range offsets {
		if off >= offset {
			break
		}
		name := filepath.Join(dir, producerSnapshotName(off))
		if err := fsys.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete producer snapshots: remove %s: %w", name, err)
		}
	}
	return nil
}
