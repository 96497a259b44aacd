package broker

// InitProducerId, v0-5.
//
// Without a transactional id every call hands out a new producer id at
// epoch 0, as Kafka does; ids are reserved from the controller in blocks
// of 1000 so they are unique across restarts. Transactional ids go to the
// transaction coordinator (txn_handlers.go). v6 (KIP-939's keepPreparedTxn, two-phase commit) is not
// served: it is not advertised, and a v6 request closes the connection.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(22, 0, 5, handleInitProducerID) }

const producerIDBlock = 1000

func handleInitProducerID(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		return s.initTransactionalProducerID(cc, req, resp) // txn_handlers.go
	}
	if !s.mayWriteIdempotently(cc) { // authz.go
		resp.ErrorCode = errClusterAuth
		return resp, nil
	}
	id, err := s.nextProducerID()
	if err != nil {
		s.log.Error("allocate producer id", "err", err)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return resp, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return resp, nil
}

func (s *Server) nextProducerID() (int64, error) {
	s.pidMu.Lock()
	defer s.pidMu.Unlock()
	if s.pidNext >= s.pidEnd {
		first, err := s.ctrl.AllocateProducerIDs(context.Background(), producerIDBlock)
		if err != nil {
			return 0, err
		}
		s.pidNext, s.pidEnd = first, first+producerIDBlock
	}
	id := s.pidNext
	s.pidNext++
	return id, nil
}
