package broker

// IncrementalAlterConfigs, v0-1 (KIP-339): SET, DELETE, APPEND and
// SUBTRACT (the last two on LIST configs) on a resource's overrides.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/config"
)

func init() { registerForwarded(44, 0, 1, handleIncrementalAlterConfigs) }

func handleIncrementalAlterConfigs(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.IncrementalAlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	md := s.ctrl.Metadata()
	r := s.resolver(md)
	for _, rr := range req.Resources {
		sr := kmsg.NewIncrementalAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		sr.ErrorCode, sr.ErrorMessage = s.alterResource(md, cc, rr.ResourceType, rr.ResourceName, req.ValidateOnly,
			func(cur map[string]string) (map[string]string, error) {
				m, err := config.IncrementalAlterTopicConfigs(r, cur, rr.Configs)
				if err == nil {
					err = r.ValidateTopicUpdate(cur, m)
				}
				return m, err
			},
			func(perBroker bool, cur map[string]string) (map[string]string, error) {
				return config.IncrementalAlterBrokerConfigs(perBroker, cur, rr.Configs)
			})
		resp.Resources = append(resp.Resources, sr)
	}
	s.applyConfigChanges(req.ValidateOnly)
	return resp, nil
}
