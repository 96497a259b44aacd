package network

// OAUTHBEARER (RFC 7628) with JWTs checked against a JWKS endpoint, as
// Kafka's OAuthBearerValidatorCallbackHandler (KIP-768) checks them: the
// signature with the endpoint's key named by the token's kid (RS*, PS*
// and ES* algorithms; "none" is refused), the expiry (exp, required) and
// not-before, within sasl.oauthbearer.clock.skew.seconds, the audience
// (sasl.oauthbearer.expected.audience, when set) and the issuer
// (sasl.oauthbearer.expected.issuer, when set). The principal is the
// claim sasl.oauthbearer.sub.claim.name (sub). A token that fails a check
// is refused with a message that says which. The keys are cached (jwks).

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"strata/broker/config"
)

// jwks caches one JWKS endpoint's keys. The endpoint is fetched on
// behalf of clients that have not authenticated, so nothing they send
// makes it fetched more often than this: at the first login, when the keys
// are older than sasl.oauthbearer.jwks.endpoint.refresh.ms, and when a
// token names a kid the keys lack; after a fetch that failed or still
// lacked a kid, none is tried again before a backoff that starts at
// sasl.oauthbearer.jwks.endpoint.retry.backoff.ms and doubles up to
// sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms (Kafka's
// RefreshingHttpsJwks). A failed fetch keeps the keys it had. Clients are
// told only "JWKS unavailable" or "key not found"; the endpoint's errors
// are logged at WARN, once per retry.backoff.max.ms.
type jwks struct {
	mu      sync.Mutex
	url     string
	keys    map[string]crypto.PublicKey
	fetched time.Time // when keys were fetched
	next    time.Time // no fetch before then (zero: any time)
	backoff time.Duration
	warned  time.Time
}

// errJWKSUnavailable and errKeyNotFound are what a client is told.
var (
	errJWKSUnavailable = errors.New("JWKS unavailable")
	errKeyNotFound     = errors.New("key not found")
)

// jwksFor returns the server's cache of url's keys.
func (s *Server) jwksFor(url string) *jwks {
	s.jwksMu.Lock()
	defer s.jwksMu.Unlock()
	if s.jwks == nil {
		s.jwks = map[string]*jwks{}
	}
	j := s.jwks[url]
	if j == nil {
		j = &jwks{url: url}
		s.jwks[url] = j
	}
	return j
}

// key returns the key named kid ("" when the set has one key).
func (j *jwks) key(ctx context.Context, kid string, cfg config.OAuthConfig, log *slog.Logger) (crypto.PublicKey, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	find := func() (crypto.PublicKey, bool) {
		if kid == "" && len(j.keys) == 1 {
			for _, k := range j.keys {
				return k, true
			}
		}
		k, ok := j.keys[kid]
		return k, ok
	}
	now := time.Now()
	stale := j.keys == nil || (cfg.Refresh > 0 && now.Sub(j.fetched) > cfg.Refresh)
	k, found := find()
	if (found && !stale) || now.Before(j.next) {
		if found {
			return k, nil
		}
		if j.keys == nil {
			return nil, errJWKSUnavailable
		}
		return nil, errKeyNotFound
	}
	keys, err := fetchJWKS(ctx, j.url)
	if err == nil {
		j.keys, j.fetched = keys, now
		k, found = find()
	}
	minBackoff, maxBackoff := max(cfg.RetryBackoff, time.Millisecond), max(cfg.RetryBackoffMax, cfg.RetryBackoff, time.Millisecond)
	if err != nil || !found {
		j.backoff = min(max(2*j.backoff, minBackoff), maxBackoff)
		j.next = now.Add(j.backoff)
	} else {
		j.backoff, j.next = 0, time.Time{}
	}
	if err != nil && now.Sub(j.warned) >= maxBackoff {
		j.warned = now
		log.Warn("OAUTHBEARER: could not fetch sasl.oauthbearer.jwks.endpoint.url; logins go on with the keys fetched before, if any",
			"url", j.url, "err", err, "retry_in", j.backoff)
	}
	switch {
	case found:
		return k, nil
	case j.keys == nil:
		return nil, errJWKSUnavailable
	}
	return nil, errKeyNotFound
}

// fetchJWKS reads a JWK set from an http(s) or file URL.
func fetchJWKS(ctx context.Context, url string) (map[string]crypto.PublicKey, error) {
	var body []byte
	if path, ok := strings.CutPrefix(url, "file://"); ok {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		body = b
	} else {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return nil, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("HTTP %s", resp.Status)
		}
		if body, err = io.ReadAll(io.LimitReader(resp.Body, 1<<20)); err != nil {
			return nil, err
		}
	}
	var set struct {
		Keys []struct {
			Kty, Kid, Use, Crv, N, E, X, Y string
		} `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("not a JWK set: %v", err)
	}
	out := map[string]crypto.PublicKey{}
	b64 := base64.RawURLEncoding
	for _, k := range set.Keys {
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		switch k.Kty {
		case "RSA":
			n, err1 := b64.DecodeString(k.N)
			e, err2 := b64.DecodeString(k.E)
			if err1 != nil || err2 != nil || len(e) > 4 {
				continue
			}
			out[k.Kid] = &rsa.PublicKey{N: new(big.Int).SetBytes(n), E: int(new(big.Int).SetBytes(e).Int64())}
		case "EC":
			var c elliptic.Curve
			switch k.Crv {
			case "P-256":
				c = elliptic.P256()
			case "P-384":
				c = elliptic.P384()
			case "P-521":
				c = elliptic.P521()
			default:
				continue
			}
			x, err1 := b64.DecodeString(k.X)
			y, err2 := b64.DecodeString(k.Y)
			if err1 != nil || err2 != nil {
				continue
			}
			out[k.Kid] = &ecdsa.PublicKey{Curve: c, X: new(big.Int).SetBytes(x), Y: new(big.Int).SetBytes(y)}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("the JWK set has no RSA or EC signing key")
	}
	return out, nil
}

// oauthServer is OAUTHBEARER's one message.
type oauthServer struct {
	cfg    config.OAuthConfig
	keys   *jwks
	ctx    context.Context
	log    *slog.Logger
	user   string
	expiry time.Time
}

func (o *oauthServer) username() string { return o.user }

// sessionEnd is when the token expires (KIP-368 ends the session then).
func (o *oauthServer) sessionEnd() time.Time { return o.expiry }

func oauthFail(format string, a ...any) error {
	return fmt.Errorf("Authentication failed: OAUTHBEARER: "+format, a...)
}

func (o *oauthServer) next(msg []byte) ([]byte, bool, error) {
	// gs2-header "n,[a=authzid]," then \x01-separated key=value pairs
	// with auth=Bearer <token>, ending \x01\x01.
	m := string(msg)
	gs2, rest, ok := strings.Cut(m, "\x01")
	if !ok || !strings.HasPrefix(gs2, "n,") && !strings.HasPrefix(gs2, "y,") {
		return nil, false, oauthFail("invalid initial client response")
	}
	var token string
	for _, kv := range strings.Split(rest, "\x01") {
		if v, ok := strings.CutPrefix(kv, "auth="); ok {
			scheme, t, _ := strings.Cut(v, " ")
			if !strings.EqualFold(scheme, "Bearer") {
				return nil, false, oauthFail("the auth value is not a Bearer token")
			}
			token = strings.TrimSpace(t)
		}
	}
	if token == "" {
		return nil, false, oauthFail("no token in the client response")
	}
	sub, exp, err := o.validate(token)
	if err != nil {
		return nil, false, oauthFail("%v", err)
	}
	if a, ok := strings.CutPrefix(strings.TrimSuffix(gs2, ","), "n,a="); ok && a != "" && a != sub {
		return nil, false, oauthFail("the authorization id %q is not the token's subject", a)
	}
	o.user, o.expiry = sub, exp
	return nil, true, nil
}

// validate checks a JWT and returns its subject and expiry.
func (o *oauthServer) validate(token string) (string, time.Time, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return "", time.Time{}, errors.New("the token is not a signed JWT (three base64url parts)")
	}
	b64 := base64.RawURLEncoding
	hb, err := b64.DecodeString(parts[0])
	if err != nil {
		return "", time.Time{}, errors.New("the token's header is not base64url")
	}
	var hdr struct{ Alg, Kid string }
	if err := json.Unmarshal(hb, &hdr); err != nil {
		return "", time.Time{}, errors.New("the token's header is not JSON")
	}
	sig, err := b64.DecodeString(parts[2])
	if err != nil {
		return "", time.Time{}, errors.New("the token's signature is not base64url")
	}
	var h func() hash.Hash
	var ch crypto.Hash
	switch hdr.Alg[min(2, len(hdr.Alg)):] {
	case "256":
		h, ch = sha256.New, crypto.SHA256
	case "384":
		h, ch = sha512.New384, crypto.SHA384
	case "512":
		h, ch = sha512.New, crypto.SHA512
	}
	if h == nil || !slices.Contains([]string{"RS", "PS", "ES"}, hdr.Alg[:2]) {
		return "", time.Time{}, fmt.Errorf("the token's algorithm %q is not accepted (RS256, PS256, ES256 and their 384 and 512 forms are)", hdr.Alg)
	}
	key, err := o.keys.key(o.ctx, hdr.Kid, o.cfg, o.log)
	if err != nil {
		return "", time.Time{}, err
	}
	d := h()
	d.Write([]byte(parts[0] + "." + parts[1]))
	sum := d.Sum(nil)
	valid := false
	switch k := key.(type) {
	case *rsa.PublicKey:
		switch hdr.Alg[:2] {
		case "RS":
			valid = rsa.VerifyPKCS1v15(k, ch, sum, sig) == nil
		case "PS":
			valid = rsa.VerifyPSS(k, ch, sum, sig, nil) == nil
		}
	case *ecdsa.PublicKey:
		if n := (k.Curve.Params().BitSize + 7) / 8; hdr.Alg[:2] == "ES" && len(sig) == 2*n {
			valid = ecdsa.Verify(k, sum, new(big.Int).SetBytes(sig[:n]), new(big.Int).SetBytes(sig[n:]))
		}
	}
	if !valid {
		return "", time.Time{}, errors.New("the token's signature does not verify with the key of sasl.oauthbearer.jwks.endpoint.url")
	}
	cb, err := b64.DecodeString(parts[1])
	if err != nil {
		return "", time.Time{}, errors.New("the token's claims are not base64url")
	}
	var claims map[string]any
	if err := json.Unmarshal(cb, &claims); err != nil {
		return "", time.Time{}, errors.New("the token's claims are not a JSON object")
	}
	now, skew := time.Now(), o.cfg.ClockSkew
	exp, ok := claims["exp"].(float64)
	if !ok {
		return "", time.Time{}, errors.New("the token has no exp claim")
	}
	expiry := time.Unix(int64(exp), 0)
	if now.After(expiry.Add(skew)) {
		return "", time.Time{}, fmt.Errorf("the token expired at %s (exp)", expiry.UTC().Format(time.RFC3339))
	}
	if nbf, ok := claims["nbf"].(float64); ok && now.Add(skew).Before(time.Unix(int64(nbf), 0)) {
		return "", time.Time{}, fmt.Errorf("the token is not valid before %s (nbf)", time.Unix(int64(nbf), 0).UTC().Format(time.RFC3339))
	}
	if len(o.cfg.Audience) > 0 {
		var aud []string
		switch a := claims["aud"].(type) {
		case string:
			aud = []string{a}
		case []any:
			for _, e := range a {
				if s, ok := e.(string); ok {
					aud = append(aud, s)
				}
			}
		}
		match := false
		for _, a := range aud {
			match = match || slices.Contains(o.cfg.Audience, a)
		}
		if !match {
			return "", time.Time{}, fmt.Errorf("the token's audience %v is not one of sasl.oauthbearer.expected.audience %v (aud)", aud, o.cfg.Audience)
		}
	}
	if o.cfg.Issuer != "" {
		if iss, _ := claims["iss"].(string); iss != o.cfg.Issuer {
			return "", time.Time{}, fmt.Errorf("the token's issuer %q is not sasl.oauthbearer.expected.issuer %q (iss)", iss, o.cfg.Issuer)
		}
	}
	claim := o.cfg.SubClaim
	if claim == "" {
		claim = "sub"
	}
	sub, _ := claims[claim].(string)
	if strings.TrimSpace(sub) == "" {
		return "", time.Time{}, fmt.Errorf("the token has no %s claim (sasl.oauthbearer.sub.claim.name) to name its principal", claim)
	}
	return sub, expiry, nil
}
