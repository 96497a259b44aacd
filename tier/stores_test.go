package tier

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"strata/internal/testenv"
)

func TestMain(m *testing.M) { testenv.Main(m) }

func TestFileStoreConformance(t *testing.T) {
	runConformance(t, func(t *testing.T) ObjectStore {
		s, err := OpenFileStore(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

func TestMemStoreConformance(t *testing.T) {
	runConformance(t, func(t *testing.T) ObjectStore { return NewMemStore() })
}

var prefixSeq atomic.Int64

// newMinIOStore returns an S3Store on the package's shared MinIO, under a
// prefix of its own, with small pages and batches so that the suite's
// listings and deletions take several requests.
func newMinIOStore(t *testing.T, tune func(*S3Config)) (*S3Store, *testenv.MinIO) {
	t.Helper()
	m := testenv.SharedMinIO(t)
	cfg := S3Config{
		Bucket:       m.Bucket(),
		Prefix:       fmt.Sprintf("conformance/%d", prefixSeq.Add(1)),
		Endpoint:     m.Endpoint(),
		Region:       testenv.MinIORegion,
		PartSize:     minPartSize,
		ListPageSize: 7,
		DeleteBatch:  5,
	}
	t.Setenv("AWS_ACCESS_KEY_ID", m.AccessKey())
	t.Setenv("AWS_SECRET_ACCESS_KEY", m.SecretKey())
	if tune != nil {
		tune(&cfg)
	}
	s, err := NewS3Store(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s, m
}

func TestS3StoreConformance(t *testing.T) {
	runConformance(t, func(t *testing.T) ObjectStore {
		s, _ := newMinIOStore(t, nil)
		return s
	})
}

// The file store's files are the keys, and failures leave no debris.
func TestFileStoreOnDisk(t *testing.T) {
	dir := t.TempDir()
	s, err := OpenFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, "t/3/seg.log", []byte("hello"))
	if b, err := os.ReadFile(filepath.Join(dir, "t", "3", "seg.log")); err != nil || string(b) != "hello" {
		t.Fatalf("file at the key's path: %q, %v", b, err)
	}
	// A failed put leaves no temporary file.
	if err := s.Put(ctxT(t), "t/3/other", strings.NewReader("abc"), 10); !errors.Is(err, ErrShortBody) {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(filepath.Join(dir, tmpDir)); len(ents) != 0 {
		t.Fatalf("temporary files left: %v", ents)
	}
	// Deleting the last key of a directory removes the directory.
	if err := s.Delete(ctxT(t), "t/3/seg.log"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "t")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("empty directories left after delete: %v", err)
	}
	// Temporary files of a dead process are removed at open; a live
	// process's are kept.
	dead := filepath.Join(dir, tmpDir, "999999999-abc")
	live := filepath.Join(dir, tmpDir, fmt.Sprintf("%d-def", os.Getppid()))
	junk := filepath.Join(dir, tmpDir, "junk")
	for _, p := range []string{dead, live, junk} {
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := OpenFileStore(dir); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{dead: false, live: true, junk: false} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s: exists %v, want %v", filepath.Base(p), err == nil, want)
		}
	}
	if got := listKeys(t, s, ""); len(got) != 0 {
		t.Fatalf("temporary files listed: %v", got)
	}
	if _, err := OpenFileStore("relative/dir"); err == nil {
		t.Fatal("relative directory accepted")
	}
}

func TestMemStoreFaults(t *testing.T) {
	s := NewMemStore()
	boom := errors.New("bucket unreachable")
	put(t, s, "a", []byte("1"))
	s.SetFault(func(op Op, key string) error {
		if op == OpPut || op == OpGet && key == "a" {
			return boom
		}
		return nil
	})
	if err := s.Put(ctxT(t), "b", strings.NewReader("2"), 1); !errors.Is(err, boom) {
		t.Fatalf("put under fault: %v", err)
	}
	if _, err := s.Get(ctxT(t), "a", 0, -1); !errors.Is(err, boom) {
		t.Fatalf("get under fault: %v", err)
	}
	if _, err := s.Head(ctxT(t), "a"); err != nil {
		t.Fatalf("head is not faulted: %v", err)
	}
	s.SetFault(nil)
	put(t, s, "b", []byte("2"))
	if !slices.Equal(s.Keys(), []string{"a", "b"}) {
		t.Fatalf("keys %v", s.Keys())
	}
	if s.Calls(OpPut) != 3 || s.Calls(OpGet) != 1 {
		t.Fatalf("calls: put %d get %d", s.Calls(OpPut), s.Calls(OpGet))
	}
	// A fault in DeleteMany stops it before the faulted key.
	s.SetFault(func(op Op, key string) error {
		if op == OpDeleteMany && key == "b" {
			return boom
		}
		return nil
	})
	if err := s.DeleteMany(ctxT(t), []string{"a", "b"}); !errors.Is(err, boom) {
		t.Fatal(err)
	}
	if !slices.Equal(s.Keys(), []string{"b"}) {
		t.Fatalf("keys after a failed DeleteMany: %v", s.Keys())
	}
	if got, _ := get(t, s, "b", 0, -1); !bytes.Equal(got, []byte("2")) {
		t.Fatalf("b = %q", got)
	}
}

// File stores hold trees: a key that is a '/'-prefix of another (or has
// one as its prefix) is refused, and nothing is changed.
func TestFileStoreKeyTree(t *testing.T) {
	s, err := OpenFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	put(t, s, "a/b", []byte("1"))
	for _, k := range []string{"a", "a/b/c"} {
		if err := s.Put(ctxT(t), k, strings.NewReader("x"), 1); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("put %s beside a/b: %v, want ErrInvalidKey", k, err)
		}
	}
	if got := listKeys(t, s, ""); !slices.Equal(got, []string{"a/b"}) {
		t.Fatalf("keys %v", got)
	}
}
