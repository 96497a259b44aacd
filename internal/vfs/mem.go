package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MemFS is an in-memory filesystem that models what a machine crash keeps:
// a file's bytes become durable when the file is synced (File.Sync), and a
// directory entry (a create, rename or remove) becomes durable when its
// parent directory is synced (SyncDir) afterwards. Crash returns a new
// filesystem holding only the durable state; the old one stays usable, so
// a test can also model a process crash by simply reopening on the same
// MemFS (everything written survives that).
//
// Errors are injected with SetInjector (see fault.go for the kinds). A
// Sync that fails loses the file's dirty bytes as Linux does after a
// writeback error: the process still reads them, but they count as clean,
// so a later Sync that succeeds does not make them durable; their durable
// image stays what it was (zeros past the old durable end) until they are
// written again. SetCapacity bounds the bytes files may hold (ENOSPC).
// Paths are cleaned and relative and absolute names address the same
// tree ("a/b" == "/a/b").
type MemFS struct {
	mu   sync.Mutex
	root *memNode
	injection
	// capacity bounds the bytes of all files (0: unlimited); used counts
	// them. Bytes of a removed file are freed at once, even while it is
	// open.
	capacity atomic.Int64
	used     atomic.Int64
}

// NewCrashableMem returns an empty MemFS.
func NewCrashableMem() *MemFS {
	return &MemFS{root: newDir()}
}

// SetCapacity bounds the bytes all files may hold together (0 or less:
// unlimited). A write that does not fit stores what does and fails with
// ErrNoSpace; a truncation that grows a file past it fails. Lowering it
// below what files hold already removes nothing.
func (m *MemFS) SetCapacity(bytes int64) { m.capacity.Store(max(bytes, 0)) }

// Used returns the bytes all files hold.
func (m *MemFS) Used() int64 { return m.used.Load() }

// reserve takes up to want bytes of free space and returns how many it
// got (want when there is no capacity).
func (m *MemFS) reserve(want int64) int64 {
	if want <= 0 {
		return 0
	}
	for {
		limit, used := m.capacity.Load(), m.used.Load()
		got := want
		if limit > 0 {
			got = min(want, max(limit-used, 0))
		}
		if m.used.CompareAndSwap(used, used+got) {
			return got
		}
	}
}

// release frees n bytes.
func (m *MemFS) release(n int64) { m.used.Add(-n) }

// treeSize is the bytes of the files under n; n.mu of files is taken.
func treeSize(n *memNode) int64 {
	if !n.isDir {
		n.mu.RLock()
		defer n.mu.RUnlock()
		return int64(len(n.data))
	}
	var t int64
	for _, c := range n.children {
		t += treeSize(c)
	}
	return t
}

type memNode struct {
	isDir bool

	// file contents, guarded by mu (ReadAt is concurrent with Write).
	mu      sync.RWMutex
	data    []byte
	synced  []byte
	modTime time.Time
	// lost are byte ranges whose writeback failed (a failed Sync): a
	// later Sync keeps their old durable image.
	lost []lostSpan

	// directory entries, guarded by MemFS.mu.
	children map[string]*memNode
	durable  map[string]*memNode // entries as of the last SyncDir
}

func newDir() *memNode {
	return &memNode{isDir: true, children: map[string]*memNode{}, durable: map[string]*memNode{}, modTime: time.Now()}
}

// Op names a filesystem operation for error injection.
type Op uint8

const (
	OpOpen Op = iota
	OpRead
	OpWrite
	OpSync
	OpTruncate
	OpClose
	OpRemove
	OpRename
	OpMkdir
	OpReadDir
	OpStat
	OpSyncDir
)

var opNames = [...]string{"open", "read", "write", "sync", "truncate", "close", "remove", "rename", "mkdir", "readdir", "stat", "syncdir"}

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return fmt.Sprintf("op%d", o)
}

// ErrInjected is the error the helper injectors return.
var ErrInjected = errors.New("vfs: injected error")

// Injector decides whether an operation on path fails; a nil result lets
// it proceed. A failed write or truncate changes nothing, except a write
// failed with a *ShortWrite, which stores its first bytes.
type Injector func(op Op, path string) error

// SetInjector installs f (nil removes it).
func (m *MemFS) SetInjector(f Injector) { m.set(f) }

func (m *MemFS) fail(op Op, name string) error {
	_, err := m.check(op, name)
	return err
}

// FailNth fails only the nth (1-based) operation of kind op.
func FailNth(op Op, n int64) Injector {
	var count atomic.Int64
	return func(o Op, _ string) error {
		if o == op && count.Add(1) == n {
			return ErrInjected
		}
		return nil
	}
}

// FailMatching fails every operation of kind op whose path contains substr.
func FailMatching(op Op, substr string) Injector {
	return func(o Op, p string) error {
		if o == op && strings.Contains(p, substr) {
			return ErrInjected
		}
		return nil
	}
}

func clean(name string) string {
	c := path.Clean("/" + name)
	return strings.TrimPrefix(c, "/")
}

func split(name string) (dir, base string) {
	c := clean(name)
	i := strings.LastIndexByte(c, '/')
	if i < 0 {
		return "", c
	}
	return c[:i], c[i+1:]
}

// lookupDir returns the directory node at dir; m.mu held.
func (m *MemFS) lookupDir(dir string) (*memNode, error) {
	n := m.root
	c := clean(dir)
	if c == "" {
		return n, nil
	}
	for _, part := range strings.Split(c, "/") {
		child, ok := n.children[part]
		if !ok {
			return nil, fs.ErrNotExist
		}
		if !child.isDir {
			return nil, fmt.Errorf("%s: not a directory", dir)
		}
		n = child
	}
	return n, nil
}

func (m *MemFS) lookup(name string) (*memNode, error) {
	dir, base := split(name)
	d, err := m.lookupDir(dir)
	if err != nil {
		return nil, err
	}
	if base == "" {
		return d, nil
	}
	n, ok := d.children[base]
	if !ok {
		return nil, fs.ErrNotExist
	}
	return n, nil
}

// OpenFile implements FS.
func (m *MemFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	if err := m.fail(OpOpen, name); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base := split(name)
	d, err := m.lookupDir(dir)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: err}
	}
	n, ok := d.children[base]
	switch {
	case ok && n.isDir:
		if flag&(os.O_WRONLY|os.O_RDWR) != 0 {
			return nil, &fs.PathError{Op: "open", Path: name, Err: errors.New("is a directory")}
		}
	case ok && flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrExist}
	case !ok && flag&os.O_CREATE == 0:
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	case !ok:
		n = &memNode{modTime: time.Now()}
		d.children[base] = n
	}
	if flag&os.O_TRUNC != 0 && !n.isDir {
		n.mu.Lock()
		m.release(int64(len(n.data)))
		n.data, n.lost = nil, nil
		n.mu.Unlock()
	}
	return &memFile{fs: m, n: n, name: name, flag: flag}, nil
}

// Remove implements FS.
func (m *MemFS) Remove(name string) error {
	if err := m.fail(OpRemove, name); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base := split(name)
	d, err := m.lookupDir(dir)
	if err != nil {
		return &fs.PathError{Op: "remove", Path: name, Err: err}
	}
	n, ok := d.children[base]
	if !ok {
		return &fs.PathError{Op: "remove", Path: name, Err: fs.ErrNotExist}
	}
	if n.isDir && len(n.children) > 0 {
		return &fs.PathError{Op: "remove", Path: name, Err: errors.New("directory not empty")}
	}
	delete(d.children, base)
	m.release(treeSize(n))
	return nil
}

// RemoveAll implements FS.
func (m *MemFS) RemoveAll(name string) error {
	if err := m.fail(OpRemove, name); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	dir, base := split(name)
	d, err := m.lookupDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	if n, ok := d.children[base]; ok {
		m.release(treeSize(n))
	}
	delete(d.children, base)
	return nil
}

// Rename implements FS.
func (m *MemFS) Rename(oldname, newname string) error {
	if err := m.fail(OpRename, oldname); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	od, ob := split(oldname)
	nd, nb := split(newname)
	odir, err := m.lookupDir(od)
	if err != nil {
		return &fs.PathError{Op: "rename", Path: oldname, Err: err}
	}
	ndir, err := m.lookupDir(nd)
	if err != nil {
		return &fs.PathError{Op: "rename", Path: newname, Err: err}
	}
	n, ok := odir.children[ob]
	if !ok {
		return &fs.PathError{Op: "rename", Path: oldname, Err: fs.ErrNotExist}
	}
	delete(odir.children, ob)
	if old, ok := ndir.children[nb]; ok && old != n {
		m.release(treeSize(old))
	}
	ndir.children[nb] = n
	return nil
}

// MkdirAll implements FS. New directories are durable only once their
// parent is synced, like files.
func (m *MemFS) MkdirAll(name string, perm os.FileMode) error {
	if err := m.fail(OpMkdir, name); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n := m.root
	c := clean(name)
	if c == "" {
		return nil
	}
	for _, part := range strings.Split(c, "/") {
		child, ok := n.children[part]
		if !ok {
			child = newDir()
			n.children[part] = child
		} else if !child.isDir {
			return &fs.PathError{Op: "mkdir", Path: name, Err: errors.New("not a directory")}
		}
		n = child
	}
	return nil
}

// ReadDir implements FS.
func (m *MemFS) ReadDir(dir string) ([]string, error) {
	if err := m.fail(OpReadDir, dir); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	d, err := m.lookupDir(dir)
	if err != nil {
		return nil, &fs.PathError{Op: "readdir", Path: dir, Err: err}
	}
	names := make([]string, 0, len(d.children))
	for name := range d.children {
		names = append(names, name)
	}
	sort.Strings(names)
	return names, nil
}

// Stat implements FS.
func (m *MemFS) Stat(name string) (os.FileInfo, error) {
	if err := m.fail(OpStat, name); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.lookup(name)
	if err != nil {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: err}
	}
	_, base := split(name)
	return n.stat(base), nil
}

// SyncDir implements FS: the current entries of dir become durable.
func (m *MemFS) SyncDir(dir string) error {
	if err := m.fail(OpSyncDir, dir); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	d, err := m.lookupDir(dir)
	if err != nil {
		return &fs.PathError{Op: "syncdir", Path: dir, Err: err}
	}
	d.durable = make(map[string]*memNode, len(d.children))
	for k, v := range d.children {
		d.durable[k] = v
	}
	return nil
}

// Crash returns a new MemFS holding only the durable state: directory
// entries as of their parent's last SyncDir, with each file's contents as
// of its last Sync.
func (m *MemFS) Crash() *MemFS {
	return m.crash(nil)
}

// CrashTorn is like Crash but keeps, for each file whose synced contents
// are a prefix of its current contents, a random prefix of the unsynced
// tail too, as an operating system may have written some of it back: the
// classic torn tail.
func (m *MemFS) CrashTorn(seed uint64) *MemFS {
	return m.crash(rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)))
}

func (m *MemFS) crash(rnd *rand.Rand) *MemFS {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := &MemFS{root: cloneDurable(m.root, rnd)}
	c.capacity.Store(m.capacity.Load())
	c.used.Store(treeSize(c.root))
	return c
}

func cloneDurable(n *memNode, rnd *rand.Rand) *memNode {
	if n.isDir {
		d := newDir()
		for name, c := range n.durable {
			cc := cloneDurable(c, rnd)
			d.children[name] = cc
			d.durable[name] = cc
		}
		return d
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	data := append([]byte(nil), n.synced...)
	if rnd != nil && len(n.data) > len(n.synced) && string(n.data[:len(n.synced)]) == string(n.synced) {
		extra := rnd.IntN(len(n.data) - len(n.synced) + 1)
		data = append(data, n.data[len(n.synced):len(n.synced)+extra]...)
	}
	return &memNode{data: data, synced: append([]byte(nil), data...), modTime: n.modTime}
}

func (n *memNode) stat(name string) os.FileInfo {
	if n.isDir {
		return memInfo{name: name, dir: true, mod: n.modTime}
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	return memInfo{name: name, size: int64(len(n.data)), mod: n.modTime}
}

type memInfo struct {
	name string
	size int64
	dir  bool
	mod  time.Time
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return i.size }
func (i memInfo) Mode() os.FileMode {
	if i.dir {
		return os.ModeDir | 0o755
	}
	return 0o644
}
func (i memInfo) ModTime() time.Time { return i.mod }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }

// memFile is an open MemFS file. It keeps working after its name is
// removed or renamed, like a file descriptor.
type memFile struct {
	fs     *MemFS
	n      *memNode
	name   string
	flag   int
	mu     sync.Mutex // pos
	pos    int64
	closed atomic.Bool
}

// errClosed is the error of an operation on a closed file: fs.ErrClosed,
// as the operating system's files answer.
var errClosed = fs.ErrClosed

func (f *memFile) pathErr(op string, err error) error {
	return &fs.PathError{Op: op, Path: f.name, Err: err}
}

func (f *memFile) Read(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, err := f.ReadAt(p, f.pos)
	f.pos += int64(n)
	return n, err
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if f.closed.Load() {
		return 0, f.pathErr("read", errClosed)
	}
	if f.n.isDir {
		return 0, f.pathErr("read", errors.New("is a directory"))
	}
	if err := f.fs.fail(OpRead, f.name); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, f.pathErr("read", errors.New("negative offset"))
	}
	f.n.mu.RLock()
	defer f.n.mu.RUnlock()
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) Write(p []byte) (int, error) {
	if f.closed.Load() {
		return 0, f.pathErr("write", errClosed)
	}
	if f.flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		return 0, f.pathErr("write", errors.New("bad file descriptor"))
	}
	keep, ierr := f.fs.check(OpWrite, f.name)
	if ierr != nil && keep == 0 {
		return 0, ierr
	}
	if ierr != nil {
		p = p[:min(keep, len(p))]
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	if f.flag&os.O_APPEND != 0 {
		f.pos = int64(len(f.n.data))
	}
	end := f.pos + int64(len(p))
	if grow := end - int64(len(f.n.data)); grow > 0 {
		if got := f.fs.reserve(grow); got < grow {
			// The disk is full: store what fits, as write(2) does.
			end -= grow - got
			p = p[:end-f.pos]
			ierr = &fs.PathError{Op: "write", Path: f.name, Err: ErrNoSpace}
		}
	}
	if end > int64(len(f.n.data)) {
		if end > int64(cap(f.n.data)) {
			grown := make([]byte, len(f.n.data), max(end, 2*int64(cap(f.n.data))))
			copy(grown, f.n.data)
			f.n.data = grown
		}
		f.n.data = f.n.data[:end]
	}
	copy(f.n.data[f.pos:], p)
	f.n.lost = cutSpans(f.n.lost, f.pos, end)
	f.pos = end
	f.n.modTime = time.Now()
	if ierr != nil {
		return len(p), ierr
	}
	return len(p), nil
}

func (f *memFile) Close() error {
	if f.closed.Swap(true) {
		return f.pathErr("close", errClosed)
	}
	return f.fs.fail(OpClose, f.name)
}

func (f *memFile) Sync() error {
	if f.closed.Load() {
		return f.pathErr("sync", errClosed)
	}
	if err := f.fs.fail(OpSync, f.name); err != nil {
		f.n.mu.Lock()
		f.n.dropDirty()
		f.n.mu.Unlock()
		return err
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	f.n.synced = append(f.n.synced[:0:0], f.n.data...)
	for _, sp := range f.n.lost {
		if sp.off < int64(len(f.n.synced)) {
			copy(f.n.synced[sp.off:], sp.durable)
		}
	}
	return nil
}

// lostSpan is a byte range whose writeback failed: its durable image
// stays durable (the old synced bytes, zeros past the old durable end)
// until the range is written again.
type lostSpan struct {
	off     int64
	durable []byte
}

// dropDirty marks the bytes that differ from the durable image as lost:
// after a failed fsync the kernel may have dropped them (Linux marks the
// pages clean), so no later fsync writes them. n.mu held.
func (n *memNode) dropDirty() {
	lo := 0
	for lo < len(n.data) && lo < len(n.synced) && n.data[lo] == n.synced[lo] {
		lo++
	}
	if lo >= len(n.data) {
		return
	}
	img := make([]byte, len(n.data)-lo)
	if lo < len(n.synced) {
		copy(img, n.synced[lo:])
	}
	n.lost = append(cutSpans(n.lost, int64(lo), int64(len(n.data))), lostSpan{off: int64(lo), durable: img})
}

// cutSpans removes [from, to) from the lost spans: those bytes were
// written again (or truncated away) and are dirty or gone.
func cutSpans(spans []lostSpan, from, to int64) []lostSpan {
	if len(spans) == 0 || from >= to {
		return spans
	}
	var out []lostSpan
	for _, sp := range spans {
		end := sp.off + int64(len(sp.durable))
		if end <= from || sp.off >= to {
			out = append(out, sp)
			continue
		}
		if sp.off < from {
			out = append(out, lostSpan{off: sp.off, durable: sp.durable[:from-sp.off]})
		}
		if end > to {
			out = append(out, lostSpan{off: to, durable: sp.durable[to-sp.off:]})
		}
	}
	return out
}

func (f *memFile) Truncate(size int64) error {
	if f.closed.Load() {
		return f.pathErr("truncate", errClosed)
	}
	if size < 0 {
		return f.pathErr("truncate", errors.New("negative size"))
	}
	if err := f.fs.fail(OpTruncate, f.name); err != nil {
		return err
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	cur := int64(len(f.n.data))
	if size <= cur {
		// Copy so that slices handed out by earlier reads stay intact.
		f.n.data = append([]byte(nil), f.n.data[:size]...)
		f.fs.release(cur - size)
		f.n.lost = cutSpans(f.n.lost, size, cur)
	} else {
		if got := f.fs.reserve(size - cur); got < size-cur {
			f.fs.release(got)
			return f.pathErr("truncate", ErrNoSpace)
		}
		f.n.data = append(f.n.data, make([]byte, size-cur)...)
		f.n.lost = cutSpans(f.n.lost, cur, size)
	}
	return nil
}

func (f *memFile) Size() (int64, error) {
	if f.closed.Load() {
		return 0, f.pathErr("stat", errClosed)
	}
	f.n.mu.RLock()
	defer f.n.mu.RUnlock()
	return int64(len(f.n.data)), nil
}

func (f *memFile) Name() string { return f.name }
