package tier

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"
)

// conformanceLarge is the size of the "large" object: over two S3 parts
// of the suite's 5 MiB part size, so that S3 uploads it in three parts.
const conformanceLarge = 2*minPartSize + 12345

// behaviours is the ObjectStore contract, run against every store by
// runConformance; each gets a fresh, empty store.
var behaviours = []struct {
	name string
	fn   func(t *testing.T, s ObjectStore)
}{
	{"PutGetHead", testPutGetHead},
	{"Overwrite", testOverwrite},
	{"EmptyObject", testEmptyObject},
	{"RangedReads", testRangedReads},
	{"Missing", testMissing},
	{"Delete", testDelete},
	{"DeleteMany", testDeleteMany},
	{"ListOrderAndPrefixes", testListOrderAndPrefixes},
	{"ListMany", testListMany},
	{"ListStopsEarly", testListStopsEarly},
	{"ShortBody", testShortBody},
	{"FailingBody", testFailingBody},
	{"InvalidKeys", testInvalidKeys},
	{"ConcurrentPuts", testConcurrentPuts},
	{"CanceledContext", testCanceledContext},
	{"LargeObject", testLargeObject},
	{"ConditionalPuts", testConditionalPuts},
	{"ConditionalRace", testConditionalRace},
}

func runConformance(t *testing.T, newStore func(t *testing.T) ObjectStore) {
	for _, b := range behaviours {
		t.Run(b.name, func(t *testing.T) { b.fn(t, newStore(t)) })
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func payload(seed uint64, n int) []byte {
	r := rand.New(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8), 7}))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func put(t *testing.T, s ObjectStore, key string, data []byte) {
	t.Helper()
	if err := s.Put(ctxT(t), key, bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
}

func get(t *testing.T, s ObjectStore, key string, off, length int64) ([]byte, error) {
	t.Helper()
	r, err := s.Get(ctxT(t), key, off, length)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read body of %s [%d,+%d): %v", key, off, length, err)
	}
	return b, nil
}

func listKeys(t *testing.T, s ObjectStore, prefix string) []string {
	t.Helper()
	keys := []string{}
	for info, err := range s.List(ctxT(t), prefix) {
		if err != nil {
			t.Fatalf("list %q: %v", prefix, err)
		}
		keys = append(keys, info.Key)
	}
	return keys
}

func testPutGetHead(t *testing.T, s ObjectStore) {
	data := payload(1, 3000)
	before := time.Now().Add(-time.Minute)
	put(t, s, "t/0/a.log", data)
	got, err := get(t, s, "t/0/a.log", 0, -1)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("get: %d bytes, %v; want the %d put", len(got), err, len(data))
	}
	info, err := s.Head(ctxT(t), "t/0/a.log")
	if err != nil {
		t.Fatal(err)
	}
	if info.Key != "t/0/a.log" || info.Size != 3000 || info.ModTime.Before(before) || info.ModTime.After(time.Now().Add(time.Minute)) {
		t.Fatalf("head = %+v", info)
	}
	if all, err := ReadAll(ctxT(t), s, "t/0/a.log"); err != nil || !bytes.Equal(all, data) {
		t.Fatalf("ReadAll: %d bytes, %v", len(all), err)
	}
}

func testOverwrite(t *testing.T, s ObjectStore) {
	put(t, s, "k", payload(1, 5000))
	second := payload(2, 100)
	put(t, s, "k", second)
	if got, err := get(t, s, "k", 0, -1); err != nil || !bytes.Equal(got, second) {
		t.Fatalf("after overwrite: %d bytes, %v", len(got), err)
	}
	if info, _ := s.Head(ctxT(t), "k"); info.Size != 100 {
		t.Fatalf("size after overwrite %d", info.Size)
	}
}

func testEmptyObject(t *testing.T, s ObjectStore) {
	put(t, s, "empty", nil)
	if info, err := s.Head(ctxT(t), "empty"); err != nil || info.Size != 0 {
		t.Fatalf("head: %+v, %v", info, err)
	}
	for _, c := range [][2]int64{{0, -1}, {0, 0}, {0, 10}} {
		if got, err := get(t, s, "empty", c[0], c[1]); err != nil || len(got) != 0 {
			t.Fatalf("get %v of empty object: %q, %v", c, got, err)
		}
	}
	if _, err := get(t, s, "empty", 1, -1); !errors.Is(err, ErrInvalidRange) {
		t.Fatalf("offset 1 of an empty object: %v, want ErrInvalidRange", err)
	}
}

func testRangedReads(t *testing.T, s ObjectStore) {
	data := payload(3, 1000)
	put(t, s, "r", data)
	for _, c := range []struct {
		off, length int64
		want        []byte
	}{
		{0, 1, data[:1]},
		{0, 1000, data},
		{0, -1, data},
		{1, -1, data[1:]},
		{500, 10, data[500:510]},
		{999, 1, data[999:]},
		{999, -1, data[999:]},
		{999, 50, data[999:]}, // cut at the end
		{10, 5000, data[10:]}, // cut at the end
		{1000, -1, []byte{}},  // at the end: empty
		{1000, 0, []byte{}},   // at the end: empty
		{1000, 10, []byte{}},  // at the end: empty
		{0, 0, []byte{}},      // nothing
		{400, 0, []byte{}},    // nothing
	} {
		got, err := get(t, s, "r", c.off, c.length)
		if err != nil || !bytes.Equal(got, c.want) {
			t.Errorf("get [%d,+%d): %d bytes, %v; want %d bytes", c.off, c.length, len(got), err, len(c.want))
		}
	}
	for _, c := range [][2]int64{{1001, -1}, {1001, 1}, {5000, 10}, {-1, 10}, {-1, -1}} {
		if _, err := get(t, s, "r", c[0], c[1]); !errors.Is(err, ErrInvalidRange) {
			t.Errorf("get [%d,+%d): %v, want ErrInvalidRange", c[0], c[1], err)
		}
	}
}

func testMissing(t *testing.T, s ObjectStore) {
	put(t, s, "dir/present", []byte("x"))
	for _, key := range []string{"absent", "dir/absent", "dir", "dir/present/deeper", "dir/presen"} {
		if _, err := s.Head(ctxT(t), key); !errors.Is(err, ErrNotFound) {
			t.Errorf("head %s: %v, want ErrNotFound", key, err)
		}
		for _, c := range [][2]int64{{0, -1}, {0, 0}, {5, 10}} {
			if _, err := get(t, s, key, c[0], c[1]); !errors.Is(err, ErrNotFound) {
				t.Errorf("get %s %v: %v, want ErrNotFound", key, c, err)
			}
		}
	}
}

func testDelete(t *testing.T, s ObjectStore) {
	put(t, s, "a/b/c", []byte("1"))
	put(t, s, "a/b2", []byte("2"))
	if err := s.Delete(ctxT(t), "a/b/c"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Head(ctxT(t), "a/b/c"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("head after delete: %v", err)
	}
	if err := s.Delete(ctxT(t), "a/b/c"); err != nil {
		t.Fatalf("delete again: %v", err)
	}
	if err := s.Delete(ctxT(t), "never/was"); err != nil {
		t.Fatalf("delete of a missing key: %v", err)
	}
	if got := listKeys(t, s, ""); !slices.Equal(got, []string{"a/b2"}) {
		t.Fatalf("keys after delete: %v", got)
	}
	// The key space is flat: a key may come back under a deleted "directory".
	put(t, s, "a/b/c", []byte("3"))
	if got, _ := get(t, s, "a/b/c", 0, -1); string(got) != "3" {
		t.Fatalf("re-put after delete: %q", got)
	}
}

func testDeleteMany(t *testing.T, s ObjectStore) {
	var keys []string
	for i := range 23 {
		k := fmt.Sprintf("p/%02d", i)
		keys = append(keys, k)
		put(t, s, k, []byte{byte(i)})
	}
	put(t, s, "keep", []byte("k"))
	// Every other key, plus missing ones; more than one batch in the
	// suite's S3 configuration.
	var del []string
	for i, k := range keys {
		if i%2 == 0 {
			del = append(del, k)
		}
	}
	del = append(del, "p/missing", "nothing/here")
	if err := s.DeleteMany(ctxT(t), del); err != nil {
		t.Fatal(err)
	}
	var want []string
	for i, k := range keys {
		if i%2 == 1 {
			want = append(want, k)
		}
	}
	if got := listKeys(t, s, "p/"); !slices.Equal(got, want) {
		t.Fatalf("after DeleteMany: %v\nwant %v", got, want)
	}
	if err := s.DeleteMany(ctxT(t), nil); err != nil {
		t.Fatalf("DeleteMany of nothing: %v", err)
	}
	if err := s.DeleteMany(ctxT(t), []string{"keep", "../x"}); !errors.Is(err, ErrInvalidKey) {
		t.Fatalf("DeleteMany with an invalid key: %v", err)
	}
	if _, err := s.Head(ctxT(t), "keep"); err != nil {
		t.Fatalf("DeleteMany with an invalid key deleted the valid one: %v", err)
	}
}

func testListOrderAndPrefixes(t *testing.T, s ObjectStore) {
	// Byte order, where '-' (0x2d) and '.' (0x2e) sort before '/' (0x2f):
	// a store walking directories must not list "a/…" before "a-b". (No
	// key is a '/'-prefix of another: file stores hold trees.)
	keys := []string{"a-b", "a.c", "a/b-c", "a/b/c", "a/bc", "a0", "b/x/y/z", "ab"}
	for i, k := range keys {
		put(t, s, k, bytes.Repeat([]byte{'x'}, i))
	}
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	for _, c := range []struct {
		prefix string
		want   []string
	}{
		{"", sorted},
		{"a", []string{"a-b", "a.c", "a/b-c", "a/b/c", "a/bc", "a0", "ab"}},
		{"a/", []string{"a/b-c", "a/b/c", "a/bc"}},
		{"a/b", []string{"a/b-c", "a/b/c", "a/bc"}},
		{"a/b/", []string{"a/b/c"}},
		{"a/b/c", []string{"a/b/c"}},
		{"b/x/", []string{"b/x/y/z"}},
		{"b/x/y/z", []string{"b/x/y/z"}},
		{"c", []string{}},
		{"zz/", []string{}},
	} {
		if got := listKeys(t, s, c.prefix); !slices.Equal(got, c.want) {
			t.Errorf("list %q = %v, want %v", c.prefix, got, c.want)
		}
	}
	for info, err := range s.List(ctxT(t), "a/b") {
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(slices.Index(keys, info.Key)); info.Size != want {
			t.Errorf("list: %s has size %d, want %d", info.Key, info.Size, want)
		}
	}
	for _, bad := range []string{"/a", "a//", "../", "a/.x"} {
		var err error
		for _, e := range s.List(ctxT(t), bad) {
			err = e
		}
		if !errors.Is(err, ErrInvalidKey) {
			t.Errorf("list %q: %v, want ErrInvalidKey", bad, err)
		}
	}
}

func testListMany(t *testing.T, s ObjectStore) {
	// Many keys over several pages of the suite's S3 page size.
	var want []string
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	sem := make(chan struct{}, 8)
	for i := range 120 {
		k := fmt.Sprintf("topic/%d/%020d.log", i%3, i)
		want = append(want, k)
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			errs <- s.Put(ctxT(t), k, strings.NewReader(k), int64(len(k)))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(want)
	if got := listKeys(t, s, ""); !slices.Equal(got, want) {
		t.Fatalf("list: %d keys, want %d; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
	var p1 []string
	for _, k := range want {
		if strings.HasPrefix(k, "topic/1/") {
			p1 = append(p1, k)
		}
	}
	if got := listKeys(t, s, "topic/1/"); !slices.Equal(got, p1) {
		t.Fatalf("list topic/1/: %d keys, want %d", len(got), len(p1))
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

func testListStopsEarly(t *testing.T, s ObjectStore) {
	for i := range 20 {
		put(t, s, fmt.Sprintf("k%02d", i), nil)
	}
	var got []string
	for info, err := range s.List(ctxT(t), "") {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, info.Key)
		if len(got) == 3 {
			break
		}
	}
	if !slices.Equal(got, []string{"k00", "k01", "k02"}) {
		t.Fatalf("first three: %v", got)
	}
}

func testShortBody(t *testing.T, s ObjectStore) {
	old := payload(4, 64)
	put(t, s, "short", old)
	for _, n := range []int64{100, conformanceLarge} {
		err := s.Put(ctxT(t), "short", bytes.NewReader(payload(5, int(n)-1)), n)
		if !errors.Is(err, ErrShortBody) {
			t.Fatalf("put of %d bytes from a reader of %d: %v, want ErrShortBody", n, n-1, err)
		}
		if got, _ := get(t, s, "short", 0, -1); !bytes.Equal(got, old) {
			t.Fatalf("failed overwrite of %d bytes changed the object (%d bytes now)", n, len(got))
		}
		if err := s.Put(ctxT(t), "short-new", bytes.NewReader(nil), n); !errors.Is(err, ErrShortBody) {
			t.Fatalf("put from an empty reader: %v", err)
		}
		if _, err := s.Head(ctxT(t), "short-new"); !errors.Is(err, ErrNotFound) {
			t.Fatalf("failed put left an object: %v", err)
		}
	}
	// A longer reader: exactly size bytes are stored.
	long := payload(6, 300)
	put(t, s, "long", long[:200]) // reference
	if err := s.Put(ctxT(t), "long2", bytes.NewReader(long), 200); err != nil {
		t.Fatal(err)
	}
	if got, _ := get(t, s, "long2", 0, -1); !bytes.Equal(got, long[:200]) {
		t.Fatalf("put of 200 bytes from a longer reader stored %d bytes", len(got))
	}
}

func testFailingBody(t *testing.T, s ObjectStore) {
	boom := errors.New("disk read failed")
	r := io.MultiReader(bytes.NewReader(payload(7, 50)), iotest.ErrReader(boom))
	if err := s.Put(ctxT(t), "failing", r, 100); !errors.Is(err, boom) {
		t.Fatalf("put from a failing reader: %v, want it to wrap the reader's error", err)
	}
	if _, err := s.Head(ctxT(t), "failing"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("failed put left an object: %v", err)
	}
}

func testInvalidKeys(t *testing.T, s ObjectStore) {
	for _, key := range []string{"", "/a", "a/", "a//b", ".", "..", "a/../b", ".hidden", "a/.tmp", "a\x00b", `a\b`, strings.Repeat("k", MaxKeyLen+1)} {
		if err := s.Put(ctxT(t), key, strings.NewReader("x"), 1); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("put %q: %v, want ErrInvalidKey", key, err)
		}
		if _, err := s.Get(ctxT(t), key, 0, -1); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("get %q: %v, want ErrInvalidKey", key, err)
		}
		if _, err := s.Head(ctxT(t), key); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("head %q: %v, want ErrInvalidKey", key, err)
		}
		if err := s.Delete(ctxT(t), key); !errors.Is(err, ErrInvalidKey) {
			t.Errorf("delete %q: %v, want ErrInvalidKey", key, err)
		}
	}
	if got := listKeys(t, s, ""); len(got) != 0 {
		t.Fatalf("invalid puts stored %v", got)
	}
	// Keys the layout uses are valid everywhere.
	put(t, s, "AQEBAQEBAQEBAQEBAQEBAQ/12/00000000000000000042-_-8AAQEBAQEBAQEBAQEBAQ.leader-epoch-checkpoint", []byte("ok"))
}

func testConcurrentPuts(t *testing.T, s ObjectStore) {
	const writers = 6
	versions := make([][]byte, writers)
	for i := range versions {
		versions[i] = payload(uint64(100+i), 64<<10)
	}
	var wg sync.WaitGroup
	errs := make([]error, writers)
	for i := range writers {
		wg.Go(func() {
			errs[i] = s.Put(ctxT(t), "contended", bytes.NewReader(versions[i]), int64(len(versions[i])))
		})
	}
	// Readers meanwhile see nothing or one whole version.
	stop := make(chan struct{})
	var rwg sync.WaitGroup
	var bad sync.Once
	for range 2 {
		rwg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				r, err := s.Get(ctxT(t), "contended", 0, -1)
				if errors.Is(err, ErrNotFound) {
					continue
				}
				if err != nil {
					bad.Do(func() { t.Errorf("get while writing: %v", err) })
					return
				}
				b, err := io.ReadAll(r)
				r.Close()
				if err != nil {
					bad.Do(func() { t.Errorf("read while writing: %v", err) })
					return
				}
				if !slices.ContainsFunc(versions, func(v []byte) bool { return bytes.Equal(v, b) }) {
					bad.Do(func() { t.Errorf("read a torn object of %d bytes while writing", len(b)) })
					return
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	rwg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	got, err := get(t, s, "contended", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(versions, func(v []byte) bool { return bytes.Equal(v, got) }) {
		t.Fatalf("final object (%d bytes) is none of the versions written", len(got))
	}
}

func testCanceledContext(t *testing.T, s ObjectStore) {
	put(t, s, "c", []byte("x"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Put(ctx, "c2", strings.NewReader("x"), 1); !errors.Is(err, context.Canceled) {
		t.Errorf("put: %v, want context.Canceled", err)
	}
	if _, err := s.Head(ctx, "c"); !errors.Is(err, context.Canceled) {
		t.Errorf("head: %v", err)
	}
	if r, err := s.Get(ctx, "c", 0, -1); err == nil {
		_, err = io.ReadAll(r)
		r.Close()
		if !errors.Is(err, context.Canceled) {
			t.Errorf("get: read %v, want context.Canceled", err)
		}
	} else if !errors.Is(err, context.Canceled) {
		t.Errorf("get: %v", err)
	}
	var lerr error
	for _, err := range s.List(ctx, "") {
		lerr = err
	}
	if !errors.Is(lerr, context.Canceled) {
		t.Errorf("list: %v", lerr)
	}
	if _, err := s.Head(ctxT(t), "c2"); !errors.Is(err, ErrNotFound) {
		t.Errorf("canceled put stored an object: %v", err)
	}
}

func testLargeObject(t *testing.T, s ObjectStore) {
	data := payload(8, conformanceLarge)
	put(t, s, "big/segment.log", data)
	info, err := s.Head(ctxT(t), "big/segment.log")
	if err != nil || info.Size != conformanceLarge {
		t.Fatalf("head: %+v, %v", info, err)
	}
	got, err := get(t, s, "big/segment.log", 0, -1)
	if err != nil || sha256.Sum256(got) != sha256.Sum256(data) {
		t.Fatalf("whole read: %d bytes, %v", len(got), err)
	}
	// Ranges across the part boundaries and at the end.
	for _, c := range [][2]int64{
		{minPartSize - 10, 20}, {2*minPartSize - 1, 2}, {conformanceLarge - 7, 7}, {conformanceLarge - 7, -1}, {123, 1 << 20},
	} {
		got, err := get(t, s, "big/segment.log", c[0], c[1])
		end := int64(len(data))
		if c[1] >= 0 {
			end = min(end, c[0]+c[1])
		}
		if err != nil || !bytes.Equal(got, data[c[0]:end]) {
			t.Errorf("get [%d,+%d): %d bytes, %v", c[0], c[1], len(got), err)
		}
	}
}

// testConditionalPuts: If-None-Match: * and If-Match hold, GetTagged
// gives the ETag of the version it read, and every write (plain Put,
// PutIf, Delete) ends a tag's match.
func testConditionalPuts(t *testing.T, s ObjectStore) {
	ctx := ctxT(t)
	putIf := func(key, data string, c Cond) (string, error) {
		return s.PutIf(ctx, key, strings.NewReader(data), int64(len(data)), c)
	}
	e1, err := putIf("c/a", "one", Cond{IfAbsent: true})
	if err != nil || e1 == "" {
		t.Fatalf("first If-None-Match put: etag %q, %v", e1, err)
	}
	if _, err := putIf("c/a", "two", Cond{IfAbsent: true}); !errors.Is(err, ErrPreconditionFailed) {
		t.Fatalf("second If-None-Match put: %v, want ErrPreconditionFailed", err)
	}
	b, tag, err := s.GetTagged(ctx, "c/a", 100)
	if err != nil || string(b) != "one" || tag != e1 {
		t.Fatalf("GetTagged = %q, %q, %v; want \"one\", %q", b, tag, err, e1)
	}
	if _, tag, err := s.GetTagged(ctx, "c/a", 2); !errors.Is(err, ErrTooLarge) || tag != e1 {
		t.Fatalf("GetTagged of an object larger than max: %q, %v; want ErrTooLarge with its ETag", tag, err)
	}
	e2, err := putIf("c/a", "three", Cond{IfMatch: e1})
	if err != nil || e2 == e1 {
		t.Fatalf("If-Match put: etag %q (old %q), %v", e2, e1, err)
	}
	if _, err := putIf("c/a", "four", Cond{IfMatch: e1}); !errors.Is(err, ErrPreconditionFailed) {
		t.Fatalf("If-Match put with a stale tag: %v, want ErrPreconditionFailed", err)
	}
	if got, _ := get(t, s, "c/a", 0, -1); string(got) != "three" {
		t.Fatalf("object after a failed condition = %q, want \"three\"", got)
	}
	put(t, s, "c/a", []byte("plain"))
	if _, err := putIf("c/a", "five", Cond{IfMatch: e2}); !errors.Is(err, ErrPreconditionFailed) {
		t.Fatalf("If-Match after a plain Put: %v, want ErrPreconditionFailed", err)
	}
	if _, err := putIf("c/missing", "x", Cond{IfMatch: e2}); !errors.Is(err, ErrPreconditionFailed) {
		t.Fatalf("If-Match of a missing object: %v, want ErrPreconditionFailed", err)
	}
	if _, _, err := s.GetTagged(ctx, "c/missing", 100); !errors.Is(err, ErrNotFound) {
		t.Fatalf("GetTagged of a missing object: %v, want ErrNotFound", err)
	}
	_, e3, err := s.GetTagged(ctx, "c/a", 100)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "c/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := putIf("c/a", "six", Cond{IfMatch: e3}); !errors.Is(err, ErrPreconditionFailed) {
		t.Fatalf("If-Match after Delete: %v, want ErrPreconditionFailed", err)
	}
	if _, err := putIf("c/a", "seven", Cond{IfAbsent: true}); err != nil {
		t.Fatalf("If-None-Match after Delete: %v", err)
	}
	if _, err := putIf("c/a", "x", Cond{}); err == nil || errors.Is(err, ErrPreconditionFailed) {
		t.Fatalf("a put with no condition: %v, want a usage error", err)
	}
}

// testConditionalRace: of writers racing with one tag, exactly one wins,
// and the object is the winner's.
func testConditionalRace(t *testing.T, s ObjectStore) {
	ctx := ctxT(t)
	tag, err := s.PutIf(ctx, "r/m", strings.NewReader("base"), 4, Cond{IfAbsent: true})
	if err != nil {
		t.Fatal(err)
	}
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v := fmt.Sprintf("writer-%d", i)
			_, errs[i] = s.PutIf(ctx, "r/m", strings.NewReader(v), int64(len(v)), Cond{IfMatch: tag})
		}()
	}
	wg.Wait()
	won := -1
	for i, err := range errs {
		switch {
		case err == nil && won >= 0:
			t.Fatalf("writers %d and %d both won", won, i)
		case err == nil:
			won = i
		case !errors.Is(err, ErrPreconditionFailed):
			t.Fatalf("writer %d: %v", i, err)
		}
	}
	if won < 0 {
		t.Fatal("no writer won")
	}
	if got, _ := get(t, s, "r/m", 0, -1); string(got) != fmt.Sprintf("writer-%d", won) {
		t.Fatalf("object = %q, want writer-%d's", got, won)
	}
}
