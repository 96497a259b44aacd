package network

// TLS for SSL (and later SASL_SSL) listeners, from PEM, and for the
// broker's own connections to other brokers.
//
// A TLS is made for one listener from a function that returns the
// listener's ssl.* configs in force (static and dynamic, resolved by the
// broker). It loads the keystore and truststore once to start (an error
// there is the broker's one-line reason not to start) and then checks,
// at most once per reloadCheck, on a handshake or when Check is called
// (the broker calls it when its dynamic configs change), whether the
// configs or the files' bytes changed; if so it loads them again. A load
// that fails keeps the previous certificates and logs a warning, as
// Kafka keeps the old keystore when a dynamic update fails validation.
// Connections already made keep the certificates they were made with;
// only new handshakes see the new ones.

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"reflect"
	"strings"
	"sync"
	"time"

	"strata/broker/config"
)

// reloadCheck is how often at most the keystore and truststore files are
// read again to see whether they changed.
const reloadCheck = time.Second

// TLS holds one listener's certificates and TLS settings.
type TLS struct {
	listener string
	settings func() config.SSLConfig
	log      *slog.Logger

	mu      sync.Mutex
	cur     *tlsState
	checked time.Time
}

// tlsState is what one load of the configs and files produced.
type tlsState struct {
	cfg      config.SSLConfig
	keyPEM   []byte // the keystore's bytes (file or inline), to see a change
	trustPEM []byte
	cert     tls.Certificate
	pool     *x509.CertPool // nil: the system's roots
	rules    config.PrincipalRules
	server   *tls.Config
}

// NewTLS loads listener's keystore and truststore from settings. The
// error is one line.
func NewTLS(listener string, settings func() config.SSLConfig, log *slog.Logger) (*TLS, error) {
	if log == nil {
		log = slog.Default()
	}
	t := &TLS{listener: listener, settings: settings, log: log}
	st, err := t.load(settings(), nil)
	if err != nil {
		return nil, fmt.Errorf("listener %s: %w", listener, err)
	}
	t.cur, t.checked = st, time.Now()
	return t, nil
}

// ValidateTLS loads cfg's keystore and truststore as a listener would,
// without keeping them: an AlterConfigs of a listener's keystore is
// refused when it would not load, as Kafka refuses it.
func ValidateTLS(cfg config.SSLConfig) error {
	_, err := (&TLS{}).load(cfg, nil)
	return err
}

// Check reloads the certificates now if the configs or files changed. It
// returns the error of a load that failed (the old certificates stay).
func (t *TLS) Check() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.checkLocked()
}

func (t *TLS) checkLocked() error {
	t.checked = time.Now()
	st, err := t.load(t.settings(), t.cur)
	if err != nil {
		t.log.Warn("TLS certificates not reloaded; the previous ones stay in use", "listener", t.listener, "err", err)
		return err
	}
	if st != t.cur {
		t.log.Info("TLS certificates reloaded", "listener", t.listener, "subject", subjectOf(st.cert))
		t.cur = st
	}
	return nil
}

// state returns the current certificates, reloading them first if the
// last check is older than reloadCheck.
func (t *TLS) state() *tlsState {
	t.mu.Lock()
	defer t.mu.Unlock()
	if time.Since(t.checked) >= reloadCheck {
		t.checkLocked()
	}
	return t.cur
}

// ServerConfig is the tls.Config a listener serves with; each handshake
// takes the certificates in force.
func (t *TLS) ServerConfig() *tls.Config {
	return &tls.Config{
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) { return t.state().server, nil },
	}
}

// ClientConfig is the tls.Config of the broker's own connection to
// another broker's listener at host: the keystore's certificate for the
// peer's ssl.client.auth, the truststore, and with
// ssl.endpoint.identification.algorithm=https the host checked against
// the peer's certificate.
func (t *TLS) ClientConfig(host string) *tls.Config {
	st := t.state()
	c := &tls.Config{
		MinVersion:   st.server.MinVersion,
		MaxVersion:   st.server.MaxVersion,
		CipherSuites: st.server.CipherSuites,
		RootCAs:      st.pool,
		ServerName:   host,
	}
	cert := st.cert
	c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	if st.cfg.EndpointIdentification == "" {
		// Verify the chain, not the name.
		pool := st.pool
		c.InsecureSkipVerify = true
		c.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the peer sent no certificate")
			}
			inter := x509.NewCertPool()
			for _, ic := range cs.PeerCertificates[1:] {
				inter.AddCert(ic)
			}
			_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter})
			return err
		}
	}
	return c
}

// principal maps a verified client certificate to a principal name
// through ssl.principal.mapping.rules.
func (t *TLS) principal(cert *x509.Certificate) (string, error) {
	return t.state().rules.Apply(cert.Subject.String())
}

// load reads the configs' keystore and truststore; it returns prev when
// nothing changed.
func (t *TLS) load(cfg config.SSLConfig, prev *tlsState) (*tlsState, error) {
	keyPEM, certPEM, err := readKeystore(cfg)
	if err != nil {
		return nil, err
	}
	trustPEM, err := readPEMSource(cfg.TruststoreLocation, cfg.TruststoreCerts, "ssl.truststore.location")
	if err != nil {
		return nil, err
	}
	both := append(append([]byte(nil), certPEM...), keyPEM...)
	if prev != nil && reflect.DeepEqual(prev.cfg, cfg) && bytes.Equal(prev.keyPEM, both) && bytes.Equal(prev.trustPEM, trustPEM) {
		return prev, nil
	}
	st := &tlsState{cfg: cfg, keyPEM: both, trustPEM: trustPEM}
	if st.cert, err = parseKeyPair(certPEM, keyPEM, cfg.KeyPassword); err != nil {
		return nil, err
	}
	if len(trustPEM) > 0 {
		st.pool = x509.NewCertPool()
		if !st.pool.AppendCertsFromPEM(trustPEM) {
			return nil, errors.New("truststore: no PEM certificate in it")
		}
	}
	if st.rules, err = config.ParsePrincipalRules(cfg.PrincipalMappingRules); err != nil {
		return nil, fmt.Errorf("ssl.principal.mapping.rules: %w", err)
	}
	srv := &tls.Config{
		Certificates: []tls.Certificate{st.cert},
		ClientCAs:    st.pool,
		MinVersion:   tls.VersionTLS13,
		MaxVersion:   tls.VersionTLS12,
	}
	for _, p := range cfg.EnabledProtocols {
		v := uint16(tls.VersionTLS12)
		if p == "TLSv1.3" {
			v = tls.VersionTLS13
		}
		srv.MinVersion, srv.MaxVersion = min(srv.MinVersion, v), max(srv.MaxVersion, v)
	}
	if len(cfg.EnabledProtocols) == 0 {
		srv.MinVersion, srv.MaxVersion = tls.VersionTLS12, tls.VersionTLS13
	}
	for _, n := range cfg.CipherSuites {
		id, ok := config.CipherSuiteID(n)
		if !ok {
			return nil, fmt.Errorf("ssl.cipher.suites: unknown cipher suite %q", n)
		}
		srv.CipherSuites = append(srv.CipherSuites, id)
	}
	switch cfg.ClientAuth {
	case "required":
		srv.ClientAuth = tls.RequireAndVerifyClientCert
	case "requested":
		srv.ClientAuth = tls.VerifyClientCertIfGiven
	}
	st.server = srv
	return st, nil
}

// readKeystore returns the keystore's key and certificate PEM: one file
// holding both (ssl.keystore.location), or the inline configs.
func readKeystore(cfg config.SSLConfig) (keyPEM, certPEM []byte, err error) {
	if cfg.KeystoreLocation != "" {
		b, err := os.ReadFile(cfg.KeystoreLocation)
		if err != nil {
			return nil, nil, fmt.Errorf("ssl.keystore.location: %w", err)
		}
		return b, b, nil
	}
	if cfg.KeystoreChain == "" || cfg.KeystoreKey == "" {
		return nil, nil, errors.New("no keystore: set ssl.keystore.location, or ssl.keystore.certificate.chain and ssl.keystore.key")
	}
	return []byte(cfg.KeystoreKey), []byte(cfg.KeystoreChain), nil
}

func readPEMSource(location, inline, key string) ([]byte, error) {
	if location != "" {
		b, err := os.ReadFile(location)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		return b, nil
	}
	return []byte(inline), nil
}

// parseKeyPair takes the certificates and the one private key out of PEM
// blocks (other blocks are skipped), decrypting the key with password
// when it is encrypted.
func parseKeyPair(certPEM, keyPEM []byte, password string) (tls.Certificate, error) {
	var certs, keys []byte
	for rest := certPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type == "CERTIFICATE" {
			certs = append(certs, pem.EncodeToMemory(b)...)
		}
	}
	for rest := keyPEM; ; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		switch {
		case b.Type == "ENCRYPTED PRIVATE KEY":
			der, err := decryptPKCS8(b.Bytes, password)
			if err != nil {
				return tls.Certificate{}, fmt.Errorf("keystore: %w", err)
			}
			keys = append(keys, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})...)
		case x509.IsEncryptedPEMBlock(b): //nolint:staticcheck // legacy encrypted PEM keys, as Kafka reads them
			if password == "" {
				return tls.Certificate{}, errors.New("keystore: the private key is encrypted; set ssl.key.password")
			}
			der, err := x509.DecryptPEMBlock(b, []byte(password)) //nolint:staticcheck
			if err != nil {
				return tls.Certificate{}, fmt.Errorf("keystore: decrypt the private key: %w", err)
			}
			keys = append(keys, pem.EncodeToMemory(&pem.Block{Type: b.Type, Bytes: der})...)
		case strings.HasSuffix(b.Type, "PRIVATE KEY"):
			keys = append(keys, pem.EncodeToMemory(b)...)
		}
	}
	if len(certs) == 0 {
		return tls.Certificate{}, errors.New("keystore: no PEM certificate in it")
	}
	if len(keys) == 0 {
		return tls.Certificate{}, errors.New("keystore: no PEM private key in it")
	}
	cert, err := tls.X509KeyPair(certs, keys)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("keystore: %w", err)
	}
	return cert, nil
}

func subjectOf(c tls.Certificate) string {
	if c.Leaf != nil {
		return c.Leaf.Subject.String()
	}
	if len(c.Certificate) > 0 {
		if l, err := x509.ParseCertificate(c.Certificate[0]); err == nil {
			return l.Subject.String()
		}
	}
	return ""
}
