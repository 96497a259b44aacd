package broker

// JoinGroup, v0-9.
//
// v1 rebalance timeout; v4 MEMBER_ID_REQUIRED on a first join without a
// member id (KIP-394); v5 group.instance.id (static membership, KIP-345);
// v6 flexible; v7 protocol type in the response; v8 reason (KIP-800);
// v9 SkipAssignment for a static leader rejoining a Stable group
// (KIP-814). The request waits until the rebalance's join phase ends.

import (
	"net"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
)

func init() { register(11, 0, 9, handleJoinGroup) }

func handleJoinGroup(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.JoinGroupRequest)
	if !s.authorizedGroup(cc, acl.OpRead, req.Group) {
		resp := req.ResponseKind().(*kmsg.JoinGroupResponse)
		resp.ErrorCode = errGroupAuth
		return resp, nil
	}
	return s.groups.coord.JoinGroup(req, cc.clientID, cc.clientHost()), nil
}

// clientHost is the client's address as Kafka reports it ("/1.2.3.4").
func (cc *clientConn) clientHost() string {
	if cc.env != nil {
		return "/" + cc.env.host
	}
	host, _, err := net.SplitHostPort(cc.conn.RemoteAddr().String())
	if err != nil {
		host = cc.conn.RemoteAddr().String()
	}
	return "/" + host
}
