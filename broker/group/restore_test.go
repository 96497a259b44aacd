package group

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// Offsets restored from outside the log reach a group that has members
// (an OffsetCommit of generation -1 is refused UNKNOWN_MEMBER_ID there),
// never replace what a group committed itself, survive a reload, and
// skip topic partitions that do not exist.
func TestRestoreOffsetsSkipsMemberChecks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l := &testLog{}
		c := startCoord(t, l, func(cfg *Config) {
			cfg.PartitionExists = func(topic string, _ int32) bool { return topic != "gone" }
		})
		ids, gen := stableGroup(t, c, "g", 1)
		if code := commit(c, "g", ids[0], gen, "t", 0, 5, ""); code != 0 {
			t.Fatalf("member commit: code %d", code)
		}
		if code := commit(c, "g", "", -1, "t", 1, 9, ""); code != codeUnknownMemberID {
			t.Fatalf("simple commit to a group with members: code %d", code)
		}
		offs := map[string]map[TopicPartition]OffsetEntry{
			"g":     {{"t", 0}: {Offset: 1, LeaderEpoch: -1, ExpireTimestamp: -1}, {"t", 1}: {Offset: 9, LeaderEpoch: -1, ExpireTimestamp: -1}, {"gone", 0}: {Offset: 3}},
			"other": {{"t", 2}: {Offset: 4, LeaderEpoch: -1, ExpireTimestamp: -1}},
		}
		restored, unknown, err := c.RestoreOffsets(offs)
		if err != nil || restored != 2 || unknown != 1 {
			t.Fatalf("restore: %d restored, %d unknown, %v", restored, unknown, err)
		}
		for _, want := range []struct {
			g    string
			p    int32
			want int64
		}{{"g", 0, 5}, {"g", 1, 9}, {"other", 2, 4}} {
			if off, code := fetched(c, want.g, "t", want.p); code != 0 || off != want.want {
				t.Fatalf("%s t-%d: %d code %d, want %d", want.g, want.p, off, code, want.want)
			}
		}
		c.Close()
		c2 := startCoord(t, l, nil)
		if off, code := fetched(c2, "g", "t", 1); code != 0 || off != 9 {
			t.Fatalf("after a reload: %d code %d", off, code)
		}
	})
}

// The batches of a load from the bucket stay under max.message.bytes
// with large metadata, mark the load begun and done (a cut after any
// batch but the last is open), and load as the offsets alone.
func TestOffsetCommitBatchesMarkTheLoad(t *testing.T) {
	offs := map[string]map[TopicPartition]OffsetEntry{"g": {}}
	meta := strings.Repeat("m", 4000)
	for p := range int32(1200) {
		offs["g"][TopicPartition{"t", p}] = OffsetEntry{Offset: int64(p), LeaderEpoch: -1, Metadata: meta, ExpireTimestamp: -1}
	}
	bs := OffsetCommitBatches(offs, time.Now())
	if len(bs) < 3 {
		t.Fatalf("%d batches", len(bs))
	}
	var sc SeedScan
	for i, b := range bs {
		if len(b) > 1048588 {
			t.Fatalf("batch %d: %d bytes", i, len(b))
		}
		sc.Scan(b)
		if open := i < len(bs)-1; sc.Open() != open {
			t.Fatalf("after batch %d of %d: open %v", i, len(bs), sc.Open())
		}
	}
	if OffsetCommitBatches(nil, time.Now()) != nil {
		t.Fatal("batches for no offsets")
	}
	synctest.Test(t, func(t *testing.T) {
		l := &testLog{}
		for _, b := range bs {
			l.Append(b)
		}
		c := startCoord(t, l, nil)
		if off, code := fetched(c, "g", "t", 1199); code != 0 || off != 1199 {
			t.Fatalf("loaded: %d code %d", off, code)
		}
		got, _ := c.PartitionOffsets(0)
		if len(got) != 1 || len(got["g"]) != 1200 {
			t.Fatalf("loaded %d groups, %d offsets", len(got), len(got["g"]))
		}
	})
}
