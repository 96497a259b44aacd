package broker

// AddOffsetsToTxn, v0-4 (the transaction coordinator: txns.go): the
// group's __consumer_offsets partition joins the transaction, so that the
// offsets TxnOffsetCommit writes for it commit or abort with it. Kafka's
// checks: Write on the transactional id
// (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then Read on the group
// (GROUP_AUTHORIZATION_FAILED).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
	"strata/broker/txn"
)

func init() { register(25, 0, 4, handleAddOffsetsToTxn) }

func handleAddOffsetsToTxn(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	switch {
	case !s.authorized(cc, acl.OpWrite, acl.ResourceTransactionalID, req.TransactionalID):
		resp.ErrorCode = errTxnIDAuth
	case !s.authorizedGroup(cc, acl.OpRead, req.Group):
		resp.ErrorCode = errGroupAuth
	default:
		code := s.txns.coord.AddOffsets(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Group)
		resp.ErrorCode = txn.CodeForVersion(25, req.Version, code)
	}
	return resp, nil
}
