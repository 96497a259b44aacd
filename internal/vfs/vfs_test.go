package vfs

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
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
