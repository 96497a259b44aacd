package broker

// DescribeGroups, v0-6.
//
// v3 authorized operations (left unset: no ACLs); v4 instance ids; v5
// flexible; v6 GROUP_ID_NOT_FOUND with a message for unknown groups
// (KIP-1043; before v6 they are described as Dead). Member metadata and
// assignments are given only for Stable groups, as Kafka does.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(15, 0, 6, handleDescribeGroups) }

func handleDescribeGroups(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	resp := s.groups.coord.DescribeGroups(kreq.(*kmsg.DescribeGroupsRequest))
	s.filterDescribeGroups(cc, resp) // authz_groups.go
	return resp, nil
}
