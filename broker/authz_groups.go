package broker

// The authorization of the group APIs (authz.go): the group coordinator
// (package group) never sees a request or a part of one the connection
// may not make, and the refused parts come back with Kafka's codes.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
)

// offsetCommitAllowed splits an OffsetCommit: without Read on the group
// everything is refused (GROUP_AUTHORIZATION_FAILED); topics without
// Read are taken out of req and returned refused
// (TOPIC_AUTHORIZATION_FAILED), for addRefusedCommits.
func (s *Server) offsetCommitAllowed(cc *clientConn, req *kmsg.OffsetCommitRequest) (refused []kmsg.OffsetCommitResponseTopic) {
	if s.authz == nil {
		return nil
	}
	groupOK := s.authorizedGroup(cc, acl.OpRead, req.Group)
	var keep []kmsg.OffsetCommitRequestTopic
	for _, t := range req.Topics {
		if groupOK && s.authorizedTopic(cc, acl.OpRead, t.Topic) {
			keep = append(keep, t)
			continue
		}
		code := errTopicAuth
		if !groupOK {
			code = errGroupAuth
		}
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		refused = append(refused, rt)
	}
	req.Topics = keep
	return refused
}

// filterOffsetFetch takes out of an OffsetFetch response what the
// connection may not see: a group without Describe is refused
// (GROUP_AUTHORIZATION_FAILED); a topic without Describe is refused
// (TOPIC_AUTHORIZATION_FAILED) when the request named it and left out
// when it asked for all.
func (s *Server) filterOffsetFetch(cc *clientConn, req *kmsg.OffsetFetchRequest, resp *kmsg.OffsetFetchResponse) {
	if s.authz == nil {
		return
	}
	if req.Version < 8 {
		if !s.authorizedGroup(cc, acl.OpDescribe, req.Group) {
			resp.ErrorCode = errGroupAuth
			for i := range resp.Topics {
				for j := range resp.Topics[i].Partitions {
					p := &resp.Topics[i].Partitions[j]
					p.Offset, p.Metadata, p.ErrorCode = -1, nil, errGroupAuth
				}
			}
			if req.Version >= 2 {
				resp.Topics = nil
			}
			return
		}
		var keep []kmsg.OffsetFetchResponseTopic
		for _, t := range resp.Topics {
			if !s.authorizedTopic(cc, acl.OpDescribe, t.Topic) {
				if req.Topics == nil {
					continue
				}
				for j := range t.Partitions {
					p := &t.Partitions[j]
					p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = -1, -1, nil, errTopicAuth
				}
			}
			keep = append(keep, t)
		}
		resp.Topics = keep
		return
	}
	named := map[string]bool{}
	for _, g := range req.Groups {
		named[g.Group] = g.Topics != nil
	}
	for i := range resp.Groups {
		g := &resp.Groups[i]
		if !s.authorizedGroup(cc, acl.OpDescribe, g.Group) {
			g.ErrorCode, g.Topics = errGroupAuth, nil
			continue
		}
		var keep []kmsg.OffsetFetchResponseGroupTopic
		for _, t := range g.Topics {
			if !s.authorizedTopic(cc, acl.OpDescribe, t.Topic) {
				if !named[g.Group] {
					continue
				}
				for j := range t.Partitions {
					p := &t.Partitions[j]
					p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode = -1, -1, nil, errTopicAuth
				}
			}
			keep = append(keep, t)
		}
		g.Topics = keep
	}
}

// filterDescribeGroups refuses the groups without Describe.
func (s *Server) filterDescribeGroups(cc *clientConn, resp *kmsg.DescribeGroupsResponse) {
	if s.authz == nil {
		return
	}
	for i := range resp.Groups {
		g := &resp.Groups[i]
		if !s.authorizedGroup(cc, acl.OpDescribe, g.Group) {
			d := kmsg.NewDescribeGroupsResponseGroup()
			d.Group, d.ErrorCode = g.Group, errGroupAuth
			*g = d
		}
	}
}

// filterListGroups leaves out the groups without Describe, unless the
// connection may Describe the cluster.
func (s *Server) filterListGroups(cc *clientConn, resp *kmsg.ListGroupsResponse) {
	if s.authz == nil || s.authorizedCluster(cc, acl.OpDescribe) {
		return
	}
	var keep []kmsg.ListGroupsResponseGroup
	for _, g := range resp.Groups {
		if s.authorizedGroup(cc, acl.OpDescribe, g.Group) {
			keep = append(keep, g)
		}
	}
	resp.Groups = keep
}

// deleteGroupsAllowed takes the groups without Delete out of req and
// returns them refused.
func (s *Server) deleteGroupsAllowed(cc *clientConn, req *kmsg.DeleteGroupsRequest) (refused []kmsg.DeleteGroupsResponseGroup) {
	if s.authz == nil {
		return nil
	}
	var keep []string
	for _, g := range req.Groups {
		if s.authorizedGroup(cc, acl.OpDelete, g) {
			keep = append(keep, g)
			continue
		}
		r := kmsg.NewDeleteGroupsResponseGroup()
		r.Group, r.ErrorCode = g, errGroupAuth
		refused = append(refused, r)
	}
	req.Groups = keep
	return refused
}

// offsetDeleteAllowed: Delete on the group (else the whole request is
// refused: refuse true); topics without Read are taken out of req and
// returned refused.
func (s *Server) offsetDeleteAllowed(cc *clientConn, req *kmsg.OffsetDeleteRequest) (refuse bool, refused []kmsg.OffsetDeleteResponseTopic) {
	if s.authz == nil {
		return false, nil
	}
	if !s.authorizedGroup(cc, acl.OpDelete, req.Group) {
		return true, nil
	}
	var keep []kmsg.OffsetDeleteRequestTopic
	for _, t := range req.Topics {
		if s.authorizedTopic(cc, acl.OpRead, t.Topic) {
			keep = append(keep, t)
			continue
		}
		rt := kmsg.NewOffsetDeleteResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetDeleteResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, errTopicAuth
			rt.Partitions = append(rt.Partitions, rp)
		}
		refused = append(refused, rt)
	}
	req.Topics = keep
	return false, refused
}
