package config

import (
	"reflect"
	"strings"
	"testing"
)

// The apache/kafka image's examples, with STRATA_ for KAFKA_.
func TestEnvNameMapping(t *testing.T) {
	cases := []struct{ env, key string }{
		{"STRATA_LOG_RETENTION_MS", "log.retention.ms"},
		{"STRATA_BROKER_ID", "broker.id"},
		{"STRATA_ZOOKEEPER_CONNECT", "zookeeper.connect"},
		{"STRATA_LISTENER_SECURITY_PROTOCOL_MAP", "listener.security.protocol.map"},
		{"STRATA_LISTENER_NAME_SASL__SSL_SCRAM___SHA___256_SASL_JAAS_CONFIG", "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config"},
		{"STRATA_A___B__C_D", "a-b_c.d"},
	}
	for _, c := range cases {
		if got, ok := EnvKey(c.env); !ok || got != c.key {
			t.Errorf("EnvKey(%s) = %q, %v; want %q", c.env, got, ok, c.key)
		}
		if got := EnvName(c.key); got != c.env {
			t.Errorf("EnvName(%s) = %q; want %s", c.key, got, c.env)
		}
	}
	// Runs of underscores are read left to right, longest first, as the
	// apache/kafka image's sed script reads them: 4 = "-.", 5 = "-_".
	for env, key := range map[string]string{"STRATA_A____B": "a-.b", "STRATA_A_____B": "a-_b", "STRATA_A______B": "a--b"} {
		if got, _ := EnvKey(env); got != key {
			t.Errorf("EnvKey(%s) = %q; want %q", env, got, key)
		}
	}
	for _, env := range []string{"STRATA_", "KAFKA_LOG_DIRS", "strata_log_dirs"} {
		if k, ok := EnvKey(env); ok {
			t.Errorf("EnvKey(%s) = %q, true; want not a setting", env, k)
		}
	}
	// Every config Strata knows round-trips.
	for _, d := range BrokerDefs() {
		if k, _ := EnvKey(EnvName(d.Name)); k != d.Name {
			t.Errorf("%s -> %s -> %s", d.Name, EnvName(d.Name), k)
		}
	}
}

func TestFromEnv(t *testing.T) {
	flags := []string{"broker-id", "listen", "tier", "s3-endpoint", "metrics", "log-format"}
	got, err := FromEnv([]string{
		"PATH=/usr/bin",
		"STRATA_LOG_RETENTION_MS=1234",
		"STRATA_NUM_PARTITIONS=3",
		"STRATA_LISTENERS=PLAINTEXT://0.0.0.0:9092,EXTERNAL://0.0.0.0:19092",
		"STRATA_SOCKET_SEND_BUFFER_BYTES=102400",   // accepted and ignored, as in a file
		"STRATA_LOG_CLEANUP_POLICY=delete,compact", // a value with '=' and ',' kept whole
		"STRATA_EMPTY=",
		// Other programs' variables, left alone.
		"STRATA_BOOTSTRAP=127.0.0.1:9092",
		"STRATA_BOOTSTRAP_SERVERS=127.0.0.1:9092",
		"STRATA_BIN=strata", "STRATA_MINIO=minio", "STRATA_KAFKA=kafka",
		"STRATA_CHAOS=1", "STRATA_CHAOS_SEED=7", "STRATA_COMPAT_WRITE=1",
		"STRATA_TEST_LOCK_DATA_DIR=x", "STRATA_BENCH_FAKE_SERVE=1",
	}, flags)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"log.retention.ms":         "1234",
		"num.partitions":           "3",
		"listeners":                "PLAINTEXT://0.0.0.0:9092,EXTERNAL://0.0.0.0:19092",
		"socket.send.buffer.bytes": "102400",
		"log.cleanup.policy":       "delete,compact",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("FromEnv = %v\nwant %v", got, want)
	}

	bad := []struct{ env, want string }{
		{"STRATA_LOG_RETENTON_MS=1", `environment STRATA_LOG_RETENTON_MS: unknown broker config "log.retenton.ms"`},
		{"STRATA_ZOOKEEPER_CONECT=zk:2181", `environment STRATA_ZOOKEEPER_CONECT: unknown broker config "zookeeper.conect"`},
		{"STRATA_TIER=s3://b/p", "environment STRATA_TIER: not a broker config; give --tier as a flag"},
		{"STRATA_S3_ENDPOINT=http://minio:9000", "environment STRATA_S3_ENDPOINT: not a broker config; give --s3-endpoint as a flag"},
		{"STRATA_LOG_FORMAT=json", "environment STRATA_LOG_FORMAT: not a broker config; give --log-format as a flag"},
		{"STRATA_SASL_FOO=x", "environment STRATA_SASL_FOO: sasl.foo: not supported"},
	}
	for _, b := range bad {
		_, err := FromEnv([]string{"STRATA_NUM_PARTITIONS=3", b.env}, flags)
		if err == nil || !strings.HasPrefix(err.Error(), b.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("FromEnv(%s) = %v; want one line starting %q", b.env, err, b.want)
		}
	}
}

// The test harness's and the admin CLI's variables must never look like
// settings: a new config whose first word is one of these would make
// `strata serve` refuse them. (STRATA_KAFKA, the harness's Kafka, has no
// dot once decoded, so the kafka.* configs do not catch it.)
func TestEnvOtherProgramsVariablesAreNotNamespaces(t *testing.T) {
	for _, w := range []string{"bin", "minio", "chaos", "compat", "test", "bench", "bootstrap"} {
		if namespaces()[w] {
			t.Errorf("%q is the first word of a broker config: STRATA_%s_* variables of other programs would be refused", w, strings.ToUpper(w))
		}
	}
}

// Precedence in `strata serve`: properties file < environment < dedicated
// flags < --set. MergeLayers is what serve applies.
func TestEnvPrecedence(t *testing.T) {
	file := map[string]string{"num.partitions": "1", "log.retention.ms": "10", "log.segment.bytes": "1000"}
	env := map[string]string{"num.partitions": "2", "log.retention.ms": "20"}
	MergeEnv(file, env)
	if err := ApplySets(file, []string{"log.retention.ms=30"}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"num.partitions": "2", "log.retention.ms": "30", "log.segment.bytes": "1000"}
	if !reflect.DeepEqual(file, want) {
		t.Errorf("merged = %v, want %v", file, want)
	}
	// An environment log.dir or node.id replaces the file's synonym
	// that would otherwise win over it (log.dirs over log.dir, broker.id
	// over node.id).
	file = map[string]string{"log.dirs": "/file", "broker.id": "1"}
	MergeEnv(file, map[string]string{"log.dir": "/env", "node.id": "2"})
	want = map[string]string{"log.dir": "/env", "node.id": "2"}
	if !reflect.DeepEqual(file, want) {
		t.Errorf("merged synonyms = %v, want %v", file, want)
	}
}
