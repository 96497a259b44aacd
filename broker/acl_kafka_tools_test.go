package broker

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"strata/broker/acl"
)

// kafkaToolsClasspath is the classpath of Kafka's tools as the compat
// suite runs them (deploy/install-deps.sh compat-java: a no-op once
// built).
func kafkaToolsClasspath(t *testing.T) string {
	t.Helper()
	script, _ := filepath.Abs("../deploy/install-deps.sh")
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, script, "compat-java").CombinedOutput(); err != nil {
		t.Fatalf("deploy/install-deps.sh compat-java (needs java and mvn): %v\n%s", err, out)
	}
	out, err := exec.Command(script, "--path", "compat-java").Output()
	if err != nil {
		t.Fatalf("install-deps.sh --path compat-java: %v", err)
	}
	return filepath.Join(strings.TrimSpace(string(out)), "libs", "*")
}

// TestACLsKafkaAclCommand: Kafka's own kafka-acls (AclCommand from
// kafka-tools) adds, lists and removes ACLs on Strata, as
// User:ANONYMOUS on the PLAINTEXT listener given Alter and Describe on
// the cluster.
func TestACLsKafkaAclCommand(t *testing.T) {
	cp := kafkaToolsClasspath(t)
	b := startACLBroker(t, nil)
	ctx := testCtx(t)
	mustACLs(t, ctx, kadm.NewClient(b.as(t, "admin")),
		kadm.NewACLs().Allow("User:ANONYMOUS").Clusters().Operations(kadm.OpAlter, kadm.OpDescribe))
	plain, _ := b.ListenerAddr("PLAINTEXT")
	kafkaACLs := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("java", append([]string{"-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", cp,
			"org.apache.kafka.tools.AclCommand", "--bootstrap-server", plain.String()}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kafka-acls %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	kafkaACLs("--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation", "Write", "--topic", "orders")
	kafkaACLs("--add", "--allow-principal", "User:*", "--operation", "All", "--topic", "logs-", "--resource-pattern-type", "prefixed")
	kafkaACLs("--add", "--deny-principal", "User:bob", "--operation", "All", "--topic", "logs-", "--resource-pattern-type", "prefixed")
	list := kafkaACLs("--list")
	for _, want := range []string{"name=orders, patternType=LITERAL", "principal=User:alice", "operation=WRITE", "name=logs-, patternType=PREFIXED", "principal=User:bob", "permissionType=DENY"} {
		if !strings.Contains(list, want) {
			t.Errorf("kafka-acls --list lacks %q:\n%s", want, list)
		}
	}
	a := b.authz
	if !a.Authorize("User:alice", "127.0.0.1", acl.OpWrite, acl.ResourceTopic, "orders") ||
		!a.Authorize("User:carol", "127.0.0.1", acl.OpRead, acl.ResourceTopic, "logs-app") ||
		a.Authorize("User:bob", "127.0.0.1", acl.OpRead, acl.ResourceTopic, "logs-app") {
		t.Fatal("the ACLs kafka-acls added do not decide as written")
	}
	kafkaACLs("--remove", "--force", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "orders")
	if a.Authorize("User:alice", "127.0.0.1", acl.OpWrite, acl.ResourceTopic, "orders") || !a.Authorize("User:alice", "127.0.0.1", acl.OpRead, acl.ResourceTopic, "orders") {
		t.Fatal("kafka-acls --remove of alice's Write did not take exactly it")
	}
}

// TestKafkaConfigsScramUsers: Kafka's own kafka-configs (ConfigCommand
// from kafka-tools) adds a SCRAM user on Strata and describes the users
// (it sends AlterUserScramCredentials, then DescribeClientQuotas next to
// DescribeUserScramCredentials), as User:admin over SASL PLAIN with the
// authorizer on; franz-go then logs in as the new user with SCRAM.
func TestKafkaConfigsScramUsers(t *testing.T) {
	cp := kafkaToolsClasspath(t)
	ts := startTestServer(t, map[string]string{
		"listeners":                                           "SASL_PLAINTEXT://127.0.0.1:0",
		"sasl.enabled.mechanisms":                             "PLAIN,SCRAM-SHA-256",
		"sasl.mechanism.inter.broker.protocol":                "PLAIN",
		"listener.name.sasl_plaintext.plain.sasl.jaas.config": plainJAAS,
		"authorizer.class.name":                               "kafka.security.authorizer.AclAuthorizer",
		"super.users":                                         "User:admin",
	})
	props := filepath.Join(t.TempDir(), "admin.properties")
	if err := os.WriteFile(props, []byte("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"+
		`sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret";`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	kafkaConfigs := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("java", append([]string{"-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", cp,
			"org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", ts.addr(), "--command-config", props}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kafka-configs %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	kafkaConfigs("--alter", "--add-config", "SCRAM-SHA-256=[iterations=8192,password=alice-secret]", "--entity-type", "users", "--entity-name", "alice")
	for _, args := range [][]string{
		{"--describe", "--entity-type", "users", "--entity-name", "alice"},
		{"--describe", "--entity-type", "users"},
	} {
		out := kafkaConfigs(args...)
		if want := "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192"; !strings.Contains(out, want) {
			t.Errorf("kafka-configs %s printed no %q:\n%s", strings.Join(args, " "), want, out)
		}
	}
	// Quotas are refused, with a message, not accepted and ignored.
	cmd := exec.Command("java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-cp", cp,
		"org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", ts.addr(), "--command-config", props,
		"--alter", "--add-config", "producer_byte_rate=1024", "--entity-type", "users", "--entity-name", "alice")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "does not support client quotas") {
		t.Errorf("kafka-configs adding a quota = %v, want a failure naming quotas:\n%s", err, out)
	}

	cl := ts.client(t, kgo.SASL(scram.Auth{User: "alice", Pass: "alice-secret"}.AsSha256Mechanism()))
	ctx := testCtx(t)
	if err := cl.Ping(ctx); err != nil {
		t.Fatalf("alice's SCRAM-SHA-256 login: %v", err)
	}
	bad := ts.client(t, kgo.SASL(scram.Auth{User: "alice", Pass: "wrong"}.AsSha256Mechanism()))
	if err := bad.Ping(ctx); err == nil {
		t.Fatal("a wrong SCRAM password was accepted")
	}
}
