package broker

// DeleteGroups, v0-2.
//
// Only empty groups can be deleted (NON_EMPTY_GROUP); unknown groups get
// GROUP_ID_NOT_FOUND. Deletion writes tombstones for the group's offsets
// and metadata. v2 flexible.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(42, 0, 2, handleDeleteGroups) }

func handleDeleteGroups(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteGroupsRequest)
	refused := s.deleteGroupsAllowed(cc, req) // authz_groups.go
	resp := s.groups.coord.DeleteGroups(req)
	resp.Groups = append(resp.Groups, refused...)
	return resp, nil
}
