package group

// Keys and values of the classic protocol in __consumer_offsets, in
// Kafka's schemas (kmsg's generated types):
//
//	key version 0/1  OffsetCommitKey{group, topic, partition}  -> OffsetCommitValue v1 or v3
//	key version 2    GroupMetadataKey{group}                   -> GroupMetadataValue v3
//
// Key versions 3-8 belong to KIP-848 consumer groups (consumer_records.go).

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// OffsetEntry is one committed offset.
type OffsetEntry struct {
	Offset          int64
	LeaderEpoch     int32 // -1 when the commit carried none
	Metadata        string
	CommitTimestamp int64 // ms
	ExpireTimestamp int64 // ms; -1 unless committed with an explicit retention (OffsetCommit v1-v4)
}

func offsetCommitKey(group string, tp TopicPartition) []byte {
	k := kmsg.NewOffsetCommitKey()
	k.Version = 1
	k.Group, k.Topic, k.Partition = group, tp.Topic, tp.Partition
	return k.AppendTo(nil)
}

// offsetCommitValue is v3 (with leader epoch), or v1 when the commit has
// an expire timestamp, as Kafka writes them.
func offsetCommitValue(e OffsetEntry) []byte {
	v := kmsg.NewOffsetCommitValue()
	v.Version = 3
	if e.ExpireTimestamp >= 0 {
		v.Version = 1
		v.ExpireTimestamp = e.ExpireTimestamp
	}
	v.Offset, v.LeaderEpoch, v.Metadata, v.CommitTimestamp = e.Offset, e.LeaderEpoch, e.Metadata, e.CommitTimestamp
	return v.AppendTo(nil)
}

func classicGroupKey(group string) []byte {
	k := kmsg.NewGroupMetadataKey()
	k.Version = 2
	k.Group = group
	return k.AppendTo(nil)
}

// classicGroupValue is GroupMetadataValue v3 (static members need v3).
// assignment gives each member's assignment; members missing from it get
// their current one.
func classicGroupValue(g *classicGroup, assignment map[string][]byte) []byte {
	v := kmsg.NewGroupMetadataValue()
	v.Version = 3
	if g.protocolType != nil {
		v.ProtocolType = *g.protocolType
	}
	v.Generation = g.generation
	v.Protocol = g.protocolName
	if g.leaderID != "" {
		v.Leader = kmsg.StringPtr(g.leaderID)
	}
	v.CurrentStateTimestamp = g.stateTimestamp
	for _, id := range g.memberOrder() {
		m := g.members[id]
		mv := kmsg.NewGroupMetadataValueMember()
		mv.MemberID, mv.InstanceID, mv.ClientID, mv.ClientHost = m.id, m.instanceID, m.clientID, m.clientHost
		mv.RebalanceTimeoutMillis, mv.SessionTimeoutMillis = m.rebalanceTimeoutMs, m.sessionTimeoutMs
		if g.protocolName != nil {
			mv.Subscription = m.metadata(*g.protocolName)
		}
		if a, ok := assignment[id]; ok {
			mv.Assignment = a
		} else {
			mv.Assignment = m.assignment
		}
		if mv.Subscription == nil {
			mv.Subscription = []byte{}
		}
		if mv.Assignment == nil {
			mv.Assignment = []byte{}
		}
		v.Members = append(v.Members, mv)
	}
	return v.AppendTo(nil)
}

// keyVersion is the first int16 of a key.
func keyVersion(key []byte) (int16, error) {
	if len(key) < 2 {
		return 0, errors.New("short key")
	}
	return int16(binary.BigEndian.Uint16(key)), nil
}

// parsedOffsetKey / parsedGroupValue are the decoded classic records.
func parseOffsetCommitKey(key []byte) (string, TopicPartition, error) {
	var k kmsg.OffsetCommitKey
	if err := k.ReadFrom(key); err != nil {
		return "", TopicPartition{}, fmt.Errorf("offset commit key: %w", err)
	}
	return k.Group, TopicPartition{k.Topic, k.Partition}, nil
}

func parseOffsetCommitValue(val []byte) (OffsetEntry, error) {
	var v kmsg.OffsetCommitValue
	if err := v.ReadFrom(val); err != nil {
		return OffsetEntry{}, fmt.Errorf("offset commit value: %w", err)
	}
	e := OffsetEntry{Offset: v.Offset, LeaderEpoch: -1, Metadata: v.Metadata, CommitTimestamp: v.CommitTimestamp, ExpireTimestamp: -1}
	if v.Version >= 3 {
		e.LeaderEpoch = v.LeaderEpoch
	}
	if v.Version == 1 {
		e.ExpireTimestamp = v.ExpireTimestamp
	}
	return e, nil
}

func parseClassicGroupKey(key []byte) (string, error) {
	var k kmsg.GroupMetadataKey
	if err := k.ReadFrom(key); err != nil {
		return "", fmt.Errorf("group metadata key: %w", err)
	}
	return k.Group, nil
}

func parseClassicGroupValue(val []byte) (*kmsg.GroupMetadataValue, error) {
	var v kmsg.GroupMetadataValue
	if err := v.ReadFrom(val); err != nil {
		return nil, fmt.Errorf("group metadata value: %w", err)
	}
	return &v, nil
}

// OffsetCommitBatches encodes committed offsets as the record batches of
// __consumer_offsets that commits of them write (OffsetCommit records,
// in batches under max.message.bytes), in group, topic, partition order;
// the broker appends them to an empty partition to load the offsets a
// snapshot in the bucket kept (groups.go). Loading them gives each group
// that has no other record an Empty classic group, as a simple
// consumer's commit does. The first record marks the load begun and the
// last one done (SeedScan), so that a load cut short (leadership moved,
// a crash) between the batches is told from a partition's own history.
// Nothing is written for no offsets.
func OffsetCommitBatches(offsets map[string]map[TopicPartition]OffsetEntry, now time.Time) [][]byte {
	if len(offsets) == 0 {
		return nil
	}
	recs := []Record{seedMarker(seedBegun)}
	for _, g := range slices.Sorted(maps.Keys(offsets)) {
		tps := slices.SortedFunc(maps.Keys(offsets[g]), func(a, b TopicPartition) int {
			if c := strings.Compare(a.Topic, b.Topic); c != 0 {
				return c
			}
			return cmp.Compare(a.Partition, b.Partition)
		})
		for _, tp := range tps {
			recs = append(recs, Record{Key: offsetCommitKey(g, tp), Value: offsetCommitValue(offsets[g][tp])})
		}
	}
	recs = append(recs, seedMarker(seedDone))
	var out [][]byte
	for len(recs) > 0 {
		n := batchLen(recs)
		out = append(out, encodeBatch(recs[:n], now))
		recs = recs[n:]
	}
	return out
}

// The records that mark a load of offsets from the bucket begun and
// done: a key of a version no Kafka record has (the coordinator skips
// it), one key each, so that compaction keeps the last of each.
const seedKeyVersion int16 = 0x7353

const (
	seedBegun byte = 1
	seedDone  byte = 2
)

func seedMarker(kind byte) Record {
	k := binary.BigEndian.AppendUint16(nil, uint16(seedKeyVersion))
	return Record{Key: append(k, kind), Value: []byte{}}
}

// SeedScan follows the load markers of OffsetCommitBatches through an
// offsets partition's batches, in log order.
type SeedScan struct{ open bool }

// Scan reads the records of whole batches.
func (sc *SeedScan) Scan(batches []byte) {
	_ = decodeBatches(batches, func(r Record) error {
		if v, err := keyVersion(r.Key); err == nil && v == seedKeyVersion && len(r.Key) == 3 {
			sc.open = r.Key[2] == seedBegun
		}
		return nil
	})
}

// Open reports whether a load of offsets from the bucket began and did
// not finish.
func (sc *SeedScan) Open() bool { return sc.open }
