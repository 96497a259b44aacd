package broker

// Forwarding of controller requests (KIP-590).
//
// In a ZooKeeper cluster only the active controller changes metadata. A
// broker that is not the controller forwards the admin requests that
// change it (CreateTopics, DeleteTopics, AlterConfigs,
// IncrementalAlterConfigs, CreatePartitions, ElectLeaders,
// AlterPartitionReassignments, ListPartitionReassignments) to the active
// controller and answers with the controller's response, so that any
// broker can be a tool's bootstrap and clients that send admin requests to
// whatever broker they reach (librdkafka, kafka-go, kafkajs) succeed. It
// does the same for the topics it creates itself: auto-created topics and
// __consumer_offsets.
//
// The request goes to the controller as it came, at the client's version,
// on a connection of its own; the controller does not forward a forwarded
// request again (its client id says it was forwarded), so two brokers that
// each think the other is the controller cannot bounce a request between
// them. When the controller cannot be reached the broker handles the
// request itself, which answers NOT_CONTROLLER, and clients retry.
//
// With an authorizer (authorizer.class.name) the controller must
// authorize the client, not the forwarding broker: the request goes
// wrapped in an Envelope (58_envelope.go) with the client's principal and
// address, as Kafka forwards, on the inter-broker listener where the
// broker's own principal has ClusterAction; the controller handles the
// inner request as the client and the broker answers the client with the
// inner response. Without an authorizer the request goes as it came.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/controller"
)

// forwardClientPrefix starts the client id of forwarded requests.
const forwardClientPrefix = "strata-forward-"

// forwardTimeout bounds a forwarded request that names no timeout of its
// own; maxForwardTimeout bounds any.
const (
	forwardTimeout    = 30 * time.Second
	maxForwardTimeout = 2 * time.Minute
)

// maxForwardResponse bounds the response read back from the controller.
const maxForwardResponse = 64 << 20

// activeController is implemented by controllers that may be inactive on
// this broker (the ZooKeeper controller); the embedded one always acts.
type activeController interface{ IsActive() bool }

// remoteController returns the active controller when it is another
// broker that this broker can name.
func (s *Server) remoteController() (controller.Broker, bool) {
	ac, ok := s.ctrl.(activeController)
	if !ok || ac.IsActive() {
		return controller.Broker{}, false
	}
	md := s.ctrl.Metadata()
	if md.ControllerID < 0 || md.ControllerID == s.self.ID {
		return controller.Broker{}, false
	}
	return md.Broker(md.ControllerID)
}

// forwarded wraps the handler of a request that only the controller can
// carry out: on a broker that is not the controller, the request is
// forwarded, and handled here only when the controller cannot be reached.
func forwarded(fn handler) handler {
	return func(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
		if cc.env != nil || strings.HasPrefix(cc.clientID, forwardClientPrefix) {
			return fn(s, cc, kreq) // forwarded here: never again
		}
		to, ok := s.remoteController()
		if !ok {
			return fn(s, cc, kreq)
		}
		ctx, cancel := context.WithTimeout(s.ctx, requestTimeout(kreq))
		defer cancel()
		var resp kmsg.Response
		var err error
		if s.authz != nil {
			resp, err = s.forwardEnvelope(ctx, to, cc, kreq)
		} else {
			resp, err = s.forward(ctx, to, kreq)
		}
		if err != nil {
			s.log.Warn("forward to the controller failed; answering here",
				"api", kmsg.NameForKey(kreq.Key()), "controller", to.ID, "err", err)
			return fn(s, cc, kreq)
		}
		s.awaitForwarded(ctx, kreq, resp)
		return resp, nil
	}
}

// awaitForwarded holds the answer to a forwarded CreateTopics or
// CreatePartitions until this broker's metadata shows what the controller
// made, whole (or ctx ends: the controller's answer stands), so that a
// client asking this broker next is not told of a topic that does not
// exist yet or has fewer partitions.
func (s *Server) awaitForwarded(ctx context.Context, kreq kmsg.Request, resp kmsg.Response) {
	ctx, cancel := context.WithTimeout(ctx, topicVisibleTimeout)
	defer cancel()
	switch r := resp.(type) {
	case *kmsg.CreateTopicsResponse:
		if req := kreq.(*kmsg.CreateTopicsRequest); req.ValidateOnly {
			return
		}
		for _, t := range r.Topics {
			if t.ErrorCode == 0 {
				s.awaitWhole(ctx, t.Topic, t.TopicID, t.NumPartitions)
			}
		}
	case *kmsg.CreatePartitionsResponse:
		req := kreq.(*kmsg.CreatePartitionsRequest)
		if req.ValidateOnly {
			return
		}
		for i, t := range r.Topics {
			if t.ErrorCode == 0 && i < len(req.Topics) && req.Topics[i].Topic == t.Topic {
				s.awaitWhole(ctx, t.Topic, [16]byte{}, req.Topics[i].Count)
			}
		}
	}
}

// awaitWhole waits until this broker's metadata holds topic name whole
// (not controller.Topic.Partial), with id unless zero, and with at least
// parts partitions, and returns it; nil when ctx ends first.
func (s *Server) awaitWhole(ctx context.Context, name string, id [16]byte, parts int32) *controller.Topic {
	for {
		ch := s.ctrl.Changes()
		t := s.ctrl.Metadata().Topics[name]
		if t != nil && !t.Partial && (id == [16]byte{} || t.ID == id) && len(t.Partitions) >= int(parts) {
			return t
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return nil
		}
	}
}

// requestTimeout is how long a forwarded request may take: the request's
// own timeout and some slack, within maxForwardTimeout.
func requestTimeout(kreq kmsg.Request) time.Duration {
	if t, ok := kreq.(kmsg.TimeoutRequest); ok && t.Timeout() > 0 {
		return min(time.Duration(t.Timeout())*time.Millisecond+5*time.Second, maxForwardTimeout)
	}
	return forwardTimeout
}

// forward sends req, at its own version, to broker to on a new connection
// and returns the response.
func (s *Server) forward(ctx context.Context, to controller.Broker, req kmsg.Request) (kmsg.Response, error) {
	conn, err := s.dialBroker(ctx, "tcp", s.brokerAddr(to)) // the inter-broker listener (listeners.go)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	return roundTrip(conn, forwardClientPrefix+strconv.Itoa(int(s.self.ID)), req)
}

// forwardEnvelope sends req to broker to in an Envelope naming the
// client of cc, and returns the response the controller gave the inner
// request; an error when the controller refused the Envelope.
func (s *Server) forwardEnvelope(ctx context.Context, to controller.Broker, cc *clientConn, req kmsg.Request) (kmsg.Response, error) {
	p, err := splitPrincipal(cc.principal())
	if err != nil {
		return nil, err
	}
	env := kmsg.NewPtrEnvelopeRequest()
	if env.RequestPrincipal, err = encodePrincipal(p); err != nil {
		return nil, err
	}
	if env.ClientHostAddress, err = envelopeAddress(cc.aclHost()); err != nil {
		return nil, err
	}
	const corr = 1
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID(cc.clientID)).AppendRequest(nil, req, corr)
	env.RequestData = frame[4:] // the header and body, without the size
	kresp, err := s.forward(ctx, to, env)
	if err != nil {
		return nil, err
	}
	eresp := kresp.(*kmsg.EnvelopeResponse)
	if eresp.ErrorCode != 0 {
		return nil, fmt.Errorf("the controller refused the Envelope: %w", kerr.ErrorForCode(eresp.ErrorCode))
	}
	data := eresp.ResponseData
	if len(data) < 4 {
		return nil, errors.New("Envelope response data truncated")
	}
	if got := int32(binary.BigEndian.Uint32(data)); got != corr {
		return nil, fmt.Errorf("Envelope response correlation id %d, want %d", got, corr)
	}
	return decodeResponse(req, data[4:])
}

// roundTrip writes one request on conn and reads its response.
func roundTrip(conn net.Conn, clientID string, req kmsg.Request) (kmsg.Response, error) {
	resp, _, err := roundTripCorr(conn, clientID, 1, req)
	return resp, err
}

// roundTripCorr is roundTrip with correlation id corr; answered reports
// whether any byte of the response was read.
func roundTripCorr(conn net.Conn, clientID string, corr int32, req kmsg.Request) (resp kmsg.Response, answered bool, err error) {
	frame := kmsg.NewRequestFormatter(kmsg.FormatterClientID(clientID)).AppendRequest(nil, req, corr)
	if _, err := conn.Write(frame); err != nil {
		return nil, false, err
	}
	var hdr [8]byte
	if n, err := io.ReadFull(conn, hdr[:]); err != nil {
		return nil, n > 0, err
	}
	size := int32(binary.BigEndian.Uint32(hdr[:4]))
	if size < 4 || size > maxForwardResponse {
		return nil, true, fmt.Errorf("response size %d out of bounds", size)
	}
	if got := int32(binary.BigEndian.Uint32(hdr[4:])); got != corr {
		return nil, true, fmt.Errorf("response correlation id %d, want %d", got, corr)
	}
	body := make([]byte, size-4)
	if _, err := io.ReadFull(conn, body); err != nil {
		return nil, true, err
	}
	resp, err = decodeResponse(req, body)
	return resp, true, err
}

// decodeResponse decodes the response to req from what follows the
// correlation id: the header's tagged fields (flexible versions but
// ApiVersions') and the body.
func decodeResponse(req kmsg.Request, body []byte) (kmsg.Response, error) {
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() && req.Key() != 18 {
		r := kbin.Reader{Src: body}
		kmsg.SkipTags(&r)
		if !r.Ok() {
			return nil, errors.New("malformed response header")
		}
		body = r.Src
	}
	if err := resp.ReadFrom(body); err != nil {
		return nil, fmt.Errorf("decode %s response: %w", kmsg.NameForKey(req.Key()), err)
	}
	return resp, nil
}

// createTopic creates a topic for this broker's own needs (auto-creation,
// internal topics) through the active controller, wherever it is, and
// returns once this broker's metadata shows the topic.
func (s *Server) createTopic(ctx context.Context, creq controller.CreateTopicRequest) (*controller.Topic, error) {
	to, remote := s.remoteController()
	if !remote {
		return s.ctrl.CreateTopic(ctx, creq)
	}
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	req.TimeoutMillis = int32(forwardTimeout / time.Millisecond)
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = creq.Name, creq.NumPartitions, creq.ReplicationFactor
	for k, v := range creq.Configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kmsg.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	fctx, cancel := context.WithTimeout(ctx, requestTimeout(req))
	defer cancel()
	kresp, err := s.forward(fctx, to, req)
	if err != nil {
		return nil, fmt.Errorf("create topic %s at controller %d: %w", creq.Name, to.ID, err)
	}
	resp := kresp.(*kmsg.CreateTopicsResponse)
	if len(resp.Topics) != 1 {
		return nil, fmt.Errorf("create topic %s: controller answered %d topics", creq.Name, len(resp.Topics))
	}
	st := resp.Topics[0]
	switch code := st.ErrorCode; {
	case code == kerr.TopicAlreadyExists.Code:
		return nil, controller.ErrTopicExists
	case code != 0:
		err := kerr.ErrorForCode(code)
		if st.ErrorMessage != nil {
			err = fmt.Errorf("%w: %s", err, *st.ErrorMessage)
		}
		return nil, fmt.Errorf("create topic %s: %w", creq.Name, err)
	}
	return s.awaitTopic(ctx, creq.Name, st.TopicID)
}

// awaitTopic waits, within topicVisibleTimeout, until this broker's
// metadata holds topic name with id, whole.
func (s *Server) awaitTopic(ctx context.Context, name string, id [16]byte) (*controller.Topic, error) {
	ctx, cancel := context.WithTimeout(ctx, topicVisibleTimeout)
	defer cancel()
	if t := s.awaitWhole(ctx, name, id, 0); t != nil {
		return t, nil
	}
	return nil, fmt.Errorf("topic %s created but not yet known here: %w", name, kerr.LeaderNotAvailable)
}

// topicVisibleTimeout bounds the wait for the controller's metadata update
// after a forwarded creation.
const topicVisibleTimeout = 10 * time.Second
