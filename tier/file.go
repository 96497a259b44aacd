package tier

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// FileStore keeps each object as a file under a root directory, at the
// path of its key ('/' separating directories). Writes are crash-safe: the
// bytes go to a temporary file in the root's .tmp directory, which is
// fsynced and renamed over the key's path, and the directory is fsynced;
// a crash leaves the old object or the new one, never a torn file. As
// keys are paths, no key may be a '/'-prefix of another ("a" and "a/b"):
// such a Put fails with ErrInvalidKey (the tier's layout never does
// this). The store is meant for one process per directory (the embedded
// default).
type FileStore struct {
	root   string
	tmp    string
	condMu sync.Mutex // with a flock on .cond.lock: see PutIf
}

// tmpDir holds files being written, and the condition lock (PutIf); keys
// never start with '.', so it is never listed.
const (
	tmpDir       = ".tmp"
	condLockName = "cond.lock"
)

// OpenFileStore opens (creating if needed) a store rooted at dir, an
// absolute path, and removes temporary files that a crashed process left.
func OpenFileStore(dir string) (*FileStore, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("file store %q: not an absolute path", dir)
	}
	s := &FileStore{root: filepath.Clean(dir), tmp: filepath.Join(filepath.Clean(dir), tmpDir)}
	if err := os.MkdirAll(s.tmp, 0o755); err != nil {
		return nil, fmt.Errorf("file store %s: %w", dir, err)
	}
	s.removeStaleTemp()
	return s, nil
}

func (s *FileStore) String() string { return "file://" + s.root }

// Dir is the root directory.
func (s *FileStore) Dir() string { return s.root }

// Temporary files are named <pid>-<random>; those of processes that are
// gone are removed at open.
func (s *FileStore) removeStaleTemp() {
	ents, _ := os.ReadDir(s.tmp)
	for _, e := range ents {
		if e.Name() == condLockName {
			continue
		}
		pidStr, _, _ := strings.Cut(e.Name(), "-")
		pid, err := strconv.Atoi(pidStr)
		alive := err == nil && (pid == os.Getpid() || !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH))
		if alive {
			continue
		}
		os.Remove(filepath.Join(s.tmp, e.Name()))
	}
}

func (s *FileStore) path(key string) string { return filepath.Join(s.root, filepath.FromSlash(key)) }

func (s *FileStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	return s.put(ctx, key, r, size, nil)
}

// PutIf checks the condition and renames the new object into place under
// the store's condition lock (a mutex, and a flock on .tmp/cond.lock for
// other processes on the directory), which Delete takes
// too. An object's ETag is its file's inode, size and modification time:
// a rename brings a new inode, so a replaced object never keeps its tag.
func (s *FileStore) PutIf(ctx context.Context, key string, r io.Reader, size int64, cond Cond) (string, error) {
	if err := cond.validate(key); err != nil {
		return "", err
	}
	var etag string
	err := s.put(ctx, key, r, size, func(dst string, commit func() error) error {
		cur, err := fileETag(dst)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if !cond.IfAbsent {
				return fmt.Errorf("put %s (%s): %w", key, cond, ErrPreconditionFailed)
			}
		case err != nil:
			return fmt.Errorf("put %s: %w", key, err)
		case cond.IfAbsent || cur != cond.IfMatch:
			return fmt.Errorf("put %s (%s): %w", key, cond, ErrPreconditionFailed)
		}
		if err := commit(); err != nil {
			return err
		}
		etag, err = fileETag(dst)
		return err
	})
	return etag, err
}

// fileETag names one version of a file.
func fileETag(path string) (string, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", err
	}
	return statETag(st), nil
}

func statETag(st fs.FileInfo) string {
	var ino uint64
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		ino = sys.Ino
	}
	return fmt.Sprintf("\"%x-%x-%x\"", ino, st.Size(), st.ModTime().UnixNano())
}

// condLock takes the condition lock (see PutIf) and returns its release.
func (s *FileStore) condLock() (func(), error) {
	s.condMu.Lock()
	f, err := os.OpenFile(filepath.Join(s.tmp, condLockName), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		s.condMu.Unlock()
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		s.condMu.Unlock()
		return nil, err
	}
	return func() {
		f.Close() // releases the flock
		s.condMu.Unlock()
	}, nil
}

// put writes the object to a temporary file and renames it into place;
// with check, the rename is commit, called by check under the condition
// lock.
func (s *FileStore) put(ctx context.Context, key string, r io.Reader, size int64, check func(dst string, commit func() error) error) (err error) {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("put %s: negative size %d", key, size)
	}
	rnd := make([]byte, 8)
	_, _ = rand.Read(rnd)
	tmp := filepath.Join(s.tmp, strconv.Itoa(os.Getpid())+"-"+hex.EncodeToString(rnd))
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	closed := false
	defer func() {
		if !closed {
			f.Close()
		}
		if err != nil {
			os.Remove(tmp)
		}
	}()
	if _, err := io.Copy(f, &ctxReader{ctx: ctx, r: &exactReader{r: r, left: size}}); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("put %s: fsync: %w", key, err)
	}
	closed = true
	if err := f.Close(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	dst := s.path(key)
	commit := func() error { return s.rename(key, tmp, dst) }
	if check == nil {
		return commit()
	}
	unlock, err := s.condLock()
	if err != nil {
		return fmt.Errorf("put %s: condition lock: %w", key, err)
	}
	defer unlock()
	return check(dst, commit)
}

// rename moves a written temporary file to the key's path and fsyncs its
// directory.
func (s *FileStore) rename(key, tmp, dst string) (err error) {
	// A concurrent Delete may remove the (then empty) parent between
	// MkdirAll and Rename: try again.
	for attempt := 0; ; attempt++ {
		err = s.mkdirs(filepath.Dir(dst))
		if err == nil {
			err = os.Rename(tmp, dst)
		}
		if err == nil {
			break
		}
		if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.EEXIST) || errors.Is(err, syscall.ENOTEMPTY) {
			return fmt.Errorf("put %s: %w: an object and a key prefix would share a path (file stores hold trees of keys)", key, ErrInvalidKey)
		}
		if !errors.Is(err, fs.ErrNotExist) || attempt == 3 {
			return fmt.Errorf("put %s: %w", key, err)
		}
	}
	if err := syncDir(filepath.Dir(dst)); err != nil {
		return fmt.Errorf("put %s: fsync directory: %w", key, err)
	}
	return nil
}

func (s *FileStore) GetTagged(ctx context.Context, key string, max int64) ([]byte, string, error) {
	if err := ValidateKey(key); err != nil {
		return nil, "", err
	}
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	f, err := os.Open(s.path(key))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil, "", fmt.Errorf("get %s: %w", key, ErrNotFound)
		}
		return nil, "", fmt.Errorf("get %s: %w", key, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, "", fmt.Errorf("get %s: %w", key, err)
	}
	if st.IsDir() {
		return nil, "", fmt.Errorf("get %s: %w", key, ErrNotFound)
	}
	if st.Size() > max {
		return nil, statETag(st), fmt.Errorf("get %s: %d bytes, more than %d: %w", key, st.Size(), max, ErrTooLarge)
	}
	b := make([]byte, st.Size())
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, "", fmt.Errorf("get %s: %w", key, err)
	}
	return b, statETag(st), nil
}

// mkdirs creates dir and its missing parents below the root, fsyncing each
// parent whose entries changed so that the new directories survive a
// crash.
func (s *FileStore) mkdirs(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if dir == s.root {
		return os.MkdirAll(dir, 0o755)
	}
	if err := s.mkdirs(filepath.Dir(dir)); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return syncDir(filepath.Dir(dir))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func (s *FileStore) Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := os.Open(s.path(key))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil, fmt.Errorf("get %s: %w", key, ErrNotFound)
		}
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	st, err := f.Stat()
	if err != nil || st.IsDir() {
		f.Close()
		if err == nil {
			err = ErrNotFound
		}
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	n, err := checkRange(key, st.Size(), off, length)
	if err != nil {
		f.Close()
		return nil, err
	}
	return &fileReader{SectionReader: io.NewSectionReader(f, off, n), f: f}, nil
}

type fileReader struct {
	*io.SectionReader
	f *os.File
}

func (r *fileReader) Close() error { return r.f.Close() }

func (s *FileStore) Head(ctx context.Context, key string) (ObjectInfo, error) {
	if err := ValidateKey(key); err != nil {
		return ObjectInfo{}, err
	}
	if err := ctx.Err(); err != nil {
		return ObjectInfo{}, err
	}
	st, err := os.Stat(s.path(key))
	if err != nil || st.IsDir() {
		if err == nil || errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return ObjectInfo{}, fmt.Errorf("head %s: %w", key, ErrNotFound)
		}
		return ObjectInfo{}, fmt.Errorf("head %s: %w", key, err)
	}
	return ObjectInfo{Key: key, Size: st.Size(), ModTime: st.ModTime()}, nil
}

// List walks the directories under the prefix, each directory's entries
// sorted as keys sort (a directory "a" as "a/"), so that keys come out in
// byte order without collecting them first.
func (s *FileStore) List(ctx context.Context, prefix string) iter.Seq2[ObjectInfo, error] {
	return func(yield func(ObjectInfo, error) bool) {
		if err := validatePrefix(prefix); err != nil {
			yield(ObjectInfo{}, err)
			return
		}
		// Start at the deepest directory the prefix names wholly.
		dirKey := ""
		if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
			dirKey = prefix[:i+1]
		}
		s.walk(ctx, dirKey, prefix, yield)
	}
}

// walk yields the objects under directory dirKey ("" or ending in '/')
// whose keys start with prefix; it returns false when the caller stopped.
func (s *FileStore) walk(ctx context.Context, dirKey, prefix string, yield func(ObjectInfo, error) bool) bool {
	if err := ctx.Err(); err != nil {
		return yield(ObjectInfo{}, err)
	}
	ents, err := os.ReadDir(filepath.Join(s.root, filepath.FromSlash(dirKey)))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return true
		}
		return yield(ObjectInfo{}, fmt.Errorf("list %s: %w", prefix, err))
	}
	sortKey := func(e fs.DirEntry) string {
		if e.IsDir() {
			return e.Name() + "/"
		}
		return e.Name()
	}
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(sortKey(a), sortKey(b)) })
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		key := dirKey + e.Name()
		if e.IsDir() {
			sub := key + "/"
			// Descend if the prefix reaches into or covers this directory.
			if strings.HasPrefix(sub, prefix) || strings.HasPrefix(prefix, sub) {
				if !s.walk(ctx, sub, prefix, yield) {
					return false
				}
			}
			continue
		}
		if !strings.HasPrefix(key, prefix) || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted meanwhile
		}
		if err != nil {
			return yield(ObjectInfo{}, fmt.Errorf("list %s: %w", prefix, err))
		}
		if !yield(ObjectInfo{Key: key, Size: info.Size(), ModTime: info.ModTime()}, nil) {
			return false
		}
	}
	return true
}

func (s *FileStore) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	p := s.path(key)
	unlock, err := s.condLock()
	if err != nil {
		return fmt.Errorf("delete %s: condition lock: %w", key, err)
	}
	defer unlock()
	if err := os.Remove(p); err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil
		}
		if st, serr := os.Stat(p); serr == nil && st.IsDir() {
			return nil // a "directory" of keys is no object
		}
		return fmt.Errorf("delete %s: %w", key, err)
	}
	// Remove parents left empty, up to the root.
	for dir := filepath.Dir(p); dir != s.root && strings.HasPrefix(dir, s.root); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil {
			break
		}
	}
	return nil
}

func (s *FileStore) DeleteMany(ctx context.Context, keys []string) error {
	for _, k := range keys {
		if err := ValidateKey(k); err != nil {
			return err
		}
	}
	for _, k := range keys {
		if err := s.Delete(ctx, k); err != nil {
			return err
		}
	}
	return nil
}

// ctxReader fails reads once ctx is done, so that long copies stop.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c *ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
