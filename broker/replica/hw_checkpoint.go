package replica

// The high-watermark checkpoint: Kafka's replication-offset-checkpoint
// file in the log directory, one line per partition this broker hosts
// (leader or follower) with its high watermark:
//
//	0                         (version)
//	N                         (number of entries)
//	topic partition offset    (N lines, separated by single spaces)
//
// It is rewritten every replica.high.watermark.checkpoint.interval.ms and
// at clean shutdown, crash-safely (temporary file, fsync, rename, fsync of
// the directory), so a reader sees either the old or the new file. On
// start the broker reads it once: a partition opened with more than one
// replica starts its high watermark from its entry, clamped into
// [log start, log end], instead of from the log start, so that consumers
// see the committed records at once rather than after every ISR member has
// fetched again. A follower's entry is the high watermark its leader gave
// it (min of the leader's and its own log end). A file that is missing,
// unreadable or corrupt is logged and ignored: high watermarks then start
// from the log start, as without a checkpoint.
//
// The entries read are kept until the first rewrite of the file (when
// Kafka's file would lose the entries of partitions not hosted any more),
// and each is used at most once.
//
// A rewrite that fails takes the log directory offline (the broker's
// logdir.go, through Options.LogDirWriteFailed), as
// Kafka's does when replication-offset-checkpoint cannot be written,
// except on a full disk before the fsync: the old file stays whole, a
// stale high watermark only makes consumers wait after a restart, and the
// next interval tries again (a full disk is not a failure in Strata, see
// the broker's logdir.go). An offline directory's checkpoint is not rewritten: its
// disk is not trusted any more, as Kafka checkpoints online directories
// only.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"strata/broker/plog"
	"strata/internal/vfs"
)

// hwCheckpointName is the file's name in the log directory (Kafka's).
const hwCheckpointName = "replication-offset-checkpoint"

// errCorruptHWCheckpoint marks a replication-offset-checkpoint that does
// not parse.
var errCorruptHWCheckpoint = errors.New("corrupt " + hwCheckpointName)

// parseHWCheckpoint reads Kafka's format. An empty file has no entries, as
// in Kafka's CheckpointFile; a wrong version, a count that does not match
// the lines, a malformed line, a negative partition or offset, or a
// partition listed twice is corrupt.
func parseHWCheckpoint(b []byte) (map[tp]int64, error) {
	out := map[tp]int64{}
	if len(b) == 0 {
		return out, nil
	}
	corrupt := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", errCorruptHWCheckpoint, fmt.Sprintf(format, args...))
	}
	lines := strings.Split(string(b), "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1] // the final newline
	}
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != "0" {
		return nil, corrupt("version %q, want 0", firstLine(lines))
	}
	if len(lines) == 1 {
		return out, nil // Kafka: a version alone reads as no entries
	}
	n, err := strconv.Atoi(strings.TrimSpace(lines[1]))
	if err != nil || n < 0 {
		return nil, corrupt("entry count %q", lines[1])
	}
	entries := lines[2:]
	if len(entries) != n {
		return nil, corrupt("%d entries, header says %d", len(entries), n)
	}
	for i, line := range entries {
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, corrupt("line %d: %q is not \"topic partition offset\"", i+3, line)
		}
		part, err1 := strconv.ParseInt(f[1], 10, 32)
		off, err2 := strconv.ParseInt(f[2], 10, 64)
		if err1 != nil || err2 != nil || part < 0 || off < 0 {
			return nil, corrupt("line %d: %q", i+3, line)
		}
		k := tp{f[0], int32(part)}
		if _, dup := out[k]; dup {
			return nil, corrupt("line %d: %s-%d listed twice", i+3, k.topic, k.part)
		}
		out[k] = off
	}
	return out, nil
}

func firstLine(lines []string) string {
	if len(lines) == 0 {
		return ""
	}
	return lines[0]
}

// formatHWCheckpoint writes Kafka's format, sorted by topic and partition.
func formatHWCheckpoint(hws map[tp]int64) []byte {
	keys := make([]tp, 0, len(hws))
	for k := range hws {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b tp) int {
		if c := strings.Compare(a.topic, b.topic); c != 0 {
			return c
		}
		return int(a.part) - int(b.part)
	})
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "0\n%d\n", len(keys))
	for _, k := range keys {
		fmt.Fprintf(&buf, "%s %d %d\n", k.topic, k.part, hws[k])
	}
	return buf.Bytes()
}

// readHWCheckpoint reads dir's checkpoint; a missing file has no entries.
func readHWCheckpoint(fsys vfs.FS, dir string) (map[tp]int64, error) {
	name := filepath.Join(dir, hwCheckpointName)
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return map[tp]int64{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", hwCheckpointName, err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", hwCheckpointName, err)
	}
	return parseHWCheckpoint(b)
}

// errLogDirFileSync tags a failed fsync of a file written with
// WriteLogDirFile or of its directory: never a mere full disk.
var errLogDirFileSync = errors.New("fsync failed")

// LogDirFileDiskFull tells whether a failed WriteLogDirFile is a full
// disk before any fsync, or no file descriptor left to open its
// temporary file (EMFILE, ENFILE): the old file is whole and the log
// directory stays online.
func LogDirFileDiskFull(err error) bool {
	return (errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) ||
		errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)) && !errors.Is(err, errLogDirFileSync)
}

// writeHWCheckpoint replaces dir's checkpoint crash-safely.
func writeHWCheckpoint(fsys vfs.FS, dir string, b []byte) error {
	return WriteLogDirFile(fsys, dir, hwCheckpointName, b)
}

// WriteLogDirFile replaces dir/name crash-safely: a temporary file,
// fsync, rename over the old one, fsync of the directory.
func WriteLogDirFile(fsys vfs.FS, dir, name string, b []byte) error {
	path := filepath.Join(dir, name)
	tmp := path + ".tmp"
	f, err := fsys.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", filepath.Base(tmp), err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", filepath.Base(tmp), err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("sync %s: %w: %w", filepath.Base(tmp), errLogDirFileSync, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", filepath.Base(tmp), err)
	}
	if err := fsys.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", filepath.Base(tmp), err)
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("sync %s: %w: %w", dir, errLogDirFileSync, err)
	}
	return nil
}

// hwCheckpoints is the Manager's checkpoint state.
type hwCheckpoints struct {
	mu      sync.Mutex
	loaded  map[tp]int64 // entries read at start, until the first rewrite
	last    []byte       // the content last written, to skip identical rewrites
	started bool         // the partitions were opened: the file may be rewritten
}

// LoadHWCheckpoint reads the checkpoint before the first reconcile. A
// corrupt or unreadable file is logged and ignored.
func (m *Manager) LoadHWCheckpoint() {
	hws, err := readHWCheckpoint(m.fs, m.cfg.DataDir)
	if err != nil {
		m.log.Warn("ignoring the high-watermark checkpoint; high watermarks start from the log start", "file", hwCheckpointName, "err", err)
		hws = nil
	}
	m.hwck.mu.Lock()
	m.hwck.loaded = hws
	m.hwck.mu.Unlock()
}

// InitialHW is the high watermark of a partition being opened: with one
// replica its log end (it is its own ISR); with more, the checkpointed
// value clamped into the log, or the log start without one, so that
// nothing uncommitted shows and the ISR moves it from there.
func (m *Manager) InitialHW(topic string, part int32, l *plog.Log, replicas int) int64 {
	k := tp{topic, part}
	start, end := l.LogStartOffset(), l.LogEndOffset()
	if replicas <= 1 {
		return end
	}
	m.hwck.mu.Lock()
	hw, ok := m.hwck.loaded[k]
	delete(m.hwck.loaded, k)
	m.hwck.mu.Unlock()
	if !ok {
		return start
	}
	return min(max(hw, start), end)
}

// CheckpointHWs writes every hosted partition's high watermark, unless
// the log directory is offline.
func (m *Manager) CheckpointHWs() error {
	if m.logDirErr() != nil {
		return nil
	}
	hws := map[tp]int64{}
	for _, p := range m.All() {
		hws[tp{p.topic, p.index}] = p.hw.Load()
	}
	b := formatHWCheckpoint(hws)
	m.hwck.mu.Lock()
	defer m.hwck.mu.Unlock()
	m.hwck.loaded = nil
	if bytes.Equal(b, m.hwck.last) {
		return nil
	}
	if err := m.fs.MkdirAll(m.cfg.DataDir, 0o755); err != nil {
		return fmt.Errorf("write %s: %w", hwCheckpointName, err)
	}
	if err := writeHWCheckpoint(m.fs, m.cfg.DataDir, b); err != nil {
		m.hwck.last = nil
		return fmt.Errorf("write %s: %w", hwCheckpointName, err)
	}
	m.hwck.last = b
	return nil
}

// FinalHWCheckpoint writes the checkpoint at shutdown, once the server
// has stopped serving, with the partitions still open; not when it never
// started (a failed Start must not replace a good file with an empty one),
// and only once.
func (m *Manager) FinalHWCheckpoint() {
	m.hwck.mu.Lock()
	started := m.hwck.started
	m.hwck.started = false // a second Close must not write an empty file
	m.hwck.mu.Unlock()
	if !started {
		return
	}
	if err := m.CheckpointHWs(); err != nil {
		m.log.Warn("high-watermark checkpoint at shutdown", "err", err)
	}
}

// StartHWCheckpoints runs CheckpointHWs every
// replica.high.watermark.checkpoint.interval.ms until the server stops.
func (m *Manager) StartHWCheckpoints() {
	m.hwck.mu.Lock()
	m.hwck.started = true
	m.hwck.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		t := time.NewTicker(time.Duration(max(m.cfg.ReplicaHighWatermarkCheckpointIntervalMs, 1)) * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-m.ctx.Done():
				return
			case <-t.C:
				if err := m.CheckpointHWs(); err != nil && !m.logDirWriteFailed(err) {
					m.log.Warn("high-watermark checkpoint not rewritten: disk full or no file descriptor left", "err", err)
				}
			}
		}
	}()
}

// HWCheckpointName is the checkpoint's file name in the log directory.
const HWCheckpointName = hwCheckpointName

// ReadHWCheckpoint reads dir's checkpoint: high watermarks by topic and
// partition; a missing file has no entries.
func ReadHWCheckpoint(fsys vfs.FS, dir string) (map[string]map[int32]int64, error) {
	hws, err := readHWCheckpoint(fsys, dir)
	if err != nil {
		return nil, err
	}
	out := map[string]map[int32]int64{}
	for k, hw := range hws {
		if out[k.topic] == nil {
			out[k.topic] = map[int32]int64{}
		}
		out[k.topic][k.part] = hw
	}
	return out, nil
}
