package broker

// Authorization: each handler asks authorized (or one of the helpers
// below) for the operation Kafka's request handlers (KafkaApis) check,
// once per resource, and answers a refusal with the error code of the
// resource's family (TOPIC_, GROUP_, CLUSTER_ or
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED). Without an authorizer
// (authorizer.class.name empty) everything is allowed. The decisions are
// package acl's; the ACLs live in the controller (controller.ACLStore).

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
	"strata/broker/network"
	"strata/controller"
)

// startAuthorizer sets up authorizer.class.name's authorizer over the
// controller's ACLs, once the controller is open.
func (s *Server) startAuthorizer() error {
	on, err := acl.Enabled(s.cfg.AuthorizerClassName)
	if err != nil || !on {
		return err
	}
	store, ok := s.ctrl.(controller.ACLStore)
	if !ok {
		return fmt.Errorf("authorizer.class.name: the controller (%T) keeps no ACLs", s.ctrl)
	}
	supers, err := acl.ParseSuperUsers(s.cfg.SuperUsers)
	if err != nil {
		return err
	}
	s.authz = acl.New(store, supers, s.cfg.AllowEveryoneIfNoACLFound)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.authz.Run(s.ctx)
	}()
	s.log.Info("authorizer", "class", s.cfg.AuthorizerClassName, "super_users", len(supers),
		"allow_everyone_if_no_acl_found", s.cfg.AllowEveryoneIfNoACLFound)
	return nil
}

// principal is who the connection authenticated as (User:ANONYMOUS for
// a connection made by hand in tests), or the client an Envelope names.
func (cc *clientConn) principal() string {
	if cc != nil && cc.env != nil {
		return cc.env.principal
	}
	if cc == nil || cc.nc == nil {
		return network.Anonymous.String()
	}
	return cc.nc.Principal().String()
}

// aclHost is the client's address as ACLs name hosts (no leading "/").
func (cc *clientConn) aclHost() string {
	if cc != nil && cc.env != nil {
		return cc.env.host
	}
	if cc == nil || cc.conn == nil {
		return ""
	}
	return strings.TrimPrefix(cc.clientHost(), "/")
}

// authorized reports whether the connection may do op on the resource.
func (s *Server) authorized(cc *clientConn, op acl.Operation, t acl.ResourceType, name string) bool {
	if s.authz == nil {
		return true
	}
	return s.authz.Authorize(cc.principal(), cc.aclHost(), op, t, name)
}

// authorizedTopic: op on the topic.
func (s *Server) authorizedTopic(cc *clientConn, op acl.Operation, topic string) bool {
	return s.authorized(cc, op, acl.ResourceTopic, topic)
}

// authorizedGroup: op on the group.
func (s *Server) authorizedGroup(cc *clientConn, op acl.Operation, group string) bool {
	return s.authorized(cc, op, acl.ResourceGroup, group)
}

// authorizedCluster: op on the cluster.
func (s *Server) authorizedCluster(cc *clientConn, op acl.Operation) bool {
	return s.authorized(cc, op, acl.ResourceCluster, acl.ClusterName)
}

// Error codes of refusals, by resource family.
var (
	errTopicAuth   = kerr.TopicAuthorizationFailed.Code
	errGroupAuth   = kerr.GroupAuthorizationFailed.Code
	errClusterAuth = kerr.ClusterAuthorizationFailed.Code
	errTxnIDAuth   = kerr.TransactionalIDAuthorizationFailed.Code
)

// checkConsumerFetch refuses the partitions of topics the consumer may
// not Read (Kafka: TOPIC_AUTHORIZATION_FAILED).
func (s *Server) checkConsumerFetch(cc *clientConn, targets []*fetchTarget) {
	if s.authz == nil {
		return
	}
	ok := map[string]bool{}
	for _, t := range targets {
		if t.key.topic == "" {
			continue
		}
		allowed, seen := ok[t.key.topic]
		if !seen {
			allowed = s.authorizedTopic(cc, acl.OpRead, t.key.topic)
			ok[t.key.topic] = allowed
		}
		if !allowed {
			t.refuse = errTopicAuth
		}
	}
}

// mayCreateTopic: Create on the cluster, or on the topic.
func (s *Server) mayCreateTopic(cc *clientConn, topic string) bool {
	return s.authorizedCluster(cc, acl.OpCreate) || s.authorizedTopic(cc, acl.OpCreate, topic)
}

// offsetForLeaderEpochAllowed: a follower (replicaID >= 0) needs
// ClusterAction on the cluster, a consumer Describe on the topic.
func (s *Server) offsetForLeaderEpochAllowed(cc *clientConn, replicaID int32, topic string) bool {
	if replicaID >= 0 {
		return s.authorizedCluster(cc, acl.OpClusterAction)
	}
	return s.authorizedTopic(cc, acl.OpDescribe, topic)
}

// mayWriteIdempotently: an idempotent producer's InitProducerId needs
// IdempotentWrite on the cluster or, since Kafka 3.0 (KIP-679), Write on
// some topic.
func (s *Server) mayWriteIdempotently(cc *clientConn) bool {
	if s.authz == nil || s.authorizedCluster(cc, acl.OpIdempotentWrite) {
		return true
	}
	return s.authz.AuthorizeAny(cc.principal(), cc.aclHost(), acl.OpWrite, acl.ResourceTopic)
}

// configsRefusal is the code refusing op (DescribeConfigs or
// AlterConfigs) on a config resource: a topic's configs need it on the
// topic, a broker's (or the cluster default's) on the cluster; 0 when
// allowed or the type is not one Strata has.
func (s *Server) configsRefusal(cc *clientConn, op acl.Operation, rtype kmsg.ConfigResourceType, name string) int16 {
	switch rtype {
	case kmsg.ConfigResourceTypeTopic:
		if !s.authorizedTopic(cc, op, name) {
			return errTopicAuth
		}
	case kmsg.ConfigResourceTypeBroker, kmsg.ConfigResourceTypeBrokerLogger:
		if !s.authorizedCluster(cc, op) {
			return errClusterAuth
		}
	}
	return 0
}

// supportedOperations are the operations each resource type has, as
// Kafka's AclEntry.supportedOperations lists them: what an
// *_authorized_operations field can hold.
var supportedOperations = map[acl.ResourceType][]acl.Operation{
	acl.ResourceTopic: {acl.OpRead, acl.OpWrite, acl.OpCreate, acl.OpDescribe, acl.OpDelete,
		acl.OpAlter, acl.OpDescribeConfigs, acl.OpAlterConfigs},
	acl.ResourceGroup: {acl.OpRead, acl.OpDescribe, acl.OpDelete},
	acl.ResourceCluster: {acl.OpCreate, acl.OpClusterAction, acl.OpDescribeConfigs, acl.OpAlterConfigs,
		acl.OpIdempotentWrite, acl.OpAlter, acl.OpDescribe},
	acl.ResourceTransactionalID: {acl.OpDescribe, acl.OpWrite},
	acl.ResourceDelegationToken: {acl.OpDescribe},
	acl.ResourceUser:            {acl.OpCreateTokens, acl.OpDescribeTokens},
}

// authorizedOperations is the *_authorized_operations bit field (KIP-430)
// of the resource for the connection's principal: bit n set when the
// operation of code n is allowed, each of the type's operations asked
// of the authorizer; without an authorizer, all of them (as Kafka).
func (s *Server) authorizedOperations(cc *clientConn, t acl.ResourceType, name string) int32 {
	var bits int32
	for _, op := range supportedOperations[t] {
		if s.authorized(cc, op, t, name) {
			bits |= 1 << op
		}
	}
	return bits
}

// clusterAuthorizedOperations is the cluster's field as Metadata (v8-10)
// and DescribeCluster answer it when asked: 0 without Describe on the
// cluster, as in Kafka.
func (s *Server) clusterAuthorizedOperations(cc *clientConn) int32 {
	if !s.authorizedCluster(cc, acl.OpDescribe) {
		return 0
	}
	return s.authorizedOperations(cc, acl.ResourceCluster, acl.ClusterName)
}
