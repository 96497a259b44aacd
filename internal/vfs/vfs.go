// Package vfs is the small filesystem interface the partition log (and later
// the tier cache and index) is written against, so that tests can run the
// same code on an in-memory filesystem that fails on demand and simulates a
// crash that keeps only synced bytes.
package vfs

import (
	"io"
	"os"
	"syscall"
)

// File is an open file. Implementations are safe for concurrent ReadAt;
// Write/Truncate/Sync are serialised by the caller.
type File interface {
	io.Reader
	io.Writer
	io.ReaderAt
	io.Closer
	// Sync makes the file's contents durable (fsync).
	Sync() error
	// Truncate changes the file's size.
	Truncate(size int64) error
	// Size returns the current size of the file.
	Size() (int64, error)
	// Name is the path the file was opened with.
	Name() string
}

// FS is a filesystem.
type FS interface {
	// OpenFile opens name with os.O_* flags and perm, like os.OpenFile.
	// Writes on a file opened with O_APPEND go to the end.
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
	Remove(name string) error
	// RemoveAll removes a path and everything under it.
	RemoveAll(name string) error
	// Rename renames oldname to newname atomically, replacing newname.
	Rename(oldname, newname string) error
	MkdirAll(name string, perm os.FileMode) error
	// ReadDir returns the names of the entries of dir, sorted.
	ReadDir(dir string) ([]string, error)
	Stat(name string) (os.FileInfo, error)
	// SyncDir makes the directory entries of dir durable (creates,
	// renames, removes).
	SyncDir(dir string) error
}

// FdFile is implemented by files backed by an operating-system file
// descriptor (the OS filesystem), so that readers can use sendfile. The
// descriptor is used inside the RawConn's Control, which keeps it open
// while the function runs: a Close meanwhile cannot hand its number to
// another file, and once closed Control fails.
type FdFile interface {
	SyscallConn() (syscall.RawConn, error)
}
