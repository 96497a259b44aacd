package broker

// IncrementalAlterConfigs, v0-1 (KIP-339): SET, DELETE, APPEND and
// SUBTRACT (the last two on LIST configs) on a resource's overrides.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/config"
)

func init() { register(44, 0, 1, handleIncrementalAlterConfigs) }

func handleIncrementalAlterConfigs(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	md := s.ctrl.Metadata()
	r := s.resolver(md)
	for _, rr := range req.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		var err error
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			t := md.Topics[rr.ResourceName]
			if t == nil {
				sr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				break
			}
			var m map[string]string
			if m, err = config.IncrementalAlterTopicConfigs(r, t.Configs, rr.Configs); err == nil && !req.ValidateOnly {
				err = s.ctrl.SetTopicConfigs(context.Background(), rr.ResourceName, m)
			}
		case kmsg.ConfigResourceTypeBroker:
			if rr.ResourceName != "" && rr.ResourceName != s.brokerIDString() {
				sr.ErrorCode = kerr.InvalidRequest.Code
				sr.ErrorMessage = kmsg.StringPtr("unexpected broker id " + rr.ResourceName)
				break
			}
			var m map[string]string
			if m, err = config.IncrementalAlterBrokerConfigs(rr.ResourceName != "", md.BrokerConfigs[rr.ResourceName], rr.Configs); err == nil && !req.ValidateOnly {
				err = s.ctrl.SetBrokerConfigs(context.Background(), rr.ResourceName, m)
			}
		default:
			sr.ErrorCode = kerr.InvalidRequest.Code
			sr.ErrorMessage = kmsg.StringPtr("unsupported resource type")
		}
		if err != nil {
			sr.ErrorCode, sr.ErrorMessage = errCode(err), errMessage(err)
		}
		resp.Resources = append(resp.Resources, sr)
	}
	if !req.ValidateOnly {
		if err := s.reconcile(s.ctrl.Metadata()); err != nil {
			s.log.Error("apply configs", "err", err)
		}
	}
	return resp, nil
}
