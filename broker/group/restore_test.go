package group

import (
	"testing"
	"testing/synctest"
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
