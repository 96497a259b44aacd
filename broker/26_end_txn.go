package broker

// EndTxn, v0-5 (the transaction coordinator: txns.go): the
// coordinator persists PrepareCommit or PrepareAbort and hands the
// transaction's markers to the marker writer (txnHost.writeMarkers).
// Kafka's check: Write on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
//
// v5 is KIP-890 part 2, as Kafka's clientTransactionVersion: the end is
// under transaction version 2 (the coordinator bumps the epoch at every
// end and answers the producer id and epoch to use next). Clients send
// v5 only when transaction.version is finalized at 2 (ApiVersions), as
// Kafka, which advertises v5 whatever the feature level.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
	"strata/broker/txn"
)

func init() { register(26, 0, 5, handleEndTxn) }

func handleEndTxn(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	if !s.authorized(cc, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID) {
		resp.ErrorCode = errTxnIDAuth
		return resp, nil
	}
	tv := int16(0)
	if req.Version >= 5 {
		tv = 2
	}
	r := s.txns.coord.EndTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit, tv)
	resp.ErrorCode = txn.CodeForVersion(26, req.Version, r.Err)
	if req.Version >= 5 {
		resp.ProducerID, resp.ProducerEpoch = r.ProducerID, r.ProducerEpoch
	}
	return resp, nil
}
