package broker

// SyncGroup, v0-5.
//
// v3 group.instance.id; v4 flexible; v5 protocol type and name in request
// and response, checked against the group's (INCONSISTENT_GROUP_PROTOCOL).
// The leader's assignment is persisted (GroupMetadataValue) before any
// member is answered; followers wait for it.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
)

func init() { register(14, 0, 5, handleSyncGroup) }

func handleSyncGroup(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SyncGroupRequest)
	if !s.authorizedGroup(cc, acl.OpRead, req.Group) {
		resp := req.ResponseKind().(*kmsg.SyncGroupResponse)
		resp.ErrorCode = errGroupAuth
		return resp, nil
	}
	return s.groups.coord.SyncGroup(req), nil
}
