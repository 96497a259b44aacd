// Package acl is the broker's authorizer: Kafka's ACL model and its
// AclAuthorizer's decisions (authorizer.class.name=
// kafka.security.authorizer.AclAuthorizer).
//
// An ACL binds a resource pattern (resource type, name, LITERAL or
// PREFIXED; the literal name "*" is every resource of the type) to an
// entry: principal (User:alice, or User:* for everyone), host (or *),
// operation and permission (Allow or Deny). Authorize decides as Kafka
// does: a super user (super.users) may do anything; a Deny that matches
// wins over any Allow; an Allow of the operation, or of All, allows it;
// Describe is implied by Read, Write, Delete and Alter, DescribeConfigs
// by AlterConfigs; a resource that no ACL names at all is allowed only
// with allow.everyone.if.no.acl.found=true.
//
// The ACLs themselves live in the controller (controller.ACLStore): the
// embedded controller's metadata file, or ZooKeeper's /kafka-acl and
// /kafka-acl-extended with Kafka's JSON. The authorizer keeps a copy it
// replaces whenever the store changes. The Kafka protocol (CreateAcls,
// DescribeAcls, DeleteAcls, and the checks of every API) is in package
// broker; this package imports only the controller and the standard
// library.
package acl
