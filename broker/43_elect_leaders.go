package broker

// ElectLeaders, v0-2 (API key 43).
//
// Served by the active controller (see controller.ElectMove): a preferred
// election (v0, or ElectionType 0) moves leadership to the first replica
// of the assignment when it is alive and in the ISR; an unclean election
// (ElectionType 1) elects a live replica of a partition without a live
// leader. A null topic list means every partition. Another broker answers
// NOT_CONTROLLER, at the top level from v1 and for each partition in v0,
// as Kafka does.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
	"strata/controller"
)

func init() { registerForwarded(43, 0, 2, handleElectLeaders) }

func handleElectLeaders(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ElectLeadersRequest)
	resp := req.ResponseKind().(*kmsg.ElectLeadersResponse)
	typ := controller.ElectPreferred
	if req.Version >= 1 {
		typ = controller.ElectionType(req.ElectionType)
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
	topLevel := func(code int16) (kmsg.Response, error) {
		if req.Version >= 1 {
			resp.ErrorCode = code
			return resp, nil
		}
		// v0 has no top-level error: every named partition carries it.
		for _, tp := range parts {
			addElectResult(resp, tp, code, nil)
		}
		return resp, nil
	}
	if !s.authorizedCluster(cc, acl.OpAlter) {
		return topLevel(errClusterAuth)
	}
	if typ != controller.ElectPreferred && typ != controller.ElectUnclean {
		return topLevel(kerr.InvalidRequest.Code)
	}
	timeout := time.Duration(req.TimeoutMillis) * time.Millisecond
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(s.ctx, timeout)
	defer cancel()
	res, err := s.ctrl.ElectLeaders(ctx, typ, parts)
	switch {
	case errors.Is(err, controller.ErrNotController):
		return topLevel(kerr.NotController.Code)
	case errors.Is(err, context.DeadlineExceeded):
		return topLevel(kerr.RequestTimedOut.Code)
	case err != nil:
		s.log.Warn("elect leaders failed", "err", err)
		return topLevel(kerr.UnknownServerError.Code)
	}
	for _, tp := range sortedPartitions(res) {
		e := res[tp]
		addElectResult(resp, tp, electErrorCode(e), errMessage(e))
	}
	return resp, nil
}

// electErrorCode maps an ElectLeaders outcome to its Kafka error code.
func electErrorCode(err error) int16 {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, controller.ErrElectionNotNeeded):
		return kerr.ElectionNotNeeded.Code
	case errors.Is(err, controller.ErrPreferredLeaderNotAvailable):
		return kerr.PreferredLeaderNotAvailable.Code
	case errors.Is(err, controller.ErrEligibleLeadersNotAvailable):
		return kerr.EligibleLeadersNotAvailable.Code
	}
	return errCode(err)
}

// addElectResult appends one partition's result, grouping by topic.
func addElectResult(resp *kmsg.ElectLeadersResponse, tp controller.TopicPartition, code int16, msg *string) {
	rp := kmsg.NewElectLeadersResponseTopicPartition()
	rp.Partition, rp.ErrorCode, rp.ErrorMessage = tp.Partition, code, msg
	if n := len(resp.Topics); n > 0 && resp.Topics[n-1].Topic == tp.Topic {
		resp.Topics[n-1].Partitions = append(resp.Topics[n-1].Partitions, rp)
		return
	}
	rt := kmsg.NewElectLeadersResponseTopic()
	rt.Topic = tp.Topic
	rt.Partitions = []kmsg.ElectLeadersResponseTopicPartition{rp}
	resp.Topics = append(resp.Topics, rt)
}

// sortedPartitions returns the keys of m by topic, then partition.
func sortedPartitions[V any](m map[controller.TopicPartition]V) []controller.TopicPartition {
	tps := make([]controller.TopicPartition, 0, len(m))
	for tp := range m {
		tps = append(tps, tp)
	}
	slices.SortFunc(tps, func(a, b controller.TopicPartition) int {
		if c := strings.Compare(a.Topic, b.Topic); c != 0 {
			return c
		}
		return int(a.Partition - b.Partition)
	})
	return tps
}
