package acl

import (
	"fmt"
	"strings"
)

// ResourceType is Kafka's resource type, numbered as on the wire.
type ResourceType int8

const (
	ResourceAny             ResourceType = 1
	ResourceTopic           ResourceType = 2
	ResourceGroup           ResourceType = 3
	ResourceCluster         ResourceType = 4
	ResourceTransactionalID ResourceType = 5
	ResourceDelegationToken ResourceType = 6
	ResourceUser            ResourceType = 7
)

// ClusterName is the name of the cluster resource.
const ClusterName = "kafka-cluster"

var resourceNames = map[ResourceType]string{
	ResourceTopic: "Topic", ResourceGroup: "Group", ResourceCluster: "Cluster",
	ResourceTransactionalID: "TransactionalId", ResourceDelegationToken: "DelegationToken", ResourceUser: "User",
}

// String is the name Kafka's ZooKeeper paths use: Topic, Group, …
func (r ResourceType) String() string {
	if n, ok := resourceNames[r]; ok {
		return n
	}
	return fmt.Sprintf("ResourceType(%d)", int8(r))
}

// ParseResourceType reads a name String gives (any case).
func ParseResourceType(s string) (ResourceType, bool) {
	for r, n := range resourceNames {
		if strings.EqualFold(n, s) {
			return r, true
		}
	}
	return 0, false
}

// Operation is Kafka's ACL operation, numbered as on the wire.
type Operation int8

const (
	OpAny             Operation = 1
	OpAll             Operation = 2
	OpRead            Operation = 3
	OpWrite           Operation = 4
	OpCreate          Operation = 5
	OpDelete          Operation = 6
	OpAlter           Operation = 7
	OpDescribe        Operation = 8
	OpClusterAction   Operation = 9
	OpDescribeConfigs Operation = 10
	OpAlterConfigs    Operation = 11
	OpIdempotentWrite Operation = 12
	OpCreateTokens    Operation = 13
	OpDescribeTokens  Operation = 14
)

var opNames = map[Operation]string{
	OpAll: "All", OpRead: "Read", OpWrite: "Write", OpCreate: "Create", OpDelete: "Delete",
	OpAlter: "Alter", OpDescribe: "Describe", OpClusterAction: "ClusterAction",
	OpDescribeConfigs: "DescribeConfigs", OpAlterConfigs: "AlterConfigs",
	OpIdempotentWrite: "IdempotentWrite", OpCreateTokens: "CreateTokens", OpDescribeTokens: "DescribeTokens",
}

// String is the name Kafka's JSON uses: Read, Write, ClusterAction, …
func (o Operation) String() string {
	if n, ok := opNames[o]; ok {
		return n
	}
	return fmt.Sprintf("Operation(%d)", int8(o))
}

// ParseOperation reads a name String gives (any case, and Kafka's
// upper-case names with underscores: CLUSTER_ACTION).
func ParseOperation(s string) (Operation, bool) {
	s = strings.ReplaceAll(s, "_", "")
	for o, n := range opNames {
		if strings.EqualFold(n, s) {
			return o, true
		}
	}
	return 0, false
}

// Permission is Allow or Deny, numbered as on the wire.
type Permission int8

const (
	PermAny   Permission = 1
	PermDeny  Permission = 2
	PermAllow Permission = 3
)

func (p Permission) String() string {
	switch p {
	case PermDeny:
		return "Deny"
	case PermAllow:
		return "Allow"
	}
	return fmt.Sprintf("Permission(%d)", int8(p))
}

// ParsePermission reads Allow or Deny (any case).
func ParsePermission(s string) (Permission, bool) {
	switch strings.ToLower(s) {
	case "allow":
		return PermAllow, true
	case "deny":
		return PermDeny, true
	}
	return 0, false
}

// PatternType is how a resource name matches, numbered as on the wire.
type PatternType int8

const (
	PatternAny      PatternType = 1
	PatternMatch    PatternType = 2 // filters only: what would match a name
	PatternLiteral  PatternType = 3
	PatternPrefixed PatternType = 4
)

func (p PatternType) String() string {
	switch p {
	case PatternLiteral:
		return "LITERAL"
	case PatternPrefixed:
		return "PREFIXED"
	}
	return fmt.Sprintf("PatternType(%d)", int8(p))
}

// ParsePatternType reads LITERAL or PREFIXED (any case).
func ParsePatternType(s string) (PatternType, bool) {
	switch strings.ToUpper(s) {
	case "LITERAL":
		return PatternLiteral, true
	case "PREFIXED":
		return PatternPrefixed, true
	}
	return 0, false
}

// Wildcard is the literal resource name, principal and host that match
// any.
const Wildcard = "*"

// Resource is a resource pattern.
type Resource struct {
	Type    ResourceType
	Pattern PatternType
	Name    string
}

// Entry is one ACL of a resource.
type Entry struct {
	Principal  string // User:alice, User:*
	Host       string // an address, or *
	Operation  Operation
	Permission Permission
}

// Binding is an ACL: an entry bound to a resource pattern.
type Binding struct {
	Resource
	Entry
}
