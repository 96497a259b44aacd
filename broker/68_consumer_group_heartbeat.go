package broker

// ConsumerGroupHeartbeat, v0-1 (KIP-848: the next-generation consumer
// group protocol, with server-side assignors "uniform" and "range"; v1
// adds SubscribedTopicRegex and client-generated member ids, KIP-1082).
//
// The request's fields are validated before any group is touched, by
// Kafka's rules (group.ValidateConsumerGroupHeartbeat: a join needs a
// rebalance timeout, an empty non-null TopicPartitions and non-null
// topic names or regex, either of which may be empty, as librdkafka 2.16
// sends them); a regex that does not compile is refused once the member
// is found, as Kafka's coordinator does. A join (epoch 0) creates the
// group, anything else needs it. The coordinator runs the
// heartbeat under the group's partition lock and answers only once the
// records it produced are durable in __consumer_offsets; if they cannot be
// written the member gets the coordinator error and retries.

import (
	"crypto/rand"
	"encoding/base64"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/acl"
	"strata/broker/group"
	"strata/controller"
)

func init() { register(68, 0, 1, handleConsumerGroupHeartbeat) }

func handleConsumerGroupHeartbeat(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ConsumerGroupHeartbeatRequest)
	resp := req.ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
	fail := func(code int16, msg string) (kmsg.Response, error) {
		resp.ErrorCode = code
		if msg != "" {
			resp.ErrorMessage = kmsg.StringPtr(msg)
		}
		return resp, nil
	}
	if !s.authorizedGroup(cc, acl.OpRead, req.Group) {
		return fail(errGroupAuth, "")
	}
	for _, t := range req.SubscribedTopicNames {
		if !s.authorizedTopic(cc, acl.OpDescribe, t) {
			return fail(errTopicAuth, "not authorized to describe topic "+t)
		}
	}
	coord := groupCoordinator(s)
	if coord == nil {
		return fail(kerr.CoordinatorNotAvailable.Code, "")
	}
	cfg := s.consumerGroupConfig()
	if code, msg := group.ValidateConsumerGroupHeartbeat(req, cfg); code != 0 {
		return fail(code, msg)
	}
	hc := group.HeartbeatContext{
		ClientID:    cc.clientID,
		ClientHost:  clientHost(cc.conn),
		Topics:      s.describableTopics(cc),
		NewMemberID: newMemberID,
	}
	var out *kmsg.ConsumerGroupHeartbeatResponse
	code := coord.WithConsumerGroup(req.Group, req.MemberEpoch == group.EpochJoin, func(mg group.ModernGroup) []group.Record {
		g, ok := mg.(*group.ConsumerGroup)
		if !ok {
			return nil
		}
		hc.Now = time.Now()
		r, recs := g.Heartbeat(hc, req)
		out = r
		return recs
	})
	if code != 0 {
		return fail(code, "")
	}
	if out == nil {
		return fail(kerr.UnknownServerError.Code, "")
	}
	return out, nil
}

// groupCoordinator returns the broker's group coordinator, nil while there
// is none.
func groupCoordinator(s *Server) *group.Coordinator {
	if s.groups == nil {
		return nil
	}
	return s.groups.coord
}

// newMemberID makes a member id for v0 joins (v1 clients bring their own):
// a random UUID, base64url without padding like Kafka's Uuid.toString.
func newMemberID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// clientHost is Kafka's rendering of the client address: "/" + IP.
func clientHost(c net.Conn) string {
	if c == nil || c.RemoteAddr() == nil {
		return ""
	}
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return "/" + c.RemoteAddr().String()
	}
	return "/" + host
}

// consumerGroupConfig is the KIP-848 group configuration, from Kafka's
// group.consumer.* broker keys.
func (s *Server) consumerGroupConfig() group.ConsumerGroupConfig {
	r := s.cfg.Resolver(nil) // before Start there is no metadata yet
	if s.ctrl != nil {
		r = s.resolver(s.ctrl.Metadata())
	}
	c := group.DefaultConsumerGroupConfig()
	c.SessionTimeout = time.Duration(r.Int("group.consumer.session.timeout.ms")) * time.Millisecond
	c.HeartbeatInterval = time.Duration(r.Int("group.consumer.heartbeat.interval.ms")) * time.Millisecond
	c.MaxSize = int(r.Int("group.consumer.max.size"))
	if as := r.List("group.consumer.assignors"); len(as) > 0 {
		c.Assignors = as
	}
	return c
}

// consumerTopics is the topic metadata consumer groups subscribe to.
func (s *Server) consumerTopics() group.TopicLookup {
	return metadataTopics{s.ctrl.Metadata()}
}

// describableTopics is consumerTopics as the member may see it: a regular
// expression subscription matches only the topics its principal may
// describe (Kafka 4's KIP-848 regex resolution), so that an assignment
// never names, or gives the id of, a topic it may not know of.
func (s *Server) describableTopics(cc *clientConn) group.TopicLookup {
	all := metadataTopics{s.ctrl.Metadata()}
	if s.authz == nil {
		return all
	}
	return filteredTopics{all, func(name string) bool { return s.authorizedTopic(cc, acl.OpDescribe, name) }}
}

// filteredTopics lists, for regex subscriptions, only the topics keep
// admits; lookups by name or id (explicit subscriptions, checked on
// their own) are as metadataTopics answers them.
type filteredTopics struct {
	metadataTopics
	keep func(name string) bool
}

func (f filteredTopics) Topics() []group.TopicInfo {
	var out []group.TopicInfo
	for _, t := range f.metadataTopics.Topics() {
		if f.keep(t.Name) {
			out = append(out, t)
		}
	}
	return out
}

// metadataTopics is a group.TopicLookup over a metadata snapshot.
type metadataTopics struct{ md *controller.Metadata }

func topicInfo(t *controller.Topic) group.TopicInfo {
	return group.TopicInfo{
		Name:       t.Name,
		ID:         t.ID,
		Partitions: int32(len(t.Partitions)),
		Internal:   t.Name == "__consumer_offsets" || t.Name == "__transaction_state",
	}
}

func (m metadataTopics) TopicByName(name string) (group.TopicInfo, bool) {
	if m.md == nil {
		return group.TopicInfo{}, false
	}
	t, ok := m.md.Topics[name]
	if !ok || t == nil {
		return group.TopicInfo{}, false
	}
	return topicInfo(t), true
}

func (m metadataTopics) TopicByID(id [16]byte) (group.TopicInfo, bool) {
	if m.md == nil {
		return group.TopicInfo{}, false
	}
	name, ok := m.md.TopicIDs[id]
	if !ok {
		return group.TopicInfo{}, false
	}
	return m.TopicByName(name)
}

func (m metadataTopics) Topics() []group.TopicInfo {
	if m.md == nil {
		return nil
	}
	out := make([]group.TopicInfo, 0, len(m.md.Topics))
	for _, t := range m.md.Topics {
		if t != nil {
			out = append(out, topicInfo(t))
		}
	}
	return out
}
