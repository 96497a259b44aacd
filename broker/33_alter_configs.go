package broker

// AlterConfigs, v0-2: full replacement of a resource's overrides (TOPIC,
// or BROKER: this broker's id or "" for the cluster-wide default).
// ValidateOnly checks without applying. Changes reach the logs at once.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/config"
)

func init() { registerForwarded(33, 0, 2, handleAlterConfigs) }

func handleAlterConfigs(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterConfigsRequest)
	resp := req.ResponseKind().(*kmsg.AlterConfigsResponse)
	md := s.ctrl.Metadata()
	r := s.resolver(md)
	for _, rr := range req.Resources {
		sr := kmsg.NewAlterConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		sr.ErrorCode, sr.ErrorMessage = s.alterResource(md, cc, rr.ResourceType, rr.ResourceName, req.ValidateOnly,
			func(cur map[string]string) (map[string]string, error) {
				m, err := config.AlterTopicConfigs(r, rr.Configs)
				if err == nil {
					err = r.ValidateTopicUpdate(cur, m)
				}
				return m, err
			},
			func(perBroker bool, _ map[string]string) (map[string]string, error) {
				return config.AlterBrokerConfigs(perBroker, rr.Configs)
			})
		resp.Resources = append(resp.Resources, sr)
	}
	s.applyConfigChanges(req.ValidateOnly)
	return resp, nil
}
