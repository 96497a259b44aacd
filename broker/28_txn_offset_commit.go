package broker

// TxnOffsetCommit, v0-5.
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
// As a Produce (txn_verify.go, KIP-890), when the producer has no open
// transaction in the group's __consumer_offsets partition, the group
// coordinator first asks the transaction coordinator: v5 (sent by
// transaction version 2 clients, which send no AddOffsetsToTxn) adds the
// partition to the transaction when transaction.version is 2, older
// versions only verify it. A refusal answers every partition, with
// Kafka's mapping (INVALID_PRODUCER_EPOCH, TRANSACTION_ABORTABLE from v4
// else INVALID_TXN_STATE, COORDINATOR_NOT_AVAILABLE when the transaction
// coordinator cannot answer).

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
	"strata/broker/txn"
)

// txnOffsetCommitMaxVersion is the highest version handleTxnOffsetCommit
// serves.
const txnOffsetCommitMaxVersion = 5

func init() { register(28, 0, txnOffsetCommitMaxVersion, handleTxnOffsetCommit) }

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
	if code := s.verifyTxnOffsets(req); code != 0 {
		resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
		for _, t := range req.Topics {
			resp.Topics = append(resp.Topics, refusedTxnTopic(t, code))
		}
		resp.Topics = append(resp.Topics, refused...)
		return resp, nil
	}
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

// verifyTxnOffsets verifies (or, v5 with transaction version 2, adds) the
// group's __consumer_offsets partition in the producer's transaction when
// this broker leads it and the producer has no open transaction there;
// it returns the code to answer, 0 to go on.
func (s *Server) verifyTxnOffsets(req *kmsg.TxnOffsetCommitRequest) int16 {
	if len(req.Topics) == 0 || s.txns == nil { // no coordinator to ask (tests call the handler directly)
		return 0
	}
	part := s.offsetsPartitionFor(req.Group)
	p := s.partition(offsetsTopic, part)
	if p == nil || !s.isLeader(p) || p.Log().HasOngoingTransaction(req.ProducerID, req.ProducerEpoch) {
		return 0 // the group coordinator answers
	}
	verifyOnly := req.Version < 5 || s.transactionVersion() < 2
	tp := txn.TopicPartition{Topic: offsetsTopic, Partition: part}
	codes, err := s.askTxnCoordinator(req.TransactionalID, req.ProducerID, req.ProducerEpoch, []txn.TopicPartition{tp}, verifyOnly, verifyDeadline(time.Now(), 0))
	code := kerr.NetworkException.Code
	if err == nil {
		var ok bool
		if code, ok = codes[tp]; !ok {
			code = kerr.UnknownServerError.Code
		}
	}
	// Kafka's TxnOffsetCommit versions to its verification errors: v4+
	// knows TRANSACTION_ABORTABLE (as Produce v11+).
	pv := int16(10)
	if req.Version >= 4 {
		pv = 11
	}
	r, refused := produceVerifyRefusal(pv, code, err)
	switch {
	case !refused:
		return 0
	case r.code == kerr.NotEnoughReplicas.Code:
		return kerr.CoordinatorNotAvailable.Code
	}
	return r.code
}
