package broker

// AlterConfigs, v0-2: full replacement of a resource's overrides (TOPIC,
// or BROKER: this broker's id or "" for the cluster-wide default).
// ValidateOnly checks without applying. Changes reach the logs at once.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/config"
)

func init() { register(33, 0, 2, handleAlterConfigs) }

func handleAlterConfigs(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	md := s.ctrl.Metadata()
	r := s.resolver(md)
	for _, rr := range req.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		var err error
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			if md.Topics[rr.ResourceName] == nil {
				sr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				break
			}
			var m map[string]string
			if m, err = config.AlterTopicConfigs(r, rr.Configs); err == nil && !req.ValidateOnly {
				err = s.ctrl.SetTopicConfigs(context.Background(), rr.ResourceName, m)
			}
		case kmsg.ConfigResourceTypeBroker:
			if rr.ResourceName != "" && rr.ResourceName != s.brokerIDString() {
				sr.ErrorCode = kerr.InvalidRequest.Code
				sr.ErrorMessage = kmsg.StringPtr("unexpected broker id " + rr.ResourceName)
				break
			}
			var m map[string]string
			if m, err = config.AlterBrokerConfigs(rr.ResourceName != "", rr.Configs); err == nil && !req.ValidateOnly {
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
