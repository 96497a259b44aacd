package tier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
	"time"
)

// ObjectStore is a flat namespace of immutable objects: S3 (S3Store), a
// local directory (FileStore) or memory (MemStore). Keys are relative to
// the store's root (the s3:// prefix or the directory). Every method may
// be called from any goroutine. See the package doc for the contract the
// conformance suite checks.
type ObjectStore interface {
	// Put stores exactly size bytes read from r under key, replacing any
	// object there. The object appears whole or not at all: if r ends
	// early or fails, Put fails and leaves what was there before.
	Put(ctx context.Context, key string, r io.Reader, size int64) error
	// Get reads length bytes of the object from offset off; length < 0
	// reads to the end, and a range past the end is cut at the end. off
	// must be within [0, size]: beyond is ErrInvalidRange. A missing key
	// is ErrNotFound. The caller closes the reader.
	Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error)
	// Head returns an object's size and modification time; ErrNotFound
	// when missing.
	Head(ctx context.Context, key string) (ObjectInfo, error)
	// List yields the objects whose keys start with prefix, in ascending
	// byte order of keys. An error ends the sequence.
	List(ctx context.Context, prefix string) iter.Seq2[ObjectInfo, error]
	// Delete removes an object; a missing key is not an error.
	Delete(ctx context.Context, key string) error
	// DeleteMany removes objects, in as few requests as the store allows;
	// missing keys are not errors.
	DeleteMany(ctx context.Context, keys []string) error
	// PutIf stores an object as Put does, but only if cond holds when the
	// store commits it: IfAbsent, no object is at key (S3's
	// If-None-Match: *); IfMatch, the object at key has that ETag (S3's
	// If-Match; a missing object does not match). Otherwise it fails
	// with ErrPreconditionFailed and changes nothing. It returns the new
	// object's ETag. Writes that must not race another writer (a
	// segment's manifest, the cluster's snapshots) use it: it is the
	// fence that holds on the store itself (see "Fencing" in the package
	// doc).
	PutIf(ctx context.Context, key string, r io.Reader, size int64, cond Cond) (etag string, err error)
	// GetTagged reads a whole object of at most max bytes with its ETag,
	// both of one version of it. A missing key is ErrNotFound; a larger
	// object is ErrTooLarge, with its ETag.
	GetTagged(ctx context.Context, key string, max int64) (data []byte, etag string, err error)
	// String describes the store for logs ("s3://bucket/prefix", "file:///dir").
	String() string
}

// Cond is the condition of a PutIf: exactly one of IfAbsent and IfMatch.
type Cond struct {
	IfAbsent bool   // only if no object is at the key
	IfMatch  string // only if the object at the key has this ETag
}

func (c Cond) validate(key string) error {
	if c.IfAbsent == (c.IfMatch != "") {
		return fmt.Errorf("put %s: a condition needs exactly one of IfAbsent and IfMatch", key)
	}
	return nil
}

func (c Cond) String() string {
	if c.IfAbsent {
		return "If-None-Match: *"
	}
	return "If-Match: " + c.IfMatch
}

// ListFromStore is a store that can start a listing after a key, as S3's
// ListObjectsV2 StartAfter does, without reading the keys before it.
type ListFromStore interface {
	// ListFrom yields what List yields, but only the keys greater than
	// startAfter.
	ListFrom(ctx context.Context, prefix, startAfter string) iter.Seq2[ObjectInfo, error]
}

// listFrom lists the keys of prefix greater than startAfter: with the
// store's ListFrom when it has one, else by skipping them.
func listFrom(ctx context.Context, store ObjectStore, prefix, startAfter string) iter.Seq2[ObjectInfo, error] {
	if lf, ok := store.(ListFromStore); ok {
		return lf.ListFrom(ctx, prefix, startAfter)
	}
	return func(yield func(ObjectInfo, error) bool) {
		for info, err := range store.List(ctx, prefix) {
			if err == nil && info.Key <= startAfter {
				continue
			}
			if !yield(info, err) || err != nil {
				return
			}
		}
	}
}

// ObjectInfo describes a stored object.
type ObjectInfo struct {
	Key     string
	Size    int64
	ModTime time.Time
}

// Errors callers branch on; the stores wrap them with context.
var (
	ErrNotFound     = errors.New("object not found")
	ErrInvalidRange = errors.New("invalid object range")
	ErrInvalidKey   = errors.New("invalid object key")
	ErrShortBody    = errors.New("object body shorter than its size")
	// ErrPreconditionFailed: a PutIf's condition did not hold (S3's 412
	// Precondition Failed, or 409 ConditionalRequestConflict when another
	// conditional write to the key was under way).
	ErrPreconditionFailed = errors.New("precondition failed")
	// ErrTooLarge: GetTagged found an object larger than it may read.
	ErrTooLarge = errors.New("object larger than allowed")
)

// MaxKeyLen is the longest key accepted (S3's limit is 1024 bytes,
// including the store's prefix).
const MaxKeyLen = 900

// ValidateKey checks a key against the rules every store applies, so that
// a key valid for one is valid for all: not empty, at most MaxKeyLen
// bytes, '/'-separated non-empty components that do not start with '.'
// (which also rules out "." and ".."), no NUL bytes and no backslashes.
func ValidateKey(key string) error {
	if key == "" || len(key) > MaxKeyLen {
		return fmt.Errorf("%w: %q: empty or longer than %d bytes", ErrInvalidKey, key, MaxKeyLen)
	}
	for c := range strings.SplitSeq(key, "/") {
		if c == "" || c[0] == '.' || strings.ContainsAny(c, "\x00\\") {
			return fmt.Errorf("%w: %q: empty component, component starting with '.', NUL or backslash", ErrInvalidKey, key)
		}
	}
	return nil
}

// validatePrefix checks a List prefix: empty, or a valid key, or a valid
// key followed by '/'.
func validatePrefix(prefix string) error {
	if p := strings.TrimSuffix(prefix, "/"); prefix != "" && ValidateKey(p) != nil {
		return fmt.Errorf("%w: prefix %q", ErrInvalidKey, prefix)
	}
	return nil
}

// checkRange validates a ranged read of an object of the given size and
// returns the number of bytes to read.
func checkRange(key string, size, off, length int64) (int64, error) {
	if off < 0 || off > size {
		return 0, fmt.Errorf("%w: %s: offset %d of %d bytes", ErrInvalidRange, key, off, size)
	}
	n := size - off
	if length >= 0 && length < n {
		n = length
	}
	return n, nil
}

// ReadAll reads a whole object.
func ReadAll(ctx context.Context, s ObjectStore, key string) ([]byte, error) {
	r, err := s.Get(ctx, key, 0, -1)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	return b, nil
}

// exactReader reads exactly n bytes from r: it reports ErrShortBody when r
// ends early and never reads past n.
type exactReader struct {
	r    io.Reader
	left int64
}

func (e *exactReader) Read(p []byte) (int, error) {
	if e.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > e.left {
		p = p[:e.left]
	}
	n, err := e.r.Read(p)
	e.left -= int64(n)
	if err == io.EOF {
		if e.left > 0 {
			return n, fmt.Errorf("%w: %d bytes missing", ErrShortBody, e.left)
		}
		return n, io.EOF
	}
	if err == nil && e.left == 0 {
		return n, io.EOF
	}
	return n, err
}
