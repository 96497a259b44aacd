package broker

import (
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/config"
	"strata/controller"
	"strata/internal/testenv"
)

// tlsFiles writes a CA, a broker keystore (for 127.0.0.1) and the
// truststore to a directory.
type tlsFiles struct {
	ca                   *testenv.CA
	dir                  string
	keystore, truststore string
}

func newTLSFiles(t *testing.T) *tlsFiles {
	f := &tlsFiles{ca: testenv.NewCA(t, "strata-test-ca"), dir: t.TempDir()}
	f.keystore = testenv.WriteFile(t, f.dir, "broker.pem", f.ca.Server(t, "broker").PEM())
	f.truststore = testenv.WriteFile(t, f.dir, "ca.pem", f.ca.PEM)
	return f
}

func (f *tlsFiles) clientTLS(t *testing.T, cn string) *tls.Config {
	c := f.ca.Client(t, pkix.Name{CommonName: cn, Organization: []string{"Strata"}})
	return &tls.Config{RootCAs: f.ca.Pool(), Certificates: []tls.Certificate{c.TLS}}
}

func listenerPort(t *testing.T, s *Server, name string) int32 {
	t.Helper()
	a, ok := s.ListenerAddr(name)
	if !ok {
		t.Fatalf("broker %d has no listener %s", s.cfg.ID, name)
	}
	return int32(a.(*net.TCPAddr).Port)
}

// TestListenersSSLCluster: three brokers whose clients and replication
// both use mTLS listeners; a franz-go client over TLS produces with
// acks=all and consumes, the followers fetch over the inter-broker SSL
// listener, and Metadata answers with the client listener's endpoints.
func TestListenersSSLCluster(t *testing.T) {
	f := newTLSFiles(t)
	c := startCluster(t, 3, map[string]string{
		"listeners":                      "CLIENT://127.0.0.1:0,INTERNAL://127.0.0.1:0",
		"listener.security.protocol.map": "CLIENT:SSL,INTERNAL:SSL",
		"inter.broker.listener.name":     "INTERNAL",
		"ssl.keystore.location":          f.keystore,
		"ssl.truststore.location":        f.truststore,
		"ssl.client.auth":                "required",
	})
	c.createTopic("secure", []int32{0, 1, 2}, map[string]string{"min.insync.replicas": "3"})
	c.waitISR("secure", 0, 1, 2)

	s0 := c.servers[0]
	cl, err := kgo.NewClient(kgo.SeedBrokers(s0.Addr().String()), kgo.DialTLSConfig(f.clientTLS(t, "alice")),
		kgo.RequiredAcks(kgo.AllISRAcks()), kgo.ConsumeTopics("secure"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range 50 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "secure", Value: []byte("v" + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("produce over TLS: %v", err)
		}
	}
	got := 0
	for got < 50 {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume over TLS: %v", err)
		}
		got += fs.NumRecords()
	}
	for id, s := range c.servers {
		if leo := c.leo(id, "secure"); leo != 50 {
			t.Fatalf("broker %d log end %d, want 50 (replicated over SSL)", id, leo)
		}
		_ = s
	}
	leader := c.servers[c.partition("secure").Leader]
	if n := leader.network.ConnsByListener()["INTERNAL"]; n < 2 {
		t.Fatalf("the leader serves %d connections on INTERNAL, want the 2 followers' fetchers (%v)", n, leader.network.ConnsByListener())
	}

	// Metadata on CLIENT names every broker at its CLIENT endpoint.
	m, err := kadm.NewClient(cl).BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Brokers) != 3 {
		t.Fatalf("brokers %v", m.Brokers)
	}
	for _, b := range m.Brokers {
		if want := listenerPort(t, c.servers[b.NodeID], "CLIENT"); b.Port != want || b.Host != "127.0.0.1" {
			t.Fatalf("broker %d at %s:%d, want its CLIENT port %d", b.NodeID, b.Host, b.Port, want)
		}
	}
}

// TestListenersMetadataPerListener: each listener answers with its own
// endpoints, and a broker without the listener is left out.
func TestListenersMetadataPerListener(t *testing.T) {
	c := startCluster(t, 1, map[string]string{
		"listeners":                      "PLAINTEXT://127.0.0.1:0,REPLICATION://127.0.0.1:0",
		"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,REPLICATION:PLAINTEXT",
		"inter.broker.listener.name":     "REPLICATION",
		"advertised.listeners":           "PLAINTEXT://client.example:9092",
	})
	// A broker registered with only a PLAINTEXT listener.
	if err := c.m.RegisterBroker(context.Background(), controller.Broker{ID: 7, Host: "other", Port: 1,
		Endpoints: []controller.Endpoint{{Listener: "PLAINTEXT", Host: "other", Port: 1}}}); err != nil {
		t.Fatal(err)
	}
	s := c.servers[0]
	ask := func(listener string) map[int32]string {
		a, _ := s.ListenerAddr(listener)
		rc := dialRaw(t, a.String())
		resp := rc.do(kmsg.NewPtrMetadataRequest(), 12).(*kmsg.MetadataResponse)
		out := map[int32]string{}
		for _, b := range resp.Brokers {
			out[b.NodeID] = net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
		return out
	}
	repl := listenerPort(t, s, "REPLICATION")
	if got := fmt.Sprint(ask("PLAINTEXT")); got != "map[0:client.example:9092 7:other:1]" {
		t.Fatalf("Metadata on PLAINTEXT = %s", got)
	}
	if got, want := fmt.Sprint(ask("REPLICATION")), fmt.Sprintf("map[0:127.0.0.1:%d]", repl); got != want {
		t.Fatalf("Metadata on REPLICATION = %s, want %s (broker 7 has no such listener)", got, want)
	}
	// FindCoordinator and DescribeCluster follow the same rule.
	a, _ := s.ListenerAddr("REPLICATION")
	rc := dialRaw(t, a.String())
	dc := rc.do(kmsg.NewPtrDescribeClusterRequest(), 0).(*kmsg.DescribeClusterResponse)
	if len(dc.Brokers) != 1 || dc.Brokers[0].Port != repl {
		t.Fatalf("DescribeCluster on REPLICATION = %+v", dc.Brokers)
	}
	if self := s.self; len(self.Endpoints) != 2 || self.Endpoints[1].Listener != "REPLICATION" {
		t.Fatalf("registered endpoints %+v", self.Endpoints)
	}
}

// TestListenersBadTLSConfig: a keystore that cannot be read stops the
// broker before it starts, with a one-line reason.
func TestListenersBadTLSConfig(t *testing.T) {
	dir := t.TempDir()
	cfg, err := config.Load(map[string]string{
		"listeners":             "SSL://127.0.0.1:0",
		"log.dirs":              dir,
		"ssl.keystore.location": dir + "/missing.pem",
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Config: cfg})
	if err == nil {
		s.Close()
	}
	if err == nil || !strings.HasPrefix(err.Error(), "listener SSL: ssl.keystore.location: open ") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("New = %v", err)
	}
}

// TestListenersDynamicKeystore: AlterConfigs of the listener's
// ssl.keystore.location rotates the certificate without a restart; a
// connection made before keeps working.
func TestListenersDynamicKeystore(t *testing.T) {
	f := newTLSFiles(t)
	ts := startTestServer(t, map[string]string{
		"listeners":             "SSL://127.0.0.1:0",
		"ssl.keystore.location": f.keystore,
	})
	clientCfg := &tls.Config{RootCAs: f.ca.Pool()}
	cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr()), kgo.DialTLSConfig(clientCfg))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testCtx(t)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, "t"); err != nil {
		t.Fatal(err)
	}
	// A keystore that does not load is refused, as Kafka refuses it.
	missing := f.dir + "/missing.pem"
	rs, err := adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "listener.name.ssl.ssl.keystore.location", Value: &missing}}, 0)
	if err != nil {
		t.Fatal(err)
	}
	if rs[0].Err == nil || !strings.Contains(rs[0].ErrMessage, "listener SSL: ssl.keystore.location: open") {
		t.Fatalf("alter to a missing keystore: %v %q", rs[0].Err, rs[0].ErrMessage)
	}
	rotated := testenv.WriteFile(t, f.dir, "rotated.pem", f.ca.Server(t, "broker-rotated").PEM())
	rs, err = adm.AlterBrokerConfigs(ctx, []kadm.AlterConfig{{Name: "listener.name.ssl.ssl.keystore.location", Value: &rotated}}, 0)
	if err == nil {
		err = rs[0].Err
	}
	if err != nil {
		t.Fatalf("alter keystore: %v", err)
	}
	waitFor(t, "new connections see the new certificate", 15*time.Second, func() bool {
		c, err := tls.Dial("tcp", ts.addr(), clientCfg)
		if err != nil {
			return false
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].Subject.CommonName == "broker-rotated"
	})
	// The client's connection, made before, still works.
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t", Value: []byte("after rotation")}).FirstErr(); err != nil {
		t.Fatalf("produce on the old connection: %v", err)
	}
}

// TestListenersDynamicTruststoreRemovalRefused (issue 25): a dynamic
// AlterConfigs that took away the truststore of a listener with
// ssl.client.auth=required was applied, leaving client certificates
// checked against the system's roots. It is refused with INVALID_CONFIG
// and the reason, as the same configuration is refused at startup, for
// the listener's truststore as for the broker's; mTLS goes on with the
// truststore in force.
func TestListenersDynamicTruststoreRemovalRefused(t *testing.T) {
	f := newTLSFiles(t)
	ts := startTestServer(t, map[string]string{
		"listeners":                         "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
		"listener.security.protocol.map":    "PLAINTEXT:PLAINTEXT,SSL:SSL",
		"inter.broker.listener.name":        "PLAINTEXT",
		"ssl.keystore.location":             f.keystore,
		"ssl.truststore.location":           f.truststore,
		"listener.name.ssl.ssl.client.auth": "required",
	})
	plainAddr, _ := ts.ListenerAddr("PLAINTEXT")
	sslAddr, _ := ts.ListenerAddr("SSL")
	cl, err := kgo.NewClient(kgo.SeedBrokers(plainAddr.String()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testCtx(t)
	adm := kadm.NewClient(cl)
	alter := func(what string, acs ...kadm.AlterConfig) kadm.AlterConfigsResponse {
		t.Helper()
		rs, err := adm.AlterBrokerConfigs(ctx, acs, 0)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		return rs[0]
	}
	empty := ""
	mtls := func(cfg *tls.Config) error {
		c, err := tls.Dial("tcp", sslAddr.String(), cfg)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte{0, 0, 0, 0}); err != nil {
			return err
		}
		var b [1]byte
		_, err = c.Read(b[:]) // a refused client certificate shows here (TLS 1.3)
		if errors.Is(err, io.EOF) {
			return nil // the broker closed the empty request: the handshake passed
		}
		return err
	}
	waitFor(t, "client certificates required", 15*time.Second, func() bool {
		return mtls(&tls.Config{RootCAs: f.ca.Pool()}) != nil && mtls(f.clientTLS(t, "alice")) == nil
	})
	for name, ac := range map[string]kadm.AlterConfig{
		"the listener's set empty": {Name: "listener.name.ssl.ssl.truststore.location", Value: &empty},
		"the broker's set empty":   {Name: "ssl.truststore.location", Value: &empty},
	} {
		r := alter(name, ac)
		if !errors.Is(r.Err, kerr.InvalidConfig) || !strings.Contains(r.ErrMessage, "ssl.client.auth=required needs a truststore") {
			t.Fatalf("truststore %s under ssl.client.auth=required: %v %q, want INVALID_CONFIG with the reason", name, r.Err, r.ErrMessage)
		}
	}
	if err := mtls(f.clientTLS(t, "alice")); err != nil {
		t.Fatalf("mTLS after the refused updates: %v", err)
	}
	if err := mtls(&tls.Config{RootCAs: f.ca.Pool()}); err == nil {
		t.Fatal("a client without a certificate got in after the refused updates")
	}
}
