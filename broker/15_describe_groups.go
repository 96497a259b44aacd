package broker

// DescribeGroups, v0-6.
//
// v3 authorized operations (of each group described without error,
// when asked); v4 instance ids; v5
// flexible; v6 GROUP_ID_NOT_FOUND with a message for unknown groups
// (KIP-1043; before v6 they are described as Dead). Member metadata and
// assignments are given only for Stable groups, as Kafka does.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
)

func init() { register(15, 0, 6, handleDescribeGroups) }

func handleDescribeGroups(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeGroupsRequest)
	resp := s.groups.coord.DescribeGroups(req)
	s.filterDescribeGroups(cc, resp) // authz_groups.go
	if req.Version >= 3 && req.IncludeAuthorizedOperations {
		for i := range resp.Groups {
			if g := &resp.Groups[i]; g.ErrorCode == 0 {
				g.AuthorizedOperations = s.authorizedOperations(cc, acl.ResourceGroup, g.Group)
			}
		}
	}
	return resp, nil
}
