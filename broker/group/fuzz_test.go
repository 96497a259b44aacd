package group

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzLoadRecords feeds arbitrary bytes to the partition loader as a
// record batch, and as a key/value pair inside a valid batch: nothing may
// panic, and a loaded group must be usable.
func FuzzLoadRecords(f *testing.F) {
	g := newClassicGroup("g", 0)
	g.generation, g.protocolName, g.leaderID = 1, kmsg.StringPtr("range"), "m"
	pt := "consumer"
	g.protocolType = &pt
	g.add(&member{id: "m", protocols: []protocol{{"range", consumerMeta("t")}}, sessionTimeoutMs: 1000})
	f.Add([]byte{0, 2, 0, 1, 'g'}, classicGroupValue(g, nil), []byte(nil))
	f.Add(offsetCommitKey("g", TopicPartition{"t", 1}), offsetCommitValue(OffsetEntry{Offset: 5, LeaderEpoch: -1, ExpireTimestamp: -1}), []byte(nil))
	f.Add([]byte{0, 1}, []byte{0, 3, 1}, encodeBatch([]Record{{Key: []byte{0, 9}}}, time.Unix(0, 0)))
	f.Fuzz(func(t *testing.T, key, value, raw []byte) {
		ls := &loadState{s: &shard{c: &Coordinator{}}, groups: map[string]*kmsg.GroupMetadataValue{},
			offsets: map[string]map[TopicPartition]OffsetEntry{}, modern: map[string]ModernGroup{}}
		decodeBatches(raw, ls.apply)
		decodeBatches(encodeBatch([]Record{{Key: key, Value: value}}, time.Unix(0, 0)), ls.apply)
		for id, gv := range ls.groups {
			g := groupFromValue(id, gv)
			g.selectProtocol()
			g.currentMemberMetadata()
			classicGroupValue(g, nil)
		}
	})
}
