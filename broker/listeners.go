package broker

// The broker's listeners (Kafka's listeners, advertised.listeners,
// listener.security.protocol.map, inter.broker.listener.name,
// control.plane.listener.name) and its own connections to other brokers.
//
// Each listener is bound and served by broker/network with its own
// accept loop; an SSL listener has its TLS (network.TLS, reloaded when its
// files or its dynamic ssl.keystore.* / ssl.truststore.* configs change).
// The broker registers every listener's advertised endpoint
// (controller.Broker.Endpoints); Metadata, FindCoordinator and
// DescribeCluster answer with the endpoints of the listener the request
// arrived on. The broker's own connections to other brokers (replica
// fetchers, forwarded requests, ControlledShutdown) go to their
// inter-broker listener's endpoint, authenticated with SASL when it is
// SASL_PLAINTEXT or SASL_SSL (sasl.go), over TLS when it is SSL or SASL_SSL,
// with that listener's keystore as client certificate and its
// truststore, and the host checked against the peer's certificate
// unless ssl.endpoint.identification.algorithm is empty.

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"strata/broker/config"
	"strata/broker/network"
	"strata/controller"
)

// boundListener is one listener being served.
type boundListener struct {
	cfg config.Listener
	adv controller.Endpoint
	ln  net.Listener
	tls *network.TLS // SSL and SASL_SSL listeners
}

// listenerTLS makes the TLS of every SSL listener; the error is one line.
func (s *Server) listenerTLS() (map[string]*network.TLS, error) {
	out := map[string]*network.TLS{}
	for _, l := range s.cfg.Listeners {
		if l.Protocol != config.SSL && l.Protocol != config.SASLSSL {
			continue
		}
		name := l.Name
		t, err := network.NewTLS(name, func() config.SSLConfig { return s.currentResolver().SSL(name) }, s.log)
		if err != nil {
			return nil, err
		}
		out[name] = t
	}
	return out, nil
}

// currentResolver is the broker's config in force (static before the
// controller is open).
func (s *Server) currentResolver() config.Resolver {
	if c := s.ctrl; c != nil {
		return s.resolver(c.Metadata())
	}
	return s.cfg.Resolver(nil)
}

// bindListeners binds every listener: the first one at opts.Listen when
// set (--listen), advertised at opts.Advertise when set (--advertise).
// A listener advertised at its own address is advertised at its bound
// one (the port picked for port 0; a reachable host for a wildcard).
func (s *Server) bindListeners() error {
	tlss := s.tlsByListener
	closeAll := func() {
		for _, b := range s.listeners {
			b.ln.Close()
		}
		s.listeners = nil
	}
	for i, l := range s.cfg.Listeners {
		adv := l
		if i < len(s.cfg.AdvertisedListeners) {
			adv = s.cfg.AdvertisedListeners[i]
		}
		ownAddr := adv.Host == l.Host && adv.Port == l.Port
		addr := l.Addr()
		if i == 0 && s.opts.Listen != "" {
			addr = s.opts.Listen
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			closeAll()
			return fmt.Errorf("listener %s: listen %s: %w", l.Name, addr, err)
		}
		b := boundListener{cfg: l, ln: ln, tls: tlss[l.Name]}
		s.listeners = append(s.listeners, b)
		advAddr := adv.Addr()
		if i == 0 && s.opts.Advertise != "" {
			advAddr, ownAddr = s.opts.Advertise, false
		}
		if ownAddr {
			advAddr = ln.Addr().String()
		}
		host, port, err := advertisedEndpoint(advAddr, ln)
		if err != nil {
			closeAll()
			return fmt.Errorf("listener %s: advertise %q: %w", l.Name, advAddr, err)
		}
		s.listeners[i].adv = controller.Endpoint{Listener: l.Name, Host: host, Port: port, SecurityProtocol: config.ProtocolID(protocolOf(l))}
	}
	return nil
}

func protocolOf(l config.Listener) string {
	if l.Protocol == "" {
		return config.PLAINTEXT
	}
	return l.Protocol
}

// advertisedEndpoint turns an advertised HOST:PORT into the host and port
// given to clients: a wildcard or empty host becomes a reachable one, and
// port 0 the bound port.
func advertisedEndpoint(adv string, ln net.Listener) (string, int32, error) {
	host, portS, err := net.SplitHostPort(adv)
	if err != nil {
		return "", 0, err
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		host = advertisedHost()
	}
	port, err := strconv.Atoi(portS)
	if err != nil || port < 0 || port > 65535 {
		return "", 0, fmt.Errorf("bad port")
	}
	if port == 0 {
		_, p, _ := net.SplitHostPort(ln.Addr().String())
		port, _ = strconv.Atoi(p)
	}
	return host, int32(port), nil
}

// serveListeners starts every listener's accept loop.
func (s *Server) serveListeners() {
	for _, b := range s.listeners {
		s.network.ServeListener(b.ln, network.Listener{Name: b.cfg.Name, Protocol: protocolOf(b.cfg), TLS: b.tls, SASL: s.listenerSASL(b.cfg)})
		// listen first: the line operators (and scripts) know from
		// before there were several listeners.
		s.log.Info("listening", "listen", b.ln.Addr().String(), "listener", b.cfg.Name, "protocol", protocolOf(b.cfg),
			"advertise", net.JoinHostPort(b.adv.Host, strconv.Itoa(int(b.adv.Port))))
	}
}

// closeListeners stops accepting.
func (s *Server) closeListeners() {
	for _, b := range s.listeners {
		b.ln.Close()
	}
}

// checkTLS reloads the listeners' certificates if their configs or files
// changed (after a change of the dynamic broker configs).
func (s *Server) checkTLS() {
	for _, b := range s.listeners {
		if b.tls != nil {
			b.tls.Check()
		}
	}
}

// ListenerAddr is the bound address of the listener named name (tests).
func (s *Server) ListenerAddr(name string) (net.Addr, bool) {
	for _, b := range s.listeners {
		if b.cfg.Name == name {
			return b.ln.Addr(), true
		}
	}
	return nil, false
}

// interBroker returns the inter-broker listener's name and, when it is
// SSL, its TLS.
func (s *Server) interBroker() (string, *network.TLS) {
	name, _ := s.cfg.InterBroker()
	for _, b := range s.listeners {
		if b.cfg.Name == name {
			return name, b.tls
		}
	}
	return name, nil
}

// brokerAddr is HOST:PORT of b's inter-broker listener (its first
// endpoint if it registered none of that name).
func (s *Server) brokerAddr(b controller.Broker) string {
	name, _ := s.interBroker()
	h, p, ok := b.Endpoint(name)
	if !ok {
		h, p = b.Host, b.Port
	}
	return net.JoinHostPort(h, strconv.Itoa(int(p)))
}

// dialBroker connects to another broker's inter-broker listener at addr,
// with TLS when the listener is SSL or SASL_SSL, and authenticated with
// SASL (sasl.go) when it is SASL_*.
func (s *Server) dialBroker(ctx context.Context, network_, addr string) (net.Conn, error) {
	name, t := s.interBroker()
	return s.dialListener(ctx, network_, addr, name, t)
}

// dialControlPlane connects the controller to a broker's control-plane
// listener at addr.
func (s *Server) dialControlPlane(ctx context.Context, network_, addr string) (net.Conn, error) {
	name, _ := s.cfg.ControlPlane()
	for _, b := range s.listeners {
		if b.cfg.Name == name {
			return s.dialListener(ctx, network_, addr, name, b.tls)
		}
	}
	return dialWith(ctx, network_, addr, nil)
}

// dialListener connects to a broker's listener of that name at addr: TLS
// when t is set, then the SASL exchange when the listener is SASL_*.
func (s *Server) dialListener(ctx context.Context, network_, addr, listener string, t *network.TLS) (net.Conn, error) {
	mech, err := s.clientSASL(listener)
	if err != nil {
		return nil, err
	}
	c, err := dialWith(ctx, network_, addr, t)
	if err != nil || mech == nil {
		return c, err
	}
	host, _, _ := net.SplitHostPort(addr)
	if err := saslClientHandshake(ctx, c, host, mech); err != nil {
		c.Close()
		return nil, fmt.Errorf("SASL to %s: %w", addr, err)
	}
	return c, nil
}

func dialWith(ctx context.Context, network_, addr string, t *network.TLS) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, network_, addr)
	if err != nil || t == nil {
		return c, err
	}
	host, _, _ := net.SplitHostPort(addr)
	tc := tls.Client(c, t.ClientConfig(strings.Trim(host, "[]")))
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := tc.HandshakeContext(hctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("TLS to %s: %w", addr, err)
	}
	return tc, nil
}

// ControlPlaneDialer returns how the controller reaches brokers: the
// control-plane listener's name, protocol id, the inter-broker
// listener's name and protocol id, and a dialer (TLS on an SSL or
// SASL_SSL listener, then SASL on a SASL_* one).
// cmd/strata hands them to the ZooKeeper controller.
func (s *Server) ControlPlaneDialer() (controlPlane, interBroker string, interBrokerProtocol int16, dial func(ctx context.Context, network, addr string) (net.Conn, error)) {
	cp, _ := s.cfg.ControlPlane()
	ib, ibp := s.cfg.InterBroker()
	return cp, ib, config.ProtocolID(ibp), s.dialControlPlane
}

// validateTLSUpdate refuses new per-broker overrides m that would give an
// SSL listener a keystore or truststore that does not load (Kafka's
// dynamic keystore update validates the new keystore first), or that the
// broker would refuse to start with (SSLConfig.Check): a listener that
// verifies client certificates (ssl.client.auth required or requested)
// left without a truststore would check them against the system's roots,
// so that any certificate a public CA issued would log in.
func (s *Server) validateTLSUpdate(md *controller.Metadata, m map[string]string) error {
	cur := s.resolver(md)
	next := cur
	next.PerBroker = m
	for _, b := range s.listeners {
		if b.tls == nil {
			continue
		}
		nc := next.SSL(b.cfg.Name)
		if reflect.DeepEqual(nc, cur.SSL(b.cfg.Name)) {
			continue
		}
		if err := network.ValidateTLS(nc); err != nil {
			return &config.Error{Code: kerr.InvalidConfig, Msg: fmt.Sprintf("listener %s: %v", b.cfg.Name, err)}
		}
		if err := nc.Check(b.cfg.Name); err != nil {
			return &config.Error{Code: kerr.InvalidConfig, Msg: err.Error() +
				": refused, as the same configuration is refused at startup (without a truststore, client certificates would be checked against the system's roots)"}
		}
	}
	return nil
}
