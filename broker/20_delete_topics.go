package broker

// DeleteTopics, v1-6. By name, or by topic id from v6. Gated by
// delete.topic.enable. The topic's partitions are closed and their
// directories removed before the answer.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
)

func init() { registerForwarded(20, 1, 6, handleDeleteTopics) }

func handleDeleteTopics(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteTopicsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteTopicsResponse)
	type item struct {
		name *string
		id   [16]byte
	}
	var items []item
	if req.Version >= 6 {
		for _, t := range req.Topics {
			items = append(items, item{t.Topic, t.TopicID})
		}
	} else {
		for _, n := range req.TopicNames {
			items = append(items, item{kmsg.StringPtr(n), [16]byte{}})
		}
	}
	md := s.ctrl.Metadata()
	for _, it := range items {
		st := kmsg.NewDeleteTopicsResponseTopic()
		st.Topic, st.TopicID = it.name, it.id
		name := ""
		if it.name != nil {
			name = *it.name
		} else if n, ok := md.TopicIDs[it.id]; ok {
			name = n
			st.Topic = kmsg.StringPtr(n)
		}
		t := md.Topics[name]
		switch {
		case !s.deleteTopicEnable():
			st.ErrorCode = kerr.TopicDeletionDisabled.Code
		case it.name == nil && t == nil:
			st.ErrorCode = kerr.UnknownTopicID.Code
		case !s.authorizedTopic(cc, acl.OpDelete, name):
			st.ErrorCode = errTopicAuth
		case t == nil:
			st.ErrorCode = kerr.UnknownTopicOrPartition.Code
		default:
			st.TopicID = t.ID
			if err := s.ctrl.DeleteTopic(context.Background(), name); err != nil {
				st.ErrorCode = errCode(err)
				st.ErrorMessage = errMessage(err)
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	if err := s.reconcile(s.ctrl.Metadata()); err != nil {
		s.log.Error("delete partitions", "err", err)
	}
	return resp, nil
}
