package broker

// Metadata, v0-12.
//
// Null topics (v1+) or an empty list (v0) ask for every topic. Unknown
// topics are created when the request allows it (v4+ flag; always before
// v4) and auto.create.topics.enable is on; the embedded controller creates
// them at once, so they come back ready. Topic ids from v10, lookup by id
// from v12. The authorized operations (KIP-430: of the cluster for v8-10,
// of each topic from v8) when asked, else -2147483648, as in Kafka.

import (
	"context"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
	"strata/controller"
)

func init() { register(3, 0, 12, handleMetadata) }

const authorizedOpsUnset = int32(-2147483648)

func handleMetadata(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.MetadataRequest)
	resp := req.ResponseKind().(*kmsg.MetadataResponse)
	md := s.ctrl.Metadata()

	all := req.Topics == nil || (req.Version == 0 && len(req.Topics) == 0)
	var names []string
	var errTopics []kmsg.MetadataResponseTopic
	if all {
		for n, t := range md.Topics {
			if !t.Partial && s.authorizedTopic(cc, acl.OpDescribe, n) { // others are left out, as Kafka does
				names = append(names, n)
			}
		}
		sort.Strings(names)
	} else {
		allowCreate := req.Version < 4 || req.AllowAutoTopicCreation
		created := false
		for _, rt := range req.Topics {
			name := ""
			if rt.Topic != nil {
				name = *rt.Topic
			} else if req.Version >= 10 {
				if n, ok := md.TopicIDs[rt.TopicID]; ok {
					name = n
				} else {
					et := kmsg.NewMetadataResponseTopic()
					et.TopicID = rt.TopicID
					et.ErrorCode = kerr.UnknownTopicID.Code
					errTopics = append(errTopics, et)
					continue
				}
			}
			if !s.authorizedTopic(cc, acl.OpDescribe, name) {
				et := kmsg.NewMetadataResponseTopic()
				et.Topic, et.TopicID = rt.Topic, rt.TopicID
				et.ErrorCode = errTopicAuth
				errTopics = append(errTopics, et)
				continue
			}
			if t, ok := md.Topics[name]; ok {
				if t.Partial { // being created: its partitions are not all known here yet
					et := kmsg.NewMetadataResponseTopic()
					et.Topic = kmsg.StringPtr(name)
					et.ErrorCode = kerr.LeaderNotAvailable.Code
					errTopics = append(errTopics, et)
				} else {
					names = append(names, name)
				}
				continue
			}
			et := kmsg.NewMetadataResponseTopic()
			et.Topic = kmsg.StringPtr(name)
			switch {
			case !validTopicName(name):
				et.ErrorCode = kerr.InvalidTopicException.Code
			case allowCreate && s.autoCreateTopics() && !s.mayCreateTopic(cc, name):
				et.ErrorCode = errTopicAuth
			case allowCreate && s.autoCreateTopics():
				if err := s.autoCreate(name); err != nil && errCode(err) != kerr.TopicAlreadyExists.Code {
					s.log.Warn("auto-create topic", "topic", name, "err", err)
					et.ErrorCode = kerr.LeaderNotAvailable.Code
				} else {
					names = append(names, name)
					created = true
					continue
				}
			default:
				et.ErrorCode = kerr.UnknownTopicOrPartition.Code
			}
			errTopics = append(errTopics, et)
		}
		if created {
			md = s.ctrl.Metadata()
		}
	}

	for _, b := range md.Brokers {
		host, port, ok := cc.endpoint(b) // the listener's endpoint (listeners.go)
		if !ok {
			continue
		}
		rb := kmsg.NewMetadataResponseBroker()
		rb.NodeID, rb.Host, rb.Port, rb.Rack = b.ID, host, port, b.Rack
		resp.Brokers = append(resp.Brokers, rb)
	}
	resp.ClusterID = kmsg.StringPtr(md.ClusterID)
	resp.ControllerID = md.ControllerID
	for _, n := range names {
		t := md.Topics[n]
		if t == nil || t.Partial {
			et := kmsg.NewMetadataResponseTopic()
			et.Topic = kmsg.StringPtr(n)
			et.ErrorCode = kerr.UnknownTopicOrPartition.Code
			resp.Topics = append(resp.Topics, et)
			continue
		}
		resp.Topics = append(resp.Topics, topicMetadata(md, t))
	}
	resp.Topics = append(resp.Topics, errTopics...)
	if req.Version >= 8 && req.Version <= 10 {
		resp.AuthorizedOperations = authorizedOpsUnset
		if req.IncludeClusterAuthorizedOperations {
			resp.AuthorizedOperations = s.clusterAuthorizedOperations(cc) // authz.go
		}
	}
	if req.Version >= 8 && req.IncludeTopicAuthorizedOperations {
		for i := range resp.Topics {
			if t := &resp.Topics[i]; t.Topic != nil {
				t.AuthorizedOperations = s.authorizedOperations(cc, acl.ResourceTopic, *t.Topic)
			}
		}
	}
	return resp, nil
}

func topicMetadata(md *controller.Metadata, t *controller.Topic) kmsg.MetadataResponseTopic {
	rt := kmsg.NewMetadataResponseTopic()
	rt.Topic = kmsg.StringPtr(t.Name)
	rt.TopicID = t.ID
	rt.IsInternal = isInternalTopic(t.Name)
	rt.AuthorizedOperations = authorizedOpsUnset
	live := map[int32]bool{}
	for _, b := range md.Brokers {
		live[b.ID] = true
	}
	for _, pm := range t.Partitions {
		rp := kmsg.NewMetadataResponseTopicPartition()
		rp.Partition = pm.Index
		rp.Leader = pm.Leader
		rp.LeaderEpoch = pm.LeaderEpoch
		rp.Replicas = append([]int32(nil), pm.Replicas...)
		rp.ISR = append([]int32(nil), pm.ISR...)
		for _, r := range pm.Replicas {
			if !live[r] {
				rp.OfflineReplicas = append(rp.OfflineReplicas, r)
			}
		}
		if pm.Leader < 0 || !live[pm.Leader] {
			rp.ErrorCode = kerr.LeaderNotAvailable.Code
		}
		rt.Partitions = append(rt.Partitions, rp)
	}
	return rt
}

func isInternalTopic(name string) bool {
	return name == "__consumer_offsets" || name == "__transaction_state"
}

// autoCreate creates a topic with the broker's defaults and opens its
// partitions before returning, so the caller can use it at once.
func (s *Server) autoCreate(name string) error {
	_, err := s.createTopic(context.Background(), controller.CreateTopicRequest{
		Name:              name,
		NumPartitions:     s.defaultNumPartitions(),
		ReplicationFactor: s.defaultReplicationFactor(),
	})
	if err != nil {
		return err
	}
	return s.reconcile(s.ctrl.Metadata())
}
