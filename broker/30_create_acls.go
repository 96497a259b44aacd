package broker

// CreateAcls, v0-3: adds ACLs to the controller's store (the embedded
// controller's metadata file, or ZooKeeper's /kafka-acl and
// /kafka-acl-extended, from which every broker applies them); needs
// Alter on the cluster. Without an authorizer: SECURITY_DISABLED.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
)

func init() { register(30, 0, 3, handleCreateAcls) }

func handleCreateAcls(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateACLsRequest)
	resp := req.ResponseKind().(*kmsg.CreateACLsResponse)
	code, msg := s.aclsRefusal(cc, acl.OpAlter) // acls_common.go
	for i := range req.Creations {
		r := kmsg.NewCreateACLsResponseResult()
		r.ErrorCode, r.ErrorMessage = code, msg
		if code == 0 {
			b := bindingOf(req.Version, &req.Creations[i])
			if err := b.Validate(); err != nil {
				r.ErrorCode, r.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(err.Error())
			} else if err := s.authz.Create(context.Background(), b); err != nil {
				r.ErrorCode, r.ErrorMessage = kerr.UnknownServerError.Code, kmsg.StringPtr(err.Error())
			}
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}
