package config

import (
	"fmt"
	"strings"
	"time"
)

// SASL mechanisms Strata serves, by Kafka's names.
const (
	MechPlain       = "PLAIN"
	MechScramSHA256 = "SCRAM-SHA-256"
	MechScramSHA512 = "SCRAM-SHA-512"
	MechOAuthBearer = "OAUTHBEARER"
)

// SASLMechanisms are the mechanisms Strata serves.
var SASLMechanisms = []string{MechPlain, MechScramSHA256, MechScramSHA512, MechOAuthBearer}

// oauthValidatorClasses are Kafka's names of the JWKS-validating
// callback handler (listener.name.<l>.oauthbearer.sasl.server.callback.handler.class).
var oauthValidatorClasses = []string{
	"org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler",
	"org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerValidatorCallbackHandler",
}

// saslDefs are the SASL configs, with Kafka's names. sasl.enabled.mechanisms
// can be set for one listener as listener.name.<listener>.sasl.enabled.mechanisms,
// and a mechanism's JAAS config is listener.name.<listener>.<mechanism>.sasl.jaas.config
// (listenerDef).
var saslDefs = []*Def{
	{Name: "sasl.enabled.mechanisms", Type: List, Default: str("GSSAPI"),
		Doc: "The SASL mechanisms served on SASL_PLAINTEXT and SASL_SSL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512. Kafka's default, GSSAPI, is not served by Strata: a SASL listener needs this set."},
	{Name: "sasl.mechanism.inter.broker.protocol", Type: String, Default: str("GSSAPI"),
		Doc: "The SASL mechanism the broker uses on its own connections to other brokers when the inter-broker listener is SASL_PLAINTEXT or SASL_SSL (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512), with the username and password of that listener's JAAS config for the mechanism."},
	{Name: "sasl.jaas.config", Type: Password, Default: nil,
		Doc: "A JAAS login module configuration; set per listener and mechanism as listener.name.<listener>.<mechanism>.sasl.jaas.config (e.g. listener.name.sasl_plaintext.plain.sasl.jaas.config)."},
	{Name: "sasl.server.callback.handler.class", Type: Class, Default: nil, Check: oneOf(oauthValidatorClasses...),
		Doc: "Set per listener as listener.name.<listener>.oauthbearer.sasl.server.callback.handler.class: Strata takes Kafka's OAuthBearerValidatorCallbackHandler only, which is what it does for OAUTHBEARER anyway (JWTs checked against sasl.oauthbearer.jwks.endpoint.url)."},
	{Name: "sasl.oauthbearer.jwks.endpoint.url", Type: String, Default: nil,
		Doc: "The JWKS (https://…, or file://…) whose keys sign the OAUTHBEARER tokens; OAUTHBEARER is served only with it set. Fetched at the first login, every sasl.oauthbearer.jwks.endpoint.refresh.ms, and when a token names a key it lacks."},
	{Name: "sasl.oauthbearer.jwks.endpoint.refresh.ms", Type: Long, Default: str("3600000"), Check: atLeast(1),
		Doc: "How often the JWKS is fetched again."},
	{Name: "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms", Type: Long, Default: str("100"), Check: atLeast(0),
		Doc: "After a JWKS fetch that failed, or that lacked the key a token names, the least time before the next; it doubles at each such fetch up to sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms. Tokens that name unknown keys never make the broker fetch more often."},
	{Name: "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms", Type: Long, Default: str("10000"), Check: atLeast(0),
		Doc: "The longest wait between JWKS fetches after failures (see sasl.oauthbearer.jwks.endpoint.retry.backoff.ms)."},
	{Name: "sasl.oauthbearer.expected.audience", Type: List, Default: str(""),
		Doc: "The audiences a token's aud claim must name one of; empty: aud is not checked."},
	{Name: "sasl.oauthbearer.expected.issuer", Type: String, Default: nil,
		Doc: "The issuer a token's iss claim must be; unset: iss is not checked."},
	{Name: "sasl.oauthbearer.sub.claim.name", Type: String, Default: str("sub"),
		Doc: "The claim that names a token's principal (User:<value>)."},
	{Name: "sasl.oauthbearer.clock.skew.seconds", Type: Int, Default: str("30"), Check: atLeast(0),
		Doc: "The clock difference allowed when checking a token's exp and nbf."},
	{Name: "connections.max.reauth.ms", Type: Long, Default: str("0"), Check: atLeast(0),
		Doc: "KIP-368: the longest a SASL session lasts before the client must re-authenticate (an OAUTHBEARER session also ends when its token expires); a connection whose session expired is closed at its next request other than a SaslHandshake starting a re-authentication. 0: sessions do not expire (but for tokens)."},
}

// saslListenerDef defines listener.name.<listener>.sasl.enabled.mechanisms
// and listener.name.<listener>.<mechanism>.sasl.jaas.config.
func saslListenerDef(rest string) (*Def, bool) {
	if rest == "sasl.enabled.mechanisms" || rest == "connections.max.reauth.ms" {
		return brokerTable.byKey[rest], true
	}
	if strings.HasPrefix(rest, "sasl.oauthbearer.") {
		d, ok := brokerTable.byKey[rest]
		return d, ok
	}
	if rest == "oauthbearer.sasl.server.callback.handler.class" {
		return brokerTable.byKey["sasl.server.callback.handler.class"], true
	}
	mech, ok := strings.CutSuffix(rest, ".sasl.jaas.config")
	if !ok {
		return nil, false
	}
	for _, m := range SASLMechanisms {
		if strings.EqualFold(m, mech) {
			return brokerTable.byKey["sasl.jaas.config"], true
		}
	}
	return nil, false
}

// SASLConfig is the SASL configuration of one listener.
type SASLConfig struct {
	// Mechanisms are the enabled mechanisms, upper-case.
	Mechanisms []string
	// JAAS is each mechanism's login module options
	// (listener.name.<listener>.<mechanism>.sasl.jaas.config); a
	// mechanism without one is absent.
	JAAS map[string]*JAASConfig
	// ReauthMs is connections.max.reauth.ms (0: no expiry).
	ReauthMs int64
	// InterBrokerMechanism is sasl.mechanism.inter.broker.protocol.
	InterBrokerMechanism string
	// OAuth is how OAUTHBEARER tokens are checked.
	OAuth OAuthConfig
}

// OAuthConfig is how OAUTHBEARER tokens are checked (sasl.oauthbearer.*).
type OAuthConfig struct {
	JWKSURL string
	Refresh time.Duration
	// RetryBackoff and RetryBackoffMax bound how often the JWKS is
	// fetched again after a failure or for a kid it lacks.
	RetryBackoff, RetryBackoffMax time.Duration
	Audience                      []string
	Issuer                        string
	SubClaim                      string
	ClockSkew                     time.Duration
}

// SASL returns listener's SASL configuration in force; err tells a JAAS
// config that does not parse.
func (r Resolver) SASL(listener string) (SASLConfig, error) {
	prefix := "listener.name." + strings.ToLower(listener) + "."
	get := func(k string) string {
		if v, _, ok := r.Lookup(prefix + k); ok {
			return v
		}
		return r.String(k)
	}
	c := SASLConfig{JAAS: map[string]*JAASConfig{}, InterBrokerMechanism: strings.ToUpper(strings.TrimSpace(r.String("sasl.mechanism.inter.broker.protocol")))}
	for _, m := range strings.Split(get("sasl.enabled.mechanisms"), ",") {
		if m = strings.ToUpper(strings.TrimSpace(m)); m != "" {
			c.Mechanisms = append(c.Mechanisms, m)
		}
	}
	c.ReauthMs = r.Int("connections.max.reauth.ms")
	c.OAuth = OAuthConfig{
		JWKSURL:  get("sasl.oauthbearer.jwks.endpoint.url"),
		Issuer:   get("sasl.oauthbearer.expected.issuer"),
		SubClaim: get("sasl.oauthbearer.sub.claim.name"),
	}
	for _, a := range strings.Split(get("sasl.oauthbearer.expected.audience"), ",") {
		if a = strings.TrimSpace(a); a != "" {
			c.OAuth.Audience = append(c.OAuth.Audience, a)
		}
	}
	var n int64
	fmt.Sscan(get("sasl.oauthbearer.jwks.endpoint.refresh.ms"), &n)
	c.OAuth.Refresh = time.Duration(n) * time.Millisecond
	n = 0
	fmt.Sscan(get("sasl.oauthbearer.jwks.endpoint.retry.backoff.ms"), &n)
	c.OAuth.RetryBackoff = time.Duration(n) * time.Millisecond
	n = 0
	fmt.Sscan(get("sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms"), &n)
	c.OAuth.RetryBackoffMax = time.Duration(n) * time.Millisecond
	n = 0
	fmt.Sscan(get("sasl.oauthbearer.clock.skew.seconds"), &n)
	c.OAuth.ClockSkew = time.Duration(n) * time.Second
	if v, _, ok := r.Lookup(prefix + "connections.max.reauth.ms"); ok {
		fmt.Sscan(v, &c.ReauthMs)
	}
	for _, m := range SASLMechanisms {
		v, _, ok := r.Lookup(prefix + strings.ToLower(m) + ".sasl.jaas.config")
		if !ok {
			if v, ok = r.Static["sasl.jaas.config"]; !ok {
				continue
			}
		}
		j, err := ParseJAAS(v)
		if err != nil {
			return c, fmt.Errorf("listener %s: %s.sasl.jaas.config: %w", listener, strings.ToLower(m), err)
		}
		c.JAAS[m] = j
	}
	return c, nil
}

// check tells what is wrong with a SASL listener's configuration: a
// mechanism Strata does not serve, or PLAIN without a JAAS config.
func (c SASLConfig) check(listener string) error {
	if len(c.Mechanisms) == 0 {
		return fmt.Errorf("listener %s: sasl.enabled.mechanisms is empty", listener)
	}
	for _, m := range c.Mechanisms {
		supported := false
		for _, s := range SASLMechanisms {
			supported = supported || m == s
		}
		if !supported {
			return fmt.Errorf("listener %s: sasl.enabled.mechanisms: %s is not served by Strata (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER are; Kafka's default is GSSAPI, so set sasl.enabled.mechanisms)", listener, m)
		}
		if m == MechOAuthBearer && c.OAuth.JWKSURL == "" {
			return fmt.Errorf("listener %s: OAUTHBEARER needs sasl.oauthbearer.jwks.endpoint.url (Strata checks tokens against a JWKS only; Kafka's unsecured tokens are not accepted)", listener)
		}
		if m == MechPlain && c.JAAS[m] == nil {
			return fmt.Errorf("listener %s: PLAIN needs listener.name.%s.plain.sasl.jaas.config with its users (user_<name>=\"<password>\")", listener, strings.ToLower(listener))
		}
	}
	return nil
}
