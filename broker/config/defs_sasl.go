package config

import (
	"fmt"
	"strings"
)

// SASL mechanisms Strata serves, by Kafka's names.
const (
	MechPlain       = "PLAIN"
	MechScramSHA256 = "SCRAM-SHA-256"
	MechScramSHA512 = "SCRAM-SHA-512"
)

// SASLMechanisms are the mechanisms Strata serves.
var SASLMechanisms = []string{MechPlain, MechScramSHA256, MechScramSHA512}

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
	{Name: "connections.max.reauth.ms", Type: Long, Default: str("0"), Check: atLeast(0),
		Doc: "KIP-368: the longest a SASL session lasts before the client must re-authenticate; a connection whose session expired is closed at its next request other than a SASL one. 0: sessions do not expire."},
}

// saslListenerDef defines listener.name.<listener>.sasl.enabled.mechanisms
// and listener.name.<listener>.<mechanism>.sasl.jaas.config.
func saslListenerDef(rest string) (*Def, bool) {
	if rest == "sasl.enabled.mechanisms" || rest == "connections.max.reauth.ms" {
		return brokerTable.byKey[rest], true
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
			return fmt.Errorf("listener %s: sasl.enabled.mechanisms: %s is not served by Strata (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 are; Kafka's default is GSSAPI, so set sasl.enabled.mechanisms)", listener, m)
		}
		if m == MechPlain && c.JAAS[m] == nil {
			return fmt.Errorf("listener %s: PLAIN needs listener.name.%s.plain.sasl.jaas.config with its users (user_<name>=\"<password>\")", listener, strings.ToLower(listener))
		}
	}
	return nil
}
