package broker

// DescribeProducers, v0 (KIP-664): the producers a partition's replica
// knows, from its producer state (plog.Log.Producers): id, epoch, last
// sequence (-1 none), last timestamp, coordinator epoch of the last
// transaction marker (-1 none) and the first offset of the producer's
// open transaction in the partition (-1 none), as kafka-transactions.sh
// describe-producers shows them.
//
// As in Kafka, READ on the topic is required (TOPIC_AUTHORIZATION_FAILED
// for every partition of it otherwise), a topic or partition the metadata
// does not hold is UNKNOWN_TOPIC_OR_PARTITION, and any replica of the
// partition answers from its own log (the admin client sends to the
// leader, or to the broker DescribeProducersOptions.brokerId names): a
// broker without a replica answers NOT_LEADER_OR_FOLLOWER, one whose log
// directory is offline KAFKA_STORAGE_ERROR.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
)

func init() { register(61, 0, 0, handleDescribeProducers) }

func handleDescribeProducers(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	md := s.ctrl.Metadata()
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		allowed := s.authorizedTopic(cc, acl.OpRead, rt.Topic)
		t := md.Topics[rt.Topic]
		for _, part := range rt.Partitions {
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = part
			p := s.partition(rt.Topic, part)
			switch {
			case !allowed:
				sp.ErrorCode = errTopicAuth
			case t == nil || part < 0 || int(part) >= len(t.Partitions):
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case p != nil && s.offline(p): // logdir.go
				sp.ErrorCode = kerr.KafkaStorageError.Code
			case p == nil:
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
			default:
				for _, pi := range p.Log().Producers() {
					ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
					ap.ProducerID, ap.ProducerEpoch = pi.ProducerID, int32(pi.ProducerEpoch)
					ap.LastSequence, ap.LastTimestamp = pi.LastSequence, pi.LastTimestamp
					ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = pi.CoordinatorEpoch, pi.CurrentTxnStartOffset
					sp.ActiveProducers = append(sp.ActiveProducers, ap)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
