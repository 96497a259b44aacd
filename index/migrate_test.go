package index

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// testdata/v1 is an index database of layout version 1, written by the
// code of the commit that added it (before segments were keyed by id):
//
//	partition 0 of topic oQECAwQFBgcICQoLDA0ODw (ids XgE... to XgU...):
//	  [0,99] epoch 0, COPY_SEGMENT_FINISHED (a version 1 manifest)
//	  [100,199] epochs 0, 1 at 150, upload epoch 1, COPY_SEGMENT_FINISHED
//	  [200,299] epoch 1, DELETE_SEGMENT_STARTED
//	  [300,399] epoch 2, upload epoch 2, COPY_SEGMENT_FINISHED
//	  [400,499] epoch 2, COPY_SEGMENT_STARTED
//	  log start offset 50 (RaiseLogStartOffset)
//	partition 1: [0,9] epoch 3 FINISHED, [10,19] STARTED, and [20,29]
//	  added, finished and deleted (DELETE_SEGMENT_FINISHED)
//	partition 0 of topic sQECAwQFBgcICQoLDA0ODw: [0,49] epochs 0, 4 at 40,
//	  FINISHED; the topic marked deleted ("gone")
//
// testdata/v1-lookups.txt is what that code's lookups answered on it
// (dumpIndex); the migrated database must answer the same.
func copyV1(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	ents, err := os.ReadDir("testdata/v1")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join("testdata/v1", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// rawKeys lists every key and value of the database, and the layout
// version.
func rawKeys(t *testing.T, x *Index) (string, uint16) {
	t.Helper()
	var b strings.Builder
	var version uint16
	err := x.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.DefaultIteratorOptions)
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			if bytes.Equal(it.Item().Key(), keyVersion) {
				version = binary.BigEndian.Uint16(v)
			}
			fmt.Fprintf(&b, "%x %x\n", it.Item().Key(), v)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String(), version
}

func checkGolden(t *testing.T, what string, x *Index) {
	t.Helper()
	want, err := os.ReadFile("testdata/v1-lookups.txt")
	if err != nil {
		t.Fatal(err)
	}
	got := dumpIndex(t, x)
	if got == string(want) {
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
	for i := range max(len(gl), len(wl)) {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Fatalf("%s: line %d:\n got %s\nwant %s", what, i+1, g, w)
		}
	}
}

// TestMigrateV1: a database of layout version 1 opens migrated: every
// segment, in its state, and every lookup answer as before, the log start
// offset and the pending topic deletion kept, no key of version 1 left;
// reopening it changes nothing; and its segments are written and read
// by id as any other.
func TestMigrateV1(t *testing.T) {
	dir := copyV1(t)
	x, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	checkGolden(t, "migrated", x)
	keys, version := rawKeys(t, x)
	if version != indexVersion {
		t.Fatalf("layout version %d after the migration", version)
	}
	for _, l := range strings.Split(strings.TrimSpace(keys), "\n") {
		k := strings.Fields(l)[0]
		if n := len(k) / 2; (k[:2] == "73" && n != segmentKeyLen) || (k[:2] == "65" && n != epochKeyLen) {
			t.Fatalf("key of version 1 left: %s", l)
		}
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	x, err = Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer x.Close()
	if again, _ := rawKeys(t, x); again != keys {
		t.Fatalf("reopening changed the database:\n%s\nwas\n%s", again, keys)
	}
	checkGolden(t, "reopened", x)

	// The migrated segments are written and read as any other: the
	// started upload finishes beside a longer one at its base.
	tp := TopicIDPartition{TopicID: UUID{0xa1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}}
	segs, err := x.Segments(tp)
	if err != nil || len(segs) != 5 {
		t.Fatalf("segments %+v %v", segs, err)
	}
	started := segs[4]
	longer := started.Clone()
	longer.SegmentID, longer.EndOffset, longer.UploadEpoch = NewUUID(), 549, 3
	add(t, x, longer, CopySegmentFinished)
	if _, err := x.UpdateSegment(SegmentUpdate{Partition: tp, SegmentID: started.SegmentID, State: CopySegmentFinished}); err != nil {
		t.Fatal(err)
	}
	if m, err := x.SegmentForOffset(tp, 450); err != nil || m.SegmentID != longer.SegmentID {
		t.Fatalf("offset 450: %s %v, want the longer segment of the greater upload epoch", m.SegmentID, err)
	}
	if m, err := x.SegmentForEpochOffset(tp, 2, 450); err != nil || m.SegmentID != longer.SegmentID {
		t.Fatalf("epoch 2 offset 450: %s %v", m.SegmentID, err)
	}
	if end, _, _ := x.LogEnd(tp); end != 549 {
		t.Fatalf("log end %d, want 549", end)
	}
	if _, err := x.UpdateSegment(SegmentUpdate{Partition: tp, SegmentID: segs[0].SegmentID, State: DeleteSegmentStarted}); err != nil {
		t.Fatal(err)
	}
	if _, err := x.UpdateSegment(SegmentUpdate{Partition: tp, SegmentID: segs[0].SegmentID, State: DeleteSegmentFinished}); err != nil {
		t.Fatal(err)
	}
	if start, _, _ := x.LogStart(tp); start != 100 {
		t.Fatalf("log start %d after deleting the first migrated segment, want 100", start)
	}
}

// TestMigrateV1Interrupted: a migration cut short after any of its steps
// (or midway through the deletion of the old keys) leaves a database that
// the next Open migrates to the same content; one whose entry does not
// decode loses that entry and its id key only.
func TestMigrateV1Interrupted(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	var migrated string
	for _, c := range []struct {
		name string
		cut  func(t *testing.T, x *Index)
	}{
		{"nothing done", func(t *testing.T, x *Index) {}},
		{"new keys written", func(t *testing.T, x *Index) {
			if _, _, err := x.migrateWrite(logger); err != nil {
				t.Fatal(err)
			}
		}},
		{"new keys written twice, half the old keys deleted", func(t *testing.T, x *Index) {
			for range 2 {
				if _, _, err := x.migrateWrite(logger); err != nil {
					t.Fatal(err)
				}
			}
			keys, _ := rawKeys(t, x)
			err := x.db.Update(func(txn *badger.Txn) error {
				for i, l := range strings.Split(strings.TrimSpace(keys), "\n") {
					k := strings.Fields(l)[0]
					if n := len(k) / 2; i%2 == 0 && (k[:2] == "73" && n == v1SegmentKeyLen || k[:2] == "65" && n == v1EpochKeyLen) {
						var b []byte
						fmt.Sscanf(k, "%x", &b)
						if err := txn.Delete(b); err != nil {
							return err
						}
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}},
		{"old keys deleted, version not set", func(t *testing.T, x *Index) {
			if _, _, err := x.migrateWrite(logger); err != nil {
				t.Fatal(err)
			}
			if err := x.migrateDelete(); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := copyV1(t)
			x, err := openDB(Options{Dir: dir}, logger)
			if err != nil {
				t.Fatal(err)
			}
			c.cut(t, x)
			if err := x.db.Close(); err != nil {
				t.Fatal(err)
			}
			x, err = Open(Options{Dir: dir, Logger: logger})
			if err != nil {
				t.Fatal(err)
			}
			defer x.Close()
			checkGolden(t, c.name, x)
			keys, version := rawKeys(t, x)
			if version != indexVersion {
				t.Fatalf("layout version %d", version)
			}
			if migrated == "" {
				migrated = keys
			} else if keys != migrated {
				t.Fatalf("keys differ from the uninterrupted migration's:\n%s\nwant\n%s", keys, migrated)
			}
		})
	}

	t.Run("undecodable entry", func(t *testing.T) {
		dir := copyV1(t)
		x, err := openDB(Options{Dir: dir}, logger)
		if err != nil {
			t.Fatal(err)
		}
		tp := TopicIDPartition{TopicID: UUID{0xa1, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, Partition: 1}
		if err := x.db.Update(func(txn *badger.Txn) error { return txn.Set(segmentBase(tp, 0), []byte("SRSM garbage")) }); err != nil {
			t.Fatal(err)
		}
		x.db.Close()
		x, err = Open(Options{Dir: dir, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		defer x.Close()
		segs, err := x.Segments(tp)
		if err != nil || len(segs) != 1 || segs[0].StartOffset != 10 {
			t.Fatalf("segments %+v %v, want [10,19] only", segs, err)
		}
		dropped := UUID{0x5e, 6, 0, 0, 0, 0, 0x40, 0, 0x80, 0, 0, 0, 0, 0, 0, 6}
		if _, err := x.Segment(tp, dropped); !errors.Is(err, ErrNotFound) {
			t.Fatalf("dropped segment by id: %v, want ErrNotFound", err)
		}
		if _, _, err := x.LogEnd(tp); err != nil {
			t.Fatal(err)
		}
	})
}

// dumpIndex writes out what the lookups of every partition of x answer,
// one line each, for comparison with testdata/v1-lookups.txt.
func dumpIndex(t *testing.T, x *Index) string {
	t.Helper()
	var b strings.Builder
	seg := func(m SegmentMetadata, err error) string {
		if errors.Is(err, ErrNotFound) {
			return "none"
		}
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%d-%d %s", m.StartOffset, m.EndOffset, m.SegmentID)
	}
	off := func(o int64, ok bool, err error) string {
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return "none"
		}
		return fmt.Sprint(o)
	}
	// Offsets at and around every segment boundary of the data.
	probes := []int64{0, 9, 10, 19, 20, 29, 39, 40, 49, 50, 99, 100, 149, 150, 199, 200, 299, 300, 399, 400, 499, 500}
	ps, err := x.Partitions()
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range ps {
		name := fmt.Sprintf("partition %d (%s)", i, p)
		fmt.Fprintln(&b, name)
		segs, err := x.Segments(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range segs {
			fmt.Fprintf(&b, "p%d segment %+v\n", i, m)
			fmt.Fprintf(&b, "p%d by id %s: %s\n", i, m.SegmentID, seg(x.Segment(p, m.SegmentID)))
		}
		for _, o := range probes {
			fmt.Fprintf(&b, "p%d offset %d: %s\n", i, o, seg(x.SegmentForOffset(p, o)))
		}
		for e := int32(0); e <= 5; e++ {
			for _, o := range probes {
				fmt.Fprintf(&b, "p%d epoch %d offset %d: %s\n", i, e, o, seg(x.SegmentForEpochOffset(p, e, o)))
			}
			fmt.Fprintf(&b, "p%d highest offset of epoch %d: %s\n", i, e, off(x.HighestOffsetForEpoch(p, e)))
		}
		for _, ts := range []int64{-1, 50, 51, 100, 101, 200, 1000, 1001, 2000, 2001, 3000, 3001} {
			for _, from := range []int64{0, 10, 50, 100, 200, 300, 400} {
				fmt.Fprintf(&b, "p%d timestamp %d from %d: %s\n", i, ts, from, seg(x.SegmentForTimestamp(p, ts, from)))
			}
		}
		fmt.Fprintf(&b, "p%d log start %s, log end %s, log start offset %s\n", i, off(x.LogStart(p)), off(x.LogEnd(p)), off(x.LogStartOffset(p)))
	}
	pend, err := x.PendingTopicDeletions()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(&b, "pending topic deletions %+v\n", pend)
	return b.String()
}
