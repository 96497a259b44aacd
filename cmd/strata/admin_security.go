package main

// strata admin against a secured listener: --command-config names a
// properties file with the client configs Kafka's own tools read from
// their --command-config (security.protocol, ssl.*, sasl.mechanism,
// sasl.jaas.config), so one file serves kafka-topics and strata admin.

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"strata/broker/config"
)

// commandConfigEnv names the command config when --command-config is
// not given.
const commandConfigEnv = "STRATA_COMMAND_CONFIG"

// commandConfigKeys are the client configs a command config may hold;
// anything else is refused by name, so a typo does not silently connect
// in plaintext.
var commandConfigKeys = map[string]bool{
	"security.protocol": true, "sasl.mechanism": true, "sasl.jaas.config": true,
	"ssl.truststore.type": true, "ssl.truststore.location": true, "ssl.truststore.certificates": true,
	"ssl.keystore.type": true, "ssl.keystore.location": true, "ssl.keystore.certificate.chain": true, "ssl.keystore.key": true,
	"ssl.endpoint.identification.algorithm": true,
	// Accepted and not used: what Kafka's tools' files commonly carry.
	"client.id": true, "request.timeout.ms": true, "default.api.timeout.ms": true,
}

// securityOpts reads the command config at path and returns the client
// options it asks for. The error is one line.
func securityOpts(path string) ([]kgo.Opt, error) {
	props, err := config.ReadPropertiesFile(path)
	if err != nil {
		return nil, fmt.Errorf("command config: %w", err)
	}
	return securityOptsFrom(props)
}

func securityOptsFrom(props map[string]string) ([]kgo.Opt, error) {
	for k := range props {
		if !commandConfigKeys[k] {
			return nil, fmt.Errorf("command config: %s is not a client config strata admin knows", k)
		}
	}
	proto := strings.ToUpper(strings.TrimSpace(props["security.protocol"]))
	if proto == "" {
		proto = config.PLAINTEXT
	}
	var opts []kgo.Opt
	switch proto {
	case config.PLAINTEXT:
	case config.SSL, config.SASLSSL:
		tc, err := clientTLS(props)
		if err != nil {
			return nil, fmt.Errorf("command config: %w", err)
		}
		opts = append(opts, kgo.Dialer((&tls.Dialer{NetDialer: &net.Dialer{Timeout: 10 * time.Second}, Config: tc}).DialContext))
	case config.SASLPlaintext:
	default:
		return nil, fmt.Errorf("command config: security.protocol=%s: want PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL", props["security.protocol"])
	}
	if proto == config.SASLPlaintext || proto == config.SASLSSL {
		m, err := clientMechanism(props)
		if err != nil {
			return nil, fmt.Errorf("command config: %w", err)
		}
		opts = append(opts, kgo.SASL(m))
	} else if props["sasl.mechanism"] != "" || props["sasl.jaas.config"] != "" {
		return nil, fmt.Errorf("command config: sasl.* is set but security.protocol=%s does not use SASL", proto)
	}
	return opts, nil
}

// clientMechanism is the SASL mechanism of sasl.mechanism with the
// username and password of sasl.jaas.config.
func clientMechanism(props map[string]string) (sasl.Mechanism, error) {
	mech := strings.TrimSpace(props["sasl.mechanism"])
	if mech == "" {
		mech = config.MechPlain // Kafka's default
	}
	raw := props["sasl.jaas.config"]
	if raw == "" {
		return nil, errors.New("a SASL protocol needs sasl.jaas.config with username and password")
	}
	j, err := config.ParseJAAS(raw)
	if err != nil {
		return nil, fmt.Errorf("sasl.jaas.config: %w", err)
	}
	user, pass := j.Options["username"], j.Options["password"]
	if user == "" {
		return nil, errors.New("sasl.jaas.config has no username")
	}
	switch mech {
	case config.MechPlain:
		return plain.Auth{User: user, Pass: pass}.AsMechanism(), nil
	case config.MechScramSHA256:
		return scram.Auth{User: user, Pass: pass}.AsSha256Mechanism(), nil
	case config.MechScramSHA512:
		return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism(), nil
	}
	return nil, fmt.Errorf("sasl.mechanism=%s: strata admin speaks PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512", mech)
}

// clientTLS is the TLS of an SSL or SASL_SSL client: the truststore's CAs
// (the system's when none is given), the keystore's certificate for
// ssl.client.auth, and the host checked unless
// ssl.endpoint.identification.algorithm is empty.
func clientTLS(props map[string]string) (*tls.Config, error) {
	for _, k := range []string{"ssl.truststore.type", "ssl.keystore.type"} {
		if v := props[k]; v != "" && !strings.EqualFold(v, "PEM") {
			return nil, fmt.Errorf("%s=%s: strata admin reads PEM only", k, v)
		}
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	trust, err := pemSource(props, "ssl.truststore.location", "ssl.truststore.certificates")
	if err != nil {
		return nil, err
	}
	if trust != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(trust) {
			return nil, errors.New("the truststore holds no PEM certificate")
		}
		tc.RootCAs = pool
	}
	var chain, key []byte
	switch {
	case props["ssl.keystore.location"] != "" && (props["ssl.keystore.certificate.chain"] != "" || props["ssl.keystore.key"] != ""):
		return nil, errors.New("set ssl.keystore.location or ssl.keystore.certificate.chain with ssl.keystore.key, not both")
	case props["ssl.keystore.location"] != "":
		b, err := os.ReadFile(props["ssl.keystore.location"])
		if err != nil {
			return nil, fmt.Errorf("ssl.keystore.location: %w", err)
		}
		chain, key = b, b
	case (props["ssl.keystore.certificate.chain"] == "") != (props["ssl.keystore.key"] == ""):
		return nil, errors.New("ssl.keystore.certificate.chain and ssl.keystore.key go together")
	default:
		chain, key = []byte(props["ssl.keystore.certificate.chain"]), []byte(props["ssl.keystore.key"])
	}
	if len(chain) > 0 {
		cert, err := tls.X509KeyPair(chain, key)
		if err != nil {
			return nil, fmt.Errorf("keystore: %w", err)
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	switch strings.ToLower(props["ssl.endpoint.identification.algorithm"]) {
	case "https":
	case "":
		if _, set := props["ssl.endpoint.identification.algorithm"]; set {
			// Verify the chain, not the name, as Kafka's clients do.
			roots := tc.RootCAs
			tc.InsecureSkipVerify = true
			tc.VerifyConnection = func(cs tls.ConnectionState) error {
				if len(cs.PeerCertificates) == 0 {
					return errors.New("the broker sent no certificate")
				}
				inter := x509.NewCertPool()
				for _, c := range cs.PeerCertificates[1:] {
					inter.AddCert(c)
				}
				_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
				return err
			}
		}
	default:
		return nil, fmt.Errorf("ssl.endpoint.identification.algorithm=%s: want https or empty", props["ssl.endpoint.identification.algorithm"])
	}
	return tc, nil
}

// pemSource is the PEM of a file config or its inline twin; nil if
// neither is set.
func pemSource(props map[string]string, fileKey, inlineKey string) ([]byte, error) {
	switch f, in := props[fileKey], props[inlineKey]; {
	case f != "" && in != "":
		return nil, fmt.Errorf("set %s or %s, not both", fileKey, inlineKey)
	case f != "":
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", fileKey, err)
		}
		return b, nil
	case in != "":
		return []byte(in), nil
	}
	return nil, nil
}
