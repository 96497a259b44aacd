package plog

// A small in-memory vfs.FS private to the producer-state and epoch-cache
// tests: it can fail chosen operations and simulate a crash that keeps only
// synced file contents and directory entries made durable by SyncDir.

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"strata/internal/vfs"
)

type psMemInode struct {
	data   []byte
	synced []byte
}

type psMemFS struct {
	mu      sync.Mutex
	files   map[string]*psMemInode // current namespace
	durable map[string]*psMemInode // namespace as of the last SyncDir of each dir
	dirs    map[string]bool
	// fail, if set, is asked before every operation; a non-nil result is
	// returned instead of doing it.
	fail func(op, name string) error
}

func newPSMemFS() *psMemFS {
	return &psMemFS{
		files:   map[string]*psMemInode{},
		durable: map[string]*psMemInode{},
		dirs:    map[string]bool{".": true, "/": true},
	}
}

func (m *psMemFS) check(op, name string) error {
	if m.fail != nil {
		return m.fail(op, name)
	}
	return nil
}

// crash forgets everything not made durable.
func (m *psMemFS) crash() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files = map[string]*psMemInode{}
	for n, ino := range m.durable {
		ino.data = slices.Clone(ino.synced)
		m.files[n] = ino
	}
}

func (m *psMemFS) OpenFile(name string, flag int, perm os.FileMode) (vfs.File, error) {
	if err := m.check("open", name); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	name = filepath.Clean(name)
	ino := m.files[name]
	if ino == nil {
		if flag&os.O_CREATE == 0 {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		if !m.dirs[filepath.Dir(name)] {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		ino = &psMemInode{}
		m.files[name] = ino
	} else if flag&os.O_TRUNC != 0 {
		ino.data = nil
	}
	return &psMemFile{fs: m, ino: ino, name: name, flag: flag}, nil
}

func (m *psMemFS) Remove(name string) error {
	if err := m.check("remove", name); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	name = filepath.Clean(name)
	if m.files[name] == nil {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	delete(m.files, name)
	return nil
}

func (m *psMemFS) RemoveAll(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = filepath.Clean(name)
	for n := range m.files {
		if n == name || strings.HasPrefix(n, name+"/") {
			delete(m.files, n)
		}
	}
	delete(m.dirs, name)
	return nil
}

func (m *psMemFS) Rename(oldname, newname string) error {
	if err := m.check("rename", oldname); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	oldname, newname = filepath.Clean(oldname), filepath.Clean(newname)
	ino := m.files[oldname]
	if ino == nil {
		return &fs.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	}
	delete(m.files, oldname)
	m.files[newname] = ino
	return nil
}

func (m *psMemFS) MkdirAll(name string, perm os.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for d := filepath.Clean(name); !m.dirs[d]; d = filepath.Dir(d) {
		m.dirs[d] = true
	}
	return nil
}

func (m *psMemFS) ReadDir(dir string) ([]string, error) {
	if err := m.check("readdir", dir); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	dir = filepath.Clean(dir)
	if !m.dirs[dir] {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: fs.ErrNotExist}
	}
	var names []string
	for n := range m.files {
		if filepath.Dir(n) == dir {
			names = append(names, filepath.Base(n))
		}
	}
	slices.Sort(names)
	return names, nil
}

type psMemInfo struct {
	name string
	size int64
}

func (i psMemInfo) Name() string       { return i.name }
func (i psMemInfo) Size() int64        { return i.size }
func (i psMemInfo) Mode() fs.FileMode  { return 0o644 }
func (i psMemInfo) ModTime() time.Time { return time.Time{} }
func (i psMemInfo) IsDir() bool        { return false }
func (i psMemInfo) Sys() any           { return nil }

func (m *psMemFS) Stat(name string) (os.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	ino := m.files[filepath.Clean(name)]
	if ino == nil {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
	}
	return psMemInfo{filepath.Base(name), int64(len(ino.data))}, nil
}

func (m *psMemFS) SyncDir(dir string) error {
	if err := m.check("syncdir", dir); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	dir = filepath.Clean(dir)
	for n := range m.durable {
		if filepath.Dir(n) == dir {
			delete(m.durable, n)
		}
	}
	for n, ino := range m.files {
		if filepath.Dir(n) == dir {
			m.durable[n] = ino
		}
	}
	return nil
}

// read returns a file's current contents (tests only).
func (m *psMemFS) read(name string) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ino := m.files[filepath.Clean(name)]; ino != nil {
		return slices.Clone(ino.data)
	}
	return nil
}

// write sets a file's contents, durably (tests only).
func (m *psMemFS) write(name string, data []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	name = filepath.Clean(name)
	ino := &psMemInode{data: slices.Clone(data), synced: slices.Clone(data)}
	m.files[name] = ino
	m.durable[name] = ino
}

type psMemFile struct {
	fs   *psMemFS
	ino  *psMemInode
	name string
	flag int
	pos  int64
}

func (f *psMemFile) Read(p []byte) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.pos >= int64(len(f.ino.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.ino.data[f.pos:])
	f.pos += int64(n)
	return n, nil
}

func (f *psMemFile) ReadAt(p []byte, off int64) (int, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if off >= int64(len(f.ino.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.ino.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *psMemFile) Write(p []byte) (int, error) {
	if err := f.fs.check("write", f.name); err != nil {
		return 0, err
	}
	if f.flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		return 0, errors.New("file not open for writing")
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.flag&os.O_APPEND != 0 {
		f.pos = int64(len(f.ino.data))
	}
	if end := f.pos + int64(len(p)); end > int64(len(f.ino.data)) {
		f.ino.data = append(f.ino.data, make([]byte, end-int64(len(f.ino.data)))...)
	}
	copy(f.ino.data[f.pos:], p)
	f.pos += int64(len(p))
	return len(p), nil
}

func (f *psMemFile) Close() error { return nil }

func (f *psMemFile) Sync() error {
	if err := f.fs.check("sync", f.name); err != nil {
		return err
	}
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	f.ino.synced = slices.Clone(f.ino.data)
	return nil
}

func (f *psMemFile) Truncate(size int64) error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if size <= int64(len(f.ino.data)) {
		f.ino.data = f.ino.data[:size]
	} else {
		f.ino.data = append(f.ino.data, make([]byte, size-int64(len(f.ino.data)))...)
	}
	return nil
}

func (f *psMemFile) Size() (int64, error) {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	return int64(len(f.ino.data)), nil
}

func (f *psMemFile) Name() string { return f.name }

var _ vfs.FS = (*psMemFS)(nil)
