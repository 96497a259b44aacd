package config

import (
	"strconv"
	"strings"
	"testing"
)

func TestLoadDefaults(t *testing.T) {
	b, err := Load(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if b.ID != 0 || b.DataDir != "./strata-data" || b.ListenAddr() != ":9092" {
		t.Errorf("ID=%d DataDir=%q Listen=%q", b.ID, b.DataDir, b.ListenAddr())
	}
	checks := []struct {
		name      string
		got, want int64
	}{
		{"num.partitions", int64(b.NumPartitions), 1},
		{"default.replication.factor", int64(b.DefaultReplicationFactor), 1},
		{"min.insync.replicas", int64(b.MinInsyncReplicas), 1},
		{"socket.request.max.bytes", int64(b.SocketRequestMaxBytes), 104857600},
		{"message.max.bytes", int64(b.MessageMaxBytes), 1048588},
		{"fetch.max.bytes", int64(b.FetchMaxBytes), 57671680},
		{"log.retention.check.interval.ms", b.LogRetentionCheckIntervalMs, 300000},
		{"zookeeper.session.timeout.ms", int64(b.ZooKeeperSessionTimeoutMs), 18000},
		{"zookeeper.connection.timeout.ms", int64(b.ZooKeeperConnectionTimeoutMs), 18000},
		{"offsets.topic.num.partitions", int64(b.OffsetsTopicNumPartitions), 50},
		{"offsets.topic.replication.factor", int64(b.OffsetsTopicReplicationFactor), 3},
		{"replica.lag.time.max.ms", b.ReplicaLagTimeMaxMs, 30000},
		{"replica.high.watermark.checkpoint.interval.ms", b.ReplicaHighWatermarkCheckpointIntervalMs, 5000},
		{"queued.max.requests", int64(b.QueuedMaxRequests), 500},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	if !b.AutoCreateTopicsEnable || !b.DeleteTopicEnable || b.RemoteLogStorageSystemEnable {
		t.Errorf("booleans: auto.create=%v delete.topic=%v remote=%v", b.AutoCreateTopicsEnable, b.DeleteTopicEnable, b.RemoteLogStorageSystemEnable)
	}
	if b.ReplicaSelectorClass != "" {
		t.Errorf("replica.selector.class = %q, want unset (leader only)", b.ReplicaSelectorClass)
	}
	if got := b.OffsetsReplicationFactor(1); got != 1 {
		t.Errorf("OffsetsReplicationFactor(1) = %d, want 1", got)
	}
	if got := b.OffsetsReplicationFactor(5); got != 3 {
		t.Errorf("OffsetsReplicationFactor(5) = %d, want 3", got)
	}
}

func TestLoadValues(t *testing.T) {
	props, err := ParseProperties([]byte(`
# stock Kafka lines that Strata ignores
num.network.threads=3
socket.send.buffer.bytes=102400
listener.security.protocol.map=PLAINTEXT:PLAINTEXT
broker.id = 7
listeners=PLAINTEXT://127.0.0.1:19092
advertised.listeners=PLAINTEXT://kafka.example:9092
log.dirs=/var/lib/strata
num.partitions=6
auto.create.topics.enable=FALSE
zookeeper.connect=localhost:2181/strata
zookeeper.connection.timeout.ms=6000
broker.rack=r1
`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Load(props)
	if err != nil {
		t.Fatal(err)
	}
	host, port := b.AdvertisedAddr()
	if b.ID != 7 || b.ListenAddr() != "127.0.0.1:19092" || host != "kafka.example" || port != 9092 ||
		b.DataDir != "/var/lib/strata" || b.NumPartitions != 6 || b.AutoCreateTopicsEnable ||
		b.ZooKeeperConnect != "localhost:2181/strata" || b.ZooKeeperConnectionTimeoutMs != 6000 ||
		b.Rack == nil || *b.Rack != "r1" {
		t.Errorf("unexpected broker %+v", b)
	}
	if b.Static["auto.create.topics.enable"] != "false" || b.Static["broker.id"] != "7" {
		t.Errorf("static values not canonical: %q", b.Static)
	}
	if strings.Join(b.Ignored, ",") != "socket.send.buffer.bytes" {
		t.Errorf("Ignored = %v", b.Ignored)
	}
}

func TestLoadNodeID(t *testing.T) {
	b, err := Load(map[string]string{"node.id": "3"})
	if err != nil || b.ID != 3 {
		t.Fatalf("node.id: ID=%v err=%v", b, err)
	}
	b, err = Load(map[string]string{"node.id": "3", "broker.id": "4"})
	if err != nil || b.ID != 4 {
		t.Fatalf("broker.id wins: %v %v", b, err)
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		props map[string]string
		want  string
	}{
		{map[string]string{"num.partitions": "0"}, "num.partitions: must be >= 1, got 0"},
		{map[string]string{"num.partitions": "x"}, `num.partitions: expected a 32-bit integer, got "x"`},
		{map[string]string{"num.partitions": "3000000000"}, "num.partitions: expected a 32-bit integer"},
		{map[string]string{"auto.create.topics.enable": "yes"}, `auto.create.topics.enable: expected true or false, got "yes"`},
		{map[string]string{"log.cleanup.policy": "delete,purge"}, `log.cleanup.policy: must be a list of [compact, delete], got "purge"`},
		{map[string]string{"compression.type": "brotli"}, "compression.type: must be one of"},
		{map[string]string{"log.message.timestamp.type": "createtime"}, "log.message.timestamp.type: must be one of"},
		{map[string]string{"num.partitons": "3"}, `unknown broker config "num.partitons"`},
		{map[string]string{"retention.ms": "3"}, `unknown broker config "retention.ms" (it is a topic config; the broker default is log.retention.ms)`},
		{map[string]string{"ssl.keystore.type": "JKS"}, `ssl.keystore.type: must be one of [PEM], got "JKS"`},
		{map[string]string{"ssl.keystore.alias": "x"}, "ssl.keystore.alias: not supported (Strata takes PEM keystores"},
		{map[string]string{"sasl.kerberos.service.name": "kafka"}, "sasl.kerberos.service.name: not supported (Strata serves SASL PLAIN and SCRAM"},
		{map[string]string{"listener.name.internal.gssapi.sasl.jaas.config": "x"}, "of the per-listener SASL settings"},
		{map[string]string{"listener.name.internal.foo": "x"}, "listener.name.<listener>.ssl.*, sasl.enabled.mechanisms"},
		{map[string]string{"listener.name.internal.ssl.client.auth": "always"}, "listener.name.internal.ssl.client.auth: must be one of"},
		{map[string]string{"listeners": "SSL://:9093"}, "listener SSL: an SSL listener needs a keystore"},
		{map[string]string{"listeners": "SSL://:9093", "ssl.keystore.location": "/k", "ssl.keystore.key": "x"}, "listener SSL: set ssl.keystore.location or"},
		{map[string]string{"listeners": "SSL://:9093", "ssl.keystore.location": "/k", "ssl.client.auth": "required"}, "ssl.client.auth=required needs a truststore"},
		{map[string]string{"listeners": "SASL_SSL://:9093"}, "listener SASL_SSL: an SSL listener needs a keystore"},
		{map[string]string{"listeners": "SASL_PLAINTEXT://:9093"}, "listener SASL_PLAINTEXT: sasl.enabled.mechanisms: GSSAPI is not served"},
		{map[string]string{"listeners": "INTERNAL://:9093"}, "listeners: listener INTERNAL is not in listener.security.protocol.map"},
		{map[string]string{"listeners": "A://:9093,B://:9093", "listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT"}, "listeners A and B use the same port 9093"},
		{map[string]string{"listeners": "PLAINTEXT://:9092,SSL://:9093"}, "listener SSL: an SSL listener needs a keystore"},
		{map[string]string{"listeners": "A://:9092,B://:9093", "listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT"}, "inter.broker.listener.name: no listener named PLAINTEXT"},
		{map[string]string{"listeners": "A://:9092,B://:9093", "listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT", "inter.broker.listener.name": "C"}, "inter.broker.listener.name: C is not in listeners"},
		{map[string]string{"inter.broker.listener.name": "PLAINTEXT", "security.inter.broker.protocol": "PLAINTEXT"}, "only one of inter.broker.listener.name and security.inter.broker.protocol"},
		{map[string]string{"listeners": "A://:9092,B://:9093", "listener.security.protocol.map": "A:PLAINTEXT,B:PLAINTEXT", "inter.broker.listener.name": "a", "control.plane.listener.name": "A"}, "control.plane.listener.name: must differ"},
		{map[string]string{"listener.security.protocol.map": "A:TLS"}, `unknown security protocol "TLS"`},
		{map[string]string{"advertised.listeners": "OTHER://h:1"}, "advertised.listeners: listener OTHER is not in listeners"},
		{map[string]string{"ssl.enabled.protocols": "TLSv1.1"}, "ssl.enabled.protocols: must be a list of [TLSv1.2, TLSv1.3]"},
		{map[string]string{"ssl.cipher.suites": "TLS_RSA_WITH_RC4_128_SHA"}, `unknown or insecure cipher suite`},
		{map[string]string{"ssl.principal.mapping.rules": "RULE:^CN=(.*)$"}, "want RULE:pattern/replacement/[LU]"},
		{map[string]string{"listeners": "localhost:9092"}, `listeners: "localhost:9092" is not NAME://HOST:PORT`},
		{map[string]string{"listeners": "PLAINTEXT://:99999"}, "bad port"},
		{map[string]string{"log.dirs": "/a,/b"}, "log.dirs: Strata supports exactly one data directory, got 2"},
		{map[string]string{"log.dirs": ""}, "log.dirs: must not be empty"},
		{map[string]string{"fetch.max.bytes": "10"}, "fetch.max.bytes: must be >= 1024, got 10"},
		{map[string]string{"log.cleaner.min.cleanable.ratio": "1.5"}, "must be between 0.0 and 1.0, got 1.5"},
		{map[string]string{"group.min.session.timeout.ms": "10", "group.max.session.timeout.ms": "5"}, "group.min.session.timeout.ms: must be <= group.max.session.timeout.ms (5), got 10"},
	}
	for _, tt := range tests {
		_, err := Load(tt.props)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Load(%v) error = %v, want it to contain %q", tt.props, err, tt.want)
			continue
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("error %q is not one line", err)
		}
	}
}

func TestValidateHandBuilt(t *testing.T) {
	b, err := Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	b.NumPartitions = 0
	if err := b.Validate(); err == nil || err.Error() != "num.partitions: must be >= 1, got 0" {
		t.Fatalf("Validate = %v", err)
	}
}

// TestDefsConsistent pins the tables to each other: every topic synonym is a
// broker config of a compatible type, and a topic default equals its
// primary broker synonym's default (or the lower-priority unit converted).
func TestDefsConsistent(t *testing.T) {
	for topic, syns := range topicSynonyms {
		td, ok := TopicDef(topic)
		if !ok {
			t.Errorf("synonym table names unknown topic config %s", topic)
			continue
		}
		var def *string
		for _, s := range syns {
			bd, ok := BrokerDef(s.name)
			if !ok {
				t.Errorf("%s: synonym %s is not a broker config", topic, s.name)
				continue
			}
			if s.mult == 1 && bd.Type != td.Type && !(bd.Type == Int && td.Type == Long) {
				t.Errorf("%s: type %v, broker %s type %v", topic, td.Type, s.name, bd.Type)
			}
			if bd.Dynamic == ReadOnly && s == syns[0] {
				t.Errorf("%s: primary synonym %s must be dynamic", topic, s.name)
			}
			if def == nil && bd.Default != nil {
				n, err := strconv.ParseInt(*bd.Default, 10, 64)
				v := *bd.Default
				if err == nil {
					v = strconv.FormatInt(n*s.mult, 10)
				}
				def = &v
			}
		}
		if def != nil && *def != *td.Default {
			t.Errorf("%s: default %s, broker synonyms give %s", topic, *td.Default, *def)
		}
	}
	for _, d := range append(BrokerDefs(), TopicDefs()...) {
		if d.Default != nil {
			if _, err := d.Parse(*d.Default); err != nil {
				t.Errorf("default of %s does not validate: %v", d.Name, err)
			}
		}
		if d.Doc == "" {
			t.Errorf("%s has no documentation", d.Name)
		}
	}
}

func TestLoadReplicaSelector(t *testing.T) {
	for _, c := range []string{RackAwareReplicaSelector, LeaderSelector} {
		b, err := Load(map[string]string{"replica.selector.class": c})
		if err != nil || b.ReplicaSelectorClass != c {
			t.Errorf("replica.selector.class=%s: %+v, %v", c, b, err)
		}
	}
	_, err := Load(map[string]string{"replica.selector.class": "com.example.MySelector"})
	if err == nil || !strings.Contains(err.Error(), "replica.selector.class") || strings.Contains(err.Error(), "\n") {
		t.Errorf("an unknown selector class: %v, want a one-line error naming the key", err)
	}
	_, err = Load(map[string]string{"replica.high.watermark.checkpoint.interval.ms": "0"})
	if err == nil || !strings.Contains(err.Error(), "replica.high.watermark.checkpoint.interval.ms") {
		t.Errorf("a zero checkpoint interval: %v, want refused", err)
	}
}
