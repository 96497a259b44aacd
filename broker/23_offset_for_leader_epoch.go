package broker

// OffsetForLeaderEpoch, v2-4 (KIP-101, KIP-279).
//
// For each partition: the largest epoch <= the requested one and the end
// offset of that epoch (the start of the next, or the log end for the
// latest). CurrentLeaderEpoch fences stale callers. Followers (replica id
// >= 0, v3+) may ask any replica; consumers must ask the leader.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(23, 2, 4, handleOffsetForLeaderEpoch) }

func handleOffsetForLeaderEpoch(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	md := s.ctrl.Metadata()
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		allowed := s.offsetForLeaderEpochAllowed(cc, req.ReplicaID, rt.Topic) // authz.go
		for _, rp := range rt.Partitions {
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LeaderEpoch, sp.EndOffset = -1, -1
			t := md.Topics[rt.Topic]
			p := s.partition(rt.Topic, rp.Partition)
			switch {
			case !allowed:
				sp.ErrorCode = errTopicAuth
			case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case p != nil && s.offline(p): // logdir.go
				sp.ErrorCode = kerr.KafkaStorageError.Code
			case p == nil || (req.ReplicaID < 0 && !s.isLeader(p)):
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
			default:
				if code := checkLeaderEpoch(rp.CurrentLeaderEpoch, p.LeaderEpoch()); code != 0 {
					sp.ErrorCode = code
					break
				}
				sp.LeaderEpoch, sp.EndOffset = p.Log().EndOffsetForEpoch(rp.LeaderEpoch)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
