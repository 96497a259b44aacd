package broker

// CreateTopics, v2-7.
//
// NumPartitions and ReplicationFactor of -1 take num.partitions and
// default.replication.factor (KIP-464); topic configs are validated with
// Kafka's names and ranges; ValidateOnly checks without creating. v5+
// returns the resulting partition count, replication factor and configs;
// v7 the topic id. Partition counts past the broker's file descriptor
// budget are refused with INVALID_PARTITIONS (fd_budget.go).

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/plog"
	"strata/controller"
)

func init() { registerForwarded(19, 2, 7, handleCreateTopics) }

func handleCreateTopics(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.CreateTopicsRequest)
	resp := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	seen := map[string]int{}
	var pending int64 // partition replicas created by this request so far (fd_budget.go)
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreateTopicsResponseTopic()
		st.Topic = rt.Topic
		st.NumPartitions, st.ReplicationFactor = -1, -1
		fail := func(code int16, msg string) {
			st.ErrorCode = code
			if msg != "" {
				st.ErrorMessage = kmsg.StringPtr(msg)
			}
		}
		creq := controller.CreateTopicRequest{
			Name: rt.Topic, NumPartitions: rt.NumPartitions, ReplicationFactor: rt.ReplicationFactor,
			ValidateOnly: req.ValidateOnly, Configs: map[string]string{},
		}
		for _, c := range rt.Configs {
			if c.Value != nil {
				creq.Configs[c.Name] = *c.Value
			}
		}
		if len(rt.ReplicaAssignment) > 0 {
			for _, a := range rt.ReplicaAssignment {
				if int(a.Partition) != len(creq.Assignments) {
					fail(kerr.InvalidReplicaAssignment.Code, "partitions in the replica assignment must be consecutive from 0")
					break
				}
				creq.Assignments = append(creq.Assignments, a.Replicas)
			}
		}
		switch {
		case st.ErrorCode != 0:
		case !s.mayCreateTopic(cc, rt.Topic): // authz.go
			fail(errTopicAuth, "")
		case seen[rt.Topic] > 1:
			fail(kerr.InvalidRequest.Code, "topic named more than once in the request")
		case !validTopicName(rt.Topic):
			fail(kerr.InvalidTopicException.Code, fmt.Sprintf("topic name %q is illegal: 1-249 characters of [a-zA-Z0-9._-], not . or ..", rt.Topic))
		case len(creq.Assignments) > 0 && (rt.NumPartitions != -1 || rt.ReplicationFactor != -1):
			fail(kerr.InvalidRequest.Code, "both replica assignment and partition count/replication factor were given")
		case len(creq.Assignments) == 0 && (rt.NumPartitions == 0 || rt.NumPartitions < -1):
			fail(kerr.InvalidPartitions.Code, fmt.Sprintf("number of partitions must be at least 1, got %d", rt.NumPartitions))
		case len(creq.Assignments) == 0 && (rt.ReplicationFactor == 0 || rt.ReplicationFactor < -1):
			fail(kerr.InvalidReplicationFactor.Code, fmt.Sprintf("replication factor must be at least 1, got %d", rt.ReplicationFactor))
		default:
			if err := s.validateTopicConfigs(creq.Configs); err != nil {
				fail(errCode(err), err.Error())
				break
			}
			if creq.NumPartitions == -1 {
				creq.NumPartitions = s.defaultNumPartitions()
			}
			if creq.ReplicationFactor == -1 {
				creq.ReplicationFactor = s.defaultReplicationFactor()
			}
			replicas := int64(creq.NumPartitions) * int64(creq.ReplicationFactor)
			if len(creq.Assignments) > 0 {
				replicas = 0
				for _, a := range creq.Assignments {
					replicas += int64(len(a))
				}
			}
			if err := s.checkDescriptorBudget(s.ctrl.Metadata(), pending+replicas); err != nil {
				fail(errCode(err), err.Error())
				break
			}
			pending += replicas
			t, err := s.ctrl.CreateTopic(context.Background(), creq)
			if err != nil {
				fail(errCode(err), err.Error())
				break
			}
			st.TopicID = t.ID
			st.NumPartitions = int32(len(t.Partitions))
			st.ReplicationFactor = int16(len(t.Partitions[0].Replicas))
			if req.Version >= 5 {
				md := s.ctrl.Metadata()
				for _, c := range s.describeTopicConfigs(md, t, nil, false, false) {
					rc := kmsg.NewCreateTopicsResponseTopicConfig()
					rc.Name, rc.Value, rc.ReadOnly, rc.Source, rc.IsSensitive = c.Name, c.Value, c.ReadOnly, int8(c.Source), c.IsSensitive
					st.Configs = append(st.Configs, rc)
				}
			}
		}
		resp.Topics = append(resp.Topics, st)
	}
	if !req.ValidateOnly {
		if err := s.reconcile(s.ctrl.Metadata()); err != nil {
			if plog.IsNoDescriptors(err) {
				// Not a disk failure: the partitions open once descriptors
				// are free (watchMetadata retries); say so to the client.
				s.log.Warn("created partitions not opened: no file descriptor left", "err", err)
				s.answerUnopened(resp)
			} else {
				s.log.Error("open created partitions", "err", err)
			}
		}
	}
	return resp, nil
}

// answerUnopened sets KAFKA_STORAGE_ERROR on the created topics of resp
// with partitions of this broker that could not be opened (no file
// descriptor left; fd_budget.go).
func (s *Server) answerUnopened(resp *kmsg.CreateTopicsResponse) {
	md := s.ctrl.Metadata()
	for i := range resp.Topics {
		st := &resp.Topics[i]
		t := md.Topics[st.Topic]
		if st.ErrorCode != 0 || t == nil {
			continue
		}
		want, opened := 0, 0
		for _, pm := range t.Partitions {
			if containsID(pm.Replicas, s.cfg.ID) {
				want++
				if s.partition(st.Topic, pm.Index) != nil {
					opened++
				}
			}
		}
		if opened < want {
			st.ErrorCode = kerr.KafkaStorageError.Code
			st.ErrorMessage = kmsg.StringPtr(noDescriptorsMessage(opened, want))
		}
	}
}
