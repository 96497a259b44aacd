package broker

// OffsetDelete, v0 (KIP-496).
//
// Deletes committed offsets of a group; for a consumer group with members,
// offsets of topics it subscribes to are refused with
// GROUP_SUBSCRIBED_TO_TOPIC; other non-empty groups get NON_EMPTY_GROUP.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(47, 0, 0, handleOffsetDelete) }

func handleOffsetDelete(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetDeleteRequest)
	refuse, refused := s.offsetDeleteAllowed(cc, req) // authz_groups.go
	if refuse {
		resp := req.ResponseKind().(*kmsg.OffsetDeleteResponse)
		resp.ErrorCode = errGroupAuth
		return resp, nil
	}
	resp := s.groups.coord.OffsetDelete(req)
	resp.Topics = append(resp.Topics, refused...)
	return resp, nil
}
