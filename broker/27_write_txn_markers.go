package broker

// WriteTxnMarkers, v0-2.
//
// The transaction coordinator's request to the leaders of a transaction's
// partitions (txn_markers.go sends it): write a COMMIT or ABORT control
// batch at the producer's id and epoch, stamped with the coordinator
// epoch (v2 adds KIP-1228's transaction version, which the partition's
// producer state checks the epoch against). As Kafka's KafkaApis:
//
//   - only a connection interBrokerAllowed admits (ClusterAction on the
//     cluster, on the inter-broker or control-plane listener;
//     interbroker.go) may send it: otherwise every partition answers
//     CLUSTER_AUTHORIZATION_FAILED;
//   - a partition unknown to the metadata answers
//     UNKNOWN_TOPIC_OR_PARTITION, one this broker does not lead
//     NOT_LEADER_OR_FOLLOWER, one whose log directory is offline
//     KAFKA_STORAGE_ERROR, one whose ISR is below min.insync.replicas
//     NOT_ENOUGH_REPLICAS;
//   - the marker is appended as an acks=-1 produce, under the applied
//     leadership (replica.Partition.AppendControlAsLeader), and answered
//     once the high watermark passes it (NOT_ENOUGH_REPLICAS_AFTER_APPEND,
//     NOT_LEADER_OR_FOLLOWER, REQUEST_TIMED_OUT as a produce); the
//     partition's producer state refuses a stale producer epoch
//     (INVALID_PRODUCER_EPOCH) or coordinator epoch
//     (TRANSACTION_COORDINATOR_FENCED);
//   - once a marker in a __consumer_offsets partition is durable, the
//     group coordinator completes the producer's transactional offsets
//     there (group.Coordinator.CompleteTxn): a COMMIT makes them the
//     group's committed offsets, an ABORT drops them.
//
// A drain (drain.go) does not refuse markers: it waits for open
// transactions to end, which needs them.

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/plog"
	"strata/broker/replica"
	"strata/controller"
)

func init() { register(27, 0, 2, handleWriteTxnMarkers) }

// markerAppendTimeout bounds the wait for a marker's replication (Kafka:
// request.timeout.ms, 30 s by default).
const markerAppendTimeout = 30 * time.Second

func handleWriteTxnMarkers(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.WriteTxnMarkersRequest)
	if !s.interBrokerAllowed(cc) { // interbroker.go
		resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
		for _, m := range req.Markers {
			resp.Markers = append(resp.Markers, refusedMarker(m, kerr.ClusterAuthorizationFailed.Code))
		}
		return resp, nil
	}
	return s.writeTxnMarkers(req), nil
}

// refusedMarker answers every partition of m with code.
func refusedMarker(m kmsg.WriteTxnMarkersRequestMarker, code int16) kmsg.WriteTxnMarkersResponseMarker {
	rm := kmsg.NewWriteTxnMarkersResponseMarker()
	rm.ProducerID = m.ProducerID
	for _, t := range m.Topics {
		rt := kmsg.NewWriteTxnMarkersResponseMarkerTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewWriteTxnMarkersResponseMarkerTopicPartition()
			rp.Partition, rp.ErrorCode = p, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		rm.Topics = append(rm.Topics, rt)
	}
	return rm
}

// writeTxnMarkers writes the markers of req in the partitions this broker
// leads and answers each partition; the coordinator's marker sender calls
// it directly for the partitions this broker leads.
func (s *Server) writeTxnMarkers(req *kmsg.WriteTxnMarkersRequest) *kmsg.WriteTxnMarkersResponse {
	resp := req.ResponseKind().(*kmsg.WriteTxnMarkersResponse)
	resp.SetVersion(req.Version)
	md := s.ctrl.Metadata()
	// The appends of every marker first, then one wait for all of them,
	// as an acks=-1 produce of many partitions. The waits index into a
	// produce response that mirrors resp (replica.AwaitReplication).
	var shadow kmsg.ProduceResponse
	var waits []replica.ProduceWait
	type offsetsDone struct {
		marker, topic, part int
		partition           int32
	}
	var offsets []offsetsDone
	for mi, m := range req.Markers {
		rm := refusedMarker(m, 0)
		tv := int16(0)
		if req.Version >= 2 {
			tv = int16(m.TransactionVersion)
		}
		marker := plog.EndTxnMarker{Type: plog.ControlAbort, CoordinatorEpoch: m.CoordinatorEpoch}
		if m.Committed {
			marker.Type = plog.ControlCommit
		}
		for ti, t := range m.Topics {
			for pi, part := range t.Partitions {
				rp := &rm.Topics[ti].Partitions[pi]
				p, code := s.markerPartition(md, t.Topic, part)
				if code == 0 {
					var info plog.AppendInfo
					var err error
					if info, err = p.AppendControlAsLeader(m.ProducerID, m.ProducerEpoch, marker, tv); err != nil {
						code = errCode(err)
						if code == kerr.UnknownServerError.Code {
							s.log.Error("write transaction marker", "topic", t.Topic, "partition", part, "err", err)
						}
					} else {
						p.AdvanceHW(p.Log().LogEndOffset()) // also wakes followers' fetches
						st := kmsg.NewProduceResponseTopic()
						st.Partitions = []kmsg.ProduceResponseTopicPartition{kmsg.NewProduceResponseTopicPartition()}
						shadow.Topics = append(shadow.Topics, st)
						waits = append(waits, replica.ProduceWait{P: p, Required: info.LastOffset + 1, Topic: len(shadow.Topics) - 1})
						if t.Topic == offsetsTopic {
							offsets = append(offsets, offsetsDone{mi, ti, pi, part})
						}
					}
				}
				rp.ErrorCode = code
			}
		}
		resp.Markers = append(resp.Markers, rm)
	}
	if len(waits) == 0 {
		return resp
	}
	s.replicas.AwaitReplication(&shadow, waits, time.Now().Add(markerAppendTimeout),
		func(sp *kmsg.ProduceResponseTopicPartition, code int16, _ string) { sp.ErrorCode = code })
	// Copy the waits' outcome back, in the order they were added.
	w := 0
	for mi := range req.Markers {
		for ti := range resp.Markers[mi].Topics {
			for pi := range resp.Markers[mi].Topics[ti].Partitions {
				rp := &resp.Markers[mi].Topics[ti].Partitions[pi]
				if rp.ErrorCode == 0 {
					rp.ErrorCode = shadow.Topics[w].Partitions[0].ErrorCode
					w++
				}
			}
		}
	}
	for _, o := range offsets {
		m := req.Markers[o.marker]
		if resp.Markers[o.marker].Topics[o.topic].Partitions[o.part].ErrorCode == 0 && s.groups != nil {
			s.groups.coord.CompleteTxn(o.partition, m.ProducerID, m.Committed)
		}
	}
	return resp
}

// markerPartition is the partition a marker goes to, when this broker
// leads it and may append to it; otherwise the error code answered.
func (s *Server) markerPartition(md *controller.Metadata, topic string, part int32) (*partition, int16) {
	t := md.Topics[topic]
	if t == nil || part < 0 || int(part) >= len(t.Partitions) {
		return nil, kerr.UnknownTopicOrPartition.Code
	}
	p := s.partition(topic, part)
	switch {
	case p == nil || p.TopicID() != t.ID || !s.isLeader(p):
		return nil, kerr.NotLeaderForPartition.Code
	case s.offline(p): // logdir.go
		return nil, kerr.KafkaStorageError.Code
	case p.Restoring.Load():
		return nil, kerr.NotLeaderForPartition.Code // retried until the leader has its log end
	case p.ISRSize() < int(p.MinISR()):
		return nil, kerr.NotEnoughReplicas.Code
	}
	return p, 0
}
