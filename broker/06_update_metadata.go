package broker

// UpdateMetadata v7-8 (API key 6): the live brokers and partition states the
// active controller tells every broker. See 04_leader_and_isr.go.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(6, 7, 8, handleUpdateMetadata) }

func handleUpdateMetadata(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.UpdateMetadataRequest)
	r := s.receiver()
	if r == nil || !s.interBrokerAllowed(cc) { // interbroker.go
		resp := req.ResponseKind().(*kmsg.UpdateMetadataResponse)
		resp.ErrorCode = kerr.StaleControllerEpoch.Code
		if r != nil {
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		}
		return resp, nil
	}
	ctx, cancel := interBrokerContext(s)
	defer cancel()
	resp := r.HandleUpdateMetadata(ctx, req)
	resp.SetVersion(req.Version)
	return resp, nil
}
