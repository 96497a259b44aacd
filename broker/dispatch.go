package broker

// Request dispatch: the network layer (broker/network) reads a request's
// header and hands the rest of the frame to the broker, which checks the
// API and version, decodes the request, runs its handler (apis.go) and
// returns the response for the network layer to write.

import (
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/network"
	"strata/broker/plog"
	"strata/controller"
)

// clientConn is what a handler knows of the connection its request came
// on.
type clientConn struct {
	nc       *network.Conn
	conn     net.Conn
	clientID string // of the connection's latest request that gave one
	// env is set for the request an Envelope carried (58_envelope.go):
	// the client's principal and address stand for the connection's.
	env *envelopeOrigin
}

// memory charges memory a handler holds to the request's share of
// queued.max.request.bytes (network.Conn.Reserve); nil (no charge) for a
// connection made by hand in tests.
func (cc *clientConn) memory() plog.Memory {
	if cc == nil || cc.nc == nil {
		return nil
	}
	return cc.nc.Reserve
}

// listener is the name of the listener the connection arrived on ("" for
// a connection made by hand in tests).
func (cc *clientConn) listener() string {
	if cc == nil || cc.nc == nil {
		return ""
	}
	return cc.nc.Listener()
}

// endpoint is b's endpoint on the connection's listener: Kafka answers
// Metadata, FindCoordinator and DescribeCluster with the endpoints of the
// listener the request arrived on, and leaves out a broker without it.
func (cc *clientConn) endpoint(b controller.Broker) (string, int32, bool) {
	l := cc.listener()
	if l == "" {
		return b.Host, b.Port, true
	}
	return b.Endpoint(l)
}

// delayedResponse is a handler's response that is complete only once
// wait has returned: an acks=-1 produce waiting for replication. The
// network layer writes it from the connection's writer goroutine, in
// request order (network/conn.go).
type delayedResponse struct {
	kmsg.Response
	wait func()
}

// dispatcher is the Server as the network layer's Handler.
type dispatcher struct{ s *Server }

// ServeRequest decodes and handles one request. An error closes the
// connection.
func (d dispatcher) ServeRequest(c *network.Conn, req *network.Request) (network.Response, error) {
	s := d.s
	key, version := req.Key, req.Version
	cc := &clientConn{nc: c, conn: c.NetConn(), clientID: c.ClientID()}
	entry, ok := s.apiEntry(key)
	if key == 18 && (!ok || version > entry.max || version < 0) {
		// KIP-511: answer at v0 without parsing the body.
		return network.Response{Msg: unsupportedApiVersions()}, nil
	}
	kreq := kmsg.RequestForKey(key)
	if kreq == nil {
		return network.Response{}, fmt.Errorf("unknown api key %d", key)
	}
	if !ok || version < entry.min || version > entry.max {
		if resp := unsupportedResponse(kreq, version); resp != nil {
			return network.Response{Msg: resp}, nil
		}
		return network.Response{}, fmt.Errorf("unsupported %s version %d", kmsg.NameForKey(key), version)
	}
	kreq.SetVersion(version)
	r := kbin.Reader{Src: req.Body}
	if kreq.IsFlexible() {
		kmsg.SkipTags(&r)
		if !r.Ok() {
			return network.Response{}, errors.New("malformed request header tags")
		}
	}
	if err := c.ReserveDecode(req, r.Src); err != nil {
		return network.Response{}, err
	}
	if err := kreq.ReadFrom(r.Src); err != nil {
		return network.Response{}, fmt.Errorf("decode %s v%d: %w", kmsg.NameForKey(key), version, err)
	}
	if key != 0 { // only produces overtake queued responses
		if err := c.Drain(); err != nil {
			return network.Response{}, err
		}
	}
	return s.handle(cc, entry.fn, kreq)
}

// handle runs a handler, turning a panic into a closed connection rather
// than a dead broker.
func (s *Server) handle(cc *clientConn, fn handler, kreq kmsg.Request) (out network.Response, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.log.With("remote", cc.conn.RemoteAddr().String()).Error("handler panic", "api", kmsg.NameForKey(kreq.Key()), "panic", r)
			err = fmt.Errorf("internal error handling %s", kmsg.NameForKey(kreq.Key()))
		}
	}()
	name := kmsg.NameForKey(kreq.Key())
	s.metrics.requests.WithLabelValues(name).Inc()
	defer s.timeRequest(name, time.Now(), &out)
	if kreq.Key() == 1 {
		return s.handleFetchSpliced(cc, kreq.(*kmsg.FetchRequest))
	}
	resp, err := fn(s, cc, kreq)
	if d, ok := resp.(*delayedResponse); ok {
		return network.Response{Msg: d.Response, Wait: d.wait}, err
	}
	return network.Response{Msg: resp}, err
}

// timeRequest observes a request's time (TotalTimeMs) once its response
// is ready: now, or when a delayed response's Wait returns.
func (s *Server) timeRequest(name string, start time.Time, out *network.Response) {
	h := s.metrics.requestTime.WithLabelValues(name)
	observe := func() { h.Observe(float64(time.Since(start).Microseconds()) / 1000) }
	if wait := out.Wait; wait != nil {
		out.Wait = func() { wait(); observe() }
		return
	}
	observe()
}

// connLimits are the connection limits in force (network.Options.Limits):
// max.connections, max.connections.per.ip and its overrides are dynamic
// cluster-wide configs, and the other registered brokers' hosts are
// admitted over max.connections (network/conn_limits.go).
func (s *Server) connLimits() network.Limits {
	md := s.ctrl.Metadata()
	r := s.resolver(md)
	return network.Limits{
		MaxConnections:      s.maxConnections(md), // fd_budget.go: from RLIMIT_NOFILE unless set
		MaxConnectionsPerIP: r.Int("max.connections.per.ip"),
		PerIPOverrides:      r.String("max.connections.per.ip.overrides"),
		PeerHosts:           func() []string { return peerHosts(md, s.cfg.ID) },
	}
}

// peerHosts are the hosts of the brokers registered in md other than self.
func peerHosts(md *controller.Metadata, self int32) []string {
	if md == nil {
		return nil
	}
	var hosts []string
	for _, b := range md.Brokers {
		if b.ID != self {
			hosts = append(hosts, b.Host)
		}
	}
	return hosts
}
