package broker

// SASL (issue 25): PLAIN over SASL_PLAINTEXT and SASL_SSL with franz-go,
// what is served before authentication, a wrong password, KIP-368
// session expiry, and SCRAM users made with AlterUserScramCredentials on
// a ZooKeeper cluster whose brokers talk SASL to each other.

import (
	"crypto"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"strata/broker/network"
	"strata/controller"
	"strata/internal/testenv"
)

const plainJAAS = `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice \"quoted\" secret";`

// produceConsume produces n records to topic through cl and reads them
// back.
func produceConsume(t *testing.T, seed string, mech sasl.Mechanism, tlsCfg *tls.Config, topic string, n int) {
	t.Helper()
	opts := []kgo.Opt{kgo.SeedBrokers(seed), kgo.SASL(mech), kgo.DefaultProduceTopic(topic), kgo.AllowAutoTopicCreation(),
		kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
	if tlsCfg != nil {
		opts = append(opts, kgo.DialTLSConfig(tlsCfg))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testCtx(t)
	for i := range n {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("v" + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("produce to %s: %v", topic, err)
		}
	}
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			t.Fatalf("consume %s: %v", topic, err)
		}
		got += fs.NumRecords()
	}
}

// expectClosed fails unless the broker closes rc without answering.
func expectClosed(t *testing.T, rc *rawConn) {
	t.Helper()
	rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [1]byte
	if n, err := rc.c.Read(b[:]); !errors.Is(err, io.EOF) {
		t.Fatalf("read after a request the broker must refuse = %d, %v; want the connection closed (EOF)", n, err)
	}
}

func startSASLServer(t *testing.T, extra map[string]string) (*testServer, *tlsFiles) {
	f := newTLSFiles(t)
	sets := map[string]string{
		"listeners":                                           "SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
		"inter.broker.listener.name":                          "SASL_PLAINTEXT",
		"sasl.enabled.mechanisms":                             "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"sasl.mechanism.inter.broker.protocol":                "PLAIN",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": plainJAAS,
		"listener.name.sasl_ssl.plain.sasl.jaas.config":       plainJAAS,
		"ssl.keystore.location":                               f.keystore,
	}
	for k, v := range extra {
		sets[k] = v
	}
	return startTestServer(t, sets), f
}

// TestSASLPlain: franz-go produces and consumes with PLAIN over
// SASL_PLAINTEXT and SASL_SSL, with a password that needed the JAAS
// config's escapes; a wrong password is refused with
// SASL_AUTHENTICATION_FAILED and a message, then the connection closes;
// a request other than ApiVersions before authentication closes the
// connection unanswered; the principal is User:<name>.
func TestSASLPlain(t *testing.T) {
	ts, f := startSASLServer(t, nil)
	alice := plain.Auth{User: "alice", Pass: `alice "quoted" secret`}.AsMechanism()
	produceConsume(t, ts.addr(), alice, nil, "plain-text", 20)
	sslAddr, _ := ts.ListenerAddr("SASL_SSL")
	produceConsume(t, sslAddr.String(), alice, &tls.Config{RootCAs: f.ca.Pool()}, "plain-ssl", 20)

	// A wrong password: franz-go sees SASL_AUTHENTICATION_FAILED.
	cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr()), kgo.SASL(plain.Auth{User: "alice", Pass: "wrong"}.AsMechanism()),
		kgo.RequestRetries(0), kgo.RetryTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if _, err := kadm.NewClient(cl).ListTopics(testCtx(t)); !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("ListTopics with a wrong password = %v, want SASL_AUTHENTICATION_FAILED", err)
	}

	// The same by hand: the answer carries a message, then the close.
	rc := dialRaw(t, ts.addr())
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "PLAIN"
	if r := rc.do(hs, 1).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
		t.Fatalf("SaslHandshake PLAIN = %v", kerr.ErrorForCode(r.ErrorCode))
	}
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SASLAuthBytes = []byte("\x00alice\x00wrong")
	r := rc.do(auth, 2).(*kmsg.SASLAuthenticateResponse)
	if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, "Invalid username or password") {
		t.Fatalf("SaslAuthenticate with a wrong password = %v %v", kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage)
	}
	expectClosed(t, rc)

	// Before authentication: ApiVersions is answered (and lists the SASL
	// APIs), Metadata closes the connection.
	rc = dialRaw(t, ts.addr())
	av := rc.do(kmsg.NewPtrApiVersionsRequest(), 2).(*kmsg.ApiVersionsResponse)
	found := 0
	for _, k := range av.ApiKeys {
		if k.ApiKey == 17 || k.ApiKey == 36 {
			found++
		}
	}
	if av.ErrorCode != 0 || found != 2 {
		t.Fatalf("ApiVersions before authentication: error %d, SASL APIs listed %d", av.ErrorCode, found)
	}
	rc.send(kmsg.NewPtrMetadataRequest(), 12)
	expectClosed(t, rc)

	// An unknown mechanism is answered with the enabled ones, then closed.
	rc = dialRaw(t, ts.addr())
	hs.Mechanism = "GSSAPI"
	h := rc.do(hs, 1).(*kmsg.SASLHandshakeResponse)
	if h.ErrorCode != kerr.UnsupportedSaslMechanism.Code || strings.Join(h.SupportedMechanisms, ",") != "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512" {
		t.Fatalf("SaslHandshake GSSAPI = %v %v", kerr.ErrorForCode(h.ErrorCode), h.SupportedMechanisms)
	}
	expectClosed(t, rc)

	// Authenticated by hand: the principal is User:alice.
	rc = dialRaw(t, ts.addr())
	hs.Mechanism = "PLAIN"
	rc.do(hs, 1)
	auth.SASLAuthBytes = []byte("\x00alice\x00alice \"quoted\" secret")
	if r := rc.do(auth, 2).(*kmsg.SASLAuthenticateResponse); r.ErrorCode != 0 || r.SessionLifetimeMillis != 0 {
		t.Fatalf("SaslAuthenticate = %v, session %d ms (want none: connections.max.reauth.ms=0)", kerr.ErrorForCode(r.ErrorCode), r.SessionLifetimeMillis)
	}
	if m := rc.do(kmsg.NewPtrMetadataRequest(), 12).(*kmsg.MetadataResponse); len(m.Brokers) != 1 {
		t.Fatalf("Metadata after authentication: %d brokers", len(m.Brokers))
	}

	// SaslHandshake v0: the PLAIN message follows as a raw token, and so
	// does the (empty) answer.
	rc = dialRaw(t, ts.addr())
	rc.do(hs, 0)
	tok := []byte("\x00admin\x00admin-secret")
	rc.writeFrame(append([]byte{0, 0, 0, byte(len(tok))}, tok...))
	var size [4]byte
	rc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(rc.c, size[:]); err != nil || size != [4]byte{} {
		t.Fatalf("raw PLAIN token answer = %v %v, want an empty token", size, err)
	}
	if m := rc.do(kmsg.NewPtrMetadataRequest(), 12).(*kmsg.MetadataResponse); len(m.Brokers) != 1 {
		t.Fatalf("Metadata after raw authentication: %d brokers", len(m.Brokers))
	}
	waitFor(t, "the connection's principal", 5*time.Second, func() bool {
		return ts.network.HasPrincipal("User:alice")
	})
}

// TestSASLReauth: with connections.max.reauth.ms, SaslAuthenticate
// answers the session's lifetime; franz-go re-authenticates (KIP-368) and
// keeps producing past several lifetimes, while a connection that does
// not re-authenticate is closed at its first request after expiry.
func TestSASLReauth(t *testing.T) {
	ts, _ := startSASLServer(t, map[string]string{"connections.max.reauth.ms": "1500"})

	rc := dialRaw(t, ts.addr())
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "PLAIN"
	rc.do(hs, 1)
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SASLAuthBytes = []byte("\x00admin\x00admin-secret")
	r := rc.do(auth, 1).(*kmsg.SASLAuthenticateResponse)
	if r.ErrorCode != 0 || r.SessionLifetimeMillis <= 0 || r.SessionLifetimeMillis > 1500 {
		t.Fatalf("SaslAuthenticate v1 = %v, session %d ms, want (0, 1500]", kerr.ErrorForCode(r.ErrorCode), r.SessionLifetimeMillis)
	}
	rc.do(kmsg.NewPtrMetadataRequest(), 12) // within the session

	// franz-go re-authenticates before each session ends.
	cl, err := kgo.NewClient(kgo.SeedBrokers(ts.addr()), kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()),
		kgo.DefaultProduceTopic("reauth"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testCtx(t)
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("produce %d with re-authentication: %v", i, err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// The connection that did not re-authenticate: closed at its next
	// request.
	// (the produce loop took 5s, past rc's 1.5s session)
	rc.send(kmsg.NewPtrMetadataRequest(), 12)
	expectClosed(t, rc)
}

// TestSASLScramZooKeeper: two brokers on ZooKeeper, talking to each other
// over SASL_PLAINTEXT with PLAIN (controller requests, replica fetches,
// forwarding). SCRAM users made with AlterUserScramCredentials through
// one broker land in /config/users/<user> in Kafka's form, and log in on
// both; DescribeUserScramCredentials lists them; a deleted one no longer
// logs in.
func TestSASLScramZooKeeper(t *testing.T) {
	c := startZKCluster(t, 2, map[string]string{
		"listeners":                                           "SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms":                             "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
		"sasl.mechanism.inter.broker.protocol":                "PLAIN",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": plainJAAS,
	})
	c.createTopic("scram", []int32{1, 2}, nil) // replicated over SASL
	act := c.active()
	other := int32(3) - act
	admin := plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.servers[other].Addr().String()), kgo.SASL(admin))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx := testCtx(t)
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: "bob", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "bob-secret"},
		{User: "bob", Mechanism: kadm.ScramSha512, Iterations: 8192, Password: "bob-secret-512"},
		{User: "carol", Mechanism: kadm.ScramSha512, Iterations: 4096, Password: "carol-secret"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for u, r := range res {
		if r.Err != nil {
			t.Fatalf("AlterUserScramCredentials %s: %v", u, r.Err)
		}
	}
	// The broker's own checks (kadm checks iterations before sending).
	for _, tc := range []struct {
		iter int32
		mech int8
		want error
	}{{100, 1, kerr.UnacceptableCredential}, {20000, 1, kerr.UnacceptableCredential}, {4096, 9, kerr.UnsupportedSaslMechanism}} {
		req := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
		up := kmsg.NewAlterUserSCRAMCredentialsRequestUpsertion()
		up.Name, up.Mechanism, up.Iterations, up.Salt, up.SaltedPassword = "dave", tc.mech, tc.iter, []byte("salt"), []byte("salted")
		req.Upsertions = append(req.Upsertions, up)
		resp, err := req.RequestWith(ctx, cl)
		if err != nil || len(resp.Results) != 1 || !errors.Is(kerr.ErrorForCode(resp.Results[0].ErrorCode), tc.want) {
			t.Fatalf("AlterUserScramCredentials %d iterations, mechanism %d = %v %+v, want %v", tc.iter, tc.mech, err, resp, tc.want)
		}
	}

	// Every broker knows them, from ZooKeeper.
	for id := range c.servers {
		waitFor(t, "broker "+strconv.Itoa(int(id))+" to know bob and carol", 5*time.Second, func() bool {
			u := c.servers[id].ctrl.Metadata().ScramUsers
			return len(u["bob"]) == 2 && len(u["carol"]) == 1
		})
	}
	zc, _, err := zk.Connect([]string{c.zk.Addr()}, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer zc.Close()
	data, _, err := zc.Get("/config/users/bob")
	if err != nil {
		t.Fatal(err)
	}
	if s := string(data); !strings.Contains(s, `"SCRAM-SHA-256":"salt=`) || !strings.Contains(s, ",stored_key=") || !strings.Contains(s, ",iterations=4096") || strings.Contains(s, "bob-secret") {
		t.Fatalf("/config/users/bob = %s, want Kafka's form without the password", s)
	}
	if _, err := controller.ParseScramCredential(strings.Split(strings.Split(string(data), `"SCRAM-SHA-512":"`)[1], `"`)[0]); err != nil {
		t.Fatalf("/config/users/bob SCRAM-SHA-512: %v", err)
	}

	desc, err := adm.DescribeUserSCRAMs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(desc) != 2 || len(desc["bob"].CredInfos) != 2 || desc["carol"].CredInfos[0].Iterations != 4096 {
		t.Fatalf("DescribeUserScramCredentials = %+v", desc)
	}

	// bob logs in with SCRAM-SHA-256 and -512 on both brokers; carol's
	// wrong password fails.
	for id, s := range c.servers {
		for _, m := range []sasl.Mechanism{scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha256Mechanism(), scram.Auth{User: "bob", Pass: "bob-secret-512"}.AsSha512Mechanism()} {
			produceConsume(t, s.Addr().String(), m, nil, "scram-"+strconv.Itoa(int(id))+"-"+m.Name(), 5)
		}
		wrong, err := kgo.NewClient(kgo.SeedBrokers(s.Addr().String()), kgo.SASL(scram.Auth{User: "carol", Pass: "nope"}.AsSha512Mechanism()), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kadm.NewClient(wrong).ListTopics(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("broker %d: carol with a wrong password = %v", id, err)
		}
		wrong.Close()
	}

	// Deleting bob's SHA-256 credential: it no longer logs in anywhere.
	if res, err := adm.AlterUserSCRAMs(ctx, []kadm.DeleteSCRAM{{User: "bob", Mechanism: kadm.ScramSha256}}, nil); err != nil || res["bob"].Err != nil {
		t.Fatalf("delete = %v %v", err, res["bob"].Err)
	}
	for id := range c.servers {
		waitFor(t, "bob's SHA-256 credential gone", 5*time.Second, func() bool {
			return len(c.servers[id].ctrl.Metadata().ScramUsers["bob"]) == 1
		})
		gone, err := kgo.NewClient(kgo.SeedBrokers(c.servers[id].Addr().String()), kgo.SASL(scram.Auth{User: "bob", Pass: "bob-secret"}.AsSha256Mechanism()), kgo.RequestRetries(0))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := kadm.NewClient(gone).ListTopics(ctx); !errors.Is(err, kerr.SaslAuthenticationFailed) {
			t.Fatalf("broker %d: deleted credential = %v", id, err)
		}
		gone.Close()
	}
}

// TestSASLKcatAndEmbeddedScram: on the embedded controller, a SCRAM user
// made with AlterUserScramCredentials is kept in the metadata file
// (owner-only) and survives a restart; kcat (librdkafka) produces with
// SASL PLAIN and consumes with SCRAM-SHA-256.
func TestSASLKcatAndEmbeddedScram(t *testing.T) {
	kcat := testenv.RequireKcat(t)
	dir := t.TempDir()
	sets := map[string]string{
		"listeners":                                           "SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms":                             "PLAIN,SCRAM-SHA-256",
		"sasl.mechanism.inter.broker.protocol":                "PLAIN",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": plainJAAS,
	}
	ts := startTestServerDir(t, dir, sets)
	cl := ts.client(t, kgo.SASL(plain.Auth{User: "admin", Pass: "admin-secret"}.AsMechanism()))
	ctx := testCtx(t)
	res, err := kadm.NewClient(cl).AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: "erin", Mechanism: kadm.ScramSha256, Password: "erin-secret"}})
	if err != nil || res["erin"].Err != nil {
		t.Fatalf("AlterUserScramCredentials = %v %v", err, res["erin"].Err)
	}
	// Kafka's answers for what does not exist.
	dreq := kmsg.NewPtrDescribeUserSCRAMCredentialsRequest()
	for _, u := range []string{"erin", "nobody"} {
		du := kmsg.NewDescribeUserSCRAMCredentialsRequestUser()
		du.Name = u
		dreq.Users = append(dreq.Users, du)
	}
	dresp, err := dreq.RequestWith(ctx, cl)
	if err != nil || len(dresp.Results) != 2 || dresp.Results[0].ErrorCode != 0 || len(dresp.Results[0].CredentialInfos) != 1 ||
		dresp.Results[0].CredentialInfos[0].Mechanism != 1 || dresp.Results[1].ErrorCode != kerr.ResourceNotFound.Code {
		t.Fatalf("DescribeUserScramCredentials erin, nobody = %v %+v", err, dresp)
	}
	areq := kmsg.NewPtrAlterUserSCRAMCredentialsRequest()
	del := kmsg.NewAlterUserSCRAMCredentialsRequestDeletion()
	del.Name, del.Mechanism = "erin", 2
	areq.Deletions = append(areq.Deletions, del)
	aresp, err := areq.RequestWith(ctx, cl)
	if err != nil || len(aresp.Results) != 1 || aresp.Results[0].ErrorCode != kerr.ResourceNotFound.Code {
		t.Fatalf("deleting erin's SCRAM-SHA-512, which does not exist = %v %+v", err, aresp)
	}
	cl.Close()
	st, err := os.Stat(filepath.Join(dir, controller.MetadataFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("metadata file: %v, mode %v; want 0600 (it holds SCRAM keys)", err, st.Mode().Perm())
	}
	ts.Close()
	ts = startTestServerDir(t, dir, sets) // the credential survives a restart

	run := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, kcat, append([]string{"-b", ts.addr(), "-X", "security.protocol=SASL_PLAINTEXT"}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("kcat %v: %v: %s", args, err, stderr)
		}
		return string(out)
	}
	run("a\nb\nc\n", "-X", "sasl.mechanisms=PLAIN", "-X", "sasl.username=alice", "-X", `sasl.password=alice "quoted" secret`, "-P", "-t", "kcat-sasl")
	got := run("", "-X", "sasl.mechanisms=SCRAM-SHA-256", "-X", "sasl.username=erin", "-X", "sasl.password=erin-secret",
		"-C", "-t", "kcat-sasl", "-o", "beginning", "-c", "3", "-q", "-e")
	if got != "a\nb\nc\n" {
		t.Fatalf("kcat consumed %q", got)
	}
}

// TestSASLOAuthBearer: OAUTHBEARER with JWTs signed by a key of a JWKS
// the test serves. A good token logs in as its sub; an expired one, one
// for another audience or issuer, and one signed by another key are each
// refused with a message that names the check.
func TestSASLOAuthBearer(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding
	jwksBody, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "kid": "k1", "use": "sig", "alg": "RS256",
		"n": b64.EncodeToString(key.N.Bytes()), "e": b64.EncodeToString(big.NewInt(int64(key.E)).Bytes()),
	}}})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(jwksBody) }))
	defer srv.Close()
	sign := func(k *rsa.PrivateKey, claims map[string]any) string {
		h, _ := json.Marshal(map[string]string{"alg": "RS256", "kid": "k1", "typ": "JWT"})
		c, _ := json.Marshal(claims)
		in := b64.EncodeToString(h) + "." + b64.EncodeToString(c)
		sum := sha256.Sum256([]byte(in))
		sig, err := rsa.SignPKCS1v15(rand.Reader, k, crypto.SHA256, sum[:])
		if err != nil {
			t.Fatal(err)
		}
		return in + "." + b64.EncodeToString(sig)
	}
	ts := startTestServer(t, map[string]string{
		"listeners":                                           "SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms":                             "PLAIN,OAUTHBEARER",
		"sasl.mechanism.inter.broker.protocol":                "PLAIN",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": plainJAAS,
		"sasl.oauthbearer.jwks.endpoint.url":                  srv.URL,
		"sasl.oauthbearer.expected.audience":                  "strata",
		"sasl.oauthbearer.expected.issuer":                    "https://idp.example",
	})
	now := time.Now().Unix()
	good := map[string]any{"sub": "frank", "aud": []string{"other", "strata"}, "iss": "https://idp.example", "exp": now + 600, "iat": now}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for a, b := range good {
			m[a] = b
		}
		m[k] = v
		return m
	}
	produceConsume(t, ts.addr(), oauth.Auth{Token: sign(key, good)}.AsMechanism(), nil, "oauth", 5)
	waitFor(t, "the connection's principal", 5*time.Second, func() bool { return ts.network.HasPrincipal("User:frank") })

	for name, tc := range map[string]struct {
		token string
		msg   string
	}{
		"expired":   {sign(key, with("exp", now-3600)), "expired"},
		"audience":  {sign(key, with("aud", "someone-else")), "sasl.oauthbearer.expected.audience"},
		"issuer":    {sign(key, with("iss", "https://evil.example")), "sasl.oauthbearer.expected.issuer"},
		"signature": {sign(other, good), "signature does not verify"},
		"no sub":    {sign(key, with("sub", "")), "no sub claim"},
	} {
		rc := dialRaw(t, ts.addr())
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Mechanism = "OAUTHBEARER"
		if r := rc.do(hs, 1).(*kmsg.SASLHandshakeResponse); r.ErrorCode != 0 {
			t.Fatalf("%s: SaslHandshake = %v", name, kerr.ErrorForCode(r.ErrorCode))
		}
		auth := kmsg.NewPtrSASLAuthenticateRequest()
		auth.SASLAuthBytes = []byte("n,,\x01auth=Bearer " + tc.token + "\x01\x01")
		r := rc.do(auth, 2).(*kmsg.SASLAuthenticateResponse)
		if r.ErrorCode != kerr.SaslAuthenticationFailed.Code || r.ErrorMessage == nil || !strings.Contains(*r.ErrorMessage, tc.msg) {
			t.Fatalf("%s token: %v %v, want SASL_AUTHENTICATION_FAILED saying %q", name, kerr.ErrorForCode(r.ErrorCode), r.ErrorMessage, tc.msg)
		}
		expectClosed(t, rc)
	}
}

// TestSASLScramBetweenBrokersOverSSL: two brokers whose only listener is
// SASL_SSL and who authenticate to each other with SCRAM-SHA-512 as the
// user of their JAAS config, whose credential is in ZooKeeper before they
// start (as Kafka's docs have it made with kafka-configs --zookeeper).
// Replication, the controller's requests and forwarding all go over it.
func TestSASLScramBetweenBrokersOverSSL(t *testing.T) {
	f := newTLSFiles(t)
	c := &zkCluster{t: t, zk: testenv.StartZooKeeper(t), dirs: map[int32]string{}, servers: map[int32]*Server{}, sets: map[string]string{
		"listeners":                            "SASL_SSL://127.0.0.1:0",
		"sasl.enabled.mechanisms":              "SCRAM-SHA-512",
		"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
		"listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": `org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="broker-secret";`,
		"ssl.keystore.location":                                 f.keystore,
		"ssl.truststore.location":                               f.truststore,
	}}
	t.Cleanup(func() {
		for _, s := range c.servers {
			s.Close()
		}
	})
	zc, _, err := zk.Connect([]string{c.zk.Addr()}, 5*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer zc.Close()
	salt := []byte("0123456789abcdef")
	salted, err := pbkdf2.Key(sha512.New, "broker-secret", salt, 4096, sha512.Size)
	if err != nil {
		t.Fatal(err)
	}
	stored, server := network.ScramKeys(sha512.New, salted)
	cred := controller.ScramCredential{Salt: salt, StoredKey: stored, ServerKey: server, Iterations: 4096}
	for _, p := range []string{"/config", "/config/users"} {
		if _, err := zc.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatal(err)
		}
	}
	data, _ := json.Marshal(map[string]any{"version": 1, "config": map[string]string{"SCRAM-SHA-512": cred.String()}})
	if _, err := zc.Create("/config/users/broker", data, 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatal(err)
	}
	for i := int32(1); i <= 2; i++ {
		c.dirs[i] = t.TempDir()
		c.start(i)
	}
	c.createTopic("scram-ssl", []int32{1, 2}, map[string]string{"min.insync.replicas": "2"})

	// A client produces with acks=all through the broker that is not the
	// controller (topic creation is forwarded), and reads back.
	other := 3 - c.active()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.servers[other].Addr().String()), kgo.DialTLSConfig(&tls.Config{RootCAs: f.ca.Pool()}),
		kgo.SASL(scram.Auth{User: "broker", Pass: "broker-secret"}.AsSha512Mechanism()), kgo.RequiredAcks(kgo.AllISRAcks()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := testCtx(t)
	if _, err := kadm.NewClient(cl).CreateTopic(ctx, 1, 2, nil, "made-through-"+strconv.Itoa(int(other))); err != nil {
		t.Fatalf("CreateTopic forwarded over SASL_SSL: %v", err)
	}
	for i := range 10 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "scram-ssl", Value: []byte(strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("acks=all produce (the follower fetches over SASL_SSL): %v", err)
		}
	}
	for id := range c.servers {
		waitFor(t, "both replicas to hold the 10 records", 10*time.Second, func() bool {
			p := c.servers[id].partition("scram-ssl", 0)
			return p != nil && p.Log().LogEndOffset() == 10
		})
	}
}

// TestSASLOnPlaintextListener: on a listener without SASL, SaslHandshake
// and SaslAuthenticate are answered ILLEGAL_SASL_STATE, as Kafka answers
// them, and the connection serves on.
func TestSASLOnPlaintextListener(t *testing.T) {
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.Mechanism = "PLAIN"
	if r := rc.do(hs, 1).(*kmsg.SASLHandshakeResponse); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslHandshake on PLAINTEXT = %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if r := rc.do(kmsg.NewPtrSASLAuthenticateRequest(), 2).(*kmsg.SASLAuthenticateResponse); r.ErrorCode != kerr.IllegalSaslState.Code {
		t.Fatalf("SaslAuthenticate on PLAINTEXT = %v", kerr.ErrorForCode(r.ErrorCode))
	}
	if m := rc.do(kmsg.NewPtrMetadataRequest(), 12).(*kmsg.MetadataResponse); len(m.Brokers) != 1 {
		t.Fatalf("Metadata after: %d brokers", len(m.Brokers))
	}
}
