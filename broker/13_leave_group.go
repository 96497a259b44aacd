package broker

// LeaveGroup, v0-5.
//
// v3 batched members with instance ids (KIP-345): a static member can be
// removed by instance id alone; v4 flexible; v5 reason (KIP-800).

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
)

func init() { register(13, 0, 5, handleLeaveGroup) }

func handleLeaveGroup(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.LeaveGroupRequest)
	if !s.authorizedGroup(cc, acl.OpRead, req.Group) {
		resp := req.ResponseKind().(*kmsg.LeaveGroupResponse)
		resp.ErrorCode = errGroupAuth
		return resp, nil
	}
	return s.groups.coord.LeaveGroup(req), nil
}
