package broker

// OffsetCommit, v0-9.
//
// v1 generation and member id (commits from a stale generation get
// ILLEGAL_GENERATION) and a per-partition commit timestamp; v2-v4 a
// retention time (expire timestamp, OffsetCommitValue v1); v5 drops it
// (KIP-211); v6 leader epoch; v7 group.instance.id; v8 flexible; v9
// KIP-848 member epochs. A generation of -1 with no member id commits to
// a group with no members ("simple" commits). The answer waits until the
// commit is durable in __consumer_offsets. v10 (topic ids) is not served.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(8, 0, 9, handleOffsetCommit) }

func handleOffsetCommit(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetCommitRequest)
	refused := s.offsetCommitAllowed(cc, req) // authz_groups.go
	if len(req.Topics) == 0 && len(refused) > 0 {
		resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		resp.Topics = refused
		return resp, nil
	}
	resp := s.groups.coord.OffsetCommit(req)
	resp.Topics = append(resp.Topics, refused...)
	return resp, nil
}
