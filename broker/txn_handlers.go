package broker

// InitProducerId with a transactional id, for 22_init_producer_id.go. Kafka's checks: Write on the
// transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); the
// coordinator's answer is mapped to the request's version
// (txn.CodeForVersion: PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before
// v4).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
	"strata/broker/txn"
)

func (s *Server) initTransactionalProducerID(cc *clientConn, req *kmsg.InitProducerIDRequest,
	resp *kmsg.InitProducerIDResponse) (kmsg.Response, error) {
	id := *req.TransactionalID
	if !s.authorized(cc, acl.OpWrite, acl.ResourceTransactionalID, id) {
		resp.ErrorCode = errTxnIDAuth
		return resp, nil
	}
	pid, epoch := int64(-1), int16(-1)
	if req.Version >= 3 { // KIP-360: the producer's current id and epoch
		pid, epoch = req.ProducerID, req.ProducerEpoch
	}
	r := s.txns.coord.InitProducerID(id, req.TransactionTimeoutMillis, pid, epoch)
	resp.ErrorCode = txn.CodeForVersion(22, req.Version, r.Err)
	if r.Err == 0 {
		resp.ProducerID, resp.ProducerEpoch = r.ProducerID, r.ProducerEpoch
	}
	return resp, nil
}
