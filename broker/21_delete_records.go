package broker

// DeleteRecords, v0-2. Moves the log start offset up to the given offset
// (-1 = the high watermark); whole segments below it are deleted. An
// offset above the high watermark is OFFSET_OUT_OF_RANGE. On a tiered
// partition the offset may lie below the local log start, in the remote
// log (tier_retention.go).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(21, 0, 2, handleDeleteRecords) }

func handleDeleteRecords(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	md := s.ctrl.Metadata()
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			t := md.Topics[rt.Topic]
			p := s.partition(rt.Topic, rp.Partition)
			switch {
			case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case p == nil || !s.isLeader(p):
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
			default:
				off := rp.Offset
				hw := p.hw.Load()
				if off == -1 {
					off = hw
				}
				if off < 0 || off > hw {
					sp.ErrorCode = kerr.OffsetOutOfRange.Code
					break
				}
				low, err := s.deleteRecords(p, off)
				if err != nil {
					sp.ErrorCode = errCode(err)
					break
				}
				sp.LowWatermark = low
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
