package tier

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"iter"
	"slices"
	"strings"
	"sync"
	"time"
)

// Op names an ObjectStore method, for MemStore's fault hook and counters.
type Op string

const (
	OpPut        Op = "put"
	OpGet        Op = "get"
	OpHead       Op = "head"
	OpList       Op = "list"
	OpDelete     Op = "delete"
	OpDeleteMany Op = "delete-many"
)

// MemStore is an ObjectStore in memory, for tests: it can fail on demand
// (SetFault) and counts calls, so that fault tests can make the bucket
// err, hang or recover at chosen points.
type MemStore struct {
	mu      sync.Mutex
	objects map[string]memObject
	fault   func(op Op, key string) error
	calls   map[Op]int
	now     func() time.Time
	gen     uint64 // the last ETag handed out
}

type memObject struct {
	data    []byte
	modTime time.Time
	etag    string
}

// NewMemStore returns an empty store.
func NewMemStore() *MemStore {
	return &MemStore{objects: map[string]memObject{}, calls: map[Op]int{}, now: time.Now}
}

func (s *MemStore) String() string { return "mem://" }

// SetFault installs a hook called at the start of every operation (once
// per key for DeleteMany; with the prefix for List); a non-nil error
// fails the operation with that error, before it changes anything. The
// hook may block (to simulate a hanging bucket) and is called without the
// store's lock held. nil removes the hook.
func (s *MemStore) SetFault(f func(op Op, key string) error) {
	s.mu.Lock()
	s.fault = f
	s.mu.Unlock()
}

// Calls returns how many times op was called.
func (s *MemStore) Calls(op Op) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

// Keys returns every key, sorted.
func (s *MemStore) Keys() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	keys := make([]string, 0, len(s.objects))
	for k := range s.objects {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (s *MemStore) begin(ctx context.Context, op Op, key string) error {
	s.mu.Lock()
	s.calls[op]++
	f := s.fault
	s.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	if f != nil {
		if err := f(op, key); err != nil {
			return fmt.Errorf("%s %s: %w", op, key, err)
		}
	}
	return nil
}

func (s *MemStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if size < 0 {
		return fmt.Errorf("put %s: negative size %d", key, size)
	}
	if err := s.begin(ctx, OpPut, key); err != nil {
		return err
	}
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, &ctxReader{ctx: ctx, r: &exactReader{r: r, left: size}}); err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	s.mu.Lock()
	s.store(key, buf.Bytes())
	s.mu.Unlock()
	return nil
}

// store sets an object with a fresh ETag; s.mu is held.
func (s *MemStore) store(key string, data []byte) string {
	s.gen++
	etag := fmt.Sprintf("\"m%d\"", s.gen)
	s.objects[key] = memObject{data: data, modTime: s.now(), etag: etag}
	return etag
}

func (s *MemStore) PutIf(ctx context.Context, key string, r io.Reader, size int64, cond Cond) (string, error) {
	if err := ValidateKey(key); err != nil {
		return "", err
	}
	if err := cond.validate(key); err != nil {
		return "", err
	}
	if size < 0 {
		return "", fmt.Errorf("put %s: negative size %d", key, size)
	}
	if err := s.begin(ctx, OpPut, key); err != nil {
		return "", err
	}
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, &ctxReader{ctx: ctx, r: &exactReader{r: r, left: size}}); err != nil {
		return "", fmt.Errorf("put %s: %w", key, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.objects[key]
	if cond.IfAbsent && ok || !cond.IfAbsent && (!ok || o.etag != cond.IfMatch) {
		return "", fmt.Errorf("put %s (%s): %w", key, cond, ErrPreconditionFailed)
	}
	return s.store(key, buf.Bytes()), nil
}

func (s *MemStore) GetTagged(ctx context.Context, key string, max int64) ([]byte, string, error) {
	if err := ValidateKey(key); err != nil {
		return nil, "", err
	}
	if err := s.begin(ctx, OpGet, key); err != nil {
		return nil, "", err
	}
	s.mu.Lock()
	o, ok := s.objects[key]
	s.mu.Unlock()
	if !ok {
		return nil, "", fmt.Errorf("get %s: %w", key, ErrNotFound)
	}
	if int64(len(o.data)) > max {
		return nil, o.etag, fmt.Errorf("get %s: %d bytes, more than %d: %w", key, len(o.data), max, ErrTooLarge)
	}
	return slices.Clone(o.data), o.etag, nil
}

func (s *MemStore) Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	if err := ValidateKey(key); err != nil {
		return nil, err
	}
	if err := s.begin(ctx, OpGet, key); err != nil {
		return nil, err
	}
	s.mu.Lock()
	o, ok := s.objects[key]
	s.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("get %s: %w", key, ErrNotFound)
	}
	n, err := checkRange(key, int64(len(o.data)), off, length)
	if err != nil {
		return nil, err
	}
	return io.NopCloser(bytes.NewReader(o.data[off : off+n])), nil
}

func (s *MemStore) Head(ctx context.Context, key string) (ObjectInfo, error) {
	if err := ValidateKey(key); err != nil {
		return ObjectInfo{}, err
	}
	if err := s.begin(ctx, OpHead, key); err != nil {
		return ObjectInfo{}, err
	}
	s.mu.Lock()
	o, ok := s.objects[key]
	s.mu.Unlock()
	if !ok {
		return ObjectInfo{}, fmt.Errorf("head %s: %w", key, ErrNotFound)
	}
	return ObjectInfo{Key: key, Size: int64(len(o.data)), ModTime: o.modTime}, nil
}

func (s *MemStore) List(ctx context.Context, prefix string) iter.Seq2[ObjectInfo, error] {
	return func(yield func(ObjectInfo, error) bool) {
		if err := validatePrefix(prefix); err != nil {
			yield(ObjectInfo{}, err)
			return
		}
		if err := s.begin(ctx, OpList, prefix); err != nil {
			yield(ObjectInfo{}, err)
			return
		}
		s.mu.Lock()
		var infos []ObjectInfo
		for k, o := range s.objects {
			if strings.HasPrefix(k, prefix) {
				infos = append(infos, ObjectInfo{Key: k, Size: int64(len(o.data)), ModTime: o.modTime})
			}
		}
		s.mu.Unlock()
		slices.SortFunc(infos, func(a, b ObjectInfo) int { return strings.Compare(a.Key, b.Key) })
		for _, info := range infos {
			if !yield(info, nil) {
				return
			}
		}
	}
}

func (s *MemStore) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return err
	}
	if err := s.begin(ctx, OpDelete, key); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.objects, key)
	s.mu.Unlock()
	return nil
}

func (s *MemStore) DeleteMany(ctx context.Context, keys []string) error {
	for _, k := range keys {
		if err := ValidateKey(k); err != nil {
			return err
		}
	}
	for _, k := range keys {
		if err := s.begin(ctx, OpDeleteMany, k); err != nil {
			return err
		}
		s.mu.Lock()
		delete(s.objects, k)
		s.mu.Unlock()
	}
	return nil
}
