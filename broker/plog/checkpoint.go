package plog

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The log checkpoint, <partition dir>/log-checkpoint, is a small text file
// in the style of Kafka's checkpoint files:
//
//	0                 version
//	<recoveryPoint>   everything below this offset was fsynced
//	<logStartOffset>  first readable offset (DeleteRecords, retention)
//	<clean>           1 if written by Close after a full flush, else 0
//
// It is replaced crash-safely (write log-checkpoint.tmp, fsync, rename,
// fsync the directory). Open rewrites it with clean=0 before the log
// accepts writes, so clean=1 on disk means nothing was appended after the
// last clean Close.
const (
	checkpointName    = "log-checkpoint"
	checkpointVersion = 0
)

type checkpoint struct {
	recoveryPoint  int64
	logStartOffset int64
	clean          bool
}

func (l *Log) checkpointLocked(clean bool) checkpoint {
	return checkpoint{recoveryPoint: l.recoveryPoint, logStartOffset: l.logStart, clean: clean}
}

func (c checkpoint) encode() []byte {
	clean := 0
	if c.clean {
		clean = 1
	}
	return fmt.Appendf(nil, "%d\n%d\n%d\n%d\n", checkpointVersion, c.recoveryPoint, c.logStartOffset, clean)
}

var errBadCheckpoint = errors.New("malformed log checkpoint")

func parseCheckpoint(b []byte) (checkpoint, error) {
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != 4 {
		return checkpoint{}, fmt.Errorf("%w: %d lines", errBadCheckpoint, len(lines))
	}
	var v [4]int64
	for i, s := range lines {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return checkpoint{}, fmt.Errorf("%w: line %d: %v", errBadCheckpoint, i+1, err)
		}
		v[i] = n
	}
	if v[0] != checkpointVersion {
		return checkpoint{}, fmt.Errorf("%w: version %d", errBadCheckpoint, v[0])
	}
	if v[1] < 0 || v[2] < 0 || v[3] < 0 || v[3] > 1 {
		return checkpoint{}, fmt.Errorf("%w: negative or bad values", errBadCheckpoint)
	}
	return checkpoint{recoveryPoint: v[1], logStartOffset: v[2], clean: v[3] == 1}, nil
}

// readCheckpoint returns the checkpoint, or ok=false when it is missing or
// unreadable (then everything is recovered).
func (l *Log) readCheckpoint() (checkpoint, bool) {
	f, err := l.fs.OpenFile(filepath.Join(l.dir, checkpointName), os.O_RDONLY, 0)
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			l.logger.Warn("open log checkpoint", "dir", l.dir, "err", err)
		}
		return checkpoint{}, false
	}
	defer f.Close()
	b, err := readAllFile(f)
	if err == nil && len(b) > 64 {
		err = fmt.Errorf("%w: %d bytes", errBadCheckpoint, len(b))
	}
	var cp checkpoint
	if err == nil {
		cp, err = parseCheckpoint(b)
	}
	if err != nil {
		l.logger.Warn("ignoring log checkpoint", "dir", l.dir, "err", err)
		return checkpoint{}, false
	}
	return cp, true
}

// writeCheckpoint replaces the checkpoint crash-safely.
func (l *Log) writeCheckpoint(cp checkpoint) error {
	return writeFileAtomic(l, checkpointName, cp.encode())
}

func writeFileAtomic(l *Log, name string, data []byte) error {
	final := filepath.Join(l.dir, name)
	tmp := final + ".tmp"
	f, err := l.fs.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	_, werr := f.Write(data)
	if werr == nil {
		werr = syncErr(f.Sync())
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return fmt.Errorf("write %s: %w", name, werr)
	}
	if err := l.fs.Rename(tmp, final); err != nil {
		return fmt.Errorf("rename %s: %w", name, err)
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("sync dir for %s: %w", name, syncErr(err))
	}
	return nil
}

func parentDir(dir string) string {
	p := filepath.Dir(filepath.Clean(dir))
	return p
}
