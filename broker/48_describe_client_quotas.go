package broker

// DescribeClientQuotas, v0-1 (KIP-546). Strata keeps no client quotas
// yet, so a valid request is answered with no entries; Kafka's
// ConfigCommand (kafka-configs --describe --entity-type users) sends it
// next to DescribeUserScramCredentials. As in Kafka, it needs
// DescribeConfigs on the cluster, and a filter is checked as Kafka
// checks it: entity types user, client-id and ip, each at most once, ip
// alone; a match only with the exact match type.

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
)

func init() { register(48, 0, 1, handleDescribeClientQuotas) }

// Kafka's quota entity types (ClientQuotaEntity).
const (
	quotaEntityUser     = "user"
	quotaEntityClientID = "client-id"
	quotaEntityIP       = "ip"
)

func handleDescribeClientQuotas(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClientQuotasResponse)
	if !s.authorizedCluster(cc, acl.OpDescribeConfigs) {
		resp.ErrorCode = errClusterAuth
		resp.ErrorMessage = kmsg.StringPtr("Cluster authorization failed.")
		return resp, nil
	}
	if err := checkQuotaFilter(req.Components); err != nil {
		resp.ErrorCode = kerr.InvalidRequest.Code
		resp.ErrorMessage = kmsg.StringPtr(err.Error())
		return resp, nil
	}
	resp.Entries = []kmsg.DescribeClientQuotasResponseEntry{} // none: Strata has no client quotas yet
	return resp, nil
}

// checkQuotaFilter validates a DescribeClientQuotas filter.
func checkQuotaFilter(components []kmsg.DescribeClientQuotasRequestComponent) error {
	seen := map[string]bool{}
	for _, c := range components {
		switch c.EntityType {
		case quotaEntityUser, quotaEntityClientID, quotaEntityIP:
		default:
			return fmt.Errorf("Custom entity type '%s' not supported", c.EntityType)
		}
		if seen[c.EntityType] {
			return fmt.Errorf("Duplicate %s filter component entity type", c.EntityType)
		}
		seen[c.EntityType] = true
		switch c.MatchType {
		case 0: // exact
			if c.Match == nil {
				return fmt.Errorf("Unexpected null match for entity type %s", c.EntityType)
			}
		case 1, 2: // default, any specified
			if c.Match != nil {
				return fmt.Errorf("Unexpected match %q for match type %d", *c.Match, c.MatchType)
			}
		default:
			return fmt.Errorf("Unexpected match type: %d", c.MatchType)
		}
	}
	if seen[quotaEntityIP] && (seen[quotaEntityUser] || seen[quotaEntityClientID]) {
		return fmt.Errorf("Invalid entity filter component combination: ip cannot be combined with user or client-id")
	}
	return nil
}
