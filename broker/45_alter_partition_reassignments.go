package broker

// AlterPartitionReassignments, v0-1 (API key 45), and
// ListPartitionReassignments, v0 (API key 46).
//
// Served by the active controller (controller/reassign.go has the
// states): a partition with a replica list starts moving to it (replacing
// a reassignment in progress), one with a null list has its reassignment
// cancelled. From v1 (KIP-860) a request that does not allow replication
// factor changes has those refused with INVALID_REPLICATION_FACTOR. A
// broker that is not the controller forwards both (forward.go); the
// reassignments in progress are known to the controller only.

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
	"strata/controller"
)

func init() {
	registerForwarded(45, 0, 1, handleAlterPartitionReassignments)
	registerForwarded(46, 0, 0, handleListPartitionReassignments)
}

func handleAlterPartitionReassignments(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	allowRF := req.Version < 1 || req.AllowReplicationFactorChange
	resp.AllowReplicationFactorChange = allowRF
	if !s.authorizedCluster(cc, acl.OpAlter) {
		resp.ErrorCode = errClusterAuth
		return resp, nil
	}
	md := s.ctrl.Metadata()
	reqs := map[controller.TopicPartition][]int32{}
	early := map[controller.TopicPartition]error{}
	var order []controller.TopicPartition
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			tp := controller.TopicPartition{Topic: t.Topic, Partition: p.Partition}
			if _, dup := reqs[tp]; dup || early[tp] != nil {
				continue
			}
			order = append(order, tp)
			if p.Replicas != nil && !allowRF {
				if cur, ok := partitionOf(md, tp); ok && len(p.Replicas) != len(cur.OriginalReplicas()) {
					early[tp] = kerr.InvalidReplicationFactor
					continue
				}
			}
			if p.Replicas != nil && len(p.Replicas) == 0 {
				early[tp] = controller.ErrInvalidReplicaAssignment
				continue
			}
			reqs[tp] = p.Replicas
		}
	}
	res := map[controller.TopicPartition]error{}
	if len(reqs) > 0 {
		ctx, cancel := context.WithTimeout(s.ctx, adminTimeout(req.TimeoutMillis))
		defer cancel()
		var err error
		res, err = s.ctrl.AlterPartitionReassignments(ctx, reqs)
		switch {
		case errors.Is(err, controller.ErrNotController):
			resp.ErrorCode = kerr.NotController.Code
			return resp, nil
		case errors.Is(err, context.DeadlineExceeded):
			resp.ErrorCode = kerr.RequestTimedOut.Code
			return resp, nil
		case err != nil:
			s.log.Warn("alter partition reassignments failed", "err", err)
			resp.ErrorCode, resp.ErrorMessage = kerr.UnknownServerError.Code, errMessage(err)
			return resp, nil
		}
	}
	for _, tp := range order {
		e, ok := early[tp]
		if !ok {
			e = res[tp]
		}
		rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
		rp.Partition, rp.ErrorCode, rp.ErrorMessage = tp.Partition, errCode(e), errMessage(e)
		if n := len(resp.Topics); n > 0 && resp.Topics[n-1].Topic == tp.Topic {
			resp.Topics[n-1].Partitions = append(resp.Topics[n-1].Partitions, rp)
			continue
		}
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = tp.Topic
		rt.Partitions = []kmsg.AlterPartitionAssignmentsResponseTopicPartition{rp}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

func handleListPartitionReassignments(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	if !s.authorizedCluster(cc, acl.OpDescribe) {
		resp.ErrorCode = errClusterAuth
		return resp, nil
	}
	if ac, ok := s.ctrl.(activeController); ok && !ac.IsActive() {
		resp.ErrorCode = kerr.NotController.Code
		return resp, nil
	}
	var parts []controller.TopicPartition
	if req.Topics != nil {
		parts = []controller.TopicPartition{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				parts = append(parts, controller.TopicPartition{Topic: t.Topic, Partition: p})
			}
		}
	}
	ra := controller.Reassignments(s.ctrl.Metadata(), parts)
	for _, tp := range sortedPartitions(ra) {
		r := ra[tp]
		rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
		rp.Partition = tp.Partition
		rp.Replicas, rp.AddingReplicas, rp.RemovingReplicas = r.Replicas, nonNil(r.Adding), nonNil(r.Removing)
		if n := len(resp.Topics); n > 0 && resp.Topics[n-1].Topic == tp.Topic {
			resp.Topics[n-1].Partitions = append(resp.Topics[n-1].Partitions, rp)
			continue
		}
		rt := kmsg.NewListPartitionReassignmentsResponseTopic()
		rt.Topic = tp.Topic
		rt.Partitions = []kmsg.ListPartitionReassignmentsResponseTopicPartition{rp}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// partitionOf returns a partition of md.
func partitionOf(md *controller.Metadata, tp controller.TopicPartition) (controller.Partition, bool) {
	t, ok := md.Topics[tp.Topic]
	if !ok || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
		return controller.Partition{}, false
	}
	return t.Partitions[tp.Partition], true
}

func nonNil(s []int32) []int32 {
	if s == nil {
		return []int32{}
	}
	return slices.Clone(s)
}

// adminTimeout is a request's timeout, or 30 s when it names none.
func adminTimeout(ms int32) time.Duration {
	if ms <= 0 {
		return 30 * time.Second
	}
	return time.Duration(ms) * time.Millisecond
}
