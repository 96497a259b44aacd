package broker

// AlterClientQuotas, v0-1 (KIP-546). Strata does not enforce client
// quotas yet, so it stores none: every entry is refused with
// INVALID_REQUEST and a message that says so, rather than accepted and
// ignored. As in Kafka, the request needs AlterConfigs on the cluster
// (CLUSTER_AUTHORIZATION_FAILED for each entry otherwise).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
)

func init() { register(49, 0, 1, handleAlterClientQuotas) }

// quotasUnsupported is the message of every refused entry.
const quotasUnsupported = "Strata does not support client quotas yet: no quota is stored or enforced"

func handleAlterClientQuotas(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterClientQuotasRequest)
	resp := req.ResponseKind().(*kmsg.AlterClientQuotasResponse)
	code, msg := kerr.InvalidRequest.Code, quotasUnsupported
	if !s.authorizedCluster(cc, acl.OpAlterConfigs) {
		code, msg = errClusterAuth, "Cluster authorization failed."
	}
	for _, e := range req.Entries {
		re := kmsg.NewAlterClientQuotasResponseEntry()
		re.ErrorCode, re.ErrorMessage = code, kmsg.StringPtr(msg)
		for _, c := range e.Entity {
			rc := kmsg.NewAlterClientQuotasResponseEntryEntity()
			rc.Type, rc.Name = c.Type, c.Name
			re.Entity = append(re.Entity, rc)
		}
		resp.Entries = append(resp.Entries, re)
	}
	return resp, nil
}
