package broker

// SASL: the broker's side of it. The network layer authenticates
// connections to SASL_PLAINTEXT and SASL_SSL listeners (broker/network,
// sasl.go there); the broker gives it each listener's SASL config (PLAIN's
// users from the listener's JAAS config) and the SCRAM credentials of the
// cluster metadata (controller.Metadata.ScramUsers: ZooKeeper's
// /config/users, or the embedded controller's metadata file), and runs the
// client side on its own connections to other brokers when their listener
// is SASL_* (sasl.mechanism.inter.broker.protocol, with the username and
// password of the listener's JAAS config for that mechanism).

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"strata/broker/config"
	"strata/broker/network"
)

// listenerSASL is the SASL of a SASL_* listener (nil for the others).
func (s *Server) listenerSASL(l config.Listener) *network.SASL {
	p := protocolOf(l)
	if p != config.SASLPlaintext && p != config.SASLSSL {
		return nil
	}
	name := l.Name
	return &network.SASL{
		Config: func() (config.SASLConfig, error) { return s.currentResolver().SASL(name) },
		Scram:  s.scramCredential,
	}
}

// scramCredential is user's SCRAM credential for mechanism, from the
// cluster metadata.
func (s *Server) scramCredential(mechanism, user string) (network.ScramCredential, bool) {
	if s.ctrl == nil {
		return network.ScramCredential{}, false
	}
	c, ok := s.ctrl.Metadata().ScramUsers[user][mechanism]
	if !ok {
		return network.ScramCredential{}, false
	}
	return network.ScramCredential{Salt: c.Salt, StoredKey: c.StoredKey, ServerKey: c.ServerKey, Iterations: c.Iterations}, true
}

// clientSASL is the mechanism the broker authenticates with on its own
// connections to listener, nil when the listener is not SASL_*.
func (s *Server) clientSASL(listener string) (sasl.Mechanism, error) {
	l, _, ok := s.cfg.Listener(listener)
	if !ok {
		return nil, nil
	}
	if p := protocolOf(l); p != config.SASLPlaintext && p != config.SASLSSL {
		return nil, nil
	}
	c, err := s.currentResolver().SASL(listener)
	if err != nil {
		return nil, err
	}
	mech := c.InterBrokerMechanism
	j := c.JAAS[mech]
	if j == nil {
		return nil, fmt.Errorf("listener %s: no JAAS config for %s (sasl.mechanism.inter.broker.protocol)", listener, mech)
	}
	user, pass := j.Options["username"], j.Options["password"]
	switch mech {
	case config.MechPlain:
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case config.MechScramSHA256:
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	case config.MechScramSHA512:
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("sasl.mechanism.inter.broker.protocol: %s is not served", mech)
}

// saslClientHandshake authenticates c with mech: SaslHandshake v1, then
// SaslAuthenticate v1 until the mechanism is done.
func saslClientHandshake(ctx context.Context, c net.Conn, host string, mech sasl.Mechanism) error {
	deadline := time.Now().Add(10 * time.Second)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	c.SetDeadline(deadline)
	defer c.SetDeadline(time.Time{})
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Version, hs.Mechanism = 1, mech.Name()
	hsResp := kmsg.NewPtrSASLHandshakeResponse()
	hsResp.Version = 1
	if err := saslRoundTrip(c, 1, hs, hsResp); err != nil {
		return err
	}
	if err := kerr.ErrorForCode(hsResp.ErrorCode); err != nil {
		return fmt.Errorf("SaslHandshake %s: %w (enabled: %v)", mech.Name(), err, hsResp.SupportedMechanisms)
	}
	session, out, err := mech.Authenticate(ctx, host)
	if err != nil {
		return err
	}
	for corr := int32(2); ; corr++ {
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = 1, out
		resp := kmsg.NewPtrSASLAuthenticateResponse()
		resp.Version = 1
		if err := saslRoundTrip(c, corr, req, resp); err != nil {
			return err
		}
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			msg := ""
			if resp.ErrorMessage != nil {
				msg = ": " + *resp.ErrorMessage
			}
			return fmt.Errorf("SaslAuthenticate %s: %w%s", mech.Name(), err, msg)
		}
		var done bool
		done, out, err = session.Challenge(resp.SASLAuthBytes)
		if err != nil {
			return err
		}
		if done {
			return nil
		}
	}
}

// saslRoundTrip writes req (header v1) and reads its response (header
// v0) into resp.
func saslRoundTrip(c net.Conn, corr int32, req kmsg.Request, resp kmsg.Response) error {
	const clientID = "strata-broker"
	buf := make([]byte, 4, 64)
	buf = binary.BigEndian.AppendUint16(buf, uint16(req.Key()))
	buf = binary.BigEndian.AppendUint16(buf, uint16(req.GetVersion()))
	buf = binary.BigEndian.AppendUint32(buf, uint32(corr))
	buf = binary.BigEndian.AppendUint16(buf, uint16(len(clientID)))
	buf = append(buf, clientID...)
	buf = req.AppendTo(buf)
	binary.BigEndian.PutUint32(buf, uint32(len(buf)-4))
	if _, err := c.Write(buf); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return fmt.Errorf("%s: %w", kmsg.NameForKey(req.Key()), err)
	}
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > 1<<20 {
		return fmt.Errorf("%s: response of %d bytes", kmsg.NameForKey(req.Key()), n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c, body); err != nil {
		return err
	}
	if int32(binary.BigEndian.Uint32(body)) != corr {
		return fmt.Errorf("%s: correlation id mismatch", kmsg.NameForKey(req.Key()))
	}
	return resp.ReadFrom(body[4:])
}
