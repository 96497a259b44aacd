package group

// Records of consumer groups in __consumer_offsets, in Kafka's formats
// (group-coordinator message schemas; kmsg has no types for them). Keys
// are not flexible: int16 key version (the record type), then int16-length
// strings. Values start with an int16 value version (0) and are flexible:
// compact strings and arrays, tagged fields at the end of every struct.
//
//	type 3  ConsumerGroupMetadata           key: group           value: Epoch, tags {0: MetadataHash int64, 1: CreationTimeMs int64}
//	type 4  ConsumerGroupPartitionMetadata  key: group           (deprecated by MetadataHash; read and ignored)
//	type 5  ConsumerGroupMemberMetadata     key: group, member   value: InstanceId?, RackId?, ClientId, ClientHost,
//	                                                             SubscribedTopicNames [], SubscribedTopicRegex?, RebalanceTimeoutMs, ServerAssignor?
//	type 6  ConsumerGroupTargetAssignmentMetadata key: group     value: AssignmentEpoch
//	type 7  ConsumerGroupTargetAssignmentMember   key: group, member  value: TopicPartitions [{TopicId, Partitions []}]
//	type 8  ConsumerGroupCurrentMemberAssignment  key: group, member  value: MemberEpoch, PreviousMemberEpoch, State int8,
//	                                                             AssignedPartitions [], PartitionsPendingRevocation []
//	                                                             (each {TopicId, Partitions, tag 0: AssignmentEpochs})
//
// A nil value is a tombstone.

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
)

// Consumer group record types (key versions).
const (
	recGroupMetadata     int16 = 3
	recPartitionMetadata int16 = 4
	recMemberMetadata    int16 = 5
	recTargetMetadata    int16 = 6
	recTargetMember      int16 = 7
	recCurrentAssignment int16 = 8
)

func tombstone(key []byte) Record { return Record{Key: key} }

func groupKey(typ int16, group string) []byte {
	return kbin.AppendString(kbin.AppendInt16(nil, typ), group)
}

func memberKey(typ int16, group, member string) []byte {
	return kbin.AppendString(groupKey(typ, group), member)
}

func groupMetadataKey(g string) []byte        { return groupKey(recGroupMetadata, g) }
func targetMetadataKey(g string) []byte       { return groupKey(recTargetMetadata, g) }
func memberMetadataKey(g, m string) []byte    { return memberKey(recMemberMetadata, g, m) }
func targetMemberKey(g, m string) []byte      { return memberKey(recTargetMember, g, m) }
func currentAssignmentKey(g, m string) []byte { return memberKey(recCurrentAssignment, g, m) }
func valueHeader() []byte                     { return kbin.AppendInt16(nil, 0) }
func appendNoTags(dst []byte) []byte          { return kbin.AppendUvarint(dst, 0) }
func appendTag(dst []byte, tag uint32, v []byte) []byte {
	dst = kbin.AppendUvarint(dst, tag)
	dst = kbin.AppendUvarint(dst, uint32(len(v)))
	return append(dst, v...)
}

// IsConsumerRecordKey reports whether a __consumer_offsets key belongs to
// a consumer group (key versions 3 to 8).
func IsConsumerRecordKey(key []byte) bool {
	if len(key) < 2 {
		return false
	}
	v := int16(key[0])<<8 | int16(key[1])
	return v >= recGroupMetadata && v <= recCurrentAssignment
}

type consumerKey struct {
	typ           int16
	group, member string
}

func parseConsumerKey(key []byte) (consumerKey, error) {
	r := kbin.Reader{Src: key}
	k := consumerKey{typ: r.Int16()}
	k.group = r.String()
	switch k.typ {
	case recMemberMetadata, recTargetMember, recCurrentAssignment:
		k.member = r.String()
	case recGroupMetadata, recPartitionMetadata, recTargetMetadata:
	default:
		return k, fmt.Errorf("consumer group record: unknown key version %d", k.typ)
	}
	if err := r.Complete(); err != nil {
		return k, fmt.Errorf("consumer group record key type %d: %w", k.typ, err)
	}
	return k, nil
}

// ConsumerRecordGroupID returns the group id of a consumer group record key.
func ConsumerRecordGroupID(key []byte) (string, bool) {
	k, err := parseConsumerKey(key)
	if err != nil {
		return "", false
	}
	return k.group, true
}

func groupMetadataRecord(g string, epoch int32, hash, createdMs int64) Record {
	v := kbin.AppendInt32(valueHeader(), epoch)
	n := 0
	var tags []byte
	if hash != 0 {
		n++
		tags = appendTag(tags, 0, kbin.AppendInt64(nil, hash))
	}
	if createdMs != -1 {
		n++
		tags = appendTag(tags, 1, kbin.AppendInt64(nil, createdMs))
	}
	v = kbin.AppendUvarint(v, uint32(n))
	return Record{Key: groupMetadataKey(g), Value: append(v, tags...)}
}

func targetMetadataRecord(g string, epoch int32) Record {
	v := kbin.AppendInt32(valueHeader(), epoch)
	return Record{Key: targetMetadataKey(g), Value: appendNoTags(v)}
}

func memberMetadataRecord(g string, m *ConsumerMember) Record {
	v := valueHeader()
	v = kbin.AppendCompactNullableString(v, m.InstanceID)
	v = kbin.AppendCompactNullableString(v, m.RackID)
	v = kbin.AppendCompactString(v, m.ClientID)
	v = kbin.AppendCompactString(v, m.ClientHost)
	v = kbin.AppendCompactArrayLen(v, len(m.SubscribedTopicNames))
	for _, n := range m.SubscribedTopicNames {
		v = kbin.AppendCompactString(v, n)
	}
	v = kbin.AppendCompactNullableString(v, m.SubscribedTopicRegex)
	v = kbin.AppendInt32(v, m.RebalanceTimeoutMs)
	v = kbin.AppendCompactNullableString(v, m.ServerAssignor)
	return Record{Key: memberMetadataKey(g, m.ID), Value: appendNoTags(v)}
}

// appendTopicPartitions writes [{TopicId, Partitions, tags}]; with epochs,
// tag 0 carries the assignment epochs aligned with Partitions.
func appendTopicPartitions(v []byte, tp TopicPartitions, epochs map[[16]byte]map[int32]int32) []byte {
	ids := sortedTopicIDs(tp)
	v = kbin.AppendCompactArrayLen(v, len(ids))
	for _, id := range ids {
		v = kbin.AppendUuid(v, id)
		v = kbin.AppendCompactArrayLen(v, len(tp[id]))
		for _, p := range tp[id] {
			v = kbin.AppendInt32(v, p)
		}
		if epochs == nil {
			v = appendNoTags(v)
			continue
		}
		var es []byte
		es = kbin.AppendCompactArrayLen(es, len(tp[id]))
		for _, p := range tp[id] {
			e, ok := epochs[id][p]
			if !ok {
				e = -1
			}
			es = kbin.AppendInt32(es, e)
		}
		v = kbin.AppendUvarint(v, 1)
		v = appendTag(v, 0, es)
	}
	return v
}

func targetMemberRecord(g, member string, tp TopicPartitions) Record {
	v := appendTopicPartitions(valueHeader(), tp, nil)
	return Record{Key: targetMemberKey(g, member), Value: appendNoTags(v)}
}

func currentAssignmentRecord(g string, m *ConsumerMember) Record {
	v := valueHeader()
	v = kbin.AppendInt32(v, m.Epoch)
	v = kbin.AppendInt32(v, m.PreviousEpoch)
	v = kbin.AppendInt8(v, int8(m.State))
	v = appendTopicPartitions(v, m.Assigned, m.AssignEpochs)
	v = appendTopicPartitions(v, m.PendingRevocation, m.AssignEpochs)
	return Record{Key: currentAssignmentKey(g, m.ID), Value: appendNoTags(v)}
}

// valueReader reads a flexible value after checking its version.
func valueReader(val []byte) (*kbin.Reader, error) {
	r := &kbin.Reader{Src: val}
	if v := r.Int16(); v != 0 || !r.Ok() {
		return nil, fmt.Errorf("unsupported value version %d", v)
	}
	return r, nil
}

// readTags reads a tagged-field section, calling fn for each tag.
func readTags(r *kbin.Reader, fn func(tag uint32, data []byte)) {
	n := r.Uvarint()
	for i := uint32(0); i < n && r.Ok(); i++ {
		tag := r.Uvarint()
		size := r.Uvarint()
		data := r.Span(int(size))
		if fn != nil && r.Ok() {
			fn(tag, data)
		}
	}
}

var errBadArray = errors.New("negative or oversized array length")

func readArrayLen(r *kbin.Reader) (int, error) {
	n := r.CompactArrayLen()
	if n < 0 || int(n) > len(r.Src) {
		// Every element takes at least one byte.
		return 0, errBadArray
	}
	return int(n), nil
}

func readInt32s(r *kbin.Reader) ([]int32, error) {
	n, err := readArrayLen(r)
	if err != nil {
		return nil, err
	}
	out := make([]int32, 0, n)
	for i := 0; i < n && r.Ok(); i++ {
		out = append(out, r.Int32())
	}
	return out, nil
}

func readTopicPartitions(r *kbin.Reader, epochs map[[16]byte]map[int32]int32) (TopicPartitions, error) {
	n, err := readArrayLen(r)
	if err != nil {
		return nil, err
	}
	tp := TopicPartitions{}
	for i := 0; i < n && r.Ok(); i++ {
		id := r.Uuid()
		ps, err := readInt32s(r)
		if err != nil {
			return nil, err
		}
		for _, p := range ps {
			tp.add(id, p)
		}
		readTags(r, func(tag uint32, data []byte) {
			if tag != 0 || epochs == nil {
				return
			}
			er := kbin.Reader{Src: data}
			es, err := readInt32s(&er)
			if err != nil || len(es) != len(ps) {
				return
			}
			for j, p := range ps {
				if es[j] < 0 {
					continue
				}
				if epochs[id] == nil {
					epochs[id] = map[int32]int32{}
				}
				epochs[id][p] = es[j]
			}
		})
	}
	return tp, nil
}
