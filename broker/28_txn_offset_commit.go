package broker

// TxnOffsetCommit, v0-4.
//
// A transactional producer commits a consumer group's offsets inside its
// transaction (KIP-98, after AddOffsetsToTxn); v2 adds leader epochs, v3
// is flexible and adds KIP-447's generation, member id and group instance
// id, so a zombie member of an old generation is fenced. The group
// coordinator (package group, txn_offsets.go) writes them to
// __consumer_offsets as a transactional batch and keeps them pending until
// the transaction's marker; the answer waits until the batch is durable.
//
// Authorization, as Kafka's KafkaApis: Write on the transactional id, else
// every partition gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED; Read on the
// group, else GROUP_AUTHORIZATION_FAILED; topics without Read get
// TOPIC_AUTHORIZATION_FAILED, unknown partitions UNKNOWN_TOPIC_OR_PARTITION.
//
// Not served yet: v5 (KIP-890 transaction version 2: the coordinator
// verifies the transaction before writing) and v6 (topic ids). Served
// only with transactions on (txns.go).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
)

// txnOffsetCommitMaxVersion is the highest version handleTxnOffsetCommit
// serves.
const txnOffsetCommitMaxVersion = 4

func init() { registerTxn(28, 0, txnOffsetCommitMaxVersion, handleTxnOffsetCommit) }

func handleTxnOffsetCommit(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	code := int16(0)
	switch {
	case !s.authorized(cc, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID):
		code = errTxnIDAuth
	case !s.authorizedGroup(cc, acl.OpRead, req.Group):
		code = errGroupAuth
	}
	if code != 0 {
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, t := range req.Topics {
			resp.Topics = append(resp.Topics, refusedTxnTopic(t, code))
		}
		return resp, nil
	}
	var keep []kmsg.TxnOffsetCommitRequestTopic
	var refused []kmsg.TxnOffsetCommitResponseTopic
	for _, t := range req.Topics {
		if s.authorizedTopic(cc, acl.OpRead, t.Topic) {
			keep = append(keep, t)
		} else {
			refused = append(refused, refusedTxnTopic(t, errTopicAuth))
		}
	}
	req.Topics = keep
	resp := s.groups.coord.TxnOffsetCommit(req)
	resp.Topics = append(resp.Topics, refused...)
	return resp, nil
}

// refusedTxnTopic answers every partition of t with code.
func refusedTxnTopic(t kmsg.TxnOffsetCommitRequestTopic, code int16) kmsg.TxnOffsetCommitResponseTopic {
	rt := kmsg.NewTxnOffsetCommitResponseTopic()
	rt.Topic = t.Topic
	for _, p := range t.Partitions {
		rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
		rp.Partition, rp.ErrorCode = p.Partition, code
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}
