package vfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Run the common behaviour against every implementation.
func forEachFS(t *testing.T, f func(t *testing.T, fsys FS, dir string)) {
	t.Run("os", func(t *testing.T) { f(t, OS, t.TempDir()) })
	t.Run("mem", func(t *testing.T) { f(t, NewCrashableMem(), "data") })
}

func mustWrite(t *testing.T, fsys FS, name string, data string, sync bool) File {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if sync {
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func readAll(t *testing.T, fsys FS, name string) string {
	t.Helper()
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestFSBasics(t *testing.T) {
	forEachFS(t, func(t *testing.T, fsys FS, dir string) {
		if err := fsys.MkdirAll(filepath.Join(dir, "p"), 0o755); err != nil {
			t.Fatal(err)
		}
		name := filepath.Join(dir, "p", "a.log")
		f := mustWrite(t, fsys, name, "hello ", false)
		if _, err := f.Write([]byte("world")); err != nil {
			t.Fatal(err)
		}
		if sz, _ := f.Size(); sz != 11 {
			t.Fatalf("size %d", sz)
		}
		buf := make([]byte, 5)
		if _, err := f.ReadAt(buf, 6); err != nil || string(buf) != "world" {
			t.Fatalf("readat %q %v", buf, err)
		}
		if _, err := f.ReadAt(buf, 9); err != io.EOF {
			t.Fatalf("short read err %v", err)
		}
		if err := f.Truncate(5); err != nil {
			t.Fatal(err)
		}
		if _, err := f.Write([]byte("!")); err != nil {
			t.Fatal(err)
		}
		if got := readAll(t, fsys, name); got != "hello!" {
			t.Fatalf("got %q", got)
		}
		if err := fsys.Rename(name, name+".deleted"); err != nil {
			t.Fatal(err)
		}
		// The open file stays readable after rename and remove.
		if err := fsys.Remove(name + ".deleted"); err != nil {
			t.Fatal(err)
		}
		if _, err := f.ReadAt(buf, 0); err != nil || string(buf) != "hello" {
			t.Fatalf("read after remove %q %v", buf, err)
		}
		f.Close()
		if _, err := fsys.Stat(name); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("stat removed: %v", err)
		}
		mustWrite(t, fsys, filepath.Join(dir, "p", "b"), "x", true).Close()
		mustWrite(t, fsys, filepath.Join(dir, "p", "a"), "yy", true).Close()
		names, err := fsys.ReadDir(filepath.Join(dir, "p"))
		if err != nil || len(names) != 2 || names[0] != "a" || names[1] != "b" {
			t.Fatalf("readdir %v %v", names, err)
		}
		fi, err := fsys.Stat(filepath.Join(dir, "p", "a"))
		if err != nil || fi.Size() != 2 || fi.IsDir() {
			t.Fatalf("stat %v %v", fi, err)
		}
		if err := fsys.SyncDir(filepath.Join(dir, "p")); err != nil {
			t.Fatal(err)
		}
		if _, err := fsys.OpenFile(filepath.Join(dir, "p", "a"), os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o644); !errors.Is(err, fs.ErrExist) {
			t.Fatalf("O_EXCL: %v", err)
		}
		if err := fsys.RemoveAll(filepath.Join(dir, "p")); err != nil {
			t.Fatal(err)
		}
		if _, err := fsys.Stat(filepath.Join(dir, "p")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("stat after RemoveAll: %v", err)
		}
	})
}

func TestOSFileHasFd(t *testing.T) {
	f, err := OS.OpenFile(filepath.Join(t.TempDir(), "x"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, ok := f.(FdFile); !ok {
		t.Fatal("OS file does not implement FdFile")
	}
}

func TestCrashKeepsOnlySynced(t *testing.T) {
	m := NewCrashableMem()
	if err := m.MkdirAll("d", 0o755); err != nil {
		t.Fatal(err)
	}
	m.SyncDir("")
	f := mustWrite(t, m, "d/synced", "durable", true)
	f.Write([]byte(" lost"))
	mustWrite(t, m, "d/unsynced-data", "gone", false)
	mustWrite(t, m, "d/old", "renamed", true)
	m.SyncDir("d")
	// Created after the directory sync: its entry is not durable.
	mustWrite(t, m, "d/late", "late", true)
	// Renamed after the directory sync: the old name survives.
	if err := m.Rename("d/old", "d/new"); err != nil {
		t.Fatal(err)
	}

	c := m.Crash()
	if got := readAll(t, c, "d/synced"); got != "durable" {
		t.Fatalf("synced file: %q", got)
	}
	if got := readAll(t, c, "d/unsynced-data"); got != "" {
		t.Fatalf("unsynced data survived: %q", got)
	}
	if _, err := c.Stat("d/late"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("unsynced entry survived: %v", err)
	}
	if got := readAll(t, c, "d/old"); got != "renamed" {
		t.Fatalf("old name after unsynced rename: %q", got)
	}
	if _, err := c.Stat("d/new"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("unsynced rename survived: %v", err)
	}
	// The original is untouched (a process crash keeps everything).
	if got := readAll(t, m, "d/synced"); got != "durable lost" {
		t.Fatalf("live fs: %q", got)
	}
	// A directory never synced into its parent is lost with its files.
	m.MkdirAll("e", 0o755)
	mustWrite(t, m, "e/f", "x", true)
	m.SyncDir("e")
	if _, err := m.Crash().Stat("e"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("unsynced dir survived: %v", err)
	}
}

func TestCrashTornKeepsPrefix(t *testing.T) {
	m := NewCrashableMem()
	f := mustWrite(t, m, "f", "abc", true)
	f.Write([]byte("defghijklmnop"))
	m.SyncDir("")
	sawTorn := false
	for seed := uint64(0); seed < 20; seed++ {
		got := readAll(t, m.CrashTorn(seed), "f")
		if len(got) < 3 || got != "abcdefghijklmnop"[:len(got)] {
			t.Fatalf("seed %d: %q is not a prefix", seed, got)
		}
		if len(got) > 3 && len(got) < 16 {
			sawTorn = true
		}
	}
	if !sawTorn {
		t.Fatal("no torn tail in 20 seeds")
	}
}

func TestInjectErrors(t *testing.T) {
	m := NewCrashableMem()
	f := mustWrite(t, m, "a.log", "x", false)
	m.SetInjector(FailNth(OpWrite, 2))
	if _, err := f.Write([]byte("1")); err != nil {
		t.Fatalf("first write: %v", err)
	}
	if _, err := f.Write([]byte("2")); !errors.Is(err, ErrInjected) {
		t.Fatalf("second write: %v", err)
	}
	if _, err := f.Write([]byte("3")); err != nil {
		t.Fatalf("third write: %v", err)
	}
	if got := readAll(t, m, "a.log"); got != "x13" {
		t.Fatalf("failed write changed the file: %q", got)
	}
	m.SetInjector(FailMatching(OpSync, ".index"))
	g := mustWrite(t, m, "0.index", "", false)
	if err := g.Sync(); !errors.Is(err, ErrInjected) {
		t.Fatalf("sync index: %v", err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("sync log: %v", err)
	}
	m.SetInjector(nil)
	if err := g.Sync(); err != nil {
		t.Fatal(err)
	}
}

// A failed fsync loses the dirty bytes as Linux does: they stay readable,
// but a later fsync that succeeds does not make them durable, while bytes
// written after the failure are.
func TestFailedSyncDropsDirtyPages(t *testing.T) {
	m := NewCrashableMem()
	f := mustWrite(t, m, "a.log", "durable|", true)
	m.SyncDir("")
	f.Write([]byte("dropped|"))
	m.SetInjector(FailMatching(OpSync, "a.log"))
	if err := f.Sync(); !errors.Is(err, ErrInjected) {
		t.Fatalf("sync: %v", err)
	}
	m.SetInjector(nil)
	if got := readAll(t, m, "a.log"); got != "durable|dropped|" {
		t.Fatalf("page cache after a failed sync: %q", got)
	}
	if got := readAll(t, m.Crash(), "a.log"); got != "durable|" {
		t.Fatalf("crash right after the failed sync: %q", got)
	}
	f.Write([]byte("later"))
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	want := "durable|" + string(make([]byte, len("dropped|"))) + "later"
	if got := readAll(t, m.Crash(), "a.log"); got != want {
		t.Fatalf("crash after a later sync: %q, want %q", got, want)
	}
	// Writing the lost range again makes it dirty, and the next sync
	// durable.
	f.Truncate(int64(len("durable|")))
	f.Write([]byte("again"))
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, m.Crash(), "a.log"); got != "durable|again" {
		t.Fatalf("rewritten range: %q", got)
	}
}

func TestCapacityENOSPC(t *testing.T) {
	m := NewCrashableMem()
	m.SetCapacity(10)
	f := mustWrite(t, m, "a", "123456", false)
	n, err := f.Write([]byte("abcdef"))
	if n != 4 || !errors.Is(err, ErrNoSpace) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write past capacity: n=%d err=%v", n, err)
	}
	if got := readAll(t, m, "a"); got != "123456abcd" || m.Used() != 10 {
		t.Fatalf("after a short write: %q, used %d", got, m.Used())
	}
	if err := f.Truncate(20); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("growing truncate on a full disk: %v", err)
	}
	// Freeing space (truncate, remove) or raising the capacity makes room.
	if err := f.Truncate(6); err != nil || m.Used() != 6 {
		t.Fatalf("truncate: %v, used %d", err, m.Used())
	}
	g := mustWrite(t, m, "b", "xyzw", false)
	if _, err := g.Write([]byte("!")); !errors.Is(err, ErrNoSpace) {
		t.Fatalf("full again: %v", err)
	}
	if err := m.Remove("b"); err != nil || m.Used() != 6 {
		t.Fatalf("remove: %v, used %d", err, m.Used())
	}
	m.SetCapacity(0)
	if _, err := f.Write(make([]byte, 100)); err != nil || m.Used() != 106 {
		t.Fatalf("unlimited: %v, used %d", err, m.Used())
	}
	m.SyncDir("")
	f.Sync()
	if c := m.Crash(); c.Used() != 106 {
		t.Fatalf("crashed fs used %d", c.Used())
	}
}

func TestShortWrites(t *testing.T) {
	run := func(t *testing.T, fsys FS, set func(Injector), dir string) {
		f := mustWrite(t, fsys, filepath.Join(dir, "a.log"), "head|", false)
		set(FailNthMatching(OpWrite, "a.log", 1, &ShortWrite{N: 3, Err: syscall.EIO}))
		n, err := f.Write([]byte("abcdef"))
		if n != 3 || !errors.Is(err, syscall.EIO) {
			t.Fatalf("short write: n=%d err=%v", n, err)
		}
		set(FailWith(OpWrite, "a.log", ErrNoSpace))
		if n, err := f.Write([]byte("x")); n != 0 || !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("ENOSPC: n=%d err=%v", n, err)
		}
		set(FailWith(OpSync, "a.log", syscall.EIO))
		if err := f.Sync(); !errors.Is(err, syscall.EIO) {
			t.Fatalf("sync: %v", err)
		}
		set(nil)
		if got := readAll(t, fsys, filepath.Join(dir, "a.log")); got != "head|abc" {
			t.Fatalf("file %q", got)
		}
		f.Close()
	}
	t.Run("mem", func(t *testing.T) {
		m := NewCrashableMem()
		run(t, m, m.SetInjector, "")
	})
	t.Run("fault-os", func(t *testing.T) {
		ff := NewFaultFS(OS)
		run(t, ff, ff.SetInjector, t.TempDir())
	})
}

func TestFaultFSBasics(t *testing.T) {
	ff := NewFaultFS(OS)
	dir := t.TempDir()
	f := mustWrite(t, ff, filepath.Join(dir, "x"), "data", true)
	if _, ok := f.(FdFile); ok {
		t.Fatal("a FaultFS file exposes its descriptor: reads would bypass the injector")
	}
	ff.SetInjector(FailMatching(OpRename, "x"))
	if err := ff.Rename(filepath.Join(dir, "x"), filepath.Join(dir, "y")); !errors.Is(err, ErrInjected) {
		t.Fatalf("rename: %v", err)
	}
	ff.SetInjector(FailMatching(OpRead, "x"))
	if _, err := f.ReadAt(make([]byte, 2), 0); !errors.Is(err, ErrInjected) {
		t.Fatalf("read: %v", err)
	}
	ff.SetInjector(nil)
	if got := readAll(t, ff, filepath.Join(dir, "x")); got != "data" {
		t.Fatalf("read back %q", got)
	}
}
