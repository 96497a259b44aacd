package broker

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// oauthLogin tries OAUTHBEARER with token on a new connection and returns
// the SaslAuthenticate answer.
func oauthLogin(t *testing.T, addr, token string) *kmsg.SASLAuthenticateResponse {
	t.Helper()
	rc := dialRaw(t, addr)
	defer rc.c.Close()
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "OAUTHBEARER"
	if r := rc.do(hs, 1).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		t.Fatalf("SaslHandshake = %v", kerr.ErrorForCode(r.ErrorCode))
	}
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SASLAuthBytes = []byte("n,,\x01auth=Bearer " + token + "\x01\x01")
	return rc.do(auth, 2).(*kmsg.SASLAuthenticateResponse)
}

// TestOAuthBearerJWKSCached (issue 25): the JWKS is fetched on behalf of
// clients that have not authenticated, and its fetch's errors reached
// them. The keys are cached: while the endpoint fails, a run of logins
// makes a few fetches (retry.backoff.ms doubling up to its max), and the
// clients are told "JWKS unavailable", nothing of the endpoint's error;
// once the keys are in, a flood of tokens naming unknown keys makes a few
// fetches ("key not found"), and good tokens none. A token's expiry ends
// the session (KIP-368) even with connections.max.reauth.ms unset.
func TestOAuthBearerJWKSCached(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding
	jwksBody, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256",
		"n": b64.EncodeToString(key.N.Bytes()), "e": b64.EncodeToString(big.NewInt(int64(key.E)).Bytes()),
	}}})
	var requests atomic.Int64
	var up atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		if !up.Load() {
			http.Error(w, "idp-internal-detail", http.StatusInternalServerError)
			return
		}
		w.Write(jwksBody)
	}))
	defer srv.Close()
	sign := func(kid string, exp int64) string {
		h, _ := json.Marshal(map[string]string{"alg": "RS256", "kid": kid, "typ": "JWT"})
		c, _ := json.Marshal(map[string]any{"sub": "frank", "exp": exp, "iat": time.Now().Unix()})
		in := b64.EncodeToString(h) + "." + b64.EncodeToString(c)
		sum := sha256.Sum256([]byte(in))
		sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
		if err != nil {
			t.Fatal(err)
		}
		return in + "." + b64.EncodeToString(sig)
	}
	ts := startTestServer(t, map[string]string{
		"listeners":                                           "SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms":                             "PLAIN,OAUTHBEARER",
		"sasl.mechanism.inter.broker.protocol":                "PLAIN",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": plainJAAS,
		"sasl.oauthbearer.jwks.endpoint.url":                  srv.URL,
		"sasl.oauthbearer.jwks.endpoint.retry.backoff.ms":     "200",
		"sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "2000",
	})
	good := sign("k1", time.Now().Unix()+120)

	// The endpoint fails: 40 logins in a row.
	for i := range 40 {
		r := oauthLogin(t, ts.addr(), good)
		if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || r.ErrorMessage == nil ||
			!strings.Contains(*r.ErrorMessage, "JWKS unavailable") || strings.Contains(*r.ErrorMessage, "idp-internal-detail") ||
			strings.Contains(*r.ErrorMessage, "500") || strings.Contains(*r.ErrorMessage, srv.URL) {
			t.Fatalf("login %d with the JWKS down: %v %v, want a generic \"JWKS unavailable\"", i, kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
		}
	}
	if n := requests.Load(); n < 1 || n > 6 {
		t.Fatalf("40 logins with the JWKS down made %d fetches, want a few", n)
	}

	// The endpoint is back: a login succeeds once the backoff has passed,
	// and its session ends with the token.
	up.Store(true)
	var life int64
	waitFor(t, "a login once the JWKS is back", 10*time.Second, func() bool {
		r := oauthLogin(t, ts.addr(), good)
		life = r.SessionLifetimeMillis
		return r.ErrorCode == 0
	})
	if life <= 0 || life > 120_000 {
		t.Fatalf("session lifetime %d ms with a token expiring in 120 s and connections.max.reauth.ms unset", life)
	}

	// A flood of tokens naming unknown keys.
	before := requests.Load()
	for i := range 100 {
		r := oauthLogin(t, ts.addr(), sign(fmt.Sprintf("forged-%d", i), time.Now().Unix()+120))
		if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "key not found") {
			t.Fatalf("token %d naming an unknown key: %v %v, want \"key not found\"", i, kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
		}
	}
	if n := requests.Load() - before; n > 6 {
		t.Fatalf("100 tokens naming unknown keys made %d JWKS fetches", n)
	}
	before = requests.Load()
	for range 20 {
		if r := oauthLogin(t, ts.addr(), good); r.ErrorCode != 0 {
			t.Fatalf("good token: %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
		}
	}
	if n := requests.Load() - before; n != 0 {
		t.Fatalf("20 logins with a known key made %d JWKS fetches", n)
	}
	t.Logf("%d JWKS fetches in all", requests.Load())
}
