package network

// SASL on SASL_PLAINTEXT and SASL_SSL listeners, as Kafka's
// SaslServerAuthenticator: the connection state that the network layer
// keeps, because it gates what may be served.
//
// Before a connection has authenticated, only one ApiVersions (handed to
// the Handler), then SaslHandshake and SaslAuthenticate (served here) are
// read; any other request closes the connection, as Kafka does, and a frame is
// at most 512 KiB (Kafka's sasl.server.max.receive.size). SaslHandshake
// picks a mechanism of sasl.enabled.mechanisms (an unknown one is
// answered UNSUPPORTED_SASL_MECHANISM and closes); SaslAuthenticate
// carries the mechanism's messages (v0 of SaslHandshake: raw size-
// prefixed tokens instead). A failed authentication is answered
// SASL_AUTHENTICATION_FAILED with a message, then the connection closes.
// On success the connection's principal is User:<name>.
//
// KIP-368: with connections.max.reauth.ms set, or a credential that
// expires (an OAUTHBEARER token), SaslAuthenticate v1+ answers the
// session's lifetime; the client re-authenticates with a new SaslHandshake
// v1 and SaslAuthenticate (same mechanism, same principal) before it
// ends. A request other than those on a connection whose session has
// expired closes it (saslGate has the whole state machine).

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/config"
)

// saslMaxReceive is Kafka's sasl.server.max.receive.size default: the
// largest frame read before authentication.
const saslMaxReceive = 512 << 10

// SASL is how a SASL listener authenticates.
type SASL struct {
	// Config returns the listener's SASL configuration in force, read at
	// each handshake.
	Config func() (config.SASLConfig, error)
	// Scram returns a user's SCRAM credential for a mechanism.
	Scram func(mechanism, user string) (ScramCredential, bool)
}

// saslMechServer is one mechanism's server side of an exchange.
type saslMechServer interface {
	next(msg []byte) (out []byte, done bool, err error)
	username() string
}

// saslState is a connection's SASL state.
type saslState struct {
	mech          string         // chosen by the latest SaslHandshake, until its exchange ends
	server        saslMechServer // the exchange in progress
	raw           bool           // SaslHandshake v0: raw tokens follow
	authenticated bool
	authMech      string    // the mechanism the connection authenticated with
	authVersion   int16     // the SaslAuthenticate version it authenticated with
	expiry        time.Time // the session's end (connections.max.reauth.ms, the credential's); zero: none
	versions      bool      // an ApiVersions was answered before authentication
	reauthStart   time.Time // when the latest re-authentication started
}

func (s *scramServer) username() string { return s.user }

// plainServer is PLAIN (RFC 4616) against the JAAS config's user_<name>
// options.
type plainServer struct {
	users map[string]string
	user  string
}

func (p *plainServer) username() string { return p.user }

func (p *plainServer) next(msg []byte) ([]byte, bool, error) {
	parts := strings.Split(string(msg), "\x00")
	if len(parts) != 3 {
		return nil, false, errors.New("Invalid SASL/PLAIN response: expected 3 tokens")
	}
	authzid, user, pass := parts[0], parts[1], parts[2]
	if user == "" {
		return nil, false, errors.New("Authentication failed: username not specified")
	}
	if pass == "" {
		return nil, false, errors.New("Authentication failed: password not specified")
	}
	if authzid != "" && authzid != user {
		return nil, false, errors.New("Authentication failed: Client requested an authorization id that is different from username")
	}
	want, ok := p.users[user]
	// compare even for an unknown user, so that the time does not tell
	if subtle.ConstantTimeCompare([]byte(pass), []byte(want)) != 1 || !ok {
		return nil, false, errors.New("Authentication failed: Invalid username or password")
	}
	p.user = user
	return nil, true, nil
}

// Authenticated reports whether the connection has authenticated (always
// true on a listener without SASL).
func (cc *Conn) Authenticated() bool {
	return cc.listener.SASL == nil || cc.sasl.authenticated
}

// saslMaxFrame is the largest frame the connection reads next.
func (cc *Conn) saslMaxFrame(max int32) int32 {
	if cc.listener.SASL != nil && !cc.sasl.authenticated {
		return min(max, saslMaxReceive)
	}
	return max
}

// minReauthInterval is Kafka's least time between the starts of two
// re-authentications of a connection (KafkaChannel's
// MIN_REAUTH_INTERVAL_ONE_SECOND_NANOS).
const minReauthInterval = time.Second

// saslGate decides a request on a SASL listener, as Kafka's
// SaslServerAuthenticator and SocketServer do: served here (handled),
// handed on (ApiVersions before authentication, or any request once
// authenticated within the session), or the connection closes (err).
//
//   - Before authentication: one ApiVersions (answered without error;
//     one answered with an error, an unsupported version, may be tried
//     again), then SaslHandshake, then only SaslAuthenticate until the
//     exchange ends. Anything else closes the connection unanswered.
//   - Once authenticated: a SaslHandshake starts a re-authentication
//     (KIP-368) when the session has an end and no re-authentication
//     started in the last second, even if the session has already ended
//     (Kafka's KafkaChannel.maybeBeginServerReauthentication); during it
//     only SaslAuthenticate is read. Any other request after the session's
//     end closes the connection. Within the session, a SaslHandshake that
//     starts nothing, or a SaslAuthenticate outside an exchange, is
//     answered ILLEGAL_SASL_STATE, as Kafka's request handlers answer.
func (cc *Conn) saslGate(req *Request) (handled, more bool, err error) {
	st := &cc.sasl
	name := kmsg.NameForKey(req.Key)
	now := time.Now()
	switch {
	case st.mech != "": // an exchange in progress (a SaslHandshake is answered ILLEGAL_SASL_STATE, then closes)
		if req.Key != 36 && req.Key != 17 {
			return true, false, fmt.Errorf("unexpected %s request during SASL authentication", name)
		}
		more, err = cc.serveSASL(req, false)
		return true, more, err
	case !st.authenticated:
		switch {
		case req.Key == 18 && !st.versions:
			return false, true, nil // answered by the Handler; serveFrame marks it done
		case req.Key == 17:
			more, err = cc.serveSASL(req, false)
			return true, more, err
		case req.Key == 18:
			return true, false, errors.New("a second ApiVersions request before SASL authentication")
		}
		return true, false, fmt.Errorf("unexpected %s request before SASL authentication", name)
	case req.Key == 17 && !st.expiry.IsZero() && (st.reauthStart.IsZero() || now.Sub(st.reauthStart) >= minReauthInterval):
		st.reauthStart = now
		more, err = cc.serveSASL(req, false)
		return true, more, err
	case !st.expiry.IsZero() && now.After(st.expiry):
		return true, false, errors.New("SASL session expired (connections.max.reauth.ms or the credential's lifetime) without re-authentication")
	case req.Key == 17 || req.Key == 36:
		more, err = cc.serveSASL(req, true)
		return true, more, err
	}
	return false, true, nil
}

// saslVersionsAnswered records an ApiVersions answered before
// authentication: only an answer without error counts (KIP-511: a client
// told its version is unsupported tries again with one the broker
// supports).
func (cc *Conn) saslVersionsAnswered(resp kmsg.Response) {
	if cc.listener.SASL == nil || cc.sasl.authenticated {
		return
	}
	if r, ok := resp.(*kmsg.ApiVersionsResponse); ok && r.ErrorCode == 0 {
		cc.sasl.versions = true
	}
}

// serveSASL answers a SaslHandshake or SaslAuthenticate; with illegal, it
// answers ILLEGAL_SASL_STATE and changes nothing.
func (cc *Conn) serveSASL(req *Request, illegal bool) (bool, error) {
	kreq := kmsg.RequestForKey(req.Key)
	maxV := int16(1)
	if req.Key == 36 {
		maxV = 2
	}
	if req.Version < 0 || req.Version > maxV {
		return false, fmt.Errorf("unsupported %s version %d", kmsg.NameForKey(req.Key), req.Version)
	}
	kreq.SetVersion(req.Version)
	r := kbin.Reader{Src: req.Body}
	if kreq.IsFlexible() {
		kmsg.SkipTags(&r)
	}
	if !r.Ok() {
		return false, errors.New("malformed request header tags")
	}
	if err := kreq.ReadFrom(r.Src); err != nil {
		return false, fmt.Errorf("decode %s v%d: %w", kmsg.NameForKey(req.Key), req.Version, err)
	}
	var resp kmsg.Response
	var closeErr error
	switch q := kreq.(type) {
	case *kmsg.SASLHandshakeRequest:
		if illegal {
			r := q.ResponseKind().(*kmsg.SASLHandshakeResponse)
			r.Version, r.ErrorCode = q.Version, kerr.IllegalSaslState.Code
			resp = r
			break
		}
		resp, closeErr = cc.saslHandshake(q)
	case *kmsg.SASLAuthenticateRequest:
		if illegal {
			r := q.ResponseKind().(*kmsg.SASLAuthenticateResponse)
			msg := "SaslAuthenticate request received after successful authentication"
			r.Version, r.ErrorCode, r.ErrorMessage = q.Version, kerr.IllegalSaslState.Code, &msg
			resp = r
			break
		}
		resp, closeErr = cc.saslAuthenticate(q)
	}
	if !cc.respond(outResp{corr: req.Correlation, Response: Response{Msg: resp}}) {
		return false, nil
	}
	if closeErr != nil {
		return false, closeErr // the answer goes out first (serve stops the writer before closing)
	}
	return true, nil
}

func (cc *Conn) saslHandshake(q *kmsg.SASLHandshakeRequest) (kmsg.Response, error) {
	resp := q.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.Version = q.Version
	cfg, err := cc.listener.SASL.Config()
	if err != nil {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, fmt.Errorf("SASL config: %w", err)
	}
	resp.SupportedMechanisms = cfg.Mechanisms
	st := &cc.sasl
	switch {
	case st.mech != "":
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, errors.New("SaslHandshake during a SASL exchange")
	case st.authenticated && (q.Version < 1 || st.authVersion < 1):
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, errors.New("re-authentication needs SaslHandshake v1 and SaslAuthenticate v1+")
	case !slices.Contains(cfg.Mechanisms, q.Mechanism):
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		return resp, fmt.Errorf("unsupported SASL mechanism %q", q.Mechanism)
	case st.authenticated && q.Mechanism != st.authMech:
		resp.ErrorCode = kerr.IllegalSaslState.Code
		return resp, fmt.Errorf("re-authentication with mechanism %s, not %s", q.Mechanism, st.authMech)
	}
	switch q.Mechanism {
	case config.MechPlain:
		var users map[string]string
		if j := cfg.JAAS[config.MechPlain]; j != nil {
			users = j.Users()
		}
		st.server = &plainServer{users: users}
	case config.MechOAuthBearer:
		if cfg.OAuth.JWKSURL == "" {
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			return resp, errors.New("OAUTHBEARER without sasl.oauthbearer.jwks.endpoint.url")
		}
		st.server = &oauthServer{cfg: cfg.OAuth, keys: cc.s.jwksFor(cfg.OAuth.JWKSURL), ctx: cc.s.ctx, log: cc.s.log}
	default:
		h := ScramHash(q.Mechanism)
		if h == nil {
			resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
			return resp, fmt.Errorf("unsupported SASL mechanism %q", q.Mechanism)
		}
		lookup := cc.listener.SASL.Scram
		if lookup == nil {
			lookup = func(string, string) (ScramCredential, bool) { return ScramCredential{}, false }
		}
		st.server = &scramServer{mech: q.Mechanism, h: h, lookup: lookup}
	}
	st.mech = q.Mechanism
	st.raw = q.Version == 0
	return resp, nil
}

func (cc *Conn) saslAuthenticate(q *kmsg.SASLAuthenticateRequest) (kmsg.Response, error) {
	resp := q.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	resp.Version = q.Version
	st := &cc.sasl
	if st.mech == "" || st.raw {
		resp.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate without a SaslHandshake v1 first"
		resp.ErrorMessage = &msg
		return resp, errors.New(msg)
	}
	out, done, err := cc.saslStep(q.SASLAuthBytes)
	if err != nil {
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		msg := err.Error()
		resp.ErrorMessage = &msg
		return resp, err
	}
	resp.SASLAuthBytes = out
	if done {
		st.authVersion = q.Version
		if q.Version >= 1 && !st.expiry.IsZero() {
			resp.SessionLifetimeMillis = time.Until(st.expiry).Milliseconds()
		}
	}
	return resp, nil
}

// saslStep runs one message of the exchange; when it completes, the
// connection is authenticated (or re-authenticated) and its session
// starts.
func (cc *Conn) saslStep(msg []byte) (out []byte, done bool, err error) {
	st := &cc.sasl
	out, done, err = st.server.next(msg)
	if err != nil {
		cc.log.Info("failed SASL authentication", "mechanism", st.mech, "err", err)
		return nil, false, err
	}
	if !done {
		return out, false, nil
	}
	p := Principal{Type: "User", Name: st.server.username()}
	if st.authenticated && p != cc.principal {
		return nil, false, errors.New("Re-authentication failed: the principal changed")
	}
	cfg, err := cc.listener.SASL.Config()
	if err != nil {
		// Without the listener's config the session's lifetime is not
		// known: refuse rather than grant one that never expires.
		return nil, false, errors.New("Authentication failed: the listener's SASL configuration is unusable")
	}
	// KIP-368, as Kafka's ReauthInfo: the session ends after
	// connections.max.reauth.ms, or when the credential expires (an
	// OAUTHBEARER token) if sooner, even with connections.max.reauth.ms
	// unset.
	st.expiry = time.Time{}
	if cfg.ReauthMs > 0 {
		st.expiry = time.Now().Add(time.Duration(cfg.ReauthMs) * time.Millisecond)
	}
	if e, ok := st.server.(interface{ sessionEnd() time.Time }); ok && !e.sessionEnd().IsZero() &&
		(st.expiry.IsZero() || e.sessionEnd().Before(st.expiry)) {
		st.expiry = e.sessionEnd()
	}
	if !st.authenticated {
		cc.log = cc.log.With("principal", p.String())
	}
	cc.principal = p
	cc.saslPrincipal.Store(&p)
	st.authMech, st.mech, st.server, st.raw, st.authenticated = st.mech, "", nil, false, true
	return out, true, nil
}

// serveRawToken serves one raw SASL token after a SaslHandshake v0: the
// answer is a size-prefixed token; a failure closes the connection.
func (cc *Conn) serveRawToken(body []byte) (bool, error) {
	out, _, err := cc.saslStep(body)
	if err != nil {
		return false, err
	}
	buf := make([]byte, 4+len(out))
	buf[0], buf[1], buf[2], buf[3] = byte(len(out)>>24), byte(len(out)>>16), byte(len(out)>>8), byte(len(out))
	copy(buf[4:], out)
	cc.armWrite()
	if _, err := cc.conn.Write(buf); err != nil {
		return false, nil
	}
	return true, nil
}
