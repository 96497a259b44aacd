package broker

// ListGroups, v0-5.
//
// v3 flexible; v4 state filter (KIP-518, case-insensitive); v5 type filter
// and group type ("classic", "consumer"; KIP-848). Lists the groups of
// the __consumer_offsets partitions this broker leads;
// COORDINATOR_LOAD_IN_PROGRESS while one of them is loading.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(16, 0, 5, handleListGroups) }

func handleListGroups(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	resp := s.groups.coord.ListGroups(kreq.(*kmsg.ListGroupsRequest))
	s.filterListGroups(cc, resp) // authz_groups.go
	return resp, nil
}
