package broker

// What CreateAcls, DescribeAcls and DeleteAcls (29_describe_acls.go,
// 30_create_acls.go, 31_delete_acls.go) share: the wire's ACLs and
// filters as package acl's.

import (
	"cmp"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
)

// errNoAuthorizer is the message of an ACL request to a broker without
// an authorizer (SECURITY_DISABLED, as Kafka answers).
const errNoAuthorizer = "no authorizer is configured on the broker (authorizer.class.name)"

// aclsRefusal is the code and message refusing an ACL request: no
// authorizer, or no op (Alter to change, Describe to list) on the
// cluster; 0 when it may go on.
func (s *Server) aclsRefusal(cc *clientConn, op acl.Operation) (int16, *string) {
	if s.authz == nil {
		return kerr.SecurityDisabled.Code, kmsg.StringPtr(errNoAuthorizer)
	}
	if !s.authorizedCluster(cc, op) {
		return errClusterAuth, nil
	}
	return 0, nil
}

// wirePattern is a request's pattern type: v0 has none and means LITERAL.
func wirePattern(version int16, p kmsg.ACLResourcePatternType) acl.PatternType {
	if version == 0 {
		return acl.PatternLiteral
	}
	return acl.PatternType(p)
}

// bindingOf reads a CreateAcls creation.
func bindingOf(version int16, c *kmsg.CreateACLsRequestCreation) acl.Binding {
	return acl.Binding{
		Resource: acl.Resource{Type: acl.ResourceType(c.ResourceType), Pattern: wirePattern(version, c.ResourcePatternType), Name: c.ResourceName},
		Entry:    acl.Entry{Principal: c.Principal, Host: c.Host, Operation: acl.Operation(c.Operation), Permission: acl.Permission(c.PermissionType)},
	}
}

// filterOf reads a DescribeAcls or DeleteAcls filter.
func filterOf(version int16, rt kmsg.ACLResourceType, name *string, pt kmsg.ACLResourcePatternType, principal, host *string, op kmsg.ACLOperation, perm kmsg.ACLPermissionType) acl.Filter {
	return acl.Filter{
		Type: acl.ResourceType(rt), Name: name, Pattern: wirePattern(version, pt),
		Principal: principal, Host: host, Operation: acl.Operation(op), Permission: acl.Permission(perm),
	}
}

// validFilter reports why a filter cannot select anything Kafka's way
// (INVALID_REQUEST), or "".
func validFilter(f acl.Filter) string {
	switch {
	case f.Type < acl.ResourceAny || f.Type > acl.ResourceUser:
		return "unknown resource type"
	case f.Pattern < acl.PatternAny || f.Pattern > acl.PatternPrefixed:
		return "unknown pattern type"
	case f.Operation < acl.OpAny || f.Operation > acl.OpDescribeTokens:
		return "unknown operation"
	case f.Permission < acl.PermAny || f.Permission > acl.PermAllow:
		return "unknown permission type"
	}
	return ""
}

// describeResources groups bindings by resource, in a stable order.
func describeResources(bs []acl.Binding) []kmsg.DescribeACLsResponseResource {
	slices.SortFunc(bs, func(a, b acl.Binding) int {
		return cmp.Or(cmp.Compare(a.Type, b.Type), cmp.Compare(a.Pattern, b.Pattern), cmp.Compare(a.Name, b.Name),
			cmp.Compare(a.Principal, b.Principal), cmp.Compare(a.Host, b.Host), cmp.Compare(a.Operation, b.Operation),
			cmp.Compare(a.Permission, b.Permission))
	})
	var out []kmsg.DescribeACLsResponseResource
	for _, b := range bs {
		if n := len(out); n == 0 || out[n-1].ResourceType != kmsg.ACLResourceType(b.Type) ||
			out[n-1].ResourcePatternType != kmsg.ACLResourcePatternType(b.Pattern) || out[n-1].ResourceName != b.Name {
			r := kmsg.NewDescribeACLsResponseResource()
			r.ResourceType, r.ResourceName, r.ResourcePatternType = kmsg.ACLResourceType(b.Type), b.Name, kmsg.ACLResourcePatternType(b.Pattern)
			out = append(out, r)
		}
		a := kmsg.NewDescribeACLsResponseResourceACL()
		a.Principal, a.Host, a.Operation, a.PermissionType = b.Principal, b.Host, kmsg.ACLOperation(b.Operation), kmsg.ACLPermissionType(b.Permission)
		out[len(out)-1].ACLs = append(out[len(out)-1].ACLs, a)
	}
	return out
}
