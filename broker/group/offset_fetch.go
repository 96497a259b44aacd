package group

// OffsetFetch: one group (v0-v7) or several (v8+); null topics (v2+) ask
// for every committed offset of the group. Offsets are served whatever the
// group's state (simple consumers have no group state). With
// RequireStable (v7+), a partition with pending transactional offsets
// answers UNSTABLE_OFFSET_COMMIT (txn_offsets.go) and the client retries.

import (
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type fetchTopic struct {
	topic string
	parts []int32
}

// OffsetFetch serves an OffsetFetch request (v0-v9).
func (c *Coordinator) OffsetFetch(req *kmsg.OffsetFetchRequest) *kmsg.OffsetFetchResponse {
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	if req.Version >= 8 {
		for _, rg := range req.Groups {
			var topics []fetchTopic
			for _, t := range rg.Topics {
				topics = append(topics, fetchTopic{t.Topic, t.Partitions})
			}
			epoch := int32(-1)
			if req.Version >= 9 {
				epoch = rg.MemberEpoch
			}
			code, out := c.fetchGroup(rg.Group, topics, rg.Topics == nil, req.RequireStable, rg.MemberID, epoch)
			sg := kmsg.NewOffsetFetchResponseGroup()
			sg.Group, sg.ErrorCode = rg.Group, code
			for _, t := range out {
				st := kmsg.NewOffsetFetchResponseGroupTopic()
				st.Topic = t.Topic
				for _, p := range t.Partitions {
					sp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					sp.Partition, sp.Offset, sp.LeaderEpoch, sp.Metadata, sp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
					st.Partitions = append(st.Partitions, sp)
				}
				sg.Topics = append(sg.Topics, st)
			}
			resp.Groups = append(resp.Groups, sg)
		}
		return resp
	}
	var topics []fetchTopic
	for _, t := range req.Topics {
		topics = append(topics, fetchTopic{t.Topic, t.Partitions})
	}
	all := req.Topics == nil && req.Version >= 2
	code, out := c.fetchGroup(req.Group, topics, all, req.Version >= 7 && req.RequireStable, nil, -1)
	if code != 0 {
		if req.Version >= 2 {
			resp.ErrorCode = code
			return resp
		}
		// v0-v1 have no top-level error: every requested partition
		// carries it.
		out = out[:0]
		for _, t := range topics {
			st := kmsg.NewOffsetFetchResponseTopic()
			st.Topic = t.topic
			for _, p := range t.parts {
				sp := kmsg.NewOffsetFetchResponseTopicPartition()
				sp.Partition, sp.Offset, sp.LeaderEpoch, sp.Metadata, sp.ErrorCode = p, -1, -1, kmsg.StringPtr(""), code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp
	}
	resp.Topics = out
	return resp
}

// fetchGroup answers one group in request order (all: sorted by topic
// and partition).
func (c *Coordinator) fetchGroup(groupID string, topics []fetchTopic, all, requireStable bool, memberID *string, epoch int32) (int16, []kmsg.OffsetFetchResponseTopic) {
	want := map[string][]int32{}
	for _, t := range topics {
		want[t.topic] = append(want[t.topic], t.parts...)
	}
	code, got := c.fetchOffsets(groupID, want, all, requireStable, memberID, epoch)
	if code != 0 {
		return code, nil
	}
	byTP := make(map[TopicPartition]OffsetEntry, len(got))
	unstable := map[TopicPartition]bool{}
	for _, p := range got {
		if p.found {
			byTP[p.tp] = p.entry
		}
		if p.unstable {
			unstable[p.tp] = true
		}
	}
	if all {
		topics = topics[:0]
		idx := map[string]int{}
		sort.Slice(got, func(i, j int) bool {
			if got[i].tp.Topic != got[j].tp.Topic {
				return got[i].tp.Topic < got[j].tp.Topic
			}
			return got[i].tp.Partition < got[j].tp.Partition
		})
		for _, p := range got {
			i, ok := idx[p.tp.Topic]
			if !ok {
				i = len(topics)
				idx[p.tp.Topic] = i
				topics = append(topics, fetchTopic{topic: p.tp.Topic})
			}
			topics[i].parts = append(topics[i].parts, p.tp.Partition)
		}
	}
	var out []kmsg.OffsetFetchResponseTopic
	for _, t := range topics {
		st := kmsg.NewOffsetFetchResponseTopic()
		st.Topic = t.topic
		for _, p := range t.parts {
			sp := kmsg.NewOffsetFetchResponseTopicPartition()
			sp.Partition, sp.Offset, sp.LeaderEpoch, sp.Metadata = p, -1, -1, kmsg.StringPtr("")
			tp := TopicPartition{t.topic, p}
			if unstable[tp] {
				sp.ErrorCode = kerr.UnstableOffsetCommit.Code
			} else if e, ok := byTP[tp]; ok {
				sp.Offset, sp.LeaderEpoch, sp.Metadata = e.Offset, e.LeaderEpoch, kmsg.StringPtr(e.Metadata)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		out = append(out, st)
	}
	return 0, out
}
