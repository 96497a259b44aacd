package broker

// DescribeConfigs, v1-4. TOPIC (2) and BROKER (4) resources; a BROKER
// resource named "" is the cluster-wide dynamic default. Sources, synonyms
// (v1+ on request), types and documentation (v3+) follow Kafka; sensitive
// values are null. A tiered topic (remote.storage.enable=true on a broker
// with tiered storage) also gets two read-only entries that are not
// configs, strata.local.log.size.bytes and strata.remote.log.size.bytes
// (remotelog/retention.go); a broker with tiered storage two more,
// strata.snapshot.written.ms and strata.snapshot.cluster.id
// (metadata_snapshot.go).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
	"strata/broker/config"
)

func init() { register(32, 1, 4, handleDescribeConfigs) }

type kmsgConfig = kmsg.DescribeConfigsResponseResourceConfig

func handleDescribeConfigs(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeConfigsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeConfigsResponse)
	md := s.ctrl.Metadata()
	r := s.resolver(md)
	for _, rr := range req.Resources {
		sr := kmsg.NewDescribeConfigsResponseResource()
		sr.ResourceType, sr.ResourceName = rr.ResourceType, rr.ResourceName
		o := config.DescribeOptions{Names: rr.ConfigNames, IncludeSynonyms: req.IncludeSynonyms, IncludeDocumentation: req.IncludeDocumentation, Version: req.Version}
		if code := s.configsRefusal(cc, acl.OpDescribeConfigs, rr.ResourceType, rr.ResourceName); code != 0 { // authz.go
			sr.ErrorCode = code
			resp.Resources = append(resp.Resources, sr)
			continue
		}
		switch rr.ResourceType {
		case kmsg.ConfigResourceTypeTopic:
			t := md.Topics[rr.ResourceName]
			if t == nil {
				sr.ErrorCode = kerr.UnknownTopicOrPartition.Code
				break
			}
			sr.Configs = config.DescribeTopic(r, t.Configs, o)
			sr.Configs = append(sr.Configs, s.tierSizeConfigs(t, o)...)
		case kmsg.ConfigResourceTypeBroker:
			switch rr.ResourceName {
			case "":
				sr.Configs = config.DescribeBrokerDefault(r, o)
			case s.brokerIDString():
				sr.Configs = config.DescribeBroker(r, o)
				sr.Configs = append(sr.Configs, s.snapshotConfigs(o)...)
			default:
				sr.ErrorCode = kerr.InvalidRequest.Code
				sr.ErrorMessage = kmsg.StringPtr("unexpected broker id " + rr.ResourceName + ", expected " + s.brokerIDString() + " or empty")
			}
		default:
			sr.ErrorCode = kerr.InvalidRequest.Code
			sr.ErrorMessage = kmsg.StringPtr("unsupported resource type")
		}
		resp.Resources = append(resp.Resources, sr)
	}
	return resp, nil
}
