package network

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/binary"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/config"
	"strata/internal/testenv"
)

// principalHandler answers ApiVersions and records the listener and
// principal of each request's connection.
type principalHandler struct {
	mu   sync.Mutex
	seen []string
}

func (h *principalHandler) ServeRequest(c *Conn, req *Request) (Response, error) {
	h.mu.Lock()
	h.seen = append(h.seen, c.Listener()+"/"+c.SecurityProtocol()+"/"+c.Principal().String())
	h.mu.Unlock()
	if req.Key != 18 {
		return Response{}, io.EOF
	}
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.Version = min(req.Version, 3)
	resp.ApiKeys = []kmsg.ApiVersionsResponseApiKey{{ApiKey: 18, MinVersion: 0, MaxVersion: 3}}
	return Response{Msg: resp}, nil
}

func (h *principalHandler) last() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.seen) == 0 {
		return ""
	}
	return h.seen[len(h.seen)-1]
}

type tlsFixture struct {
	ca       *testenv.CA
	dir      string
	keystore string
	addr     string
	h        *principalHandler
	tls      *TLS
}

// startTLS serves an SSL listener named CLIENT with a keystore file and
// the CA as truststore.
func startTLS(t *testing.T, ssl config.SSLConfig) *tlsFixture {
	t.Helper()
	f := &tlsFixture{ca: testenv.NewCA(t, "test-ca"), dir: t.TempDir(), h: &principalHandler{}}
	f.keystore = testenv.WriteFile(t, f.dir, "broker.pem", f.ca.Server(t, "broker-1").PEM())
	ssl.KeystoreLocation = f.keystore
	ssl.TruststoreCerts = string(f.ca.PEM)
	var mu sync.Mutex
	cur := ssl
	settings := func() config.SSLConfig { mu.Lock(); defer mu.Unlock(); return cur }
	tl, err := NewTLS("CLIENT", settings, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.tls = tl
	cfg, err := config.Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	s := New(Options{Config: cfg, Handler: f.h, Limits: func() Limits {
		return Limits{MaxConnections: 1000, MaxConnectionsPerIP: 1000}
	}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.ServeListener(ln, Listener{Name: "CLIENT", Protocol: "SSL", TLS: tl})
	t.Cleanup(func() { s.Close(); s.Wait() })
	f.addr = ln.Addr().String()
	return f
}

// apiVersions asks for ApiVersions with franz-go over TLS.
func (f *tlsFixture) apiVersions(t *testing.T, cfg *tls.Config) error {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.addr), kgo.DialTLSConfig(cfg), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrApiVersionsRequest())
	return err
}

func TestTLSMutualPrincipal(t *testing.T) {
	f := startTLS(t, config.SSLConfig{
		ClientAuth:            "required",
		PrincipalMappingRules: `RULE:^CN=([^,]*),O=Eng$/$1/L,DEFAULT`,
		EnabledProtocols:      []string{"TLSv1.2", "TLSv1.3"},
	})
	alice := f.ca.Client(t, pkix.Name{CommonName: "Alice", Organization: []string{"Eng"}})
	ok := &tls.Config{RootCAs: f.ca.Pool(), Certificates: []tls.Certificate{alice.TLS}}
	if err := f.apiVersions(t, ok); err != nil {
		t.Fatalf("client with a certificate: %v", err)
	}
	if got := f.h.last(); got != "CLIENT/SSL/User:alice" {
		t.Fatalf("connection = %q, want CLIENT/SSL/User:alice", got)
	}
	// DEFAULT: the distinguished name as it is.
	bob := f.ca.Client(t, pkix.Name{CommonName: "bob", Organization: []string{"Ops"}})
	if err := f.apiVersions(t, &tls.Config{RootCAs: f.ca.Pool(), Certificates: []tls.Certificate{bob.TLS}}); err != nil {
		t.Fatal(err)
	}
	if got := f.h.last(); got != "CLIENT/SSL/User:CN=bob,O=Ops" {
		t.Fatalf("connection = %q", got)
	}

	n := len(f.h.seen)
	// No certificate: refused.
	if err := f.apiVersions(t, &tls.Config{RootCAs: f.ca.Pool()}); err == nil {
		t.Fatal("a client without a certificate was served")
	}
	// A certificate of another CA: refused.
	other := testenv.NewCA(t, "other-ca")
	mallory := other.Client(t, pkix.Name{CommonName: "alice", Organization: []string{"Eng"}})
	if err := f.apiVersions(t, &tls.Config{RootCAs: f.ca.Pool(), Certificates: []tls.Certificate{mallory.TLS}}); err == nil {
		t.Fatal("a client certificate of another CA was accepted")
	}
	// A client that trusts another CA refuses the broker.
	if err := f.apiVersions(t, &tls.Config{RootCAs: other.Pool(), Certificates: []tls.Certificate{alice.TLS}}); err == nil {
		t.Fatal("the client accepted a broker certificate of a CA it does not trust")
	}
	// A plaintext client gets nothing.
	if err := (&tlsFixture{addr: f.addr}).plainAPIVersions(t); err == nil {
		t.Fatal("a plaintext client was served on an SSL listener")
	}
	if len(f.h.seen) != n {
		t.Fatalf("refused connections reached the handler: %v", f.h.seen[n:])
	}
}

func (f *tlsFixture) plainAPIVersions(t *testing.T) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(f.addr), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err = cl.SeedBrokers()[0].Request(ctx, kmsg.NewPtrApiVersionsRequest())
	return err
}

func TestTLSRequestedAnonymous(t *testing.T) {
	f := startTLS(t, config.SSLConfig{ClientAuth: "requested"})
	if err := f.apiVersions(t, &tls.Config{RootCAs: f.ca.Pool(), ServerName: "localhost"}); err != nil {
		t.Fatal(err)
	}
	if got := f.h.last(); got != "CLIENT/SSL/User:ANONYMOUS" {
		t.Fatalf("connection = %q", got)
	}
}

// rawAPIVersions sends ApiVersions v0 on c and reads the answer.
func rawAPIVersions(c net.Conn, corr int32) error {
	req := []byte{0, 0, 0, 10, 0, 18, 0, 0, 0, 0, 0, 0, 0xff, 0xff}
	binary.BigEndian.PutUint32(req[8:12], uint32(corr))
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write(req); err != nil {
		return err
	}
	var size [4]byte
	if _, err := io.ReadFull(c, size[:]); err != nil {
		return err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(c, body)
	return err
}

func TestTLSRotation(t *testing.T) {
	f := startTLS(t, config.SSLConfig{ClientAuth: "none"})
	dial := func() *tls.Conn {
		c, err := tls.Dial("tcp", f.addr, &tls.Config{RootCAs: f.ca.Pool()})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	old := dial()
	defer old.Close()
	if cn := old.ConnectionState().PeerCertificates[0].Subject.CommonName; cn != "broker-1" {
		t.Fatalf("first certificate %q", cn)
	}
	if err := rawAPIVersions(old, 1); err != nil {
		t.Fatal(err)
	}
	// A certificate of a new CA, which new clients trust.
	ca2 := testenv.NewCA(t, "ca-2")
	testenv.WriteFile(t, f.dir, "broker.pem", ca2.Server(t, "broker-1-rotated").PEM())
	deadline := time.Now().Add(15 * time.Second)
	for {
		c, err := tls.Dial("tcp", f.addr, &tls.Config{RootCAs: ca2.Pool()})
		if err == nil {
			cn := c.ConnectionState().PeerCertificates[0].Subject.CommonName
			err = rawAPIVersions(c, 2)
			c.Close()
			if cn == "broker-1-rotated" && err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("new connections never saw the rotated certificate: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The connection made before the rotation still works.
	if err := rawAPIVersions(old, 3); err != nil {
		t.Fatalf("old connection after rotation: %v", err)
	}
	// A broken keystore leaves the certificate in use.
	testenv.WriteFile(t, f.dir, "broker.pem", []byte("not PEM"))
	if err := f.tls.Check(); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("Check of a broken keystore = %v", err)
	}
	c, err := tls.Dial("tcp", f.addr, &tls.Config{RootCAs: ca2.Pool()})
	if err != nil {
		t.Fatalf("after a broken keystore was written: %v", err)
	}
	c.Close()
}

func TestTLSBadKeystore(t *testing.T) {
	dir := t.TempDir()
	ca := testenv.NewCA(t, "ca")
	srv := ca.Server(t, "b")
	for _, tt := range []struct {
		cfg  config.SSLConfig
		want string
	}{
		{config.SSLConfig{KeystoreLocation: dir + "/missing.pem"}, "ssl.keystore.location: open"},
		{config.SSLConfig{KeystoreLocation: testenv.WriteFile(t, dir, "cert-only.pem", srv.CertPEM)}, "no PEM private key"},
		{config.SSLConfig{KeystoreChain: string(srv.CertPEM), KeystoreKey: string(ca.Server(t, "x").KeyPEM)}, "private key does not match"},
		{config.SSLConfig{KeystoreChain: string(srv.CertPEM), KeystoreKey: string(srv.KeyPEM), TruststoreCerts: "junk"}, "truststore: no PEM certificate"},
	} {
		_, err := NewTLS("SSL", func() config.SSLConfig { return tt.cfg }, nil)
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("NewTLS = %v, want one line with %q", err, tt.want)
		}
	}
}

// TestTLSEncryptedKey reads a PKCS#8 key encrypted by openssl with
// ssl.key.password.
func TestTLSEncryptedKey(t *testing.T) {
	dir := t.TempDir()
	ca := testenv.NewCA(t, "ca")
	srv := ca.Server(t, "b")
	plain := testenv.WriteFile(t, dir, "key.pem", srv.KeyPEM)
	out, err := exec.Command("openssl", "pkcs8", "-topk8", "-v2", "aes256", "-in", plain, "-passout", "pass:s3cret").Output()
	if err != nil {
		t.Fatalf("openssl: %v", err)
	}
	cfg := config.SSLConfig{KeystoreChain: string(srv.CertPEM), KeystoreKey: string(out), KeyPassword: "s3cret"}
	if _, err := NewTLS("SSL", func() config.SSLConfig { return cfg }, nil); err != nil {
		t.Fatal(err)
	}
	cfg.KeyPassword = "wrong"
	if _, err := NewTLS("SSL", func() config.SSLConfig { return cfg }, nil); err == nil {
		t.Fatal("a wrong ssl.key.password was taken")
	}
	cfg.KeyPassword = ""
	if _, err := NewTLS("SSL", func() config.SSLConfig { return cfg }, nil); err == nil || !strings.Contains(err.Error(), "set ssl.key.password") {
		t.Fatalf("no password: %v", err)
	}
}

// TestTLSClientEndpointIdentification: the broker's own client side checks
// the peer's host with ssl.endpoint.identification.algorithm=https, and
// only the chain with it empty.
func TestTLSClientEndpointIdentification(t *testing.T) {
	ca := testenv.NewCA(t, "ca")
	noSAN := ca.Client(t, pkix.Name{CommonName: "no-names"}) // names no host
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{noSAN.TLS}})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.(*tls.Conn).Handshake()
			c.Close()
		}
	}()
	self := ca.Server(t, "self")
	dial := func(algo string, trust []byte) error {
		cfg := config.SSLConfig{KeystoreChain: string(self.CertPEM), KeystoreKey: string(self.KeyPEM),
			TruststoreCerts: string(trust), EndpointIdentification: algo}
		tl, err := NewTLS("INTERNAL", func() config.SSLConfig { return cfg }, nil)
		if err != nil {
			t.Fatal(err)
		}
		c, err := tls.Dial("tcp", ln.Addr().String(), tl.ClientConfig("127.0.0.1"))
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := dial("https", ca.PEM); err == nil {
		t.Fatal("https: a certificate that does not name 127.0.0.1 was accepted")
	}
	if err := dial("", ca.PEM); err != nil {
		t.Fatalf("no identification: %v", err)
	}
	if err := dial("", testenv.NewCA(t, "other").PEM); err == nil {
		t.Fatal("no identification: a certificate of an untrusted CA was accepted")
	}
}
