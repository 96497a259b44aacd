package broker

// FindCoordinator, v0-4 (batched keys from v4, KIP-699).
//
// There is no group or transaction coordinator yet: every key is answered
// COORDINATOR_NOT_AVAILABLE, which clients treat as "try again later".
// The API is served anyway because librdkafka enables lz4 only when a
// broker lists FindCoordinator.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(10, 0, 4, handleFindCoordinator) }

func handleFindCoordinator(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	msg := kmsg.StringPtr("the group and transaction coordinators are not available yet")
	if req.Version < 4 {
		resp.ErrorCode, resp.ErrorMessage = kerr.CoordinatorNotAvailable.Code, msg
		resp.NodeID, resp.Port = -1, -1
		return resp, nil
	}
	for _, k := range req.CoordinatorKeys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Port = k, -1, -1
		c.ErrorCode, c.ErrorMessage = kerr.CoordinatorNotAvailable.Code, msg
		resp.Coordinators = append(resp.Coordinators, c)
	}
	return resp, nil
}
