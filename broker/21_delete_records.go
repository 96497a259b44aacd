package broker

// DeleteRecords, v0-2. Moves the log start offset up to the given offset
// (-1 = the high watermark); whole segments below it are deleted. An
// offset above the high watermark is OFFSET_OUT_OF_RANGE. On a tiered
// partition the offset may lie below the local log start, in the remote
// log (remotelog/retention.go).
//
// As Kafka's DelayedDeleteRecords, the answer waits, up to the request's
// timeout, until every follower on a live broker has moved its log start
// there too (followers follow the leader's log start: replica/fetcher.go);
// the low watermark is then the lowest log start over the replicas
// (Kafka's lowWatermarkIfLeader). A partition still short at the timeout
// gets REQUEST_TIMED_OUT. Waiting wakes the followers' long-polled fetches
// so that they hear of the new log start at once.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
	"strata/controller"
)

// deleteRecordsPoll is how often a waiting DeleteRecords looks at the
// followers' log starts.
const deleteRecordsPoll = 5 * time.Millisecond

func init() { register(21, 0, 2, handleDeleteRecords) }

func handleDeleteRecords(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteRecordsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteRecordsResponse)
	md := s.ctrl.Metadata()
	isAlive := liveBrokers(md)
	type pending struct {
		ti, pi int // the partition's place in the response
		p      *partition
		off    int64
	}
	var waits []pending
	for _, rt := range req.Topics {
		st := kmsg.NewDeleteRecordsResponseTopic()
		st.Topic = rt.Topic
		allowed := s.authorizedTopic(cc, acl.OpDelete, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewDeleteRecordsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.LowWatermark = -1
			t := md.Topics[rt.Topic]
			p := s.partition(rt.Topic, rp.Partition)
			switch {
			case !allowed:
				sp.ErrorCode = errTopicAuth
			case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case p == nil || !s.isLeader(p):
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
			default:
				off := rp.Offset
				hw := p.HW()
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
				if lw := p.LowWatermark(low, isAlive); lw < off {
					waits = append(waits, pending{ti: len(resp.Topics), pi: len(st.Partitions), p: p, off: off})
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(waits) == 0 {
		return resp, nil
	}
	deadline := time.Now().Add(time.Duration(max(req.TimeoutMillis, 0)) * time.Millisecond)
	return &delayedResponse{Response: resp, wait: func() {
		for _, w := range waits {
			w.p.Wake()
		}
		for len(waits) > 0 {
			left := waits[:0]
			for _, w := range waits {
				sp := &resp.Topics[w.ti].Partitions[w.pi]
				low := w.p.LowWatermark(s.logStart(w.p), liveBrokers(s.ctrl.Metadata()))
				switch {
				case low < 0:
					sp.ErrorCode, sp.LowWatermark = kerr.NotLeaderForPartition.Code, -1
				case low >= w.off:
					sp.LowWatermark = low
				default:
					left = append(left, w)
				}
			}
			waits = left
			if len(waits) == 0 {
				return
			}
			if time.Now().After(deadline) {
				for _, w := range waits {
					sp := &resp.Topics[w.ti].Partitions[w.pi]
					sp.ErrorCode, sp.LowWatermark = kerr.RequestTimedOut.Code, -1
				}
				return
			}
			time.Sleep(deleteRecordsPoll)
		}
	}}, nil
}

// liveBrokers reports whether a broker is registered in md (alive).
func liveBrokers(md *controller.Metadata) func(int32) bool {
	alive := make(map[int32]bool, len(md.Brokers))
	for _, b := range md.Brokers {
		alive[b.ID] = true
	}
	return func(id int32) bool { return alive[id] }
}
