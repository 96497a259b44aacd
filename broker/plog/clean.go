package plog

// Log compaction (cleanup.policy=compact), after Kafka's LogCleaner,
// LogCleanerManager and MemoryRecords.filterTo:
//
//   - The dirty section starts at the cleaner offset (file
//     cleaner-offset-checkpoint, reset to the log start when missing or
//     outside the log) and ends at the first uncleanable offset: the
//     active segment's base, the caller's limit (high watermark), and with
//     min.compaction.lag.ms the first segment whose max timestamp is
//     younger than the lag.
//   - A pass runs when dirty bytes / (clean + dirty bytes) exceeds
//     min.cleanable.dirty.ratio, or when max.compaction.lag.ms has passed
//     since the first batch of the oldest dirty segment and there are
//     dirty bytes.
//   - The keys of the dirty section map to their latest offset (an MD5 of
//     the key; at most maxOffsetMapEntries keys per pass, stopping at a
//     batch boundary, as Kafka's dedupe buffer does). The pass then
//     rewrites every segment below the map's end, in groups that fit
//     segment.bytes and segment.index.bytes, each into one new segment
//     named after the group's first base (clean_swap.go).
//   - A record is kept when it lies past the map's end, or has a key, is
//     the latest for it, and has a value or is a tombstone whose batch's
//     delete horizon has not passed. Records without keys are dropped.
//     A batch that keeps every record is copied verbatim unless it holds
//     a tombstone and no delete horizon yet: then it is rebuilt with the
//     horizon now + delete.retention.ms (KIP-534). A batch that keeps
//     none disappears, except the batch holding an active producer's
//     last data offset (or, when its batches are gone, its last marker)
//     and the last batch before the first uncleanable offset, which stay
//     as header-only batches (offsets, sequence, epoch).
//   - Nothing at or after the first offset of an unfinished transaction
//     is cleaned: the first uncleanable offset is at most the last stable
//     offset, and, as in Kafka's LogToClean, it is the base of the
//     segment holding min(last stable offset, high watermark, active
//     segment base, compaction lag bound), so a segment holding
//     unstable offsets is never rewritten.
//   - Records of aborted transactions are removed and never enter the
//     offset map; transaction markers stay while their transaction has
//     a batch in the log, then go after delete.retention.ms
//     (clean_txn.go).

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"io/fs"
	"os"
	"path/filepath"
)

const (
	cleanerCheckpointName = "cleaner-offset-checkpoint"
	// maxOffsetMapEntries bounds the keys one pass collects (Kafka's
	// 128 MiB default dedupe buffer holds about 5 million).
	maxOffsetMapEntries = 4 << 20
	// cleanWriteChunk is how much cleaned data is buffered per write.
	cleanWriteChunk = 1 << 20
)

// Clean runs one cleaning pass if cleanup.policy has compact and the dirty
// ratio or max.compaction.lag.ms ask for one. It is safe to call
// concurrently with appends and reads; passes are serialised.
func (l *Log) Clean() (CleanStats, error) {
	return l.CleanBelow(math.MaxInt64)
}

// CleanBelow is Clean that never cleans at or above maxOffset; the broker
// passes the high watermark. It never cleans at or past the last stable
// offset either (as Kafka), nor the segment holding the first offset it
// may not clean.
func (l *Log) CleanBelow(maxOffset int64) (CleanStats, error) {
	return l.CleanBelowCharged(maxOffset, nil)
}

// CleanBelowCharged is CleanBelow that charges what reading compressed
// batches holds to mem (the broker's queued.max.request.bytes); a batch
// whose charge is refused is kept as it is (clean_stream.go).
func (l *Log) CleanBelowCharged(maxOffset int64, mem Memory) (CleanStats, error) {
	cfg := l.cfg.Load()
	if !cfg.Compact {
		return CleanStats{}, nil
	}
	l.cleanMu.Lock()
	defer l.cleanMu.Unlock()
	nowMs := l.nowMs()
	p, err := l.planClean(cfg, nowMs, maxOffset)
	if err != nil || !p.eligible {
		return CleanStats{DirtyRatio: p.ratio, FirstDirtyOffset: p.firstDirty}, err
	}
	c := &cleaner{l: l, cfg: cfg, mem: mem, now: nowMs, upper: p.firstUncleanable, offsets: offsetMap{m: map[[16]byte]int64{}}}
	c.txns = newCleanTxns(l.AbortedTransactions(p.firstDirty, p.firstUncleanable))
	c.stats = CleanStats{Cleaned: true, DirtyRatio: p.ratio, FirstDirtyOffset: p.firstDirty}
	end, err := c.buildOffsetMap(p)
	if err != nil {
		if l.planStale(p) {
			c.stats.Aborted = true
			return c.stats, nil
		}
		return c.stats, fmt.Errorf("clean %s: %w", l.dir, err)
	}
	c.stats.EndOffset = end
	defer func() {
		if c.skip.err != nil {
			l.logger.Warn("log cleaner keeps batches it cannot read within its memory bounds as they are",
				"dir", l.dir, "batches", c.stats.BatchesSkipped, "first_offset", c.skip.offset, "bytes", c.skip.bytes, "err", c.skip.err)
		}
	}()
	if end > p.firstDirty {
		// One view of the transactions for the whole rewrite, from the
		// first segment (every group lies below firstUncleanable, a
		// segment base).
		c.txns = newCleanTxns(l.AbortedTransactions(p.views[0].base, p.firstUncleanable))
		for _, g := range groupSegments(p.views, end, cfg, p.firstUncleanable) {
			aborted, err := c.cleanGroup(p, g)
			if aborted {
				c.stats.Aborted = true
				return c.stats, nil
			}
			if err != nil {
				return c.stats, fmt.Errorf("clean %s: %w", l.dir, err)
			}
		}
	}
	if end > p.firstDirty || p.forceCheckpoint {
		ckpt := max(end, p.firstDirty)
		l.mu.Lock()
		current := l.truncGen == p.gen
		if current {
			l.cleanerOffset = ckpt
		}
		l.mu.Unlock()
		if current {
			if err := l.writeCleanerOffset(ckpt); err != nil {
				return c.stats, err
			}
		}
	}
	l.logger.Debug("cleaned log", "dir", l.dir, "dirtyRatio", p.ratio, "firstDirty", p.firstDirty, "end", end,
		"segmentsCleaned", c.stats.SegmentsCleaned, "bytesRead", c.stats.BytesRead, "bytesWritten", c.stats.BytesWritten)
	return c.stats, nil
}

// cleanPlan is what a pass knows of the log when it starts.
type cleanPlan struct {
	segs             []*segment // every segment but the active one
	views            []segView
	next             []int64 // the base of the segment after segs[i]
	maxTs            []int64
	firstDirty       int64
	firstUncleanable int64
	ratio            float64
	eligible         bool
	forceCheckpoint  bool
	gen              uint64
}

func (l *Log) planClean(cfg *Config, nowMs, maxOffset int64) (cleanPlan, error) {
	var p cleanPlan
	l.mu.Lock()
	if err := l.usableLocked(); err != nil {
		l.mu.Unlock()
		return p, err
	}
	p.gen = l.truncGen
	// Never past an unfinished transaction (Kafka's first uncleanable
	// offset is at most the last stable offset); maxOffset is the high
	// watermark.
	maxOffset = l.producers.lastStableOffset(maxOffset)
	l.noteTxnsLocked()
	logStart, leo := l.logStart, l.leo()
	p.firstDirty = l.cleanerOffset
	if p.firstDirty < logStart || p.firstDirty > leo {
		p.firstDirty, p.forceCheckpoint = logStart, l.cleanerOffset >= 0 || logStart > 0
	}
	n := len(l.segs) - 1
	p.segs = append([]*segment(nil), l.segs[:n]...)
	for i, s := range p.segs {
		p.views = append(p.views, s.snapshot())
		p.next = append(p.next, l.segs[i+1].base)
		p.maxTs = append(p.maxTs, s.maxTs)
	}
	activeBase := l.active().base
	l.mu.Unlock()

	// floor is the index of the segment holding offset (or -1).
	floor := func(offset int64) int {
		i := -1
		for j, s := range p.segs {
			if s.base <= offset {
				i = j
			}
		}
		return i
	}
	uncleanable := min(activeBase, maxOffset)
	from := max(floor(p.firstDirty), 0)
	if lag := max(cfg.MinCompactionLagMs, 0); lag > 0 {
		for i := from; i < len(p.views); i++ {
			if p.maxTs[i] > nowMs-lag {
				uncleanable = min(uncleanable, p.views[i].base)
				break
			}
		}
	}
	// Kafka's LogToClean: the first uncleanable offset is the base of the
	// segment holding it, so that no segment holding offsets at or past
	// the last stable offset (an open transaction's records, markers
	// above it) is rewritten.
	if i := floor(uncleanable); i >= 0 && uncleanable < activeBase {
		uncleanable = p.views[i].base
	}
	p.firstUncleanable = max(p.firstDirty, uncleanable)

	var cleanBytes, cleanableBytes int64
	for _, v := range p.views {
		if v.base < p.firstDirty {
			cleanBytes += v.size
		}
	}
	fuBase := activeBase
	if i := floor(p.firstUncleanable); i >= 0 && p.firstUncleanable < activeBase {
		fuBase = p.views[i].base
	}
	lo := min(p.firstDirty, fuBase)
	for i, v := range p.views {
		if v.base < fuBase && p.next[i] > lo {
			cleanableBytes += v.size
		}
	}
	total := cleanBytes + cleanableBytes
	if total == 0 {
		return p, nil
	}
	p.ratio = float64(cleanableBytes) / float64(total)

	// max.compaction.lag.ms: the first batch of the oldest dirty segment.
	needNow := false
	if maxLag := max(cfg.MaxCompactionLagMs, 0); maxLag < nowMs {
		earliest := int64(math.MaxInt64)
		for _, v := range p.views[from:] {
			if v.size == 0 {
				continue
			}
			if h, err := readBatchHeader(v.f, 0); err == nil && h.MaxTimestamp > 0 {
				earliest = min(earliest, h.MaxTimestamp)
			}
		}
		needNow = earliest < nowMs-maxLag
	}
	p.eligible = (needNow && cleanableBytes > 0) || p.ratio > cfg.MinCleanableDirtyRatio
	return p, nil
}

// planStale tells whether the log changed under a pass so that its result
// must be thrown away: a truncation, or a segment of the plan deleted.
func (l *Log) planStale(p cleanPlan) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.failed != nil || l.truncGen != p.gen {
		return true
	}
	live := make(map[*segment]bool, len(l.segs))
	for _, s := range l.segs {
		live[s] = true
	}
	for _, s := range p.segs {
		if !live[s] {
			return true
		}
	}
	return false
}

// offsetMap maps key digests to the latest offset of the key in the dirty
// section; latest is the last offset it covers.
type offsetMap struct {
	m      map[[16]byte]int64
	latest int64
}

type cleaner struct {
	l       *Log
	cfg     *Config
	mem     Memory // charged for reading compressed batches
	now     int64
	upper   int64 // first uncleanable offset
	offsets offsetMap
	stats   CleanStats
	// lastRecords: the last record of each active producer, whose batch
	// stays (header-only when emptied) to keep its sequence and epoch.
	lastRecords map[int64]lastRecord
	// txns: the transactions seen in the current walk (clean_txn.go).
	txns *cleanTxns
	// skip is the first batch kept because it could not be read within
	// the bounds on memory (logged once per pass).
	skip struct {
		offset, bytes int64
		err           error
	}
}

// buildOffsetMap collects the keys of [firstDirty, firstUncleanable) and
// returns the end of the section it covered.
func (c *cleaner) buildOffsetMap(p cleanPlan) (int64, error) {
	c.offsets.latest = p.firstDirty - 1
	for i, v := range p.views {
		if p.next[i] <= p.firstDirty || v.base >= p.firstUncleanable {
			continue
		}
		sc := newScanner(v.f, v.idx.lookup(p.firstDirty), v.size, true)
		for sc.next() {
			h := sc.h
			if h.lastOffset() < p.firstDirty {
				continue
			}
			if h.lastOffset() >= p.firstUncleanable {
				return c.offsets.latest + 1, nil
			}
			if h.isControl() {
				c.txns.onControl(&h, sc.batch)
			} else if aborted := c.txns.onData(&h); !aborted && h.RecordCount > 0 {
				if len(c.offsets.m)+int(h.RecordCount) > maxOffsetMapEntries && len(c.offsets.m) > 0 {
					return c.offsets.latest + 1, nil // full
				}
				if err := c.mapBatch(sc.batch, &h, p.firstDirty); err != nil {
					return 0, fmt.Errorf("segment %d: %w", v.base, err)
				}
			}
			c.offsets.latest = h.lastOffset()
		}
		if sc.err != nil {
			return 0, fmt.Errorf("segment %d: %w", v.base, sc.err)
		}
	}
	return c.offsets.latest + 1, nil
}

// mapBatch adds the keys of batch b (header h) at or after firstDirty to
// the offset map, reading its records as a stream charged to c.mem. A
// batch that cannot be read within the bounds on memory adds the keys read
// before it stopped, with a WARN; filterBatch then keeps it whole.
func (c *cleaner) mapBatch(b []byte, h *batchHeader, firstDirty int64) error {
	s, err := openRecordStream(b, h, c.mem, 0)
	if err == nil {
		defer s.close()
		for i := int32(0); i < h.RecordCount; i++ {
			var r streamRecord
			if err = s.next(i, &r); err != nil {
				break
			}
			if !r.keyNull && r.offset >= firstDirty {
				c.offsets.m[r.digest] = r.offset
			}
		}
	}
	if err != nil && beyondBounds(err) {
		c.skipped(h, err)
		return nil
	}
	return err
}

// skipped notes a batch kept as it is because it could not be read within
// the bounds on memory; the pass logs the first at WARN with their count.
func (c *cleaner) skipped(h *batchHeader, err error) {
	if c.skip.err == nil {
		c.skip.offset, c.skip.bytes, c.skip.err = h.BaseOffset, h.size(), err
	}
}

// groupSegments groups the segments below end (Kafka's
// groupSegmentsBySize): consecutive segments whose total log and index
// sizes fit segment.bytes and segment.index.bytes and whose offsets fit a
// segment's 32-bit relative offsets. It returns indexes into segs.
func groupSegments(segs []segView, end int64, cfg *Config, firstUncleanable int64) [][]int {
	var n int
	for n < len(segs) && segs[n].base < end {
		n++
	}
	var groups [][]int
	for i := 0; i < n; {
		g := []int{i}
		logSize := segs[i].size
		idxSize := int64(segs[i].idx.n) * offsetEntrySize
		tidxSize := int64(segs[i].tidx.n) * timeEntrySize
		j := i + 1
		for ; j < n; j++ {
			s := segs[j]
			lastOff := firstUncleanable - 1
			if j+1 < len(segs) {
				lastOff = segs[j+1].base - 1
			}
			if logSize+s.size > cfg.SegmentBytes ||
				idxSize+int64(s.idx.n)*offsetEntrySize > int64(cfg.SegmentIndexBytes) ||
				tidxSize+int64(s.tidx.n)*timeEntrySize > int64(cfg.SegmentIndexBytes) ||
				(s.size > 0 && lastOff-segs[i].base > math.MaxInt32) {
				break
			}
			g = append(g, j)
			logSize += s.size
			idxSize += int64(s.idx.n) * offsetEntrySize
			tidxSize += int64(s.tidx.n) * timeEntrySize
		}
		groups = append(groups, g)
		i = j
	}
	return groups
}

// filterBatch returns what of batch b the cleaned segment keeps: b itself,
// a rebuilt batch, a header-only batch, or nil. Its records are read as a
// stream, twice when the batch is rebuilt (which records stay, then
// writing them), with what that holds charged to c.mem; a batch that
// cannot be read within the bounds on memory is kept as it is.
func (c *cleaner) filterBatch(b []byte) ([]byte, error) {
	h := parseHeader(b)
	c.stats.RecordsRead += int64(h.RecordCount)
	c.stats.BytesRead += h.size()
	horizon := int64(-1)
	if h.Attributes&attrDeleteHorizon != 0 {
		horizon = h.BaseTimestamp
	}
	// Kafka's checkBatchRetention: whether the batch's records may all
	// go (an aborted transaction's data; a marker of a transaction with
	// nothing left, once its delete horizon passed), and whether the
	// batch stays, emptied, for its producer's state or as the last
	// batch below the first uncleanable offset.
	var discardable, discard bool
	if h.isControl() {
		discardable = c.txns.onControl(&h, b)
		discard = discardable && horizon >= 0 && horizon <= c.now
	} else {
		discardable = c.txns.onData(&h)
		discard = discardable
	}
	retainEmpty := c.lastOfProducer(&h) || h.lastOffset()+1 == c.upper
	if discard || h.RecordCount == 0 {
		if retainEmpty {
			if h.RecordCount == 0 {
				return b, nil
			}
			return emptyBatch(&h), nil
		}
		return nil, nil
	}
	// A marker stays whole; one whose transaction has nothing left gets
	// a delete horizon the first time (KIP-534, as tombstones do).
	controlHorizon := h.isControl() && discardable && horizon < 0
	if h.isControl() && !controlHorizon {
		c.stats.RecordsKept += int64(h.RecordCount)
		return b, nil
	}
	if h.RecordCount < 0 || h.size() > int64(len(b)) || h.size() < batchHeaderSize {
		return nil, fmt.Errorf("%w: record count %d", errBadRecords, h.RecordCount)
	}
	data := b[batchHeaderSize:h.size()]
	if int64(h.RecordCount) > maxStreamRecords(data, h.codec()) {
		return nil, fmt.Errorf("%w: batch at offset %d: %d records cannot fit in it", errBadRecords, h.BaseOffset, h.RecordCount)
	}
	if h.codec() != codecNone {
		// The stream, the record marks, and a rebuild's compressor and
		// output, held through both readings.
		release, err := c.mem.charge(streamMemory(data, h.codec()) + (int64(h.RecordCount)+63)/8 +
			writeMemory(h.codec()) + int64(rebuildOutputLimit(len(data))))
		if err != nil {
			return c.unreadable(b, &h, err)
		}
		defer release()
	}
	s, err := openRecordStream(b, &h, nil, 0)
	if err != nil {
		return c.unreadable(b, &h, err)
	}
	keep := newBitset(h.RecordCount)
	var kept int32
	tombstones := false
	baseTs, maxTs := int64(0), int64(math.MinInt64)
	for i := int32(0); i < h.RecordCount; i++ {
		var r streamRecord
		if err := s.next(i, &r); err != nil {
			s.close()
			return c.unreadable(b, &h, err)
		}
		if h.isControl() || c.keep(&r, horizon) {
			if kept == 0 {
				baseTs = r.ts
			}
			keep.set(i)
			kept++
			maxTs = max(maxTs, r.ts)
			tombstones = tombstones || r.valueNull
		}
	}
	err = s.end()
	s.close()
	if err != nil {
		return c.unreadable(b, &h, err)
	}
	needHorizon := (tombstones || controlHorizon) && horizon < 0
	switch {
	case kept > 0 && kept == h.RecordCount && !needHorizon:
		c.stats.RecordsKept += int64(kept)
		return b, nil
	case kept > 0:
		if needHorizon {
			horizon = math.MaxInt64
			if c.cfg.DeleteRetentionMs < math.MaxInt64-c.now {
				horizon = c.now + max(c.cfg.DeleteRetentionMs, 0)
			}
		}
		out, ok, err := c.rebuild(b, &h, keep, kept, baseTs, maxTs, horizon)
		if err != nil {
			return c.unreadable(b, &h, err)
		}
		if !ok {
			c.l.logger.Warn("log cleaner keeps a batch whose kept records compress worse than the original",
				"dir", c.l.dir, "offset", h.BaseOffset, "bytes", h.size())
			c.stats.RecordsKept += int64(h.RecordCount)
			return b, nil
		}
		c.stats.RecordsKept += int64(kept)
		return out, nil
	case retainEmpty:
		return emptyBatch(&h), nil
	}
	return nil, nil
}

// unreadable decides for a batch whose records could not be read: one
// beyond the bounds on memory is kept as it is (all its records), with a
// WARN; a corrupt one fails the pass.
func (c *cleaner) unreadable(b []byte, h *batchHeader, err error) ([]byte, error) {
	if !beyondBounds(err) {
		return nil, fmt.Errorf("batch at offset %d: %w", h.BaseOffset, err)
	}
	c.skipped(h, err)
	c.stats.BatchesSkipped++
	c.stats.RecordsKept += int64(h.RecordCount)
	return b, nil
}

func (c *cleaner) keep(r *streamRecord, horizon int64) bool {
	if r.offset > c.offsets.latest {
		return true
	}
	if r.keyNull {
		return false
	}
	if found, ok := c.offsets.m[r.digest]; ok && r.offset < found {
		return false
	}
	return !r.valueNull || horizon < 0 || c.now < horizon
}

// readCleanerOffset returns the persisted first dirty offset, or -1.
func (l *Log) readCleanerOffset() int64 {
	f, err := l.fs.OpenFile(filepath.Join(l.dir, cleanerCheckpointName), os.O_RDONLY, 0)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			l.logger.Warn("open cleaner checkpoint", "dir", l.dir, "err", err)
		}
		return -1
	}
	defer f.Close()
	b, err := readAllFile(f)
	if err != nil || len(b) > 64 {
		return -1
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 2 || lines[0] != "0" {
		l.logger.Warn("ignoring cleaner checkpoint", "dir", l.dir)
		return -1
	}
	off, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || off < 0 {
		return -1
	}
	return off
}

// writeCleanerOffset persists the first dirty offset: version line "0",
// then the offset.
func (l *Log) writeCleanerOffset(off int64) error {
	return writeFileAtomic(l, cleanerCheckpointName, fmt.Appendf(nil, "0\n%d\n", off))
}
