package broker

// The data directory's lock file, as Kafka's LogManager takes one in each
// log directory (<log.dir>/.lock, FileLock.tryLock).
//
// Two brokers on one data directory would recover, append to and
// checkpoint the same partition logs, each unaware of the other: records
// acknowledged by one are lost to the other's truncation or overwritten.
// So New, before anything reads or writes the directory (the remote index
// under it, the controller's metadata, checkpoints, partition logs), opens
// <data-dir>/.lock and takes an exclusive, non-blocking flock on it, held
// until Close. It then writes its pid into the file, so that a second
// process refused the lock can name the holder.
//
// A flock belongs to the open file description: the kernel drops it when
// the holder exits, however it exits, so a lock file left by a dead
// process (with its pid inside) does not block a restart. The file itself
// is never removed (removing it would let a second process lock a new
// file while the first still holds the old one). Nothing in the broker
// takes it for a partition directory: partitions are opened by name as the
// controller assigns them, never by scanning the data directory.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// dataDirLockFile is the lock file's name in the data directory (Kafka's
// LogManager.LockFileName).
const dataDirLockFile = ".lock"

// DataDirInUseError is New's error when another process holds the data
// directory's lock.
type DataDirInUseError struct {
	Dir string // the data directory, absolute when it could be made so
	Pid int    // the holder's pid as it wrote it; 0 when unknown
}

func (e *DataDirInUseError) Error() string {
	holder := "another Strata process"
	if e.Pid > 0 {
		holder += fmt.Sprintf(" (pid %d)", e.Pid)
	}
	return fmt.Sprintf("data directory %s is in use by %s; each broker needs its own --data-dir", e.Dir, holder)
}

// dataDirLock is a held lock on a data directory.
type dataDirLock struct {
	f *os.File
}

// lockDataDir takes the exclusive lock on dir/.lock, creating the file if
// need be, and writes this process's pid into it. dir must exist. When
// another open file description holds the lock (another process, or
// another lockDataDir in this one), the error is a *DataDirInUseError.
func lockDataDir(dir string) (*dataDirLock, error) {
	name := absDirName(dir)
	path := filepath.Join(dir, dataDirLockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("data directory %s: open %s: %w", name, dataDirLockFile, err)
	}
	if err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, &DataDirInUseError{Dir: name, Pid: lockHolder(path)}
		}
		return nil, fmt.Errorf("data directory %s: lock %s: %w", name, dataDirLockFile, err)
	}
	// The pid only names the holder to whoever is refused; a failure to
	// write it does not matter to the lock.
	if f.Truncate(0) == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &dataDirLock{f: f}, nil
}

// release gives the lock up; the file stays. Safe on nil and twice.
func (l *dataDirLock) release() error {
	if l == nil || l.f == nil {
		return nil
	}
	f := l.f
	l.f = nil
	err := flock(f, syscall.LOCK_UN)
	return errors.Join(err, f.Close())
}

// flock is syscall.Flock, retried when a signal interrupts it.
func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}

// lockHolder returns the pid written in the lock file at path if that
// process is alive, else 0. The holder writes its pid just after it
// locked, so a lock taken a moment ago may still show the previous
// (dead) holder's pid or none: it is read again for a short while.
func lockHolder(path string) int {
	for range 20 {
		if b, err := os.ReadFile(path); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 && processAlive(pid) {
				return pid
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	return 0
}

// processAlive tells whether a process with this pid exists (one of
// another user's answers EPERM, which says it does).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || err == syscall.EPERM
}

// absDirName is dir made absolute, for messages; dir itself if that fails.
func absDirName(dir string) string {
	if abs, err := filepath.Abs(dir); err == nil {
		return abs
	}
	return dir
}
