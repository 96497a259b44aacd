package broker

// DeleteAcls, v0-3: removes the ACLs each filter selects and answers
// them; needs Alter on the cluster. Without an authorizer:
// SECURITY_DISABLED.

import (
	"context"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
)

func init() { register(31, 0, 3, handleDeleteAcls) }

func handleDeleteAcls(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DeleteACLsRequest)
	resp := req.ResponseKind().(*kmsg.DeleteACLsResponse)
	code, msg := s.aclsRefusal(cc, acl.OpAlter) // acls_common.go
	for _, rf := range req.Filters {
		r := kmsg.NewDeleteACLsResponseResult()
		r.ErrorCode, r.ErrorMessage = code, msg
		if code == 0 {
			f := filterOf(req.Version, rf.ResourceType, rf.ResourceName, rf.ResourcePatternType, rf.Principal, rf.Host, rf.Operation, rf.PermissionType)
			if m := validFilter(f); m != "" {
				r.ErrorCode, r.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(m)
			} else {
				deleted, err := s.authz.Delete(context.Background(), f)
				if err != nil {
					r.ErrorCode, r.ErrorMessage = kerr.UnknownServerError.Code, kmsg.StringPtr(err.Error())
				}
				for _, b := range deleted {
					m := kmsg.NewDeleteACLsResponseResultMatchingACL()
					m.ResourceType, m.ResourceName, m.ResourcePatternType = kmsg.ACLResourceType(b.Type), b.Name, kmsg.ACLResourcePatternType(b.Pattern)
					m.Principal, m.Host = b.Principal, b.Host
					m.Operation, m.PermissionType = kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
					r.MatchingACLs = append(r.MatchingACLs, m)
				}
			}
		}
		resp.Results = append(resp.Results, r)
	}
	return resp, nil
}
