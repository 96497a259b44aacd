package broker

// Heartbeat, v0-4.
//
// v3 group.instance.id (FENCED_INSTANCE_ID); v4 flexible.
// REBALANCE_IN_PROGRESS tells members to rejoin.

import "github.com/twmb/franz-go/pkg/kmsg"

func init() { register(12, 0, 4, handleHeartbeat) }

func handleHeartbeat(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	return s.groups.coord.Heartbeat(kreq.(*kmsg.HeartbeatRequest)), nil
}
