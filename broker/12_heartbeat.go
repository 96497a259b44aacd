package broker

// Heartbeat, v0-4.
//
// v3 group.instance.id (FENCED_INSTANCE_ID); v4 flexible.
// REBALANCE_IN_PROGRESS tells members to rejoin.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
)

func init() { register(12, 0, 4, handleHeartbeat) }

func handleHeartbeat(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.HeartbeatRequest)
	if !s.authorizedGroup(cc, acl.OpRead, req.Group) {
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = errGroupAuth
		return resp, nil
	}
	return s.groups.coord.Heartbeat(req), nil
}
