package e2e

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/testenv"
)

// TestClusterSSLBetweenBrokers: three broker processes on a real
// ZooKeeper with three listeners each, PLAINTEXT for clients, INTERNAL
// (SSL, client certificates required) between brokers and CONTROL (SSL)
// for the controller. Every broker registers all three endpoints in
// /brokers/ids/N as Kafka does; an RF=3, min.insync.replicas=3 topic
// takes acks=all writes, which needs the followers to fetch over
// INTERNAL; the leader's INTERNAL port and the brokers' CONTROL ports hold
// the TLS connections (read from /proc/net/tcp); Metadata on PLAINTEXT
// names the PLAINTEXT endpoints and on INTERNAL the INTERNAL ones (a
// franz-go client with a certificate, and kcat over TLS).
func TestClusterSSLBetweenBrokers(t *testing.T) {
	ca := testenv.NewCA(t, "strata-e2e-ca")
	dir := t.TempDir()
	keystore := testenv.WriteFile(t, dir, "broker.pem", ca.Server(t, "broker").PEM())
	truststore := testenv.WriteFile(t, dir, "ca.pem", ca.PEM)
	zkSrv := testenv.StartZooKeeper(t)
	sets := []string{
		"listeners=PLAINTEXT://127.0.0.1:0,INTERNAL://127.0.0.1:0,CONTROL://127.0.0.1:0",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,INTERNAL:SSL,CONTROL:SSL",
		"inter.broker.listener.name=INTERNAL",
		"control.plane.listener.name=CONTROL",
		"ssl.keystore.location=" + keystore,
		"ssl.truststore.location=" + truststore,
		"ssl.client.auth=required",
		"min.insync.replicas=3",
	}
	_, seeds := startZKBrokers(t, zkSrv.Addr()+"/tls", sets)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// The registrations.
	conn, _, err := zk.Connect([]string{zkSrv.Addr()}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	endpoints := map[int32]map[string]int{} // broker -> listener -> port
	for id := int32(1); id <= 3; id++ {
		data, _, err := conn.Get(fmt.Sprintf("/tls/brokers/ids/%d", id))
		if err != nil {
			t.Fatalf("broker %d registration: %v", id, err)
		}
		var z struct {
			Endpoints []string          `json:"endpoints"`
			Map       map[string]string `json:"listener_security_protocol_map"`
		}
		if err := json.Unmarshal(data, &z); err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(z.Map) != "map[CONTROL:SSL INTERNAL:SSL PLAINTEXT:PLAINTEXT]" || len(z.Endpoints) != 3 {
			t.Fatalf("broker %d registration %s", id, data)
		}
		endpoints[id] = map[string]int{}
		for _, ep := range z.Endpoints {
			name, hp, _ := strings.Cut(ep, "://")
			_, p, _ := net.SplitHostPort(hp)
			endpoints[id][name], _ = strconv.Atoi(p)
		}
		if want := seeds[id-1]; "127.0.0.1:"+strconv.Itoa(endpoints[id]["PLAINTEXT"]) != want {
			t.Fatalf("broker %d PLAINTEXT endpoint %d, ready line %s", id, endpoints[id]["PLAINTEXT"], want)
		}
	}

	createReplicatedTopic(t, ctx, seeds, "secure", 1)
	cl := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()))
	for i := range 100 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "secure", Value: []byte("v" + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("acks=all produce %d: %v", i, err)
		}
	}
	adm := kadm.NewClient(cl)
	md, err := adm.Metadata(ctx, "secure")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range md.Brokers {
		if b.Port != int32(endpoints[b.NodeID]["PLAINTEXT"]) {
			t.Fatalf("Metadata on PLAINTEXT: broker %d at port %d, want %d", b.NodeID, b.Port, endpoints[b.NodeID]["PLAINTEXT"])
		}
	}
	leader := md.Topics["secure"].Partitions[0].Leader
	if n := establishedTo(t, endpoints[leader]["INTERNAL"]); n < 2 {
		t.Fatalf("the leader's INTERNAL listener holds %d connections, want the followers' fetchers", n)
	}
	controllerID := md.Controller
	for id := int32(1); id <= 3; id++ {
		if id == controllerID {
			continue
		}
		if n := establishedTo(t, endpoints[id]["CONTROL"]); n < 1 {
			t.Fatalf("broker %d's CONTROL listener holds no connection from the controller", id)
		}
	}

	// A TLS client on INTERNAL sees the INTERNAL endpoints.
	client := ca.Client(t, pkix.Name{CommonName: "admin"})
	internal := "127.0.0.1:" + strconv.Itoa(endpoints[1]["INTERNAL"])
	tcl := newClient(t, internal, kgo.DialTLSConfig(&tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{client.TLS}}))
	tmd, err := kadm.NewClient(tcl).BrokerMetadata(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range tmd.Brokers {
		if b.Port != int32(endpoints[b.NodeID]["INTERNAL"]) {
			t.Fatalf("Metadata on INTERNAL: broker %d at port %d, want %d", b.NodeID, b.Port, endpoints[b.NodeID]["INTERNAL"])
		}
	}

	// kcat (librdkafka) over mTLS consumes what was written.
	kcat := testenv.RequireKcat(t)
	certFile := testenv.WriteFile(t, dir, "client.crt", client.CertPEM)
	keyFile := testenv.WriteFile(t, dir, "client.key", client.KeyPEM)
	kctx, kcancel := context.WithTimeout(ctx, 60*time.Second)
	defer kcancel()
	out, err := exec.CommandContext(kctx, kcat, "-b", internal, "-C", "-t", "secure", "-o", "beginning", "-c", "100", "-e", "-q",
		"-X", "security.protocol=SSL", "-X", "ssl.ca.location="+truststore,
		"-X", "ssl.certificate.location="+certFile, "-X", "ssl.key.location="+keyFile).CombinedOutput()
	if err != nil {
		t.Fatalf("kcat over TLS: %v\n%s", err, out)
	}
	if lines := strings.Split(strings.TrimSpace(string(out)), "\n"); len(lines) != 100 || lines[0] != "v0" || lines[99] != "v99" {
		t.Fatalf("kcat read %d lines: %.300s", len(lines), out)
	}
}

// establishedTo counts the established TCP connections whose local port
// is port (the server side of connections to a listener).
func establishedTo(t *testing.T, port int) int {
	t.Helper()
	n := 0
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fs := strings.Fields(sc.Text())
			if len(fs) < 4 || fs[3] != "01" { // ESTABLISHED
				continue
			}
			_, hexPort, ok := strings.Cut(fs[1], ":")
			if p, err := strconv.ParseUint(hexPort, 16, 32); ok && err == nil && int(p) == port {
				n++
			}
		}
		fh.Close()
	}
	return n
}
