package vfs

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync/atomic"
	"syscall"
)

// Faults a test can inject, on MemFS (which also models what a machine
// crash keeps) and on FaultFS (any filesystem, the operating system's
// included):
//
//   - any operation failing: an Injector returning an error;
//   - a short write: an Injector returning a *ShortWrite for a write,
//     which stores the first N bytes and then fails;
//   - a full disk: an Injector returning ErrNoSpace (a write stores
//     nothing), or on MemFS a capacity (SetCapacity): writes past it
//     store what fits and fail with ENOSPC, and raising the capacity (or
//     removing files) makes room again;
//   - a failing fsync: an Injector failing OpSync. On MemFS the dirty
//     pages of the file are then lost, as on Linux after a writeback
//     error: they stay readable, but they are marked clean, so a later
//     Sync that succeeds does not write them (see MemFS).

// ErrNoSpace is the error of a full disk (ENOSPC); errors.Is matches it
// against the operating system's too.
var ErrNoSpace error = syscall.ENOSPC

// ShortWrite, returned by an Injector for an OpWrite, makes the write
// store its first N bytes (at most all of them) and then fail with Err
// (ErrInjected if nil), as write(2) does when the disk fills up or the
// device fails mid-way.
type ShortWrite struct {
	N   int
	Err error
}

func (s *ShortWrite) Error() string {
	return fmt.Sprintf("short write of %d bytes: %v", s.N, s.cause())
}

func (s *ShortWrite) Unwrap() error { return s.cause() }

func (s *ShortWrite) cause() error {
	if s.Err == nil {
		return ErrInjected
	}
	return s.Err
}

// injection holds an Injector; MemFS and FaultFS share it.
type injection struct {
	inject atomic.Pointer[Injector]
}

func (x *injection) set(f Injector) {
	if f == nil {
		x.inject.Store(nil)
		return
	}
	x.inject.Store(&f)
}

// check asks the injector about op on name. For a write it also returns
// how many bytes to store before failing (-1: the whole write proceeds,
// 0: nothing is stored).
func (x *injection) check(op Op, name string) (keep int, err error) {
	p := x.inject.Load()
	if p == nil {
		return -1, nil
	}
	ierr := (*p)(op, name)
	if ierr == nil {
		return -1, nil
	}
	var sw *ShortWrite
	if op == OpWrite && errors.As(ierr, &sw) {
		return max(sw.N, 0), &fs.PathError{Op: op.String(), Path: name, Err: sw.cause()}
	}
	return 0, &fs.PathError{Op: op.String(), Path: name, Err: ierr}
}

// FailWith fails every operation of kind op whose path contains substr
// with err (a *ShortWrite for writes makes them short).
func FailWith(op Op, substr string, err error) Injector {
	return func(o Op, p string) error {
		if o == op && strings.Contains(p, substr) {
			return err
		}
		return nil
	}
}

// FailNthMatching fails only the nth (1-based) operation of kind op whose
// path contains substr, with err.
func FailNthMatching(op Op, substr string, n int64, err error) Injector {
	var count atomic.Int64
	return func(o Op, p string) error {
		if o == op && strings.Contains(p, substr) && count.Add(1) == n {
			return err
		}
		return nil
	}
}

// FaultFS wraps a filesystem and injects errors and short writes into it
// (pebble's errorfs): tests of code that needs real files (sendfile, other
// packages writing beside it) still get failing fsyncs, short writes and
// ENOSPC. It does not model crashes; MemFS does.
type FaultFS struct {
	base FS
	injection
}

// NewFaultFS wraps base; with no injector it behaves as base.
func NewFaultFS(base FS) *FaultFS { return &FaultFS{base: base} }

// SetInjector installs f (nil removes it).
func (f *FaultFS) SetInjector(inj Injector) { f.set(inj) }

func (f *FaultFS) fail(op Op, name string) error {
	_, err := f.check(op, name)
	return err
}

// OpenFile implements FS.
func (f *FaultFS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	if err := f.fail(OpOpen, name); err != nil {
		return nil, err
	}
	file, err := f.base.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: file, fs: f}, nil
}

// Remove implements FS.
func (f *FaultFS) Remove(name string) error {
	if err := f.fail(OpRemove, name); err != nil {
		return err
	}
	return f.base.Remove(name)
}

// RemoveAll implements FS.
func (f *FaultFS) RemoveAll(name string) error {
	if err := f.fail(OpRemove, name); err != nil {
		return err
	}
	return f.base.RemoveAll(name)
}

// Rename implements FS.
func (f *FaultFS) Rename(oldname, newname string) error {
	if err := f.fail(OpRename, oldname); err != nil {
		return err
	}
	return f.base.Rename(oldname, newname)
}

// MkdirAll implements FS.
func (f *FaultFS) MkdirAll(name string, perm fs.FileMode) error {
	if err := f.fail(OpMkdir, name); err != nil {
		return err
	}
	return f.base.MkdirAll(name, perm)
}

// ReadDir implements FS.
func (f *FaultFS) ReadDir(dir string) ([]string, error) {
	if err := f.fail(OpReadDir, dir); err != nil {
		return nil, err
	}
	return f.base.ReadDir(dir)
}

// Stat implements FS.
func (f *FaultFS) Stat(name string) (fs.FileInfo, error) {
	if err := f.fail(OpStat, name); err != nil {
		return nil, err
	}
	return f.base.Stat(name)
}

// SyncDir implements FS.
func (f *FaultFS) SyncDir(dir string) error {
	if err := f.fail(OpSyncDir, dir); err != nil {
		return err
	}
	return f.base.SyncDir(dir)
}

// faultFile is a FaultFS file. It hides the base file's descriptor
// (FdFile), so readers copy instead of using sendfile, and every read
// goes through the injector.
type faultFile struct {
	File
	fs *FaultFS
}

func (f *faultFile) Read(p []byte) (int, error) {
	if err := f.fs.fail(OpRead, f.Name()); err != nil {
		return 0, err
	}
	return f.File.Read(p)
}

func (f *faultFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.fs.fail(OpRead, f.Name()); err != nil {
		return 0, err
	}
	return f.File.ReadAt(p, off)
}

func (f *faultFile) Write(p []byte) (int, error) {
	keep, err := f.fs.check(OpWrite, f.Name())
	if err == nil {
		return f.File.Write(p)
	}
	if keep > 0 {
		n, werr := f.File.Write(p[:min(keep, len(p))])
		if werr != nil {
			return n, werr
		}
		return n, err
	}
	return 0, err
}

func (f *faultFile) Sync() error {
	if err := f.fs.fail(OpSync, f.Name()); err != nil {
		return err
	}
	return f.File.Sync()
}

func (f *faultFile) Truncate(size int64) error {
	if err := f.fs.fail(OpTruncate, f.Name()); err != nil {
		return err
	}
	return f.File.Truncate(size)
}

func (f *faultFile) Close() error {
	err := f.File.Close()
	if ierr := f.fs.fail(OpClose, f.Name()); ierr != nil && err == nil {
		return ierr
	}
	return err
}
