package bench

import (
	"context"
	"crypto/tls"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"

	"strata/internal/testenv"
)

// TestTLSCerts checks the run's certificates: a TLS server with the
// keystore file is trusted by the clients' config at 127.0.0.1 and
// localhost, and not by a client that trusts another CA.
func TestTLSCerts(t *testing.T) {
	certs, err := newTLSCerts()
	if err != nil {
		t.Fatal(err)
	}
	defer certs.Close()
	pair, err := tls.LoadX509KeyPair(certs.keystore, certs.keystore)
	if err != nil {
		t.Fatalf("keystore %s: %v", certs.keystore, err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{pair}})
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
			go func() { _ = c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, host := range []string{"127.0.0.1", "localhost"} {
		br, err := overTLS([]string{net.JoinHostPort(host, port)}, certs.caPEM)
		if err != nil {
			t.Fatal(err)
		}
		got, err := br.negotiated(ctx)
		if err != nil || !strings.HasPrefix(got, "TLS 1.3 TLS_AES_") {
			t.Errorf("%s: negotiated %q, %v", host, got, err)
		}
	}
	other, err := newTLSCerts()
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	br, _ := overTLS([]string{ln.Addr().String()}, other.caPEM)
	if got, err := br.negotiated(ctx); err == nil {
		t.Errorf("a client trusting another CA negotiated %q", got)
	}
	if _, err := overTLS(nil, []byte("not PEM")); err == nil {
		t.Error("a CA of no PEM accepted")
	}

	// Kafka gets the same key and certificates inline, one line each.
	props := certs.kafkaProperties()
	for line := range strings.Lines(props) {
		if !regexp.MustCompile(`^ssl\.[a-z.]+=\S`).MatchString(line) {
			t.Errorf("property line %q", line)
		}
	}
	for _, want := range []string{"ssl.keystore.type=PEM\n", `ssl.keystore.key=-----BEGIN PRIVATE KEY-----\n`,
		"ssl.cipher.suites=" + kafkaTLSCipher + "\n", "ssl.enabled.protocols=TLSv1.3\n"} {
		if !strings.Contains(props, want) {
			t.Errorf("kafka's properties lack %q:\n%s", want, props)
		}
	}
	nd := &kafkaNode{id: 1, dir: "/d/node-1", addr: "127.0.0.1:1000", ctrAddr: "127.0.0.1:1001"}
	node := kafkaProperties(nd, "1@127.0.0.1:1001", 1, certs)
	for _, want := range []string{"listeners=SSL://127.0.0.1:1000,CONTROLLER://127.0.0.1:1001\n", "advertised.listeners=SSL://127.0.0.1:1000\n",
		"inter.broker.listener.name=SSL\n", "listener.security.protocol.map=CONTROLLER:PLAINTEXT,SSL:SSL\n", props} {
		if !strings.Contains(node, want) {
			t.Errorf("a TLS node's properties lack %q:\n%s", want, node)
		}
	}
}

func TestCipherFloor(t *testing.T) {
	f, err := measureCipherFloor(50 * time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("AES-128-GCM on one thread: seal %.0f MB/s, open %.0f MB/s", f.SealMBPerSec, f.OpenMBPerSec)
	// Any machine this runs on seals and opens more than 10 MB/s, and no
	// core a thousand times that.
	if f.SealMBPerSec < 10 || f.OpenMBPerSec < 10 || f.SealMBPerSec > 1e4 || f.OpenMBPerSec > 1e4 || f.RecordBytes != 16<<10 {
		t.Errorf("cipher floor %+v", f)
	}
}

// TestTLSPreset runs the tls preset, shrunk, on its default targets:
// Strata and the real Apache Kafka over TLS with the run's certificates,
// and Strata in plaintext; it checks every result, what each TLS target
// negotiated, the floor, the goals and the report's TLS lines. It is the
// test run's second Kafka start (TestKafkaTarget's is plaintext).
func TestTLSPreset(t *testing.T) {
	bin := testenv.BuildStrata(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	w := smokeWorkload(t, "tls")
	var brokerLog syncBuffer
	began := time.Now()
	rep, err := Run(ctx, Config{Workload: w, StrataBin: bin, BrokerLog: &brokerLog})
	t.Logf("tls preset on %v in %s", rep.Targets, time.Since(began).Round(time.Millisecond))
	if err != nil {
		t.Fatalf("%v\nbroker log tail: %s", err, lastLines(brokerLog.String(), 20))
	}
	for _, res := range rep.Results {
		checkConsistent(t, res, rep.Workload)
		want := "TLS 1.3 " + kafkaTLSCipher
		if res.Target == TargetStrata {
			want = ""
		}
		if res.TLS != want {
			t.Errorf("%s negotiated %q, want %q", res.Target, res.TLS, want)
		}
		if b := res.Broker; b == nil || b.CPUSeconds <= 0 || b.PhaseCPU[phaseRun] <= 0 {
			t.Errorf("%s: broker resources %+v", res.Target, b)
		}
	}
	if f := rep.CipherFloor; f == nil || f.SealMBPerSec <= 0 || f.OpenMBPerSec <= 0 {
		t.Errorf("cipher floor %+v", rep.CipherFloor)
	}
	s := &Suite{Machine: ReadMachine(), Reports: []*Report{rep}, Goals: EvaluateGoals(Issue25Goals, []*Report{rep})}
	for _, g := range s.Goals {
		// A tiny run may serve its read-back within one clock tick of
		// CPU time: a ratio of 0 is possible, a negative one is not.
		if !g.Evaluated || g.Measured < 0 {
			t.Errorf("goal %q: %+v", g.Name, g)
		}
	}
	md, bs := s.Markdown(""), s.Benchstat()
	num := `[0-9.]+`
	for _, re := range []string{
		`\| metric \| strata-tls \| kafka-tls \| strata \| strata-tls/kafka-tls \| strata-tls/strata \|`,
		`\| raw read-back records/s \(fastest pass\) \| ` + num + ` \| ` + num + ` \| ` + num + ` \| ` + num + `x \| ` + num + `x \|`,
		`TLS in this run \(strata-tls negotiated TLS 1\.3 TLS_AES_128_GCM_SHA256, kafka-tls TLS 1\.3 TLS_AES_128_GCM_SHA256\): ` +
			`the floor, Go's AES-128-GCM on one core of this machine, seals ` + num + ` MB/s`,
		`Strata over TLS against its own plaintext run \(strata-tls/strata\): produce MB/s ` + num + `x, raw read-back records/s ` + num + `x`,
		`\*\*strata-tls, kafka-tls\*\*`,
	} {
		if !regexp.MustCompile(re).MatchString(md) {
			t.Errorf("report lacks %s:\n%s", re, md)
		}
	}
	if !regexp.MustCompile(`(?m)^BenchmarkCipherFloor/workload=tls/cipher=AES-128-GCM/op=seal 1 `+num+` ns/op `+num+` MB/s$`).MatchString(bs) ||
		!strings.Contains(bs, "BenchmarkRawReadBack/workload=tls/target=strata-tls ") || !strings.Contains(bs, "BenchmarkRawReadBack/workload=tls/target=kafka-tls ") {
		t.Errorf("benchstat lines:\n%s", bs)
	}
}
