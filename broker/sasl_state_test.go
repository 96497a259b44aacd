package broker

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// saslLogin authenticates rc with PLAIN as admin (SaslHandshake v1,
// SaslAuthenticate v1) and returns the session's lifetime.
func saslLogin(t *testing.T, rc *rawConn) int64 {
	t.Helper()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "PLAIN"
	if r := rc.do(hs, 1).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		t.Fatalf("SaslHandshake = %v", kerr.ErrorForCode(r.ErrorCode))
	}
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SASLAuthBytes = []byte("\x00admin\x00admin-secret")
	r := rc.do(auth, 1).(*kmsg.SASLAuthenticateResponse)
	if r.ErrorCode != 0 {
		t.Fatalf("SaslAuthenticate = %v", kerr.ErrorForCode(r.ErrorCode))
	}
	return r.SessionLifetimeMillis
}

func metadataOK(t *testing.T, rc *rawConn, when string) {
	t.Helper()
	if m := rc.do(kmsg.NewPtrMetadataRequest(), 12).(*kmsg.MetadataResponse); len(m.Brokers) != 1 {
		t.Fatalf("Metadata %s: %d brokers", when, len(m.Brokers))
	}
}

// TestSASLStateMachine (issue 25): several ApiVersions were served before
// SASL. As Kafka's SaslServerAuthenticator: one ApiVersions (one refused
// for its version may be retried), then SaslHandshake, then only
// SaslAuthenticate; anything else closes the connection. Once
// authenticated, a SaslHandshake that starts no re-authentication and a
// SaslAuthenticate outside an exchange are answered ILLEGAL_SASL_STATE
// and the connection goes on.
func TestSASLStateMachine(t *testing.T) {
	ts, _ := startSASLServer(t, nil)
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "PLAIN"

	rc := dialRaw(t, ts.addr())
	if av := rc.do(kmsg.NewPtrApiVersionsRequest(), 2).(*kmsg.ApiVersionsResponse); av.ErrorCode != 0 {
		t.Fatalf("first ApiVersions: %v", kerr.ErrorForCode(av.ErrorCode))
	}
	rc.send(kmsg.NewPtrApiVersionsRequest(), 2)
	expectClosed(t, rc)

	// A version the broker does not serve is answered with the error and
	// does not count: the client may try again, then authenticate.
	rc = dialRaw(t, ts.addr())
	corr := rc.send(kmsg.NewPtrApiVersionsRequest(), 99)
	av := kmsg.NewPtrApiVersionsResponse()
	rc.recv(corr, av)
	if av.ErrorCode != kerr.UnsupportedVersion.Code {
		t.Fatalf("ApiVersions v99: %v", kerr.ErrorForCode(av.ErrorCode))
	}
	v3 := kmsg.NewPtrApiVersionsRequest()
	v3.ClientSoftwareName, v3.ClientSoftwareVersion = "strata-test", "1"
	if av := rc.do(v3, 3).(*kmsg.ApiVersionsResponse); av.ErrorCode != 0 {
		t.Fatalf("ApiVersions v3 after v99: %v", kerr.ErrorForCode(av.ErrorCode))
	}
	saslLogin(t, rc)
	metadataOK(t, rc, "after ApiVersions, SaslHandshake, SaslAuthenticate")

	for _, tc := range []struct {
		name   string
		before func(rc *rawConn)
		req    kmsg.Request
	}{
		{"SaslAuthenticate first", func(*rawConn) {}, kmsg.NewPtrSASLAuthenticateRequest()},
		{"ApiVersions after SaslHandshake", func(rc *rawConn) { rc.do(hs, 1) }, kmsg.NewPtrApiVersionsRequest()},
		{"Metadata after SaslHandshake", func(rc *rawConn) { rc.do(hs, 1) }, kmsg.NewPtrMetadataRequest()},
	} {
		rc := dialRaw(t, ts.addr())
		tc.before(rc)
		rc.send(tc.req, 1)
		t.Log(tc.name)
		expectClosed(t, rc)
	}

	// Authenticated, no session end (connections.max.reauth.ms=0): the
	// SASL requests are answered ILLEGAL_SASL_STATE, the connection stays.
	rc = dialRaw(t, ts.addr())
	saslLogin(t, rc)
	if r := rc.do(hs, 1).(*kmsg.SASLHandshakeResponse); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslHandshake after authentication without re-authentication: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := rc.do(kmsg.NewPtrSASLAuthenticateRequest(), 1).(*kmsg.SASLAuthenticateResponse); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslAuthenticate after authentication: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	metadataOK(t, rc, "after the refused SASL requests")
}

// TestSASLReauthAfterExpiry (issue 25, KIP-368): as Kafka's KafkaChannel
// and SocketServer. A SaslHandshake on a connection whose session has
// ended still starts a re-authentication (Kafka checks only that a
// session end exists and that no re-authentication started in the last
// second); requests other than its SaslAuthenticate during it close the
// connection; a SaslHandshake within a second of the last
// re-authentication's start on an expired session, like any other
// request after expiry, closes it.
func TestSASLReauthAfterExpiry(t *testing.T) {
	ts, _ := startSASLServer(t, map[string]string{"connections.max.reauth.ms": "300"})
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "PLAIN"

	rc := dialRaw(t, ts.addr())
	if life := saslLogin(t, rc); life <= 0 || life > 300 {
		t.Fatalf("session lifetime %d ms", life)
	}
	time.Sleep(400 * time.Millisecond) // past the session
	saslLogin(t, rc)                   // re-authentication after expiry, as Kafka allows
	metadataOK(t, rc, "after re-authenticating past the session's end")
	time.Sleep(400 * time.Millisecond) // expired again, within a second of the re-authentication's start
	rc.send(hs, 1)
	expectClosed(t, rc)

	// During a re-authentication only its SaslAuthenticate is read.
	rc = dialRaw(t, ts.addr())
	saslLogin(t, rc)
	if r := rc.do(hs, 1).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		t.Fatalf("re-authentication SaslHandshake: %v", kerr.ErrorForCode(r.ErrorCode))
	}
	rc.send(kmsg.NewPtrMetadataRequest(), 12)
	expectClosed(t, rc)
}
