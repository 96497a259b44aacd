package replica

import (
	"errors"
	"maps"
	"testing"

	"strata/internal/vfs"
)

func TestHWCheckpointFormat(t *testing.T) {
	hws := map[tp]int64{{"b", 0}: 0, {"a", 1}: 7, {"a", 0}: 5, {"a", 10}: 12345678901}
	got := string(formatHWCheckpoint(hws))
	want := "0\n4\na 0 5\na 1 7\na 10 12345678901\nb 0 0\n"
	if got != want {
		t.Fatalf("format:\n%q\nwant\n%q", got, want)
	}
	back, err := parseHWCheckpoint([]byte(got))
	if err != nil || !maps.Equal(back, hws) {
		t.Fatalf("parse(format) = %v, %v; want %v", back, err, hws)
	}
	if got := string(formatHWCheckpoint(nil)); got != "0\n0\n" {
		t.Fatalf("empty checkpoint %q", got)
	}
}

func TestHWCheckpointParse(t *testing.T) {
	good := []struct {
		in   string
		want map[tp]int64
	}{
		{"", map[tp]int64{}},
		{"0\n", map[tp]int64{}},
		{"0\n0\n", map[tp]int64{}},
		{"0\n1\n__consumer_offsets 49 3", map[tp]int64{{"__consumer_offsets", 49}: 3}}, // no final newline
		{"0\n2\nt  0\t9\nt 1 0\n", map[tp]int64{{"t", 0}: 9, {"t", 1}: 0}},             // Kafka splits on \s+
	}
	for _, c := range good {
		got, err := parseHWCheckpoint([]byte(c.in))
		if err != nil || !maps.Equal(got, c.want) {
			t.Errorf("parse(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	bad := []string{
		"1\n0\n",               // unknown version
		"x\n",                  // not a version
		"0\n2\nt 0 1\n",        // fewer entries than the count
		"0\n1\nt 0 1\nt 1 1\n", // more
		"0\n-1\n",              // negative count
		"0\nn\n",               // not a count
		"0\n1\nt 0\n",          // two fields
		"0\n1\nt 0 1 2\n",      // four
		"0\n1\nt x 1\n",        // partition not a number
		"0\n1\nt 0 y\n",        // offset not a number
		"0\n1\nt -1 1\n",       // negative partition
		"0\n1\nt 0 -5\n",       // negative offset
		"0\n1\nt 2147483648 1\n",
		"0\n2\nt 0 1\nt 0 2\n", // listed twice
		"0\n1\n\n",             // empty line
	}
	for _, in := range bad {
		if got, err := parseHWCheckpoint([]byte(in)); !errors.Is(err, errCorruptHWCheckpoint) {
			t.Errorf("parse(%q) = %v, %v; want a corrupt-checkpoint error", in, got, err)
		}
	}
}

// TestHWCheckpointCrashSafe: whatever fails or crashes during a rewrite,
// the file afterwards is the old or the new checkpoint, never a mix.
func TestHWCheckpointCrashSafe(t *testing.T) {
	old := map[tp]int64{{"t", 0}: 10}
	next := map[tp]int64{{"t", 0}: 20, {"t", 1}: 3}
	setup := func() *vfs.MemFS {
		fs := vfs.NewCrashableMem()
		if err := fs.MkdirAll("/data", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := fs.SyncDir("/"); err != nil {
			t.Fatal(err)
		}
		if err := writeHWCheckpoint(fs, "/data", formatHWCheckpoint(old)); err != nil {
			t.Fatal(err)
		}
		return fs
	}
	read := func(fs vfs.FS) map[tp]int64 {
		t.Helper()
		got, err := readHWCheckpoint(fs, "/data")
		if err != nil {
			t.Fatalf("read after crash: %v", err)
		}
		return got
	}

	// A completed rewrite survives a crash, torn or not.
	for seed := uint64(0); seed < 20; seed++ {
		fs := setup()
		if err := writeHWCheckpoint(fs, "/data", formatHWCheckpoint(next)); err != nil {
			t.Fatal(err)
		}
		if got := read(fs.CrashTorn(seed)); !maps.Equal(got, next) {
			t.Fatalf("seed %d: after a completed rewrite and a crash: %v, want %v", seed, got, next)
		}
	}
	// A rewrite that fails at any step leaves the old file (or, once the
	// rename happened, possibly the new one) after a crash.
	for _, op := range []vfs.Op{vfs.OpOpen, vfs.OpWrite, vfs.OpSync, vfs.OpClose, vfs.OpRename, vfs.OpSyncDir} {
		for seed := uint64(0); seed < 5; seed++ {
			fs := setup()
			fs.SetInjector(vfs.FailNth(op, 1))
			if err := writeHWCheckpoint(fs, "/data", formatHWCheckpoint(next)); err == nil {
				t.Fatalf("%v failure: the rewrite reported success", op)
			}
			fs.SetInjector(nil)
			got := read(fs.CrashTorn(seed))
			if !maps.Equal(got, old) && !(op == vfs.OpSyncDir && maps.Equal(got, next)) {
				t.Fatalf("%v failure, seed %d: after a crash %v, want %v", op, seed, got, old)
			}
			if got := read(fs); op != vfs.OpSyncDir && !maps.Equal(got, old) {
				t.Fatalf("%v failure: without a crash %v, want the old %v", op, got, old)
			}
		}
	}
	// No file: no entries.
	fs := vfs.NewCrashableMem()
	if got, err := readHWCheckpoint(fs, "/nowhere"); err != nil || len(got) != 0 {
		t.Fatalf("missing checkpoint: %v, %v", got, err)
	}
}

func FuzzParseHWCheckpoint(f *testing.F) {
	f.Add([]byte("0\n2\na 0 5\nb 1 7\n"))
	f.Add([]byte("0\n0\n"))
	f.Add([]byte("0\n1\n__consumer_offsets 49 9223372036854775807\n"))
	f.Add([]byte("0\n3\nt 0 1\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, b []byte) {
		hws, err := parseHWCheckpoint(b)
		if err != nil {
			if !errors.Is(err, errCorruptHWCheckpoint) {
				t.Fatalf("error %v does not wrap errCorruptHWCheckpoint", err)
			}
			return
		}
		for k, off := range hws {
			if k.part < 0 || off < 0 || k.topic == "" {
				t.Fatalf("parsed a bad entry %+v %d from %q", k, off, b)
			}
		}
		again, err := parseHWCheckpoint(formatHWCheckpoint(hws))
		if err != nil || !maps.Equal(again, hws) {
			t.Fatalf("round trip of %q: %v, %v", b, again, err)
		}
	})
}
