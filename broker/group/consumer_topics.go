package group

// Topic metadata as the consumer group coordinator sees it: the broker
// resolves subscribed names and regular expressions through a TopicLookup
// built from the controller's metadata.

import (
	"encoding/binary"
	"hash/fnv"
	"regexp"
	"sort"
)

// TopicInfo describes one topic.
type TopicInfo struct {
	Name       string
	ID         [16]byte
	Partitions int32
	Internal   bool
}

// TopicLookup resolves topics by name and id.
type TopicLookup interface {
	TopicByName(name string) (TopicInfo, bool)
	TopicByID(id [16]byte) (TopicInfo, bool)
	// Topics lists every topic (for regular expression subscriptions).
	Topics() []TopicInfo
}

// StaticTopics is a TopicLookup over a fixed list; tests and the broker
// (from a metadata snapshot) use it.
type StaticTopics struct {
	byName map[string]TopicInfo
	byID   map[[16]byte]TopicInfo
	all    []TopicInfo
}

// NewStaticTopics indexes topics.
func NewStaticTopics(topics []TopicInfo) *StaticTopics {
	s := &StaticTopics{byName: map[string]TopicInfo{}, byID: map[[16]byte]TopicInfo{}}
	for _, t := range topics {
		s.byName[t.Name] = t
		s.byID[t.ID] = t
		s.all = append(s.all, t)
	}
	sort.Slice(s.all, func(i, j int) bool { return s.all[i].Name < s.all[j].Name })
	return s
}

func (s *StaticTopics) TopicByName(name string) (TopicInfo, bool) {
	t, ok := s.byName[name]
	return t, ok
}
func (s *StaticTopics) TopicByID(id [16]byte) (TopicInfo, bool) { t, ok := s.byID[id]; return t, ok }
func (s *StaticTopics) Topics() []TopicInfo                     { return s.all }

// compileTopicRegex compiles a subscription regular expression. Kafka uses
// RE2/J with a whole-name match; Go's regexp is RE2.
func compileTopicRegex(expr string) (*regexp.Regexp, error) {
	return regexp.Compile("^(?:" + expr + ")$")
}

// memberRegex is the member's compiled subscription regex, nil when it has
// none. An empty regex is none, as in Kafka: librdkafka's KIP-848 consumer
// sends "" with its topic names.
func memberRegex(m *ConsumerMember) *regexp.Regexp {
	if m.SubscribedTopicRegex == nil || *m.SubscribedTopicRegex == "" {
		return nil
	}
	re, err := compileTopicRegex(*m.SubscribedTopicRegex)
	if err != nil {
		return nil
	}
	return re
}

// memberTopics resolves the topics a member subscribes to that exist.
func memberTopics(m *ConsumerMember, topics TopicLookup) []TopicInfo {
	seen := map[string]bool{}
	var out []TopicInfo
	for _, n := range m.SubscribedTopicNames {
		if t, ok := topics.TopicByName(n); ok && !seen[n] {
			seen[n] = true
			out = append(out, t)
		}
	}
	if re := memberRegex(m); re != nil {
		for _, t := range topics.Topics() {
			if !t.Internal && !seen[t.Name] && re.MatchString(t.Name) {
				seen[t.Name] = true
				out = append(out, t)
			}
		}
	}
	return out
}

// subscriptionHash hashes the metadata (name, id, partition count) of
// every topic some member subscribes to; a change means a new target
// assignment is needed (Kafka's MetadataHash, KIP-1101; our hash
// function differs, the value is only compared with itself).
func subscriptionHash(members map[string]*ConsumerMember, topics TopicLookup) (int64, map[string][16]byte) {
	all := map[string]TopicInfo{}
	ids := map[string][16]byte{}
	for _, m := range members {
		for _, t := range memberTopics(m, topics) {
			all[t.Name] = t
			ids[t.Name] = t.ID
		}
	}
	if len(all) == 0 {
		return 0, ids
	}
	names := make([]string, 0, len(all))
	for n := range all {
		names = append(names, n)
	}
	sort.Strings(names)
	h := fnv.New64a()
	var b [4]byte
	for _, n := range names {
		t := all[n]
		h.Write([]byte(n))
		h.Write([]byte{0})
		h.Write(t.ID[:])
		binary.BigEndian.PutUint32(b[:], uint32(t.Partitions))
		h.Write(b[:])
	}
	return int64(h.Sum64()), ids
}
