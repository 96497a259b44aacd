package config

import (
	"crypto/tls"
	"fmt"
	"strings"
	"sync"
)

// DefaultProtocolMap is Kafka's default listener.security.protocol.map.
const DefaultProtocolMap = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"

// Security protocols, with Kafka's names and ids (UpdateMetadata's
// SecurityProtocol).
const (
	PLAINTEXT     = "PLAINTEXT"
	SSL           = "SSL"
	SASLPlaintext = "SASL_PLAINTEXT"
	SASLSSL       = "SASL_SSL"
)

// ProtocolID is Kafka's id of a security protocol (-1 if unknown).
func ProtocolID(p string) int16 {
	switch p {
	case PLAINTEXT:
		return 0
	case SSL:
		return 1
	case SASLPlaintext:
		return 2
	case SASLSSL:
		return 3
	}
	return -1
}

// ProtocolName is the name of Kafka's security protocol id ("" if unknown).
func ProtocolName(id int16) string {
	for _, p := range []string{PLAINTEXT, SSL, SASLPlaintext, SASLSSL} {
		if ProtocolID(p) == id {
			return p
		}
	}
	return ""
}

// sslDefs are the TLS configs, with Kafka's names. Every one can be set
// for one listener as listener.name.<listener>.<name> (listenerDef). The
// keystore and truststore configs are dynamic per broker, as in Kafka, so
// that AlterConfigs can rotate a listener's certificate.
var sslDefs = []*Def{
	{Name: "ssl.keystore.type", Type: String, Default: str("PEM"), Check: oneOf("PEM"), Dynamic: PerBroker,
		Doc: "The format of the keystore. Strata takes PEM only (Kafka's default is JKS)."},
	{Name: "ssl.keystore.location", Type: String, Default: nil, Dynamic: PerBroker,
		Doc: "The PEM file with the private key and its certificate chain. Reloaded when the file changes."},
	{Name: "ssl.keystore.certificate.chain", Type: Password, Default: nil, Dynamic: PerBroker,
		Doc: "The certificate chain in PEM, inline, with ssl.keystore.key (instead of ssl.keystore.location)."},
	{Name: "ssl.keystore.key", Type: Password, Default: nil, Dynamic: PerBroker,
		Doc: "The private key in PEM (PKCS#8, PKCS#1 or SEC 1), inline, with ssl.keystore.certificate.chain."},
	{Name: "ssl.keystore.password", Type: Password, Default: nil, Dynamic: PerBroker,
		Doc: "The password of the keystore. Accepted, not used for PEM (see ssl.key.password)."},
	{Name: "ssl.key.password", Type: Password, Default: nil, Dynamic: PerBroker,
		Doc: "The password of an encrypted private key (PKCS#8 encrypted with PBES2, or a legacy PEM-encrypted key)."},
	{Name: "ssl.truststore.type", Type: String, Default: str("PEM"), Check: oneOf("PEM"), Dynamic: PerBroker,
		Doc: "The format of the truststore. Strata takes PEM only (Kafka's default is JKS)."},
	{Name: "ssl.truststore.location", Type: String, Default: nil, Dynamic: PerBroker,
		Doc: "The PEM file with the trusted CA certificates; unset with no ssl.truststore.certificates: the system's roots. Reloaded when the file changes."},
	{Name: "ssl.truststore.certificates", Type: Password, Default: nil, Dynamic: PerBroker,
		Doc: "The trusted CA certificates in PEM, inline."},
	{Name: "ssl.truststore.password", Type: Password, Default: nil, Dynamic: PerBroker,
		Doc: "The password of the truststore. Accepted, not used for PEM."},
	{Name: "ssl.client.auth", Type: String, Default: str("none"), Check: oneOf("required", "requested", "none"),
		Doc: "Whether clients must (required) or may (requested) present a certificate, verified against the truststore."},
	{Name: "ssl.enabled.protocols", Type: List, Default: str("TLSv1.2,TLSv1.3"), Check: tlsProtocols,
		Doc: "The TLS versions enabled: TLSv1.2 and TLSv1.3."},
	{Name: "ssl.protocol", Type: String, Default: str("TLSv1.3"), Check: oneOf("TLSv1.2", "TLSv1.3", "TLS"),
		Doc: "The TLS protocol of the SSLContext. Accepted; ssl.enabled.protocols decides."},
	{Name: "ssl.cipher.suites", Type: List, Default: str(""), Check: cipherSuites,
		Doc: "The TLS 1.2 cipher suites enabled, by their IANA names (TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, …); empty: Go's secure defaults. TLS 1.3 suites are not configurable."},
	{Name: "ssl.endpoint.identification.algorithm", Type: String, Default: str("https"), Check: oneOf("https", ""),
		Doc: "On the broker's own connections to other brokers: https verifies that the peer's certificate names its host; empty does not."},
	{Name: "ssl.principal.mapping.rules", Type: String, Default: str("DEFAULT"), Check: principalRules,
		Doc: "Rules mapping a client certificate's subject to a principal name: RULE:pattern/replacement/[LU] and DEFAULT, comma-separated, first match wins."},
}

func init() {
	for _, k := range []string{"ssl.keymanager.algorithm", "ssl.trustmanager.algorithm", "ssl.secure.random.implementation", "ssl.provider"} {
		ignoredKeys[k] = true
	}
}

// listenerDefs caches the definitions of per-listener keys.
var listenerDefs sync.Map // key -> *Def

// listenerDef defines listener.name.<listener>.ssl.*: the ssl.* config's
// definition under the prefixed name, with no default of its own (the
// unprefixed config applies then).
func listenerDef(key string) (*Def, bool) {
	if d, ok := listenerDefs.Load(key); ok {
		return d.(*Def), true
	}
	l, rest, ok := ListenerKey(key)
	if !ok || l == "" {
		return nil, false
	}
	base, ok := brokerTable.byKey[rest]
	if !strings.HasPrefix(rest, "ssl.") {
		base, ok = saslListenerDef(rest)
	}
	if !ok {
		return nil, false
	}
	d := *base
	d.Name, d.Default = key, nil
	v, _ := listenerDefs.LoadOrStore(key, &d)
	return v.(*Def), true
}

// ListenerKey splits listener.name.<listener>.<config> into the lower-case
// listener name and the config.
func ListenerKey(key string) (listener, config string, ok bool) {
	rest, ok := strings.CutPrefix(key, "listener.name.")
	if !ok {
		return "", "", false
	}
	l, c, ok := strings.Cut(rest, ".")
	return strings.ToLower(l), c, ok
}

func tlsProtocols(v any) error {
	l := v.([]string)
	if len(l) == 0 {
		return fmt.Errorf("must name at least one of TLSv1.2, TLSv1.3")
	}
	return listOf("TLSv1.2", "TLSv1.3")(v)
}

// CipherSuiteID returns the id of a TLS cipher suite by its IANA name.
func CipherSuiteID(name string) (uint16, bool) {
	for _, c := range tls.CipherSuites() {
		if c.Name == name {
			return c.ID, true
		}
	}
	return 0, false
}

func cipherSuites(v any) error {
	for _, n := range v.([]string) {
		if _, ok := CipherSuiteID(n); !ok {
			return fmt.Errorf("unknown or insecure cipher suite %q", n)
		}
	}
	return nil
}

func principalRules(v any) error {
	_, err := ParsePrincipalRules(v.(string))
	return err
}

// protocolMap validates listener.security.protocol.map.
func protocolMap(v any) error {
	_, err := ParseProtocolMap(v.(string))
	return err
}

// ParseProtocolMap parses NAME:PROTOCOL[,…] into upper-case names.
func ParseProtocolMap(s string) (map[string]string, error) {
	out := map[string]string{}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, proto, ok := strings.Cut(item, ":")
		name, proto = strings.ToUpper(strings.TrimSpace(name)), strings.ToUpper(strings.TrimSpace(proto))
		if !ok || name == "" {
			return nil, fmt.Errorf("%q is not NAME:PROTOCOL", item)
		}
		if ProtocolID(proto) < 0 {
			return nil, fmt.Errorf("%q: unknown security protocol %q (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)", item, proto)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("listener name %s appears twice", name)
		}
		out[name] = proto
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("must map at least one listener name")
	}
	return out, nil
}
