package compat

// The security section: one more broker, started once, with a listener
// per way of connecting (TLS, mutual TLS, SASL_SSL with PLAIN, SCRAM and
// OAUTHBEARER) and an authorizer, so that a check passes only when the
// connection was given the principal it should have. Each client of the
// section produces to and reads back from one topic per listener and
// mechanism.

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	kafkago "github.com/segmentio/kafka-go"
	kgosasl "github.com/segmentio/kafka-go/sasl"
	kgoplain "github.com/segmentio/kafka-go/sasl/plain"
	kgoscram "github.com/segmentio/kafka-go/sasl/scram"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/oauth"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xdgscram "github.com/xdg-go/scram"

	"strata/internal/testenv"
)

// The principals of the section. Each listener and mechanism has its
// topics (secPrefix(feature)), which an ACL opens to its principal only.
const (
	plainUser, plainPassword = "alice", "alice-secret"
	scramUser, scramPassword = "bob", "bob-secret"
	oauthSubject             = "carol"
	oauthClientID            = "compat-client"
	oauthClientSecret        = "compat-client-secret"
	oauthAudience            = "strata"
	oauthIssuer              = "https://idp.compat.example"
	// The client certificate's subject, and what mappingRules make of it.
	mtlsCN, mtlsPrincipal = "Compat-Client", "compat-client"
)

// secPrincipal is the principal an ACL opens each feature's topics to;
// TLS without a client certificate is User:ANONYMOUS, and its topics have
// no ACL.
var secPrincipal = map[string]string{
	"sec-mtls":          "User:" + mtlsPrincipal,
	"sec-plain":         "User:" + plainUser,
	"sec-scram-sha-256": "User:" + scramUser,
	"sec-scram-sha-512": "User:" + scramUser,
	"sec-oauthbearer":   "User:" + oauthSubject,
}

// secTopic is the topic a client's check of feature writes and reads.
func secTopic(feature, client string) string { return feature + "-" + client }

// secEnv is the security broker and what a client needs to reach it.
type secEnv struct {
	plaintext, ssl, mtls, saslSSL string // listener addresses
	caFile                        string // the CA of the broker's certificate
	certFile, keyFile             string // the client certificate and its key (PEM)
	keystoreFile                  string // the same, key first, in one file (Kafka's PEM keystore)
	tlsCfg, mtlsCfg               *tls.Config
	tokenURL                      string // the token endpoint (OAuth client credentials)
	token                         func() string
}

// environ is what the external drivers read (scripts/, java/).
func (s *secEnv) environ() []string {
	return []string{
		"STRATA_COMPAT_SEC_SSL=" + s.ssl,
		"STRATA_COMPAT_SEC_MTLS=" + s.mtls,
		"STRATA_COMPAT_SEC_SASL_SSL=" + s.saslSSL,
		"STRATA_COMPAT_SEC_CA=" + s.caFile,
		"STRATA_COMPAT_SEC_CERT=" + s.certFile,
		"STRATA_COMPAT_SEC_KEY=" + s.keyFile,
		"STRATA_COMPAT_SEC_KEYSTORE=" + s.keystoreFile,
		"STRATA_COMPAT_SEC_PLAIN_USER=" + plainUser,
		"STRATA_COMPAT_SEC_PLAIN_PASSWORD=" + plainPassword,
		"STRATA_COMPAT_SEC_SCRAM_USER=" + scramUser,
		"STRATA_COMPAT_SEC_SCRAM_PASSWORD=" + scramPassword,
		"STRATA_COMPAT_SEC_TOKEN_URL=" + s.tokenURL,
		"STRATA_COMPAT_SEC_CLIENT_ID=" + oauthClientID,
		"STRATA_COMPAT_SEC_CLIENT_SECRET=" + oauthClientSecret,
		"STRATA_COMPAT_SEC_TOKEN=" + s.token(),
	}
}

var listeningLine = regexp.MustCompile(`msg=listening listen=(\S+) listener=(\S+)`)

// startSecurity starts the security broker, its token endpoint and JWKS,
// creates the section's topics, the SCRAM user and the ACLs, and checks
// that the ACLs bite.
func startSecurity(t *testing.T) *secEnv {
	t.Helper()
	dir := t.TempDir()
	ca := testenv.NewCA(t, "strata-compat-ca")
	client := ca.Client(t, pkix.Name{CommonName: mtlsCN, OrganizationalUnit: []string{"clients"}, Organization: []string{"Strata test"}})
	s := &secEnv{
		caFile:       testenv.WriteFile(t, dir, "ca.pem", ca.PEM),
		certFile:     testenv.WriteFile(t, dir, "client.crt", client.CertPEM),
		keyFile:      testenv.WriteFile(t, dir, "client.key", client.KeyPEM),
		keystoreFile: testenv.WriteFile(t, dir, "client.pem", client.PEM()),
		tlsCfg:       &tls.Config{RootCAs: ca.Pool()},
		mtlsCfg:      &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{client.TLS}},
	}
	keystore := testenv.WriteFile(t, dir, "broker.pem", ca.Server(t, "localhost").PEM())

	// The identity provider: a JWKS file for the broker, and a token
	// endpoint (OAuth client credentials) for the clients that fetch
	// their token themselves.
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.RawURLEncoding
	jwks, _ := json.Marshal(map[string]any{"keys": []map[string]string{{
		"kty": "RSA", "kid": "compat", "use": "sig", "alg": "RS256",
		"n": b64.EncodeToString(key.N.Bytes()), "e": b64.EncodeToString(big.NewInt(int64(key.E)).Bytes()),
	}}})
	jwksFile := testenv.WriteFile(t, dir, "jwks.json", jwks)
	s.token = func() string {
		now := time.Now().Unix()
		h, _ := json.Marshal(map[string]string{"alg": "RS256", "kid": "compat", "typ": "JWT"})
		c, _ := json.Marshal(map[string]any{"sub": oauthSubject, "aud": oauthAudience, "iss": oauthIssuer,
			"iat": now, "exp": now + 3600, "scope": "kafka"})
		in := b64.EncodeToString(h) + "." + b64.EncodeToString(c)
		sum := sha256.Sum256([]byte(in))
		sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
		if err != nil {
			panic(err) // rand.Reader does not fail
		}
		return in + "." + b64.EncodeToString(sig)
	}
	idp := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, secret, ok := r.BasicAuth()
		if !ok {
			r.ParseForm()
			id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
		}
		if r.Method != http.MethodPost || id != oauthClientID || secret != oauthClientSecret {
			http.Error(w, `{"error":"invalid_client"}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": s.token(), "token_type": "Bearer", "expires_in": 3600})
	}))
	t.Cleanup(idp.Close)
	s.tokenURL = idp.URL + "/token"

	jaas := fmt.Sprintf(`org.apache.kafka.common.security.plain.PlainLoginModule required user_%s="%s";`, plainUser, plainPassword)
	b := testenv.StartBroker(t, testenv.BrokerOptions{ID: 7, Sets: []string{
		"group.initial.rebalance.delay.ms=0",
		"listeners=PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,MTLS://127.0.0.1:0,SASL_SSL://127.0.0.1:0",
		"listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,SASL_SSL:SASL_SSL",
		"inter.broker.listener.name=PLAINTEXT",
		"ssl.keystore.location=" + keystore,
		"ssl.truststore.location=" + s.caFile,
		"listener.name.mtls.ssl.client.auth=required",
		"ssl.principal.mapping.rules=" + mappingRules,
		"sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512,OAUTHBEARER",
		"listener.name.sasl_ssl.plain.sasl.jaas.config=" + jaas,
		"sasl.oauthbearer.jwks.endpoint.url=file://" + jwksFile,
		"sasl.oauthbearer.expected.audience=" + oauthAudience,
		"sasl.oauthbearer.expected.issuer=" + oauthIssuer,
		"authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
		"allow.everyone.if.no.acl.found=true",
	}})
	addrs := map[string]string{}
	for _, m := range listeningLine.FindAllStringSubmatch(b.Logs(), -1) {
		addrs[m[2]] = m[1]
	}
	s.plaintext, s.ssl, s.mtls, s.saslSSL = addrs["PLAINTEXT"], addrs["SSL"], addrs["MTLS"], addrs["SASL_SSL"]
	if s.plaintext == "" || s.ssl == "" || s.mtls == "" || s.saslSSL == "" {
		t.Fatalf("security broker: listeners %v, want PLAINTEXT, SSL, MTLS and SASL_SSL", addrs)
	}

	// Topics, the SCRAM user and the ACLs, as User:ANONYMOUS on
	// PLAINTEXT: allowed while no ACL names the cluster or the topics.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, []string{s.plaintext}))
	var topics []string
	for _, c := range clients {
		for _, f := range secFeatures {
			if _, na := c.NA[f.Key]; c.Sec && !na {
				topics = append(topics, secTopic(f.Key, c.Key))
			}
		}
	}
	res, err := adm.CreateTopics(ctx, 1, 1, nil, topics...)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("security broker: create topics: %v", err)
	}
	sres, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: scramUser, Mechanism: kadm.ScramSha256, Iterations: 8192, Password: scramPassword},
		{User: scramUser, Mechanism: kadm.ScramSha512, Iterations: 8192, Password: scramPassword},
	})
	if err == nil {
		err = sres[scramUser].Err
	}
	if err != nil {
		t.Fatalf("security broker: SCRAM user %s: %v", scramUser, err)
	}
	for feature, principal := range secPrincipal {
		acl := kadm.NewACLs().Allow(principal).AllowHosts("*").Topics(feature + "-").
			ResourcePatternType(kadm.ACLPatternPrefixed).Operations(kadm.OpAll)
		r, err := adm.CreateACLs(ctx, acl)
		if err == nil && (len(r) != 1 || r[0].Err != nil) {
			err = fmt.Errorf("%+v", r)
		}
		if err != nil {
			t.Fatalf("security broker: ACL for %s: %v", principal, err)
		}
	}
	// The ACLs bite: User:ANONYMOUS may not write a topic of mutual TLS.
	anon := newClient(t, []string{s.plaintext}, kgo.RequestRetries(0), kgo.RecordRetries(1))
	err = anon.ProduceSync(ctx, &kgo.Record{Topic: secTopic("sec-mtls", "franz-go"), Value: []byte("x")}).FirstErr()
	if !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("security broker: User:ANONYMOUS producing to a topic of mutual TLS: %v, want TOPIC_AUTHORIZATION_FAILED", err)
	}
	return s
}

// checkSecurity runs client's check of each security feature it does not
// declare not applicable, at once: each has its own topic and
// connections, so they need not wait for each other.
func (e *env) checkSecurity(t *testing.T, client string, check func(f Feature) func(ctx context.Context) error) {
	t.Helper()
	var wg sync.WaitGroup
	for _, f := range secFeatures {
		if _, na := clientByKey(client).NA[f.Key]; na {
			continue
		}
		run := check(f)
		wg.Go(func() { e.check(t, client, f.Key, run) })
	}
	wg.Wait()
}

// franzSecurityOpts are franz-go's options for feature.
func (s *secEnv) franzSecurityOpts(feature string) []kgo.Opt {
	withSASL := func(m sasl.Mechanism) []kgo.Opt {
		return []kgo.Opt{kgo.SeedBrokers(s.saslSSL), kgo.DialTLSConfig(s.tlsCfg), kgo.SASL(m)}
	}
	switch feature {
	case "sec-tls":
		return []kgo.Opt{kgo.SeedBrokers(s.ssl), kgo.DialTLSConfig(s.tlsCfg)}
	case "sec-mtls":
		return []kgo.Opt{kgo.SeedBrokers(s.mtls), kgo.DialTLSConfig(s.mtlsCfg)}
	case "sec-plain":
		return withSASL(plain.Auth{User: plainUser, Pass: plainPassword}.AsMechanism())
	case "sec-scram-sha-256":
		return withSASL(scram.Auth{User: scramUser, Pass: scramPassword}.AsSha256Mechanism())
	case "sec-scram-sha-512":
		return withSASL(scram.Auth{User: scramUser, Pass: scramPassword}.AsSha512Mechanism())
	case "sec-oauthbearer":
		return withSASL(oauth.Oauth(func(context.Context) (oauth.Auth, error) { return oauth.Auth{Token: s.token()}, nil }))
	}
	panic("unknown security feature " + feature)
}

// runFranzSecurity: franz-go produces and reads back through each
// listener and mechanism.
func runFranzSecurity(t *testing.T, e *env) {
	const client = "franz-go"
	e.checkSecurity(t, client, func(f Feature) func(ctx context.Context) error {
		opts := e.sec.franzSecurityOpts(f.Key)
		return func(ctx context.Context) error {
			topic := secTopic(f.Key, client)
			cl, err := kgo.NewClient(append([]kgo.Opt{kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DefaultProduceTopic(topic),
				kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
				kgo.FetchMaxWait(200 * time.Millisecond)}, opts...)...)
			if err != nil {
				return err
			}
			defer cl.Close()
			vs := values(topic, records)
			var rs []*kgo.Record
			for _, v := range vs {
				rs = append(rs, &kgo.Record{Value: []byte(v)})
			}
			if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
				return fmt.Errorf("produce: %w", err)
			}
			var got []string
			for len(got) < records {
				fs := cl.PollFetches(ctx)
				if ctx.Err() != nil {
					return fmt.Errorf("read %d of %d records: %w", len(got), records, ctx.Err())
				}
				if err := fs.Err0(); err != nil {
					return fmt.Errorf("consume: %w", err)
				}
				fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
			}
			return inOrder(got, vs)
		}
	})
}

// inOrder reports whether got is want.
func inOrder(got, want []string) error {
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		return fmt.Errorf("read back %d records, not the %d produced in order", len(got), len(want))
	}
	return nil
}

// kcatSecurityArgs are kcat's arguments for feature: librdkafka's
// configs. OAUTHBEARER would use librdkafka's own OIDC login (client
// credentials at the token endpoint), which Debian's build lacks (so it
// is declared not applicable).
func (s *secEnv) kcatSecurityArgs(feature string) []string {
	tlsArgs := []string{"-X", "ssl.ca.location=" + s.caFile}
	sasl := func(mech string, more ...string) []string {
		return append(append([]string{"-b", s.saslSSL, "-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=" + mech}, tlsArgs...), more...)
	}
	switch feature {
	case "sec-tls":
		return append([]string{"-b", s.ssl, "-X", "security.protocol=SSL"}, tlsArgs...)
	case "sec-mtls":
		return append(append([]string{"-b", s.mtls, "-X", "security.protocol=SSL"}, tlsArgs...),
			"-X", "ssl.certificate.location="+s.certFile, "-X", "ssl.key.location="+s.keyFile)
	case "sec-plain":
		return sasl("PLAIN", "-X", "sasl.username="+plainUser, "-X", "sasl.password="+plainPassword)
	case "sec-scram-sha-256":
		return sasl("SCRAM-SHA-256", "-X", "sasl.username="+scramUser, "-X", "sasl.password="+scramPassword)
	case "sec-scram-sha-512":
		return sasl("SCRAM-SHA-512", "-X", "sasl.username="+scramUser, "-X", "sasl.password="+scramPassword)
	case "sec-oauthbearer":
		return sasl("OAUTHBEARER", "-X", "sasl.oauthbearer.method=oidc", "-X", "sasl.oauthbearer.client.id="+oauthClientID,
			"-X", "sasl.oauthbearer.client.secret="+oauthClientSecret, "-X", "sasl.oauthbearer.token.endpoint.url="+s.tokenURL)
	}
	panic("unknown security feature " + feature)
}

// runKcatSecurity: kcat produces and reads back through each listener
// and mechanism.
func runKcatSecurity(t *testing.T, e *env, kcat string) {
	const client = "kcat"
	e.checkSecurity(t, client, func(f Feature) func(ctx context.Context) error {
		args := e.sec.kcatSecurityArgs(f.Key)
		return func(ctx context.Context) error {
			topic := secTopic(f.Key, client)
			vs := values(topic, records)
			pargs := append([]string{"-P", "-t", topic, "-p", "0", "-X", "acks=all"}, args...)
			if _, err := kcatRun(ctx, kcat, strings.Join(vs, "\n")+"\n", pargs...); err != nil {
				return err
			}
			cargs := append([]string{"-C", "-t", topic, "-o", "beginning", "-c", fmt.Sprint(records), "-f", "%s\n", "-q"}, args...)
			out, err := kcatRun(ctx, kcat, "", cargs...)
			if err != nil {
				return err
			}
			return inOrder(strings.Split(strings.TrimSuffix(out, "\n"), "\n"), vs)
		}
	})
}

// xdgSCRAM is sarama's SCRAM client, as sarama's documentation has it:
// sarama leaves SCRAM's client side to the application, with
// github.com/xdg-go/scram in its examples.
type xdgSCRAM struct {
	hash xdgscram.HashGeneratorFcn
	conv *xdgscram.ClientConversation
}

func (x *xdgSCRAM) Begin(user, pass, authzID string) error {
	c, err := x.hash.NewClient(user, pass, authzID)
	if err != nil {
		return err
	}
	x.conv = c.NewConversation()
	return nil
}

func (x *xdgSCRAM) Step(challenge string) (string, error) { return x.conv.Step(challenge) }
func (x *xdgSCRAM) Done() bool                            { return x.conv.Done() }

// saramaToken is sarama's OAUTHBEARER AccessTokenProvider.
type saramaToken func() string

func (f saramaToken) Token() (*sarama.AccessToken, error) {
	return &sarama.AccessToken{Token: f()}, nil
}

// saramaSecurityConfig is sarama's configuration for feature, and the
// broker to dial.
func (s *secEnv) saramaSecurityConfig(feature string) (*sarama.Config, string) {
	c := saramaConfig()
	c.Net.TLS.Enable, c.Net.TLS.Config = true, s.tlsCfg
	sasl := func(mech sarama.SASLMechanism, user, pass string) (*sarama.Config, string) {
		c.Net.SASL.Enable, c.Net.SASL.Mechanism, c.Net.SASL.User, c.Net.SASL.Password = true, mech, user, pass
		c.Net.SASL.Handshake = true
		return c, s.saslSSL
	}
	switch feature {
	case "sec-tls":
		return c, s.ssl
	case "sec-mtls":
		c.Net.TLS.Config = s.mtlsCfg
		return c, s.mtls
	case "sec-plain":
		return sasl(sarama.SASLTypePlaintext, plainUser, plainPassword)
	case "sec-scram-sha-256":
		c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgSCRAM{hash: xdgscram.SHA256} }
		return sasl(sarama.SASLTypeSCRAMSHA256, scramUser, scramPassword)
	case "sec-scram-sha-512":
		c.Net.SASL.SCRAMClientGeneratorFunc = func() sarama.SCRAMClient { return &xdgSCRAM{hash: xdgscram.SHA512} }
		return sasl(sarama.SASLTypeSCRAMSHA512, scramUser, scramPassword)
	case "sec-oauthbearer":
		c.Net.SASL.TokenProvider = saramaToken(s.token)
		return sasl(sarama.SASLTypeOAuth, "", "")
	}
	panic("unknown security feature " + feature)
}

// runSaramaSecurity: sarama produces and reads back through each
// listener and mechanism.
func runSaramaSecurity(t *testing.T, e *env) {
	const client = "sarama"
	e.checkSecurity(t, client, func(f Feature) func(ctx context.Context) error {
		cfg, addr := e.sec.saramaSecurityConfig(f.Key)
		return func(ctx context.Context) error {
			topic := secTopic(f.Key, client)
			vs := values(topic, records)
			if err := saramaProduce([]string{addr}, cfg, topic, 1, vs); err != nil {
				return fmt.Errorf("produce: %w", err)
			}
			c, err := sarama.NewConsumer([]string{addr}, cfg)
			if err != nil {
				return err
			}
			defer c.Close()
			pc, err := c.ConsumePartition(topic, 0, sarama.OffsetOldest)
			if err != nil {
				return fmt.Errorf("consume: %w", err)
			}
			defer pc.Close()
			var got []string
			for len(got) < records {
				select {
				case m := <-pc.Messages():
					got = append(got, string(m.Value))
				case err := <-pc.Errors():
					return fmt.Errorf("consume: %w", err)
				case <-ctx.Done():
					return fmt.Errorf("read %d of %d records: %w", len(got), records, ctx.Err())
				}
			}
			return inOrder(got, vs)
		}
	})
}

// kafkagoSecurity is kafka-go's TLS configuration and SASL mechanism for
// feature, and the broker to dial.
func (s *secEnv) kafkagoSecurity(feature string) (*tls.Config, kgosasl.Mechanism, string, error) {
	scramMech := func(algo kgoscram.Algorithm) (*tls.Config, kgosasl.Mechanism, string, error) {
		m, err := kgoscram.Mechanism(algo, scramUser, scramPassword)
		return s.tlsCfg, m, s.saslSSL, err
	}
	switch feature {
	case "sec-tls":
		return s.tlsCfg, nil, s.ssl, nil
	case "sec-mtls":
		return s.mtlsCfg, nil, s.mtls, nil
	case "sec-plain":
		return s.tlsCfg, kgoplain.Mechanism{Username: plainUser, Password: plainPassword}, s.saslSSL, nil
	case "sec-scram-sha-256":
		return scramMech(kgoscram.SHA256)
	case "sec-scram-sha-512":
		return scramMech(kgoscram.SHA512)
	}
	panic("unknown security feature " + feature)
}

// runKafkaGoSecurity: kafka-go produces and reads back through each
// listener and mechanism it has.
func runKafkaGoSecurity(t *testing.T, e *env) {
	const client = "kafka-go"
	e.checkSecurity(t, client, func(f Feature) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			tlsCfg, mech, addr, err := e.sec.kafkagoSecurity(f.Key)
			if err != nil {
				return err
			}
			topic := secTopic(f.Key, client)
			w := &kafkago.Writer{Addr: kafkago.TCP(addr), Transport: &kafkago.Transport{TLS: tlsCfg, SASL: mech}, Topic: topic,
				RequiredAcks: kafkago.RequireAll, BatchTimeout: 5 * time.Millisecond}
			defer w.Close()
			vs := values(topic, records)
			var ms []kafkago.Message
			for _, v := range vs {
				ms = append(ms, kafkago.Message{Value: []byte(v)})
			}
			if err := w.WriteMessages(ctx, ms...); err != nil {
				return fmt.Errorf("produce: %w", err)
			}
			r := kafkago.NewReader(kafkago.ReaderConfig{Brokers: []string{addr}, Topic: topic, Partition: 0, MaxWait: 200 * time.Millisecond,
				Dialer: &kafkago.Dialer{Timeout: 10 * time.Second, DualStack: true, TLS: tlsCfg, SASLMechanism: mech}})
			defer r.Close()
			var got []string
			for len(got) < records {
				m, err := r.ReadMessage(ctx)
				if err != nil {
					return fmt.Errorf("consume: %w", err)
				}
				got = append(got, string(m.Value))
			}
			return inOrder(got, vs)
		}
	})
}
