package broker

// AddPartitionsToTxn, v0-3, served only with transactions on (txns.go).
//
// The clients' form: one transactional id and its partitions. Kafka's
// checks, in its order: Write on the transactional id (every partition
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then Write on each topic
// (TOPIC_AUTHORIZATION_FAILED) and its existence
// (UNKNOWN_TOPIC_OR_PARTITION); when some partition fails these, the
// others answer OPERATION_NOT_ATTEMPTED and nothing is added. Otherwise
// the coordinator's one answer goes to every partition. v4+ (KIP-890's
// batched form, which brokers send to verify a transactional write) is
// not served yet: it is not advertised, and is answered
// UNSUPPORTED_VERSION.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
	"strata/broker/txn"
)

func init() { registerTxn(24, 0, 3, handleAddPartitionsToTxn) }

func handleAddPartitionsToTxn(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	codes := make([][]int16, len(req.Topics))
	fill := func(code int16) {
		for i, rt := range req.Topics {
			for j := range rt.Partitions {
				if codes[i][j] == 0 {
					codes[i][j] = code
				}
			}
		}
	}
	for i, rt := range req.Topics {
		codes[i] = make([]int16, len(rt.Partitions))
	}
	if !s.authorized(cc, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID) {
		fill(errTxnIDAuth)
	} else {
		md := s.ctrl.Metadata()
		failed := false
		var parts []txn.TopicPartition
		for i, rt := range req.Topics {
			allowed := s.authorizedTopic(cc, acl.OpWrite, rt.Topic)
			t := md.Topics[rt.Topic]
			for j, p := range rt.Partitions {
				switch {
				case !allowed:
					codes[i][j], failed = errTopicAuth, true
				case t == nil || p < 0 || int(p) >= len(t.Partitions):
					codes[i][j], failed = kerr.UnknownTopicOrPartition.Code, true
				default:
					parts = append(parts, txn.TopicPartition{Topic: rt.Topic, Partition: p})
				}
			}
		}
		if failed {
			fill(kerr.OperationNotAttempted.Code)
		} else {
			code := s.txns.coord.AddPartitions(req.TransactionalID, req.ProducerID, req.ProducerEpoch, parts, 0)
			fill(txn.CodeForVersion(24, req.Version, code))
		}
	}
	for i, rt := range req.Topics {
		st := kmsg.NewAddPartitionsToTxnResponseTopic()
		st.Topic = rt.Topic
		for j, p := range rt.Partitions {
			sp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
			sp.Partition, sp.ErrorCode = p, codes[i][j]
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp, nil
}
