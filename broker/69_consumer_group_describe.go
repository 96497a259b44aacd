package broker

// ConsumerGroupDescribe, v0-1 (KIP-848; v1 adds MemberType). A group that
// does not exist, or is a classic group, is GROUP_ID_NOT_FOUND, as in
// Kafka; an empty group id is INVALID_GROUP_ID. The group's authorized
// operations (KIP-430) when asked.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
	"strata/broker/group"
)

func init() { register(69, 0, 1, handleConsumerGroupDescribe) }

func handleConsumerGroupDescribe(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ConsumerGroupDescribeRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupDescribeResponse)
	topics := s.consumerTopics()
	for _, id := range req.Groups {
		d := kmsg.NewConsumerGroupDescribeResponseGroup()
		d.Group = id
		switch {
		case id == "":
			d.ErrorCode = kerr.InvalidGroupID.Code
		case !s.authorizedGroup(cc, acl.OpDescribe, id):
			d.ErrorCode = errGroupAuth
		case groupCoordinator(s) == nil:
			d.ErrorCode = kerr.CoordinatorNotAvailable.Code
		default:
			code := groupCoordinator(s).ConsumerGroupFor(id, func(mg group.ModernGroup) {
				if g, ok := mg.(*group.ConsumerGroup); ok {
					d = g.Describe(topics)
				}
			})
			if code != 0 {
				d.ErrorCode = code
				if code == kerr.GroupIDNotFound.Code {
					d.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("Group %s not found.", id))
				}
			}
		}
		if req.IncludeAuthorizedOperations && d.ErrorCode == 0 {
			d.AuthorizedOperations = s.authorizedOperations(cc, acl.ResourceGroup, id)
		}
		resp.Groups = append(resp.Groups, d)
	}
	return resp, nil
}
