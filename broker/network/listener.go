package network

// Listeners and who a connection is.
//
// A broker has one or more listeners (Kafka's listeners config), each a
// name, a security protocol and an accept loop (Server.ServeListener).
// A connection carries its listener and the principal it authenticated
// as, for the handlers: Metadata answers with the endpoints of the
// listener a request arrived on, and authorization (later) reads the
// principal. PLAINTEXT connections, and SSL connections whose client
// gave no certificate, are User:ANONYMOUS; an SSL client's verified
// certificate names its principal through ssl.principal.mapping.rules
// (a name no rule maps is refused, as Kafka refuses it). On a SASL
// listener, the principal is the user SASL authenticated (sasl.go).

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"time"
)

// Listener is one listener a Server accepts on.
type Listener struct {
	Name     string // the listener name, e.g. PLAINTEXT, INTERNAL
	Protocol string // PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
	// TLS serves the TLS of SSL and SASL_SSL listeners; nil for the
	// others.
	TLS *TLS
	// SASL authenticates the connections of SASL_PLAINTEXT and SASL_SSL
	// listeners (sasl.go); nil for the others.
	SASL *SASL
}

// Principal is who a connection authenticated as (Kafka's KafkaPrincipal).
type Principal struct {
	Type string // "User"
	Name string
}

// Anonymous is the principal of a connection that did not authenticate.
var Anonymous = Principal{Type: "User", Name: "ANONYMOUS"}

func (p Principal) String() string { return p.Type + ":" + p.Name }

// handshakeTimeout bounds a TLS handshake when connections.max.idle.ms
// is longer (or 0).
const handshakeTimeout = 10 * time.Second

// Listener is the name of the listener the connection arrived on.
func (cc *Conn) Listener() string { return cc.listener.Name }

// SecurityProtocol is the security protocol of the connection's listener.
func (cc *Conn) SecurityProtocol() string { return cc.listener.Protocol }

// Principal is who the connection authenticated as.
func (cc *Conn) Principal() Principal { return cc.principal }

// handshake runs the TLS handshake of a connection to an SSL listener and
// sets its principal from the client's certificate. It runs in the
// connection's goroutine, within handshakeTimeout (or
// connections.max.idle.ms if shorter), before any request is read.
func (cc *Conn) handshake() error {
	l := cc.listener
	if l.TLS == nil {
		return nil
	}
	d := handshakeTimeout
	if idle := cc.s.idleTimeout(); idle > 0 && idle < d {
		d = idle
	}
	tc := tls.Server(cc.raw, l.TLS.ServerConfig())
	ctx, cancel := context.WithTimeout(cc.s.ctx, d)
	defer cancel()
	cc.raw.SetDeadline(time.Now().Add(d))
	if err := tc.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("TLS handshake: %w", err)
	}
	cc.raw.SetDeadline(time.Time{})
	cc.conn = tc
	if certs := tc.ConnectionState().PeerCertificates; len(certs) > 0 {
		name, err := l.TLS.principal(certs[0])
		if err != nil {
			return err
		}
		if name == "" {
			return errors.New("ssl.principal.mapping.rules mapped the client certificate to an empty name")
		}
		cc.principal = Principal{Type: "User", Name: name}
	}
	cc.log = cc.log.With("principal", cc.principal.String())
	return nil
}
