package broker

// DescribeAcls, v0-3: the ACLs a filter selects; needs Describe on the
// cluster. Without an authorizer: SECURITY_DISABLED.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
)

func init() { register(29, 0, 3, handleDescribeAcls) }

func handleDescribeAcls(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeACLsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeACLsResponse)
	if code, msg := s.aclsRefusal(cc, acl.OpDescribe); code != 0 { // acls_common.go
		resp.ErrorCode, resp.ErrorMessage = code, msg
		return resp, nil
	}
	f := filterOf(req.Version, req.ResourceType, req.ResourceName, req.ResourcePatternType, req.Principal, req.Host, req.Operation, req.PermissionType)
	if msg := validFilter(f); msg != "" {
		resp.ErrorCode, resp.ErrorMessage = kerr.InvalidRequest.Code, kmsg.StringPtr(msg)
		return resp, nil
	}
	resp.Resources = describeResources(s.authz.Bindings(f))
	return resp, nil
}
