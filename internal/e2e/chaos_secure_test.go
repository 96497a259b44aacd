package e2e

// The secured variant of the kill -9 campaign (issue 25): the cluster of
// chaos_tier_test.go with SASL_SSL as its only listener, SCRAM-SHA-512
// between the brokers and ACLs on.

import (
	"context"
	"crypto/pbkdf2"
	"crypto/sha512"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"strata/broker/network"
	"strata/controller"
	"strata/internal/testenv"
)

// chaosSecurity secures a chaos cluster: each broker's one listener is
// SASL_SSL (a certificate of a CA made for the test), the brokers
// authenticate to each other with SCRAM-SHA-512 as User:broker, whose
// credential is in ZooKeeper before they start, and the ACL authorizer
// is on with allow.everyone.if.no.acl.found=false. User:broker and
// User:admin (the harness's own clients) are super users; User:app (the
// producers and the verifying consumer) gets only the ACLs it needs,
// from grantApp.
type chaosSecurity struct {
	ca                   *testenv.CA
	keystore, truststore string
	ports                map[int32]int
}

const (
	chaosAppUser     = "app"
	chaosAppGroup    = "chaos-verify" // the verifier's group, which User:app may Read
	chaosClosedTopic = "chaos-closed" // a topic no ACL opens to User:app
)

var chaosPasswords = map[string]string{"broker": "broker-secret", "admin": "admin-secret", chaosAppUser: "app-secret"}

func newChaosSecurity(t *testing.T) *chaosSecurity {
	t.Helper()
	ca := testenv.NewCA(t, "strata-chaos-ca")
	dir := t.TempDir()
	return &chaosSecurity{
		ca:         ca,
		keystore:   testenv.WriteFile(t, dir, "broker.pem", ca.Server(t, "broker").PEM()),
		truststore: testenv.WriteFile(t, dir, "ca.pem", ca.PEM),
		ports:      map[int32]int{},
	}
}

// prepare writes the SCRAM-SHA-512 credentials of User:broker and
// User:admin under chroot's /config/users, Kafka's form, as
// `kafka-configs --zookeeper` makes them before the brokers start.
func (s *chaosSecurity) prepare(t *testing.T, zkAddr, chroot string) {
	t.Helper()
	zc, _, err := zk.Connect([]string{zkAddr}, 10*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	defer zc.Close()
	for _, p := range []string{chroot, chroot + "/config", chroot + "/config/users"} {
		if _, err := zc.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			t.Fatalf("create %s: %v", p, err)
		}
	}
	for _, user := range []string{"broker", "admin"} {
		salt := []byte("salt-of-" + user)
		salted, err := pbkdf2.Key(sha512.New, chaosPasswords[user], salt, 4096, sha512.Size)
		if err != nil {
			t.Fatal(err)
		}
		stored, server := network.ScramKeys(sha512.New, salted)
		cred := controller.ScramCredential{Salt: salt, StoredKey: stored, ServerKey: server, Iterations: 4096}
		data, _ := json.Marshal(map[string]any{"version": 1, "config": map[string]string{"SCRAM-SHA-512": cred.String()}})
		if _, err := zc.Create(chroot+"/config/users/"+user, data, 0, zk.WorldACL(zk.PermAll)); err != nil {
			t.Fatalf("create the SCRAM user %s: %v", user, err)
		}
	}
}

// brokerSets are broker id's security configs. Its listener's port is
// chosen at the first call and kept, so that a restarted broker is where
// the others and the clients knew it.
func (s *chaosSecurity) brokerSets(t *testing.T, id int32) []string {
	t.Helper()
	if s.ports[id] == 0 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		s.ports[id] = ln.Addr().(*net.TCPAddr).Port
		ln.Close()
	}
	return []string{
		fmt.Sprintf("listeners=SASL_SSL://127.0.0.1:%d", s.ports[id]),
		"inter.broker.listener.name=SASL_SSL",
		"sasl.enabled.mechanisms=SCRAM-SHA-512",
		"sasl.mechanism.inter.broker.protocol=SCRAM-SHA-512",
		`listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" password="broker-secret";`,
		"ssl.keystore.location=" + s.keystore,
		"ssl.truststore.location=" + s.truststore,
		"authorizer.class.name=kafka.security.authorizer.AclAuthorizer",
		"allow.everyone.if.no.acl.found=false",
		"super.users=User:broker;User:admin",
	}
}

// opts are a client's options for user: TLS to the brokers' CA and
// SCRAM-SHA-512.
func (s *chaosSecurity) opts(user string) []kgo.Opt {
	return []kgo.Opt{
		kgo.DialTLSConfig(&tls.Config{RootCAs: s.ca.Pool()}),
		kgo.SASL(scram.Auth{User: user, Pass: chaosPasswords[user]}.AsSha512Mechanism()),
	}
}

func (s *chaosSecurity) adminOpts() []kgo.Opt  { return s.opts("admin") }
func (s *chaosSecurity) clientOpts() []kgo.Opt { return s.opts(chaosAppUser) }

// chaosAppACLs are the bindings grantApp creates: what an idempotent
// producer and a consumer of the topic in a group need, nothing else.
const chaosAppACLs = 5

// grantApp makes User:app (AlterUserScramCredentials, as User:admin) and
// gives it Write, Describe and Read on the topic, IdempotentWrite on the
// cluster and Read on chaosAppGroup (CreateAcls), then waits until every
// broker knows them: each lists the ACLs (DescribeAcls) and lets User:app
// log in and describe the topic.
func (c *chaosCluster) grantApp() {
	t := c.t
	t.Helper()
	adm := kadm.NewClient(newClient(t, c.seeds[0], append([]kgo.Opt{kgo.SeedBrokers(c.seeds...)}, c.admin...)...))
	ctx, cancel := context.WithTimeout(c.ctx, 60*time.Second)
	defer cancel()
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{{User: chaosAppUser, Mechanism: kadm.ScramSha512, Iterations: 4096, Password: chaosPasswords[chaosAppUser]}})
	if err == nil {
		err = res[chaosAppUser].Err
	}
	if err != nil {
		t.Fatalf("AlterUserScramCredentials %s: %v", chaosAppUser, err)
	}
	principal := "User:" + chaosAppUser
	for _, b := range []*kadm.ACLBuilder{
		kadm.NewACLs().Allow(principal).Topics(chaosTopic).Operations(kadm.OpWrite, kadm.OpDescribe, kadm.OpRead),
		kadm.NewACLs().Allow(principal).Clusters().Operations(kadm.OpIdempotentWrite),
		kadm.NewACLs().Allow(principal).Groups(chaosAppGroup).Operations(kadm.OpRead),
	} {
		rs, err := adm.CreateACLs(ctx, b)
		if err != nil {
			t.Fatalf("CreateAcls: %v", err)
		}
		for _, r := range rs {
			if r.Err != nil {
				t.Fatalf("CreateAcls %s %v on %s: %v %s", r.Principal, r.Operation, r.Name, r.Err, r.ErrMessage)
			}
		}
	}
	admCl := newClient(t, c.seeds[0], append([]kgo.Opt{kgo.SeedBrokers(c.seeds...)}, c.admin...)...)
	waitState(t, 30*time.Second, "every broker to know User:app and its ACLs", func() (string, bool) {
		var sb strings.Builder
		ok := true
		for id := int32(1); id <= 3; id++ {
			rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
			req := kmsg.NewPtrDescribeACLsRequest()
			req.ResourceType, req.ResourcePatternType = kmsg.ACLResourceTypeAny, kmsg.ACLResourcePatternTypeAny
			req.Operation, req.PermissionType = kmsg.ACLOperationAny, kmsg.ACLPermissionTypeAny
			kresp, err := admCl.Broker(int(id)).Request(rctx, req)
			n := 0
			if err == nil {
				for _, r := range kresp.(*kmsg.DescribeACLsResponse).Resources {
					n += len(r.ACLs)
				}
			}
			var desc error
			if err == nil {
				_, desc = ownMetadata(rctx, c.bs[id], c.load)
			}
			rcancel()
			fmt.Fprintf(&sb, "broker %d: %d ACLs (%v), User:app describes the topic: %v; ", id, n, err, desc)
			ok = ok && err == nil && n == chaosAppACLs && desc == nil
		}
		return sb.String(), ok
	})
}

// ownMetadata asks one broker for the topic's metadata as opts's user.
func ownMetadata(ctx context.Context, b *testenv.Broker, opts []kgo.Opt) (kadm.Metadata, error) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr())}, opts...)...)
	if err != nil {
		return kadm.Metadata{}, err
	}
	defer cl.Close()
	md, err := kadm.NewClient(cl).Metadata(ctx, chaosTopic)
	if err == nil {
		err = md.Topics[chaosTopic].Err
	}
	return md, err
}

// checkAppRefused checks that the ACLs are on: User:app may not create a
// topic, produce to or see a topic no ACL opens to it, nor use a group
// other than its own.
func (c *chaosCluster) checkAppRefused() {
	t := c.t
	t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 60*time.Second)
	defer cancel()
	adm := kadm.NewClient(newClient(t, c.seeds[0], append([]kgo.Opt{kgo.SeedBrokers(c.seeds...)}, c.admin...)...))
	if r, err := adm.CreateTopic(ctx, 1, 3, nil, chaosClosedTopic); err != nil || r.Err != nil {
		t.Fatalf("create %s as User:admin: %v %v", chaosClosedTopic, err, r.Err)
	}
	app := newClient(t, c.seeds[0], append([]kgo.Opt{kgo.SeedBrokers(c.seeds...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.RecordDeliveryTimeout(20 * time.Second)}, c.load...)...)
	appAdm := kadm.NewClient(app)
	if r, err := appAdm.CreateTopic(ctx, 1, 3, nil, "chaos-app-made"); err == nil && r.Err == nil {
		t.Errorf("User:app created a topic without Create on the cluster or the topic")
	} else if !errors.Is(r.Err, kerr.TopicAuthorizationFailed) {
		t.Errorf("CreateTopics as User:app = %v %v, want TOPIC_AUTHORIZATION_FAILED", err, r.Err)
	}
	if err := app.ProduceSync(ctx, &kgo.Record{Topic: chaosClosedTopic, Value: []byte("x")}).FirstErr(); !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Errorf("produce to %s as User:app = %v, want TOPIC_AUTHORIZATION_FAILED", chaosClosedTopic, err)
	}
	if md, err := appAdm.Metadata(ctx); err != nil {
		t.Errorf("Metadata as User:app: %v", err)
	} else if _, ok := md.Topics[chaosClosedTopic]; ok || len(md.Topics) != 1 {
		t.Errorf("Metadata of all topics as User:app lists %v, want only %s", md.Topics.Names(), chaosTopic)
	}
	offs := kadm.Offsets{}
	offs.Add(kadm.Offset{Topic: chaosTopic, Partition: 0, At: 0, LeaderEpoch: -1})
	if r, err := appAdm.CommitOffsets(ctx, "not-"+chaosAppGroup, offs); err == nil && r.Error() == nil {
		t.Errorf("User:app committed offsets of a group it has no ACL for")
	} else if !errors.Is(err, kerr.GroupAuthorizationFailed) && !errors.Is(r.Error(), kerr.GroupAuthorizationFailed) {
		t.Errorf("OffsetCommit to another group as User:app = %v %v, want GROUP_AUTHORIZATION_FAILED", err, r.Error())
	}
	c.logf("ACLs on: User:app refused CreateTopics, a produce to and the metadata of %s, and another group", chaosClosedTopic)
}

// commitVerified commits the verified end offsets to chaosAppGroup as
// User:app (OffsetCommit: Read on the group and the topic) and reads them
// back.
func (c *chaosCluster) commitVerified(ends map[int32]int64) {
	t := c.t
	t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 60*time.Second)
	defer cancel()
	appAdm := kadm.NewClient(newClient(t, c.seeds[0], append([]kgo.Opt{kgo.SeedBrokers(c.seeds...)}, c.load...)...))
	offs := kadm.Offsets{}
	for p, e := range ends {
		offs.Add(kadm.Offset{Topic: chaosTopic, Partition: p, At: e, LeaderEpoch: -1})
	}
	r, err := appAdm.CommitOffsets(ctx, chaosAppGroup, offs)
	if err == nil {
		err = r.Error()
	}
	if err != nil {
		t.Fatalf("OffsetCommit to %s as User:app: %v", chaosAppGroup, err)
	}
	got, err := appAdm.FetchOffsets(ctx, chaosAppGroup)
	if err == nil {
		err = got.Error()
	}
	if err != nil {
		t.Fatalf("OffsetFetch of %s as User:app: %v", chaosAppGroup, err)
	}
	for p, e := range ends {
		if o, ok := got.Lookup(chaosTopic, p); !ok || o.At != e {
			t.Errorf("group %s partition %d: committed offset %v, want %d", chaosAppGroup, p, o.At, e)
		}
	}
}

// chaosAuthFailures are broker log lines that say a connection failed to
// authenticate or a request was refused: between the brokers, none may
// appear, and the harness's clients (super users, and User:app within its
// ACLs) give none.
var chaosAuthFailures = []string{
	"AUTHORIZATION_FAILED",
	"failed SASL authentication",
	"SASL_AUTHENTICATION_FAILED",
	"SaslHandshake",
	"SaslAuthenticate",
	"x509: ",
	"tls: bad certificate",
	"tls: unknown certificate",
}

// TestChaosTierSecuredKills: the cluster of TestChaosTierKillsAndMoves
// with security on: each broker's only listener is SASL_SSL, the brokers
// replicate, forward and send the controller's requests to each other
// over it as User:broker with SCRAM-SHA-512, and the ACL authorizer is on
// with allow.everyone.if.no.acl.found=false and User:broker a super user.
// The producers and the verifying consumer are User:app, with only the
// ACLs they need (Write, Describe and Read on the topic, IdempotentWrite
// on the cluster, Read on their group), which is refused what no ACL
// grants. Round after round a broker, mostly one mid-upload, is killed
// with -9 under the acks=-1 load and restarted; then the tier settles and
// the verifier of TestChaosTierKillsAndMoves reads everything back from
// the brokers and the bucket: nothing acknowledged may be missing,
// changed or stored twice. No broker may log a failed authentication or
// authorization. 2 kills in `make test`, 12 in `make chaos`.
func TestChaosTierSecuredKills(t *testing.T) {
	long := chaosLong()
	rounds := chaosEnvInt(t, "STRATA_CHAOS_ROUNDS", map[bool]int{false: 2, true: 12}[long])
	seed := chaosSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0x5ec0e))
	m := testenv.SharedMinIO(t)
	bucket := m.NewBucket(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(5+rounds*2)*time.Minute)
	defer cancel()
	c := startChaosCluster(t, ctx, m, bucket, chaosTier{copyRate: 128 << 10, graceMs: 30000}, newChaosSecurity(t))
	c.logf("cluster up (SASL_SSL, SCRAM-SHA-512 between brokers, ACLs on); seed %d (STRATA_CHAOS_SEED to replay), %d rounds", seed, rounds)
	c.grantApp()
	c.checkAppRefused()
	load := startChaosLoad(t, c.seeds, 3, 1, c.load...)
	c.warmUp(90 * time.Second)
	c.logf("warm: %d records acknowledged", load.acks())
	st := c.faultRounds(load, rng, rounds, []chaosFault{faultKill})
	v, _ := c.conclude(load, st)
	c.commitVerified(v.ends)
	failures := c.brokerLogCounts(chaosAuthFailures...)
	for p, n := range failures {
		t.Errorf("broker logs: %d lines match %q (a failed authentication or authorization)", n, p)
	}
	c.logf("secured: %d acknowledged records read back as User:app, and the bucket's; no failed authentication or authorization in the broker logs", v.acked)
}
