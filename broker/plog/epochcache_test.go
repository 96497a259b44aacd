package plog

import (
	"errors"
	"path/filepath"
	"slices"
	"testing"
)

func ecOpen(t *testing.T, m *psMemFS) *EpochCache {
	t.Helper()
	c, err := OpenEpochCache(m, psDir)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func ecAssign(t *testing.T, c *EpochCache, entries ...EpochEntry) {
	t.Helper()
	for _, e := range entries {
		if err := c.Assign(e.Epoch, e.StartOffset); err != nil {
			t.Fatal(err)
		}
	}
}

func TestEpochCacheAssign(t *testing.T) {
	c := ecOpen(t, psNewFS(t))
	if _, ok := c.Latest(); ok {
		t.Fatal("empty cache has a latest entry")
	}
	steps := []struct {
		assign EpochEntry
		want   []EpochEntry
	}{
		{EpochEntry{0, 0}, []EpochEntry{{0, 0}}},
		{EpochEntry{1, 10}, []EpochEntry{{0, 0}, {1, 10}}},
		{EpochEntry{1, 5}, []EpochEntry{{0, 0}, {1, 10}}},              // same epoch: ignored
		{EpochEntry{0, 20}, []EpochEntry{{0, 0}, {1, 10}}},             // older epoch: ignored
		{EpochEntry{3, 10}, []EpochEntry{{0, 0}, {3, 10}}},             // epoch 1 had nothing of its own
		{EpochEntry{4, 5}, []EpochEntry{{0, 0}, {4, 5}}},               // start below existing entries drops them
		{EpochEntry{6, 30}, []EpochEntry{{0, 0}, {4, 5}, {6, 30}}},     // normal append
		{EpochEntry{7, 0}, []EpochEntry{{7, 0}}},                       // everything dropped
		{EpochEntry{9, 1 << 40}, []EpochEntry{{7, 0}, {9, 1 << 40}}},   // large offsets
		{EpochEntry{8, 1<<40 + 1}, []EpochEntry{{7, 0}, {9, 1 << 40}}}, // older epoch ignored
	}
	for i, s := range steps {
		ecAssign(t, c, s.assign)
		if got := c.Entries(); !slices.Equal(got, s.want) {
			t.Fatalf("step %d Assign(%v): entries %v, want %v", i, s.assign, got, s.want)
		}
	}
	if l, ok := c.Latest(); !ok || l != (EpochEntry{9, 1 << 40}) {
		t.Fatalf("Latest = %v, %v", l, ok)
	}
	if err := c.Assign(-1, 0); err == nil {
		t.Fatal("negative epoch accepted")
	}
	if err := c.Assign(10, -1); err == nil {
		t.Fatal("negative offset accepted")
	}
	// Entries returns a copy.
	c.Entries()[0].Epoch = 99
	if c.Entries()[0].Epoch != 7 {
		t.Fatal("Entries exposed the cache's slice")
	}
}

// ecFixture: 2@10, 4@20, 7@35.
func ecFixture(t *testing.T) (*EpochCache, *psMemFS) {
	m := psNewFS(t)
	c := ecOpen(t, m)
	ecAssign(t, c, EpochEntry{2, 10}, EpochEntry{4, 20}, EpochEntry{7, 35})
	return c, m
}

func TestEpochCacheEndOffsetFor(t *testing.T) {
	c, _ := ecFixture(t)
	const leo = 50
	tests := []struct {
		epoch      int32
		wantEpoch  int32
		wantOffset int64
	}{
		{-1, -1, -1}, // undefined epoch
		{7, 7, leo},  // latest: log end offset
		{8, -1, -1},  // newer than the latest
		{4, 4, 35},   // end of epoch 4 = start of 7
		{5, 4, 35},   // unknown epoch between: largest epoch below it
		{6, 4, 35},   //
		{3, 2, 20},   //
		{2, 2, 20},   //
		{1, 1, 10},   // older than every entry: Kafka answers (epoch, first start)
		{0, 0, 10},   //
	}
	for _, tt := range tests {
		e, o := c.EndOffsetFor(tt.epoch, leo)
		if e != tt.wantEpoch || o != tt.wantOffset {
			t.Errorf("EndOffsetFor(%d) = (%d, %d), want (%d, %d)", tt.epoch, e, o, tt.wantEpoch, tt.wantOffset)
		}
	}
	empty, _ := OpenEpochCache(nil, "")
	if e, o := empty.EndOffsetFor(0, leo); e != -1 || o != -1 {
		t.Errorf("empty EndOffsetFor(0) = (%d, %d)", e, o)
	}
}

func TestEpochCacheEpochForOffset(t *testing.T) {
	c, _ := ecFixture(t)
	for off, want := range map[int64]int32{0: -1, 9: -1, 10: 2, 19: 2, 20: 4, 34: 4, 35: 7, 1000: 7} {
		if got := c.EpochForOffset(off); got != want {
			t.Errorf("EpochForOffset(%d) = %d, want %d", off, got, want)
		}
	}
}

func TestEpochCacheTruncate(t *testing.T) {
	tests := []struct {
		name string
		op   func(*EpochCache) error
		want []EpochEntry
	}{
		{"end past latest start", func(c *EpochCache) error { return c.TruncateFromEnd(36) }, []EpochEntry{{2, 10}, {4, 20}, {7, 35}}},
		{"end at latest start", func(c *EpochCache) error { return c.TruncateFromEnd(35) }, []EpochEntry{{2, 10}, {4, 20}}},
		{"end inside epoch 4", func(c *EpochCache) error { return c.TruncateFromEnd(21) }, []EpochEntry{{2, 10}, {4, 20}}},
		{"end at epoch 4 start", func(c *EpochCache) error { return c.TruncateFromEnd(20) }, []EpochEntry{{2, 10}}},
		{"end below everything", func(c *EpochCache) error { return c.TruncateFromEnd(0) }, nil},
		{"end negative", func(c *EpochCache) error { return c.TruncateFromEnd(-1) }, []EpochEntry{{2, 10}, {4, 20}, {7, 35}}},
		{"start below first", func(c *EpochCache) error { return c.TruncateFromStart(5) }, []EpochEntry{{2, 10}, {4, 20}, {7, 35}}},
		{"start at first", func(c *EpochCache) error { return c.TruncateFromStart(10) }, []EpochEntry{{2, 10}, {4, 20}, {7, 35}}},
		{"start inside epoch 2", func(c *EpochCache) error { return c.TruncateFromStart(15) }, []EpochEntry{{2, 15}, {4, 20}, {7, 35}}},
		{"start at epoch 4", func(c *EpochCache) error { return c.TruncateFromStart(20) }, []EpochEntry{{4, 20}, {7, 35}}},
		{"start inside epoch 4", func(c *EpochCache) error { return c.TruncateFromStart(25) }, []EpochEntry{{4, 25}, {7, 35}}},
		{"start past latest", func(c *EpochCache) error { return c.TruncateFromStart(100) }, []EpochEntry{{7, 100}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, m := ecFixture(t)
			if err := tt.op(c); err != nil {
				t.Fatal(err)
			}
			if got := c.Entries(); !slices.Equal(got, tt.want) {
				t.Fatalf("entries %v, want %v", got, tt.want)
			}
			// The change was persisted durably.
			m.crash()
			if got := ecOpen(t, m).Entries(); !slices.Equal(got, tt.want) {
				t.Fatalf("after reopen entries %v, want %v", got, tt.want)
			}
		})
	}
}

func TestEpochCacheFileRoundTrip(t *testing.T) {
	c, m := ecFixture(t)
	name := filepath.Join(psDir, epochCheckpointName)
	if got, want := string(m.read(name)), "0\n3\n2 10\n4 20\n7 35\n"; got != want {
		t.Fatalf("checkpoint file %q, want %q", got, want)
	}
	m.crash()
	if got := ecOpen(t, m).Entries(); !slices.Equal(got, c.Entries()) {
		t.Fatalf("reopened %v, want %v", got, c.Entries())
	}
	// No change, no write.
	m.fail = func(op, _ string) error { return errors.New("unexpected write") }
	ecAssign(t, c, EpochEntry{7, 40}, EpochEntry{3, 60})
	if err := c.TruncateFromEnd(100); err != nil {
		t.Fatal(err)
	}
	if err := c.TruncateFromStart(1); err != nil {
		t.Fatal(err)
	}
}

func TestEpochCachePersistFailure(t *testing.T) {
	c, m := ecFixture(t)
	boom := errors.New("boom")
	m.fail = func(op, _ string) error {
		if op == "sync" {
			return boom
		}
		return nil
	}
	if err := c.Assign(9, 40); !errors.Is(err, boom) {
		t.Fatalf("Assign = %v, want boom", err)
	}
	m.fail = nil
	if got := ecOpen(t, m).Entries(); !slices.Equal(got, []EpochEntry{{2, 10}, {4, 20}, {7, 35}}) {
		t.Fatalf("file after failed write: %v", got)
	}
}

func TestEpochCacheOpenFiles(t *testing.T) {
	ok := map[string][]EpochEntry{
		"":                                       nil,
		"0\n":                                    nil,
		"0\n0\n":                                 nil,
		"0\r\n1\r\n5 100\r\n":                    {{5, 100}},
		"0\n2\n1 0\n3 7":                         {{1, 0}, {3, 7}}, // no final newline
		"0\n2\n3 100\n4 100\n":                   {{4, 100}},       // equal starts (old Kafka files): the later epoch wins
		"0\n2\n3\t100\n4  200\n":                 {{3, 100}, {4, 200}},
		"0\n1\n2147483647 9223372036854775807\n": {{2147483647, 9223372036854775807}},
	}
	for content, want := range ok {
		m := psNewFS(t)
		m.write(filepath.Join(psDir, epochCheckpointName), []byte(content))
		c, err := OpenEpochCache(m, psDir)
		if err != nil {
			t.Errorf("%q: %v", content, err)
			continue
		}
		if got := c.Entries(); !slices.Equal(got, want) {
			t.Errorf("%q: entries %v, want %v", content, got, want)
		}
	}
	bad := []string{
		"\n", "1\n0\n", "x\n", "0\n-1\n", "0\nx\n", "0\n2\n1 0\n", "0\n1\n1 0\n2 5\n",
		"0\n1\n1\n", "0\n1\n1 2 3\n", "0\n1\n-1 0\n", "0\n1\n1 -5\n", "0\n1\n2147483648 0\n",
		"0\n2\n3 10\n3 20\n", "0\n2\n4 10\n3 20\n", "0\n1\n1 0\n\n",
	}
	for _, content := range bad {
		m := psNewFS(t)
		m.write(filepath.Join(psDir, epochCheckpointName), []byte(content))
		c, err := OpenEpochCache(m, psDir)
		if !errors.Is(err, errCorruptEpochCheckpoint) {
			t.Errorf("%q: err %v, want corrupt", content, err)
			continue
		}
		// The caller may keep the empty cache and rebuild it.
		if c == nil || len(c.Entries()) != 0 {
			t.Errorf("%q: cache %v, want empty", content, c)
			continue
		}
		ecAssign(t, c, EpochEntry{1, 0})
		if got := ecOpen(t, m).Entries(); !slices.Equal(got, []EpochEntry{{1, 0}}) {
			t.Errorf("%q: rebuilt cache reads back %v", content, got)
		}
	}
	// Other errors give no cache.
	m := psNewFS(t)
	m.write(filepath.Join(psDir, epochCheckpointName), []byte("0\n0\n"))
	m.fail = func(op, _ string) error { return errors.New("eio") }
	if c, err := OpenEpochCache(m, psDir); err == nil || c != nil {
		t.Fatalf("OpenEpochCache with I/O error = %v, %v", c, err)
	}
}

func FuzzParseEpochCheckpoint(f *testing.F) {
	for _, s := range []string{"", "0\n", "0\n3\n2 10\n4 20\n7 35\n", "0\r\n1\r\n5 100\r\n", "0\n2\n3 100\n4 100\n", "0\n1\n1 2 3\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, buf []byte) {
		entries, err := parseEpochCheckpoint(buf)
		if err != nil {
			if !errors.Is(err, errCorruptEpochCheckpoint) {
				t.Fatalf("error %v does not wrap errCorruptEpochCheckpoint", err)
			}
			return
		}
		for i := 1; i < len(entries); i++ {
			if entries[i].Epoch <= entries[i-1].Epoch || entries[i].StartOffset <= entries[i-1].StartOffset {
				t.Fatalf("entries not increasing: %v", entries)
			}
		}
		again, err := parseEpochCheckpoint(encodeEpochCheckpoint(entries))
		if err != nil || !slices.Equal(again, entries) {
			t.Fatalf("round trip: %v, %v; want %v", again, err, entries)
		}
	})
}
