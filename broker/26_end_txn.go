package broker

// EndTxn, v0-4, served only with transactions on (txns.go): the
// coordinator persists PrepareCommit or PrepareAbort and hands the
// transaction's markers to the marker writer (txnHost.writeMarkers).
// Kafka's check: Write on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED). v5 (KIP-890 part 2:
// transaction version 2, an epoch bump at every end) is not served yet.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
	"strata/broker/txn"
)

func init() { registerTxn(26, 0, 4, handleEndTxn) }

func handleEndTxn(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	if !s.authorized(cc, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID) {
		resp.ErrorCode = errTxnIDAuth
		return resp, nil
	}
	r := s.txns.coord.EndTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit, 0)
	resp.ErrorCode = txn.CodeForVersion(26, req.Version, r.Err)
	return resp, nil
}
