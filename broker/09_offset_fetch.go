package broker

// OffsetFetch, v0-9.
//
// v2 null topics = every committed offset, top-level error; v5 leader
// epoch; v6 flexible; v7 RequireStable (no transactions yet: always
// stable); v8 several groups per request; v9 KIP-848 member id and epoch.
// Partitions with no commit answer offset -1. v10 (topic ids) is not
// served.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(9, 0, 9, handleOffsetFetch) }

func handleOffsetFetch(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetFetchRequest)
	resp := s.groups.coord.OffsetFetch(req)
	s.filterOffsetFetch(cc, req, resp) // authz_groups.go
	return resp, nil
}
