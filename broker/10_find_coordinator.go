package broker

// FindCoordinator, v0-5 (batched keys from v4, KIP-699).
//
// Group keys (type 0): the coordinator is the leader of partition
// abs(hashCode(group)) % partitions of __consumer_offsets, which is
// created on first use. Transaction keys (type 1, txns.go) need Describe
// on the transactional id and name the leader of its __transaction_state
// partition, created on first use. Other types are INVALID_REQUEST. v6
// (share groups, KIP-932) is not served.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
	"strata/broker/group"
	"strata/controller"
)

func init() { register(10, 0, 5, handleFindCoordinator) }

func handleFindCoordinator(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	keys := req.CoordinatorKeys
	if req.Version < 4 {
		keys = []string{req.CoordinatorKey}
	}
	for _, k := range keys {
		c := kmsg.NewFindCoordinatorResponseCoordinator()
		c.Key, c.NodeID, c.Port = k, -1, -1
		var msg string
		switch req.CoordinatorType {
		case 0:
			if !s.authorizedGroup(cc, acl.OpDescribe, k) {
				c.ErrorCode = errGroupAuth
				break
			}
			msg = s.findGroupCoordinator(cc, &c)
		case 1:
			switch {
			case !s.authorized(cc, acl.OpDescribe, acl.ResourceTransactionalID, k):
				c.ErrorCode = errTxnIDAuth
			default:
				msg = s.findTxnCoordinator(cc, &c) // txns.go
			}
		default:
			c.ErrorCode, msg = kerr.InvalidRequest.Code, "unknown coordinator type"
		}
		if msg != "" {
			c.ErrorMessage = &msg
		}
		resp.Coordinators = append(resp.Coordinators, c)
	}
	if req.Version < 4 {
		c := resp.Coordinators[0]
		resp.Coordinators = nil
		resp.ErrorCode, resp.NodeID, resp.Host, resp.Port = c.ErrorCode, c.NodeID, c.Host, c.Port
		if req.Version >= 1 {
			resp.ErrorMessage = c.ErrorMessage
		}
	}
	return resp, nil
}

// findGroupCoordinator fills c for a group id; it returns an error
// message when there is no coordinator to name.
func (s *Server) findGroupCoordinator(cc *clientConn, c *kmsg.FindCoordinatorResponseCoordinator) string {
	return s.findCoordinatorOf(cc, c, s.ensureOffsetsTopic, group.PartitionFor)
}

// findCoordinatorOf fills c with the leader of the partition of the
// coordinator's internal topic (made sure of by ensure) that partitionFor
// gives c's key; it returns an error message when there is none to name.
func (s *Server) findCoordinatorOf(cc *clientConn, c *kmsg.FindCoordinatorResponseCoordinator,
	ensure func() (*controller.Topic, error), partitionFor func(key string, partitions int32) int32) string {
	t, err := ensure()
	if err != nil {
		s.log.Warn("find coordinator", "err", err)
		c.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return err.Error()
	}
	p := partitionFor(c.Key, int32(len(t.Partitions)))
	leader := t.Partitions[p].Leader
	if b, ok := s.ctrl.Metadata().Broker(leader); ok {
		host, port, ok := cc.endpoint(b)
		if !ok {
			c.ErrorCode = kerr.CoordinatorNotAvailable.Code
			return "the coordinator has no endpoint on listener " + cc.listener()
		}
		c.NodeID, c.Host, c.Port = b.ID, host, port
		return ""
	}
	c.ErrorCode = kerr.CoordinatorNotAvailable.Code
	return "the coordinator's partition has no live leader"
}
