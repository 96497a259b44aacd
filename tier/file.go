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
	root string
	tmp  string
}

// tmpDir holds files being written; keys never start with '.', so it is
// never listed.
const tmpDir = ".tmp"

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

func (s *FileStore) Put(ctx context.Context, key string, r io.Reader, size int64) (err error) {
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
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err := io.Copy(f, &ctxReader{ctx: ctx, r: &exactReader{r: r, left: size}}); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("put %s: fsync: %w", key, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	dst := s.path(key)
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
