package broker

// CreatePartitions, v0-3. Grows a topic; shrinking or keeping the count is
// INVALID_PARTITIONS. Explicit assignments are accepted when they name
// existing brokers. Growth past the broker's file descriptor budget is
// INVALID_PARTITIONS (fd_budget.go).

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
)

func init() { registerForwarded(37, 0, 3, handleCreatePartitions) }

func handleCreatePartitions(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	md := s.ctrl.Metadata()
	var pending int64 // partition replicas added by this request so far (fd_budget.go)
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		t := md.Topics[rt.Topic]
		switch {
		case seen[rt.Topic] > 1:
			st.ErrorCode = kerr.InvalidRequest.Code
			st.ErrorMessage = kmsg.StringPtr("topic named more than once in the request")
		case !s.authorizedTopic(cc, acl.OpAlter, rt.Topic):
			st.ErrorCode = errTopicAuth
		case t == nil:
			st.ErrorCode = kerr.UnknownTopicOrPartition.Code
		case rt.Assignment != nil && len(rt.Assignment) != int(rt.Count)-len(t.Partitions):
			st.ErrorCode = kerr.InvalidReplicaAssignment.Code
			st.ErrorMessage = kmsg.StringPtr(fmt.Sprintf("%d assignments given for %d new partitions", len(rt.Assignment), int(rt.Count)-len(t.Partitions)))
		default:
			var replicas int64
			if int(rt.Count) > len(t.Partitions) && len(t.Partitions) > 0 {
				replicas = int64(int(rt.Count)-len(t.Partitions)) * int64(len(t.Partitions[0].Replicas))
			}
			if err := s.checkDescriptorBudget(md, pending+replicas); err != nil {
				st.ErrorCode = errCode(err)
				st.ErrorMessage = errMessage(err)
				break
			}
			if err := s.ctrl.CreatePartitions(context.Background(), rt.Topic, rt.Count, req.ValidateOnly); err != nil {
				st.ErrorCode = errCode(err)
				st.ErrorMessage = errMessage(err)
				break
			}
			pending += replicas
		}
		resp.Topics = append(resp.Topics, st)
	}
	if !req.ValidateOnly {
		if err := s.reconcile(s.ctrl.Metadata()); err != nil {
			s.log.Error("open new partitions", "err", err)
		}
	}
	return resp, nil
}
