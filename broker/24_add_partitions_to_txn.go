package broker

// AddPartitionsToTxn, v0-5 (the transaction coordinator: txns.go).
//
// The clients' form: one transactional id and its partitions. Kafka's
// checks, in its order: Write on the transactional id (every partition
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then Write on each topic
// (TOPIC_AUTHORIZATION_FAILED) and its existence
// (UNKNOWN_TOPIC_OR_PARTITION); when some partition fails these, the
// others answer OPERATION_NOT_ATTEMPTED and nothing is added. Otherwise
// the coordinator's one answer goes to every partition.
//
// v4+ is KIP-890's batched form, which partition leaders send before they
// append a transactional write (txn_verify.go): several transactional
// ids, each VerifyOnly (is the partition in the producer's open
// transaction?) or not (add it, transaction version 2, for a Produce v12
// of a KIP-890 part 2 client). As Kafka's KafkaApis, only a connection
// with ClusterAction (interBrokerAllowed) may send it, else the top-level
// CLUSTER_AUTHORIZATION_FAILED; unknown partitions answer
// UNKNOWN_TOPIC_OR_PARTITION and the others of their transaction
// OPERATION_NOT_ATTEMPTED; v4 answers TRANSACTION_ABORTABLE (v5) as
// INVALID_TXN_STATE.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
	"strata/broker/txn"
)

func init() { register(24, 0, 5, handleAddPartitionsToTxn) }

func handleAddPartitionsToTxn(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version >= 4 {
		if !s.interBrokerAllowed(cc) { // interbroker.go
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
			return resp, nil
		}
		resp.Transactions = s.addPartitionsBatched(req.Version, req.Transactions)
		return resp, nil
	}
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

// addPartitionsBatched serves the transactions of an AddPartitionsToTxn
// v4+ (the brokers' form).
func (s *Server) addPartitionsBatched(version int16, txns []kmsg.AddPartitionsToTxnRequestTransaction) []kmsg.AddPartitionsToTxnResponseTransaction {
	md := s.ctrl.Metadata()
	out := make([]kmsg.AddPartitionsToTxnResponseTransaction, 0, len(txns))
	for _, tr := range txns {
		codes := map[txn.TopicPartition]int16{}
		var parts []txn.TopicPartition
		failed := false
		for _, rt := range tr.Topics {
			t := md.Topics[rt.Topic]
			for _, p := range rt.Partitions {
				tp := txn.TopicPartition{Topic: rt.Topic, Partition: p}
				if t == nil || p < 0 || int(p) >= len(t.Partitions) {
					codes[tp], failed = kerr.UnknownTopicOrPartition.Code, true
					continue
				}
				parts = append(parts, tp)
			}
		}
		switch {
		case failed:
			for _, tp := range parts {
				codes[tp] = kerr.OperationNotAttempted.Code
			}
		case tr.VerifyOnly:
			for tp, code := range s.txns.coord.VerifyPartitions(tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, parts) {
				codes[tp] = code
			}
		default:
			tv := int16(0)
			if version >= 5 {
				tv = 2
			}
			code := s.txns.coord.AddPartitions(tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, parts, tv)
			for _, tp := range parts {
				codes[tp] = code
			}
		}
		rt := kmsg.NewAddPartitionsToTxnResponseTransaction()
		rt.TransactionalID = tr.TransactionalID
		for _, t := range tr.Topics {
			st := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			st.Topic = t.Topic
			for _, p := range t.Partitions {
				sp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				sp.Partition = p
				sp.ErrorCode = codes[txn.TopicPartition{Topic: t.Topic, Partition: p}]
				if version < 5 && sp.ErrorCode == kerr.TransactionAbortable.Code {
					sp.ErrorCode = kerr.InvalidTxnState.Code
				}
				st.Partitions = append(st.Partitions, sp)
			}
			rt.Topics = append(rt.Topics, st)
		}
		out = append(out, rt)
	}
	return out
}
