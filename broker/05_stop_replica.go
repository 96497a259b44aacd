package broker

// StopReplica v3-4 (API key 5), with Delete: this broker stops hosting the
// partitions named and deletes their logs. See 04_leader_and_isr.go.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(5, 3, 4, handleStopReplica) }

func handleStopReplica(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.StopReplicaRequest)
	r := s.receiver()
	if r == nil || !s.interBrokerAllowed(cc) { // interbroker.go
		resp := req.ResponseKind().(*kmsg.StopReplicaResponse)
		resp.ErrorCode = kerr.StaleControllerEpoch.Code
		if r != nil {
			resp.ErrorCode = kerr.ClusterAuthorizationFailed.Code
		}
		return resp, nil
	}
	ctx, cancel := interBrokerContext(s)
	defer cancel()
	resp := r.HandleStopReplica(ctx, req)
	resp.SetVersion(req.Version)
	if resp.ErrorCode == 0 {
		s.applyNow()
	}
	return resp, nil
}
