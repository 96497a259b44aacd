package broker

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

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
