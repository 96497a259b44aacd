package broker

// Envelope, v0 (KIP-590): a request a broker forwards to the active
// controller on behalf of a client, with the client's principal and
// address, so that the controller authorizes it as the client.
//
// The controller serves an Envelope, as Kafka does, only on the
// inter-broker or control-plane listener (elsewhere the connection is
// closed) and only from a principal with ClusterAction on the cluster
// (CLUSTER_AUTHORIZATION_FAILED); on a broker that is not the active
// controller it answers NOT_CONTROLLER. The principal
// (envelope_principal.go) and the address are checked
// (PRINCIPAL_DESERIALIZATION_FAILURE, INVALID_REQUEST), as is the inner
// request: one whole request, with its header, of an API that brokers
// forward (registerForwarded), at a version served here
// (INVALID_REQUEST). The inner request is then handled as if the client
// had sent it here, as the embedded principal from the embedded address,
// and its response, with its header, is the Envelope's response data.
// The forwarding side is forward.go (forwardEnvelope).

import (
	"errors"
	"fmt"
	"net"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func init() { register(58, 0, 0, handleEnvelope) }

// envelopeOrigin is who an Envelope's inner request comes from.
type envelopeOrigin struct {
	principal string // Type:Name
	host      string // the address, as ACLs name hosts
}

func handleEnvelope(s *Server, cc *clientConn, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.EnvelopeRequest)
	resp := req.ResponseKind().(*kmsg.EnvelopeResponse)
	if cc.env != nil {
		resp.ErrorCode = kerr.InvalidRequest.Code // an Envelope in an Envelope
		return resp, nil
	}
	if l := cc.listener(); l != "" && !s.privilegedListener(l) {
		return nil, fmt.Errorf("an Envelope on listener %s: it is accepted only on the inter-broker listener", l)
	}
	if !s.interBrokerAllowed(cc) { // ClusterAction on the cluster (interbroker.go)
		s.log.Warn("Envelope refused: no ClusterAction on the cluster", "principal", cc.principal(), "remote", cc.aclHost())
		resp.ErrorCode = errClusterAuth
		return resp, nil
	}
	if ac, ok := s.ctrl.(activeController); ok && !ac.IsActive() {
		resp.ErrorCode = kerr.NotController.Code
		return resp, nil
	}
	p, err := decodePrincipal(req.RequestPrincipal)
	if err != nil {
		s.log.Warn("Envelope refused: bad principal", "from", cc.principal(), "err", err)
		resp.ErrorCode = kerr.PrincipalDeserializationFailure.Code
		return resp, nil
	}
	host, err := envelopeHost(req.ClientHostAddress)
	if err != nil {
		s.log.Warn("Envelope refused: bad client address", "from", cc.principal(), "err", err)
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	inner, corr, clientID, err := parseEnvelopedRequest(req.RequestData)
	if err != nil {
		s.log.Warn("Envelope refused: bad inner request", "from", cc.principal(), "err", err)
		resp.ErrorCode = kerr.InvalidRequest.Code
		return resp, nil
	}
	icc := &clientConn{nc: cc.nc, conn: cc.conn, clientID: clientID, env: &envelopeOrigin{principal: p.String(), host: host}}
	out, err := s.handle(icc, apis[inner.Key()].fn, inner)
	if err != nil || out.Msg == nil {
		s.log.Warn("Envelope: the inner request failed", "api", kmsg.NameForKey(inner.Key()), "err", err)
		resp.ErrorCode = kerr.UnknownServerError.Code
		return resp, nil
	}
	if out.Wait != nil {
		out.Wait()
	}
	resp.ResponseData = appendEnvelopedResponse(nil, corr, out.Msg)
	return resp, nil
}

// privilegedListener: the inter-broker or control-plane listener.
func (s *Server) privilegedListener(l string) bool {
	ib, _ := s.cfg.InterBroker()
	cp, _ := s.cfg.ControlPlane()
	return l == ib || cp != "" && l == cp
}

// envelopeHost reads an Envelope's client address: an IPv4 or IPv6
// address, 4 or 16 bytes.
func envelopeHost(b []byte) (string, error) {
	if len(b) != net.IPv4len && len(b) != net.IPv6len {
		return "", fmt.Errorf("client address of %d bytes (4 or 16)", len(b))
	}
	return net.IP(b).String(), nil
}

// envelopeAddress is what envelopeHost reads: host's address, 4 bytes
// for IPv4.
func envelopeAddress(host string) ([]byte, error) {
	ip := net.ParseIP(host)
	if ip == nil {
		return nil, fmt.Errorf("client address %q is not an IP address", host)
	}
	if v4 := ip.To4(); v4 != nil {
		return v4, nil
	}
	return ip.To16(), nil
}

// maxEnvelopedClientID bounds the inner request's client id.
const maxEnvelopedClientID = 4096

// parseEnvelopedRequest decodes an Envelope's request data: a request
// header (v1, or v2 for flexible versions) and body, of a forwardable API
// at a version served here.
func parseEnvelopedRequest(b []byte) (kmsg.Request, int32, string, error) {
	r := kbin.Reader{Src: b}
	key, version, corr := r.Int16(), r.Int16(), r.Int32()
	cid := r.NullableString()
	if !r.Ok() {
		return nil, 0, "", errors.New("truncated request header")
	}
	clientID := ""
	if cid != nil {
		clientID = *cid
	}
	if len(clientID) > maxEnvelopedClientID {
		return nil, 0, "", fmt.Errorf("client id of %d bytes", len(clientID))
	}
	kreq := kmsg.RequestForKey(key)
	if kreq == nil {
		return nil, 0, "", fmt.Errorf("unknown api key %d", key)
	}
	entry, served := apis[key]
	if !served || !forwardable[key] {
		return nil, 0, "", fmt.Errorf("%s is not an API brokers forward", kmsg.NameForKey(key))
	}
	if version < entry.min || version > entry.max {
		return nil, 0, "", fmt.Errorf("%s v%d is not served (v%d-%d)", kmsg.NameForKey(key), version, entry.min, entry.max)
	}
	kreq.SetVersion(version)
	if kreq.IsFlexible() {
		kmsg.SkipTags(&r)
		if !r.Ok() {
			return nil, 0, "", errors.New("malformed request header tags")
		}
	}
	if err := kreq.ReadFrom(r.Src); err != nil {
		return nil, 0, "", fmt.Errorf("decode %s v%d: %w", kmsg.NameForKey(key), version, err)
	}
	return kreq, corr, clientID, nil
}

// appendEnvelopedResponse appends resp with its response header
// (correlation id; tagged fields when flexible), as an Envelope's
// response data holds it.
func appendEnvelopedResponse(dst []byte, corr int32, resp kmsg.Response) []byte {
	dst = kbin.AppendInt32(dst, corr)
	if resp.IsFlexible() && resp.Key() != 18 {
		dst = append(dst, 0)
	}
	return resp.AppendTo(dst)
}
