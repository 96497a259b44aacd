package broker

// Protocol tests: DescribeConfigs, AlterConfigs, IncrementalAlterConfigs,
// topic and broker level, and that a changed config reaches the log.

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func strOrNull(s *string) string {
	if s == nil {
		return "<null>"
	}
	return *s
}

// describeConfigs describes one resource (v4, with synonyms) and returns
// its configs by name.
func describeConfigs(t testing.TB, rc *rawConn, typ kmsg.ConfigResourceType, name string, names ...string) (int16, map[string]kmsg.DescribeConfigsResponseResourceConfig) {
	t.Helper()
	req := kmsg.NewPtrDescribeConfigsRequest()
	req.IncludeSynonyms = true
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.ConfigNames = typ, name, names
	req.Resources = append(req.Resources, rr)
	resp := rc.do(req, 4).(*kmsg.DescribeConfigsResponse)
	if len(resp.Resources) != 1 {
		t.Fatalf("DescribeConfigs: %d resources answered", len(resp.Resources))
	}
	out := map[string]kmsg.DescribeConfigsResponseResourceConfig{}
	for _, c := range resp.Resources[0].Configs {
		if _, dup := out[c.Name]; dup {
			t.Errorf("DescribeConfigs %s: %s listed twice", name, c.Name)
		}
		out[c.Name] = c
	}
	return resp.Resources[0].ErrorCode, out
}

func describeTopicConfig(t testing.TB, rc *rawConn, topic, name string) kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	code, cfgs := describeConfigs(t, rc, kmsg.ConfigResourceTypeTopic, topic, name)
	wantCode(t, "describe "+topic, code, nil)
	c, ok := cfgs[name]
	if !ok {
		t.Fatalf("describe %s: %s missing", topic, name)
	}
	return c
}

// wantConfig checks a described config's value and source.
func wantConfig(t testing.TB, what string, c kmsg.DescribeConfigsResponseResourceConfig, value string, src kmsg.ConfigSource) {
	t.Helper()
	if strOrNull(c.Value) != value || c.Source != src {
		t.Errorf("%s: %s = %s from %v, want %s from %v", what, c.Name, strOrNull(c.Value), c.Source, value, src)
	}
}

type alterOp struct {
	name  string
	op    kmsg.IncrementalAlterConfigOp
	value *string
}

func cfgSet(name, v string) alterOp { return alterOp{name, kmsg.IncrementalAlterConfigOpSet, &v} }
func cfgDel(name string) alterOp    { return alterOp{name, kmsg.IncrementalAlterConfigOpDelete, nil} }

func incrementalAlter(t testing.TB, rc *rawConn, typ kmsg.ConfigResourceType, name string, validateOnly bool, ops ...alterOp) int16 {
	t.Helper()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	req.ValidateOnly = validateOnly
	rr := kmsg.NewIncrementalAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = typ, name
	for _, o := range ops {
		c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		c.Name, c.Op, c.Value = o.name, o.op, o.value
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	resp := rc.do(req, 1).(*kmsg.IncrementalAlterConfigsResponse)
	if len(resp.Resources) != 1 {
		t.Fatalf("IncrementalAlterConfigs: %d resources answered", len(resp.Resources))
	}
	return resp.Resources[0].ErrorCode
}

func alterConfigs(t testing.TB, rc *rawConn, typ kmsg.ConfigResourceType, name string, kv ...string) int16 {
	t.Helper()
	req := kmsg.NewPtrAlterConfigsRequest()
	rr := kmsg.NewAlterConfigsRequestResource()
	rr.ResourceType, rr.ResourceName = typ, name
	for i := 0; i+1 < len(kv); i += 2 {
		c := kmsg.NewAlterConfigsRequestResourceConfig()
		c.Name, c.Value = kv[i], kmsg.StringPtr(kv[i+1])
		rr.Configs = append(rr.Configs, c)
	}
	req.Resources = append(req.Resources, rr)
	resp := rc.do(req, 2).(*kmsg.AlterConfigsResponse)
	if len(resp.Resources) != 1 {
		t.Fatalf("AlterConfigs: %d resources answered", len(resp.Resources))
	}
	return resp.Resources[0].ErrorCode
}

const (
	topicRes  = kmsg.ConfigResourceTypeTopic
	brokerRes = kmsg.ConfigResourceTypeBroker
)

func TestProtoDescribeConfigs(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, map[string]string{"log.retention.hours": "100", "log.segment.bytes": "50000000"})
	rc := dialRaw(t, ts.addr())
	rc.createTopic("dc", 1, map[string]string{"max.message.bytes": "5000"})

	code, cfgs := describeConfigs(t, rc, topicRes, "dc")
	wantCode(t, "describe topic", code, nil)
	wantConfig(t, "topic override", cfgs["max.message.bytes"], "5000", kmsg.ConfigSourceDynamicTopicConfig)
	wantConfig(t, "static broker synonym", cfgs["segment.bytes"], "50000000", kmsg.ConfigSourceStaticBrokerConfig)
	// Kafka's quirk: a value inherited from a synonym in another unit
	// (log.retention.hours) is computed, but its source is DEFAULT_CONFIG
	// and the synonyms list drops it (ConfigHelper.configSynonyms).
	wantConfig(t, "synonym in hours", cfgs["retention.ms"], "360000000", kmsg.ConfigSourceDefaultConfig)
	wantConfig(t, "default", cfgs["segment.ms"], "604800000", kmsg.ConfigSourceDefaultConfig)
	wantConfig(t, "default", cfgs["cleanup.policy"], "delete", kmsg.ConfigSourceDefaultConfig)
	wantConfig(t, "default", cfgs["message.timestamp.type"], "CreateTime", kmsg.ConfigSourceDefaultConfig)
	wantConfig(t, "default", cfgs["min.insync.replicas"], "1", kmsg.ConfigSourceDefaultConfig)
	if len(cfgs) < 20 {
		t.Errorf("topic describe lists only %d configs", len(cfgs))
	}
	// Synonyms: the topic override first, then the broker default.
	syn := cfgs["max.message.bytes"].ConfigSynonyms
	if len(syn) < 2 || syn[0].Name != "max.message.bytes" || syn[0].Source != kmsg.ConfigSourceDynamicTopicConfig ||
		syn[len(syn)-1].Name != "message.max.bytes" || syn[len(syn)-1].Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("max.message.bytes synonyms %+v", syn)
	}
	syn = cfgs["segment.bytes"].ConfigSynonyms
	if len(syn) != 2 || syn[0].Name != "log.segment.bytes" || strOrNull(syn[0].Value) != "50000000" || syn[0].Source != kmsg.ConfigSourceStaticBrokerConfig ||
		syn[1].Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("segment.bytes synonyms %+v, want log.segment.bytes static then default", syn)
	}

	// Named configs only; unknown names are left out.
	code, cfgs = describeConfigs(t, rc, topicRes, "dc", "segment.bytes", "no.such.config")
	wantCode(t, "describe named", code, nil)
	if len(cfgs) != 1 {
		t.Errorf("describe of 2 names (one unknown) returned %d configs", len(cfgs))
	}
	code, _ = describeConfigs(t, rc, topicRes, "no-such-topic")
	wantCode(t, "describe an unknown topic", code, kerr.UnknownTopicOrPartition)

	// Broker.
	code, cfgs = describeConfigs(t, rc, brokerRes, "0")
	wantCode(t, "describe broker 0", code, nil)
	wantConfig(t, "broker static", cfgs["log.retention.hours"], "100", kmsg.ConfigSourceStaticBrokerConfig)
	wantConfig(t, "broker default", cfgs["num.partitions"], "1", kmsg.ConfigSourceDefaultConfig)
	if c, ok := cfgs["broker.id"]; !ok || strOrNull(c.Value) != "0" {
		t.Errorf("broker.id = %+v", c)
	}
	code, _ = describeConfigs(t, rc, brokerRes, "")
	wantCode(t, "describe the cluster default", code, nil)
	code, _ = describeConfigs(t, rc, brokerRes, "7")
	if code == 0 {
		t.Errorf("describe of broker 7 on broker 0 succeeded")
	}

	// v1 (not flexible) answers too.
	req := kmsg.NewPtrDescribeConfigsRequest()
	rr := kmsg.NewDescribeConfigsRequestResource()
	rr.ResourceType, rr.ResourceName, rr.ConfigNames = topicRes, "dc", []string{"max.message.bytes"}
	req.Resources = append(req.Resources, rr)
	resp := rc.do(req, 1).(*kmsg.DescribeConfigsResponse)
	if c := resp.Resources[0].Configs; len(c) != 1 || strOrNull(c[0].Value) != "5000" {
		t.Errorf("DescribeConfigs v1: %+v", c)
	}
}

func TestProtoAlterTopicConfigs(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, map[string]string{"log.retention.hours": "100"})
	rc := dialRaw(t, ts.addr())
	rc.createTopic("ac", 1, map[string]string{"max.message.bytes": "5000"})

	// Incremental SET keeps the other overrides.
	wantCode(t, "SET retention.ms", incrementalAlter(t, rc, topicRes, "ac", false, cfgSet("retention.ms", "86400000")), nil)
	wantConfig(t, "after SET", describeTopicConfig(t, rc, "ac", "retention.ms"), "86400000", kmsg.ConfigSourceDynamicTopicConfig)
	wantConfig(t, "after SET", describeTopicConfig(t, rc, "ac", "max.message.bytes"), "5000", kmsg.ConfigSourceDynamicTopicConfig)

	// The new max.message.bytes reaches the log: 5000 refuses 6000 bytes.
	big := plainBatch(1000, strings.Repeat("b", 6000)).build(t)
	wantCode(t, "produce over the override", rc.producePart("ac", 0, big).ErrorCode, kerr.MessageTooLarge)

	// DELETE reverts to the broker's value and source.
	wantCode(t, "DELETE max.message.bytes", incrementalAlter(t, rc, topicRes, "ac", false, cfgDel("max.message.bytes")), nil)
	wantConfig(t, "after DELETE", describeTopicConfig(t, rc, "ac", "max.message.bytes"), "1048588", kmsg.ConfigSourceDefaultConfig)
	rc.produceOK("ac", 0, big)

	// ValidateOnly changes nothing.
	wantCode(t, "validate-only SET", incrementalAlter(t, rc, topicRes, "ac", true, cfgSet("retention.ms", "1000")), nil)
	wantConfig(t, "after validate-only", describeTopicConfig(t, rc, "ac", "retention.ms"), "86400000", kmsg.ConfigSourceDynamicTopicConfig)

	// Bad names and values: INVALID_CONFIG, nothing changed.
	wantCode(t, "SET an unknown name", incrementalAlter(t, rc, topicRes, "ac", false, cfgSet("no.such.config", "1")), kerr.InvalidConfig)
	wantCode(t, "SET a bad value", incrementalAlter(t, rc, topicRes, "ac", false, cfgSet("retention.ms", "forever")), kerr.InvalidConfig)
	wantCode(t, "SET a bad enum", incrementalAlter(t, rc, topicRes, "ac", false, cfgSet("cleanup.policy", "shred")), kerr.InvalidConfig)
	wantConfig(t, "after refused alters", describeTopicConfig(t, rc, "ac", "retention.ms"), "86400000", kmsg.ConfigSourceDynamicTopicConfig)
	wantCode(t, "alter an unknown topic", incrementalAlter(t, rc, topicRes, "nope", false, cfgSet("retention.ms", "1")), kerr.UnknownTopicOrPartition)

	// AlterConfigs replaces the whole set.
	wantCode(t, "AlterConfigs", alterConfigs(t, rc, topicRes, "ac", "segment.ms", "3600000"), nil)
	wantConfig(t, "after AlterConfigs", describeTopicConfig(t, rc, "ac", "segment.ms"), "3600000", kmsg.ConfigSourceDynamicTopicConfig)
	// The retention.ms override is gone: back to log.retention.hours=100
	// (DEFAULT_CONFIG by Kafka's synonym quirk, see TestProtoDescribeConfigs).
	wantConfig(t, "after AlterConfigs", describeTopicConfig(t, rc, "ac", "retention.ms"), "360000000", kmsg.ConfigSourceDefaultConfig)
	wantCode(t, "AlterConfigs with a bad value", alterConfigs(t, rc, topicRes, "ac", "segment.ms", "-5"), kerr.InvalidConfig)
	wantConfig(t, "after a refused AlterConfigs", describeTopicConfig(t, rc, "ac", "segment.ms"), "3600000", kmsg.ConfigSourceDynamicTopicConfig)
}

func TestProtoAlterBrokerConfigs(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, map[string]string{"log.retention.hours": "100"})
	rc := dialRaw(t, ts.addr())
	rc.createTopic("bc", 1, nil)

	// Cluster-wide dynamic default beats static.
	wantCode(t, "SET cluster default", incrementalAlter(t, rc, brokerRes, "", false, cfgSet("log.retention.ms", "5000000")), nil)
	wantConfig(t, "topic after cluster default", describeTopicConfig(t, rc, "bc", "retention.ms"), "5000000", kmsg.ConfigSourceDynamicDefaultBrokerConfig)
	// Per-broker dynamic beats the cluster default.
	wantCode(t, "SET broker 0", incrementalAlter(t, rc, brokerRes, "0", false, cfgSet("log.retention.ms", "7000000")), nil)
	wantConfig(t, "topic after per-broker", describeTopicConfig(t, rc, "bc", "retention.ms"), "7000000", kmsg.ConfigSourceDynamicBrokerConfig)
	code, cfgs := describeConfigs(t, rc, brokerRes, "0", "log.retention.ms")
	wantCode(t, "describe broker 0", code, nil)
	wantConfig(t, "broker 0", cfgs["log.retention.ms"], "7000000", kmsg.ConfigSourceDynamicBrokerConfig)
	code, cfgs = describeConfigs(t, rc, brokerRes, "", "log.retention.ms")
	wantCode(t, "describe the cluster default", code, nil)
	wantConfig(t, "cluster default", cfgs["log.retention.ms"], "5000000", kmsg.ConfigSourceDynamicDefaultBrokerConfig)

	// A topic override beats all of them.
	wantCode(t, "SET topic", incrementalAlter(t, rc, topicRes, "bc", false, cfgSet("retention.ms", "1234567")), nil)
	wantConfig(t, "topic override", describeTopicConfig(t, rc, "bc", "retention.ms"), "1234567", kmsg.ConfigSourceDynamicTopicConfig)

	// Deleting the per-broker value falls back to the cluster default.
	wantCode(t, "DELETE broker 0", incrementalAlter(t, rc, brokerRes, "0", false, cfgDel("log.retention.ms")), nil)
	code, cfgs = describeConfigs(t, rc, brokerRes, "0", "log.retention.ms")
	wantCode(t, "describe broker 0", code, nil)
	wantConfig(t, "broker 0 after DELETE", cfgs["log.retention.ms"], "5000000", kmsg.ConfigSourceDynamicDefaultBrokerConfig)

	// AlterConfigs on the broker replaces its set.
	wantCode(t, "AlterConfigs broker 0", alterConfigs(t, rc, brokerRes, "0", "log.segment.bytes", "2000000"), nil)
	code, cfgs = describeConfigs(t, rc, brokerRes, "0", "log.segment.bytes")
	wantCode(t, "describe broker 0", code, nil)
	wantConfig(t, "broker 0 after AlterConfigs", cfgs["log.segment.bytes"], "2000000", kmsg.ConfigSourceDynamicBrokerConfig)
	wantConfig(t, "topic segment.bytes from the broker", describeTopicConfig(t, rc, "bc", "segment.bytes"), "2000000", kmsg.ConfigSourceDynamicBrokerConfig)

	// Static-only configs cannot change dynamically; unknown broker ids are
	// refused.
	if code := incrementalAlter(t, rc, brokerRes, "0", false, cfgSet("broker.id", "5")); code == 0 {
		t.Errorf("dynamic change of broker.id accepted")
	}
	if code := incrementalAlter(t, rc, brokerRes, "7", false, cfgSet("log.retention.ms", "1")); code == 0 {
		t.Errorf("alter of broker 7 on broker 0 accepted")
	}
	code, cfgs = describeConfigs(t, rc, brokerRes, "0", "broker.id")
	wantCode(t, "describe broker 0", code, nil)
	if strOrNull(cfgs["broker.id"].Value) != "0" {
		t.Errorf("broker.id now %s", strOrNull(cfgs["broker.id"].Value))
	}
}

var segmentName = regexp.MustCompile(`^[0-9]{20}\.log$`)

func segmentFiles(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	var out []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".log") {
			if !segmentName.MatchString(e.Name()) {
				t.Errorf("segment file %q is not named by a 20-digit base offset", e.Name())
			}
			out = append(out, e.Name())
		}
	}
	return out
}

// A segment.bytes change takes effect on the log: segments roll smaller.
func TestProtoSegmentBytesTakesEffect(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("seg", 1, nil)
	dir := filepath.Join(ts.dir, "seg-0")

	raw := plainBatch(1000, strings.Repeat("s", 300<<10)).build(t)
	rc.produceOK("seg", 0, raw)
	rc.produceOK("seg", 0, raw)
	if n := len(segmentFiles(t, dir)); n != 1 {
		t.Fatalf("%d segments before the change, want 1", n)
	}

	// 1 MiB: Kafka 4's minimum for segment.bytes, so valid everywhere.
	wantCode(t, "SET segment.bytes", incrementalAlter(t, rc, topicRes, "seg", false, cfgSet("segment.bytes", "1048576")), nil)
	for i := 0; i < 6; i++ {
		rc.produceOK("seg", 0, raw)
	}
	segs := segmentFiles(t, dir)
	if len(segs) < 2 {
		t.Fatalf("%d segments after 8 batches of %d bytes with segment.bytes=1MiB, want at least 2", len(segs), len(raw))
	}
	if segs[0] != "00000000000000000000.log" {
		t.Errorf("first segment %s", segs[0])
	}

	// Survives a restart: every batch is there.
	ts.Close()
	ts2 := startTestServerDir(t, ts.dir, ts.sets)
	rc2 := dialRaw(t, ts2.addr())
	if got := rc2.offsetAt("seg", 0, -1); got != 8 {
		t.Errorf("latest offset %d after a restart, want 8", got)
	}
	var n int64
	for off := int64(0); off < 8; {
		fp := rc2.fetchOne("seg", 0, off, 4<<20)
		bs := splitBatches(t, fp.RecordBatches)
		if len(bs) == 0 {
			t.Fatalf("nothing fetched at offset %d after a restart", off)
		}
		for _, b := range bs {
			if b.FirstOffset != off {
				t.Fatalf("batch at %d, want %d", b.FirstOffset, off)
			}
			off++
			n++
		}
	}
	if len(segmentFiles(t, dir)) < 2 {
		t.Errorf("segments merged after a restart")
	}
}
