package broker

// ListOffsets, v1-9.
//
// Timestamps: -1 latest (the high watermark; the last stable offset for
// read_committed, isolation_level 1), -2 earliest, -3 the
// offset of the largest timestamp (KIP-734), -4 earliest local and -5
// latest tiered (KIP-1005; with no tier the earliest local is the log
// start and nothing is tiered, so -5 answers -1; for a tiered topic -2 is
// the remote log start, -5 the last offset of the uploaded segments, with
// its leader epoch). A timestamp >= 0 gives
// the first offset whose timestamp is at least it, or -1 when none is;
// on a tiered partition the remote segments are searched first
// (remotelog/fetch.go), and a failed remote read is KAFKA_STORAGE_ERROR.
//
// As in Kafka, only the leader answers, except for the debugging replica
// id -2, which any replica serves from its own log; consumers (replica id
// -1) see up to the high watermark, or the last stable offset with
// read_committed (as Kafka: a timestamp or max-timestamp answer at or
// past it is -1), others up to the log end. While a
// leader's high watermark is below the start offset of its epoch (a new
// leader whose followers have not fetched yet) a consumer asking for the
// latest offset, or for a timestamp found nowhere below the high watermark, gets
// OFFSET_NOT_AVAILABLE (KIP-207) rather than an offset that is too low.
//
// A partition named twice in one request gets INVALID_REQUEST at each
// mention, as in Kafka. With that, a request costs at most one batch
// decompression per partition it names: a search by timestamp skips
// batches by their max timestamps and decompresses only the batch that
// holds the answer, as a stream, stopping at the answer, within the
// broker's bound on concurrent decompressions (plog/records.go). What that
// stream holds (the codec's window and buffers, up to the zstd window a
// stored batch declares) is charged to the request's share of
// queued.max.request.bytes before it is decompressed, waiting as a
// request does while the pool is full; a batch whose charge cannot be had
// (more than the whole bound) answers with its base offset and max
// timestamp, as a batch with unreadable records does.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
	"strata/broker/plog"
)

func init() { register(2, 1, 9, handleListOffsets) }

func handleListOffsets(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListOffsetsRequest)
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	md := s.ctrl.Metadata()
	leaderOnly := req.ReplicaID != -2 // Kafka's DEBUGGING_REPLICA_ID
	client := req.ReplicaID == -1     // Kafka's CONSUMER_REPLICA_ID
	dups := duplicatePartitions(req)
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		allowed := s.authorizedTopic(cc, acl.OpDescribe, rt.Topic)
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
			t := md.Topics[rt.Topic]
			p := s.partition(rt.Topic, rp.Partition)
			switch {
			case !allowed:
				sp.ErrorCode = errTopicAuth
			case dups[listedPartition{rt.Topic, rp.Partition}]:
				sp.ErrorCode = kerr.InvalidRequest.Code
			case t == nil || rp.Partition < 0 || int(rp.Partition) >= len(t.Partitions):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case p != nil && s.offline(p): // logdir.go
				sp.ErrorCode = kerr.KafkaStorageError.Code
			case p == nil || (leaderOnly && !s.isLeader(p)):
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
			case p.Restoring.Load():
				sp.ErrorCode = kerr.LeaderNotAvailable.Code // remotelog/restore.go
			default:
				if code := checkLeaderEpoch(rp.CurrentLeaderEpoch, p.LeaderEpoch()); code != 0 {
					sp.ErrorCode = code
					break
				}
				s.listOffset(p, rp.Timestamp, client, req.IsolationLevel, cc.memory(), &sp)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}

type listedPartition struct {
	topic string
	part  int32
}

// duplicatePartitions returns the partitions a ListOffsets request names
// more than once (nil when none is).
func duplicatePartitions(req *kmsg.ListOffsetsRequest) map[listedPartition]bool {
	n := 0
	for _, rt := range req.Topics {
		n += len(rt.Partitions)
	}
	if n < 2 {
		return nil
	}
	seen := make(map[listedPartition]bool, n)
	var dups map[listedPartition]bool
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			k := listedPartition{rt.Topic, rp.Partition}
			if seen[k] {
				if dups == nil {
					dups = map[listedPartition]bool{}
				}
				dups[k] = true
			}
			seen[k] = true
		}
	}
	return dups
}

func (s *Server) listOffset(p *partition, ts int64, client bool, isolation int8, mem plog.Memory, sp *kmsg.ListOffsetsResponseTopicPartition) {
	hw := p.HW()
	// upTo is Kafka's lastFetchableOffset: the high watermark, the last
	// stable offset for read_committed, the log end for replicas.
	upTo := hw
	switch {
	case !client:
		hw = p.Log().LogEndOffset()
		upTo = hw
	case isolation == 1:
		upTo = p.Log().LastStableOffset(hw)
	}
	if ts != -1 && ts != -3 && ts != -4 && s.remoteNotReady(p) {
		sp.ErrorCode = kerr.ReplicaNotAvailable.Code // the remote log is not known yet
		sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
		return
	}
	switch ts {
	case -1: // latest
		sp.Offset = upTo
		sp.LeaderEpoch = p.LeaderEpoch()
	case -2: // earliest: the remote log start of a tiered partition
		sp.Offset = p.Log().LogStartOffset()
		if start, ok := s.remoteLogStart(p); ok && start < sp.Offset {
			sp.Offset = start
		}
	case -4: // earliest local
		sp.Offset = p.Log().LogStartOffset()
	case -3: // max timestamp
		off, mts, epoch := p.Log().MaxTimestampCharged(mem)
		if off >= 0 && off < upTo {
			sp.Offset, sp.Timestamp, sp.LeaderEpoch = off, mts, epoch
		}
	case -5: // latest tiered: the last offset uploaded, or -1
		if end, epoch, ok := s.remoteLogEnd(p); ok {
			sp.Offset, sp.LeaderEpoch = end, epoch
		}
	default:
		if ts < 0 {
			sp.ErrorCode = kerr.InvalidRequest.Code
			return
		}
		// Remote segments first (they hold the older records), then the
		// local log (remotelog/fetch.go).
		off, fts, epoch, ok, code := s.remoteOffsetForTimestamp(p, ts, mem)
		if code != 0 {
			sp.ErrorCode = code
			return
		}
		if !ok {
			off, fts, epoch, ok = p.Log().OffsetForTimestampCharged(ts, mem)
		}
		if ok && off < upTo {
			sp.Offset, sp.Timestamp, sp.LeaderEpoch = off, fts, epoch
		}
	}
	if sp.ErrorCode == 0 && client && (ts == -1 || ts >= 0 && sp.Offset < 0) {
		if start, ok := leaderEpochStart(p); ok && start > hw {
			sp.ErrorCode = kerr.OffsetNotAvailable.Code
			sp.Timestamp, sp.Offset, sp.LeaderEpoch = -1, -1, -1
		}
	}
}

// leaderEpochStart is the log end offset at which this broker became
// leader in its current epoch (Kafka's leaderEpochStartOffsetOpt), if it
// leads.
func leaderEpochStart(p *partition) (int64, bool) {
	_, start, leader := p.LeaderTerm()
	if !leader {
		return 0, false
	}
	return start, true
}
