package plog

// The leader-epoch cache and its checkpoint file (owner: producer-state
// work). Kafka's format of leader-epoch-checkpoint:
//
//	0            (version)
//	N            (number of entries)
//	epoch startOffset   (N lines)
//
// The rules follow Kafka's LeaderEpochFileCache. Entries are kept with
// strictly increasing epochs and strictly increasing start offsets.

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"

	"strata/internal/vfs"
)

// epochCheckpointName is the checkpoint file's name in the partition dir.
const epochCheckpointName = "leader-epoch-checkpoint"

// errCorruptEpochCheckpoint marks a leader-epoch-checkpoint that does not
// parse (OpenEpochCache wraps it).
var errCorruptEpochCheckpoint = errors.New("corrupt leader-epoch-checkpoint")

// EpochEntry is one leader epoch and the first offset written in it.
type EpochEntry struct {
	Epoch       int32
	StartOffset int64
}

// EpochCache holds a partition's leader epochs. Not safe for concurrent use;
// the log's mutex guards it.
type EpochCache struct {
	fs      vfs.FS // nil: in memory only (tests)
	dir     string
	entries []EpochEntry // oldest first
}

// OpenEpochCache reads dir/leader-epoch-checkpoint (empty cache if absent).
//
// A checkpoint that does not parse gives an error wrapping
// errCorruptEpochCheckpoint together with a usable, empty cache bound to
// dir: the caller either fails (Kafka marks the log dir offline) or keeps
// the empty cache and rebuilds it by calling Assign with the
// partitionLeaderEpoch and base offset of the log's batches, which rewrites
// the file. Any other error returns a nil cache. A nil fs gives a cache that
// is never persisted (for tests).
func OpenEpochCache(fsys vfs.FS, dir string) (*EpochCache, error) {
	c := &EpochCache{fs: fsys, dir: dir}
	if fsys == nil {
		return c, nil
	}
	name := filepath.Join(dir, epochCheckpointName)
	buf, err := psReadFile(fsys, name)
	if errors.Is(err, fs.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open leader epoch cache: %w", err)
	}
	entries, err := parseEpochCheckpoint(buf)
	if err != nil {
		return c, fmt.Errorf("open leader epoch cache %s: %w", name, err)
	}
	c.entries = entries
	return c, nil
}

// Assign records that epoch starts at startOffset, if epoch is newer than
// the latest; persists the checkpoint crash-safely when it changes.
//
// A same or older epoch is ignored (Kafka would instead replace or truncate;
// the log truncates the cache with TruncateFromEnd before such appends). As
// in Kafka, entries whose start offset is >= startOffset are dropped first,
// so an epoch in which nothing was written leaves no entry. If persisting
// fails, the cache is left as it was and the error is returned: the log
// refuses the append, and the next one assigns the epoch again.
func (c *EpochCache) Assign(epoch int32, startOffset int64) error {
	if epoch < 0 || startOffset < 0 {
		return fmt.Errorf("assign leader epoch %d at offset %d: negative", epoch, startOffset)
	}
	old := c.entries
	es := slices.Clone(c.entries)
	if !assignEpochEntry(&es, EpochEntry{Epoch: epoch, StartOffset: startOffset}) {
		return nil
	}
	c.entries = es
	if err := c.persist(); err != nil {
		c.entries = old
		return err
	}
	return nil
}

// assignEpochEntry appends e if its epoch is newer than the last entry's,
// after dropping entries that start at or after e.StartOffset. It reports
// whether entries changed.
func assignEpochEntry(entries *[]EpochEntry, e EpochEntry) bool {
	es := *entries
	if len(es) > 0 && e.Epoch <= es[len(es)-1].Epoch {
		return false
	}
	for len(es) > 0 && es[len(es)-1].StartOffset >= e.StartOffset {
		es = es[:len(es)-1]
	}
	*entries = append(es, e)
	return true
}

// rebuild replaces the entries starting at or after from by starts (the
// epochs of the log's batches from there, oldest first, as
// assignEpochEntry collects them), keeping those before, and persists the
// result if it changed. A batch epoch not newer than a kept entry's adds
// nothing (Kafka's recovery assigns only newer epochs).
func (c *EpochCache) rebuild(from int64, starts []EpochEntry) error {
	es := make([]EpochEntry, 0, len(c.entries)+len(starts))
	for _, e := range c.entries {
		if e.StartOffset < from {
			es = append(es, e)
		}
	}
	for _, e := range starts {
		assignEpochEntry(&es, e)
	}
	if slices.Equal(es, c.entries) {
		return nil
	}
	c.entries = es
	return c.persist()
}

// Latest returns the newest entry.
func (c *EpochCache) Latest() (EpochEntry, bool) {
	if len(c.entries) == 0 {
		return EpochEntry{}, false
	}
	return c.entries[len(c.entries)-1], true
}

// EndOffsetFor answers OffsetForLeaderEpoch like Kafka's
// LeaderEpochFileCache.endOffsetFor:
//
//   - epoch -1 (undefined), an empty cache, or an epoch newer than the
//     latest: (-1, -1);
//   - the latest epoch: (epoch, logEndOffset);
//   - otherwise the largest epoch <= epoch and the start offset of the first
//     epoch > epoch; when epoch is older than every entry there is no such
//     largest epoch and the answer is (epoch, start offset of the first
//     entry), since the data before it is gone from the log.
func (c *EpochCache) EndOffsetFor(epoch int32, logEndOffset int64) (int32, int64) {
	if epoch == -1 || len(c.entries) == 0 {
		return -1, -1
	}
	if epoch == c.entries[len(c.entries)-1].Epoch {
		return epoch, logEndOffset
	}
	// higher: first entry with Epoch > epoch.
	higher := len(c.entries)
	for i, e := range c.entries {
		if e.Epoch > epoch {
			higher = i
			break
		}
	}
	if higher == len(c.entries) {
		return -1, -1
	}
	if higher == 0 {
		return epoch, c.entries[0].StartOffset
	}
	return c.entries[higher-1].Epoch, c.entries[higher].StartOffset
}

// EpochForOffset returns the epoch that offset was written in (-1 if unknown).
// Offsets past the latest entry's start belong to the latest epoch.
func (c *EpochCache) EpochForOffset(offset int64) int32 {
	epoch := int32(-1)
	for _, e := range c.entries {
		if e.StartOffset > offset {
			break
		}
		epoch = e.Epoch
	}
	return epoch
}

// TruncateFromEnd removes entries whose start offset >= endOffset.
func (c *EpochCache) TruncateFromEnd(endOffset int64) error {
	n := len(c.entries)
	for n > 0 && c.entries[n-1].StartOffset >= endOffset {
		n--
	}
	if endOffset < 0 || n == len(c.entries) {
		return nil
	}
	c.entries = c.entries[:n]
	return c.persist()
}

// TruncateFromStart drops entries wholly below startOffset, moving the
// start of the one that covers it up to startOffset.
func (c *EpochCache) TruncateFromStart(startOffset int64) error {
	if startOffset < 0 || len(c.entries) == 0 || c.entries[0].StartOffset >= startOffset {
		return nil
	}
	// The last entry starting at or before startOffset covers it.
	last := 0
	for last+1 < len(c.entries) && c.entries[last+1].StartOffset <= startOffset {
		last++
	}
	kept := append([]EpochEntry{{Epoch: c.entries[last].Epoch, StartOffset: startOffset}}, c.entries[last+1:]...)
	c.entries = kept
	return c.persist()
}

// Entries returns a copy of the entries, oldest first.
func (c *EpochCache) Entries() []EpochEntry {
	return append([]EpochEntry(nil), c.entries...)
}

// persist rewrites the checkpoint file crash-safely.
func (c *EpochCache) persist() error {
	if c.fs == nil {
		return nil
	}
	name := filepath.Join(c.dir, epochCheckpointName)
	if err := replaceFileDurably(c.fs, c.dir, name, encodeEpochCheckpoint(c.entries)); err != nil {
		return fmt.Errorf("write leader epoch checkpoint: %w", err)
	}
	return nil
}
