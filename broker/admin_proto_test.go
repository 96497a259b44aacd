package broker

// Protocol tests: CreateTopics, DeleteTopics, CreatePartitions,
// DescribeLogDirs.

import (
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type topicSpec struct {
	name    string
	parts   int32
	rf      int16
	configs map[string]string
}

func createTopicsReq(validateOnly bool, topics ...topicSpec) *kmsg.CreateTopicsRequest {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 10000
	req.ValidateOnly = validateOnly
	for _, ts := range topics {
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = ts.name, ts.parts, ts.rf
		for k, v := range ts.configs {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = k, kmsg.StringPtr(v)
			rt.Configs = append(rt.Configs, c)
		}
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func createdTopic(resp *kmsg.CreateTopicsResponse, name string) *kmsg.CreateTopicsResponseTopic {
	for i := range resp.Topics {
		if resp.Topics[i].Topic == name {
			return &resp.Topics[i]
		}
	}
	return nil
}

func topicExists(rc *rawConn, name string) bool {
	rc.t.Helper()
	resp := rc.do(metadataReq(), 12).(*kmsg.MetadataResponse)
	return mdTopic(resp, name) != nil
}

func TestProtoCreateTopics(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, map[string]string{"num.partitions": "4", "auto.create.topics.enable": "false"})
	rc := dialRaw(t, ts.addr())

	// Defaults with -1 (KIP-464); v5+ returns counts and configs.
	resp := rc.do(createTopicsReq(false,
		topicSpec{"ct-default", -1, -1, nil},
		topicSpec{"ct-explicit", 2, 1, map[string]string{"retention.ms": "123456", "cleanup.policy": "delete"}},
	), 7).(*kmsg.CreateTopicsResponse)
	def := createdTopic(resp, "ct-default")
	if def == nil {
		t.Fatalf("ct-default missing from the response")
	}
	wantCode(t, "create with -1/-1", def.ErrorCode, nil)
	if def.NumPartitions != 4 || def.ReplicationFactor != 1 {
		t.Errorf("-1/-1 created %d partitions, replication %d; want num.partitions=4 and 1", def.NumPartitions, def.ReplicationFactor)
	}
	if def.TopicID == ([16]byte{}) {
		t.Errorf("v7 response lacks the topic id")
	}
	exp := createdTopic(resp, "ct-explicit")
	wantCode(t, "create ct-explicit", exp.ErrorCode, nil)
	if exp.NumPartitions != 2 {
		t.Errorf("ct-explicit has %d partitions, want 2", exp.NumPartitions)
	}
	cfgs := map[string]kmsg.CreateTopicsResponseTopicConfig{}
	for _, c := range exp.Configs {
		cfgs[c.Name] = c
	}
	if c, ok := cfgs["retention.ms"]; !ok || c.Value == nil || *c.Value != "123456" || c.Source != int8(kmsg.ConfigSourceDynamicTopicConfig) {
		t.Errorf("v5+ configs: retention.ms = %+v, want 123456 from DYNAMIC_TOPIC_CONFIG", c)
	}
	if c, ok := cfgs["segment.bytes"]; !ok || c.Value == nil || *c.Value != "1073741824" || c.Source != int8(kmsg.ConfigSourceDefaultConfig) {
		t.Errorf("v5+ configs: segment.bytes = %+v, want the default 1073741824", c)
	}
	md := rc.do(metadataReq("ct-default"), 12).(*kmsg.MetadataResponse)
	if mt := mdTopic(md, "ct-default"); mt == nil || len(mt.Partitions) != 4 || mt.TopicID != def.TopicID {
		t.Errorf("metadata of ct-default: %+v", mt)
	}
	// Partitions are usable at once.
	rc.produceOK("ct-default", 3, plainBatch(1000, "x").build(t))

	// Already exists.
	resp = rc.do(createTopicsReq(false, topicSpec{"ct-default", 1, 1, nil}), 7).(*kmsg.CreateTopicsResponse)
	wantCode(t, "create an existing topic", resp.Topics[0].ErrorCode, kerr.TopicAlreadyExists)

	// Validate only: the answer of a create, nothing created.
	resp = rc.do(createTopicsReq(true, topicSpec{"ct-validate", 3, 1, nil}), 7).(*kmsg.CreateTopicsResponse)
	wantCode(t, "validate only", resp.Topics[0].ErrorCode, nil)
	if resp.Topics[0].NumPartitions != 3 {
		t.Errorf("validate only: %d partitions in the answer, want 3", resp.Topics[0].NumPartitions)
	}
	if topicExists(rc, "ct-validate") {
		t.Errorf("validate only created the topic")
	}
	resp = rc.do(createTopicsReq(true, topicSpec{"ct-default", 3, 1, nil}), 7).(*kmsg.CreateTopicsResponse)
	wantCode(t, "validate only of an existing topic", resp.Topics[0].ErrorCode, kerr.TopicAlreadyExists)

	// The same name twice in one request: both refused, nothing created.
	resp = rc.do(createTopicsReq(false, topicSpec{"ct-dup", 1, 1, nil}, topicSpec{"ct-dup", 1, 1, nil}), 7).(*kmsg.CreateTopicsResponse)
	if len(resp.Topics) != 2 {
		t.Fatalf("duplicate request: %d topics answered, want 2", len(resp.Topics))
	}
	for _, rt := range resp.Topics {
		wantCode(t, "duplicate topic in one request", rt.ErrorCode, kerr.InvalidRequest)
	}
	if topicExists(rc, "ct-dup") {
		t.Errorf("a topic named twice in one request was created")
	}

	// Bad input, each refused with its error and nothing created.
	for _, c := range []struct {
		spec topicSpec
		want *kerr.Error
	}{
		{topicSpec{"ct-bad-cfg-name", 1, 1, map[string]string{"no.such.config": "1"}}, kerr.InvalidConfig},
		{topicSpec{"ct-bad-cfg-value", 1, 1, map[string]string{"retention.ms": "soon"}}, kerr.InvalidConfig},
		{topicSpec{"ct-bad-cfg-enum", 1, 1, map[string]string{"cleanup.policy": "shred"}}, kerr.InvalidConfig},
		{topicSpec{"ct-bad-cfg-ts", 1, 1, map[string]string{"message.timestamp.type": "WallClock"}}, kerr.InvalidConfig},
		{topicSpec{"bad name!", 1, 1, nil}, kerr.InvalidTopicException},
		{topicSpec{strings.Repeat("n", 250), 1, 1, nil}, kerr.InvalidTopicException},
		{topicSpec{"..", 1, 1, nil}, kerr.InvalidTopicException},
		{topicSpec{"ct-zero-parts", 0, 1, nil}, kerr.InvalidPartitions},
		{topicSpec{"ct-rf-3", 1, 3, nil}, kerr.InvalidReplicationFactor},
	} {
		resp := rc.do(createTopicsReq(false, c.spec), 7).(*kmsg.CreateTopicsResponse)
		if len(resp.Topics) != 1 {
			t.Fatalf("%s: %d topics answered", c.spec.name, len(resp.Topics))
		}
		wantCode(t, "create "+c.spec.name, resp.Topics[0].ErrorCode, c.want)
		if resp.Topics[0].ErrorMessage == nil {
			t.Errorf("create %s: no error message", c.spec.name)
		}
		if topicExists(rc, c.spec.name) {
			t.Errorf("create %s: refused but created", c.spec.name)
		}
	}

	// Older versions (v2, not flexible) still work.
	resp = rc.do(createTopicsReq(false, topicSpec{"ct-v2", 1, 1, nil}), 2).(*kmsg.CreateTopicsResponse)
	wantCode(t, "CreateTopics v2", resp.Topics[0].ErrorCode, nil)
	if !topicExists(rc, "ct-v2") {
		t.Errorf("CreateTopics v2 did not create the topic")
	}
}

func deleteTopicsReq(names ...string) *kmsg.DeleteTopicsRequest {
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = 10000
	req.TopicNames = names
	for _, n := range names {
		rt := kmsg.NewDeleteTopicsRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func TestProtoDeleteTopics(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, map[string]string{"auto.create.topics.enable": "false"})
	rc := dialRaw(t, ts.addr())
	id := rc.createTopic("del", 2, map[string]string{"retention.ms": "99999"})
	for i := 0; i < 5; i++ {
		rc.produceOK("del", 0, plainBatch(1000, "old").build(t))
	}

	resp := rc.do(deleteTopicsReq("del"), 6).(*kmsg.DeleteTopicsResponse)
	if len(resp.Topics) != 1 {
		t.Fatalf("%d topics answered", len(resp.Topics))
	}
	wantCode(t, "delete", resp.Topics[0].ErrorCode, nil)
	if resp.Topics[0].TopicID != id {
		t.Errorf("delete answered topic id %x, want %x", resp.Topics[0].TopicID, id)
	}
	if topicExists(rc, "del") {
		t.Fatalf("deleted topic still in metadata")
	}
	p := rc.producePart("del", 0, plainBatch(1000, "x").build(t))
	wantCode(t, "produce to a deleted topic", p.ErrorCode, kerr.UnknownTopicOrPartition)
	lo := rc.listOffset("del", 0, -1)
	wantCode(t, "list offsets of a deleted topic", lo.ErrorCode, kerr.UnknownTopicOrPartition)

	// Deleting again, or an unknown topic.
	resp = rc.do(deleteTopicsReq("del"), 6).(*kmsg.DeleteTopicsResponse)
	wantCode(t, "delete a deleted topic", resp.Topics[0].ErrorCode, kerr.UnknownTopicOrPartition)
	resp = rc.do(deleteTopicsReq("del"), 1).(*kmsg.DeleteTopicsResponse)
	wantCode(t, "delete a deleted topic (v1)", resp.Topics[0].ErrorCode, kerr.UnknownTopicOrPartition)

	// Recreated with the same name: a new, empty topic with default configs.
	id2 := rc.createTopic("del", 1, nil)
	if id2 == id {
		t.Errorf("recreated topic has the old id")
	}
	if got := rc.offsetAt("del", 0, -1); got != 0 {
		t.Errorf("recreated topic latest offset %d, want 0", got)
	}
	if got := rc.offsetAt("del", 0, -2); got != 0 {
		t.Errorf("recreated topic earliest offset %d, want 0", got)
	}
	fp := rc.fetchOne("del", 0, 0, 1<<20)
	if len(fp.RecordBatches) != 0 {
		t.Errorf("recreated topic serves %d bytes of the old topic", len(fp.RecordBatches))
	}
	if c := describeTopicConfig(t, rc, "del", "retention.ms"); c.Source != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("recreated topic keeps the old retention.ms override: %s from %v", strOrNull(c.Value), c.Source)
	}
	if base := rc.produceOK("del", 0, plainBatch(1000, "new").build(t)); base != 0 {
		t.Errorf("first produce to the recreated topic at %d, want 0", base)
	}

	// By topic id (v6).
	id3 := rc.createTopic("del-by-id", 1, nil)
	req := kmsg.NewPtrDeleteTopicsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewDeleteTopicsRequestTopic()
	rt.TopicID = id3
	req.Topics = append(req.Topics, rt)
	resp = rc.do(req, 6).(*kmsg.DeleteTopicsResponse)
	wantCode(t, "delete by id", resp.Topics[0].ErrorCode, nil)
	if topicExists(rc, "del-by-id") {
		t.Errorf("topic deleted by id still in metadata")
	}
	resp = rc.do(req, 6).(*kmsg.DeleteTopicsResponse)
	wantCode(t, "delete by an unknown id", resp.Topics[0].ErrorCode, kerr.UnknownTopicID)
}

// The deleted topic's data does not come back after a restart.
func TestProtoDeleteTopicsRestart(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, map[string]string{"auto.create.topics.enable": "false"})
	rc := dialRaw(t, ts.addr())
	rc.createTopic("gone", 1, nil)
	rc.produceOK("gone", 0, plainBatch(1000, "old", "old").build(t))
	wantCode(t, "delete", rc.do(deleteTopicsReq("gone"), 6).(*kmsg.DeleteTopicsResponse).Topics[0].ErrorCode, nil)
	rc.createTopic("gone", 1, nil)
	rc.produceOK("gone", 0, plainBatch(1000, "new").build(t))

	ts.Close()
	ts2 := startTestServerDir(t, ts.dir, ts.sets)
	rc2 := dialRaw(t, ts2.addr())
	if got := rc2.offsetAt("gone", 0, -1); got != 1 {
		t.Errorf("recreated topic latest offset %d after a restart, want 1", got)
	}
	recs := consumeAll(t, ts2, "gone", 1)
	if string(recs[0].Value) != "new" {
		t.Errorf("record %q after a restart, want \"new\"", recs[0].Value)
	}
}

func TestProtoCreatePartitions(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("cp", 1, nil)
	rc.produceOK("cp", 0, plainBatch(1000, "p0").build(t))

	create := func(count int32, validateOnly bool) kmsg.CreatePartitionsResponseTopic {
		t.Helper()
		req := kmsg.NewPtrCreatePartitionsRequest()
		req.TimeoutMillis = 10000
		req.ValidateOnly = validateOnly
		rt := kmsg.NewCreatePartitionsRequestTopic()
		rt.Topic, rt.Count = "cp", count
		req.Topics = append(req.Topics, rt)
		resp := rc.do(req, 3).(*kmsg.CreatePartitionsResponse)
		if len(resp.Topics) != 1 {
			t.Fatalf("%d topics answered", len(resp.Topics))
		}
		return resp.Topics[0]
	}
	parts := func() int {
		md := rc.do(metadataReq("cp"), 12).(*kmsg.MetadataResponse)
		return len(mdTopic(md, "cp").Partitions)
	}

	wantCode(t, "validate-only grow", create(5, true).ErrorCode, nil)
	if n := parts(); n != 1 {
		t.Errorf("validate-only grew the topic to %d partitions", n)
	}
	wantCode(t, "grow to 3", create(3, false).ErrorCode, nil)
	if n := parts(); n != 3 {
		t.Fatalf("topic has %d partitions after growing to 3", n)
	}
	if base := rc.produceOK("cp", 2, plainBatch(1000, "p2").build(t)); base != 0 {
		t.Errorf("new partition's first offset %d, want 0", base)
	}
	if got := rc.offsetAt("cp", 0, -1); got != 1 {
		t.Errorf("partition 0 latest %d after growing, want 1 (data kept)", got)
	}
	wantCode(t, "shrink to 2", create(2, false).ErrorCode, kerr.InvalidPartitions)
	wantCode(t, "same count", create(3, false).ErrorCode, kerr.InvalidPartitions)
	if n := parts(); n != 3 {
		t.Errorf("topic has %d partitions after refused changes, want 3", n)
	}

	req := kmsg.NewPtrCreatePartitionsRequest()
	req.TimeoutMillis = 10000
	rt := kmsg.NewCreatePartitionsRequestTopic()
	rt.Topic, rt.Count = "no-such-topic", 2
	req.Topics = append(req.Topics, rt)
	resp := rc.do(req, 3).(*kmsg.CreatePartitionsResponse)
	wantCode(t, "grow an unknown topic", resp.Topics[0].ErrorCode, kerr.UnknownTopicOrPartition)
}

func TestProtoDescribeLogDirs(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("ld", 2, nil)
	rc.createTopic("ld-other", 1, nil)

	sizes := func(all bool) map[tp]int64 {
		t.Helper()
		req := kmsg.NewPtrDescribeLogDirsRequest()
		if !all {
			rt := kmsg.NewDescribeLogDirsRequestTopic()
			rt.Topic, rt.Partitions = "ld", []int32{0, 1}
			req.Topics = append(req.Topics, rt)
		}
		resp := rc.do(req, 4).(*kmsg.DescribeLogDirsResponse)
		wantCode(t, "DescribeLogDirs", resp.ErrorCode, nil)
		if len(resp.Dirs) != 1 {
			t.Fatalf("%d log dirs, want 1", len(resp.Dirs))
		}
		d := resp.Dirs[0]
		wantCode(t, "log dir", d.ErrorCode, nil)
		if d.Dir == "" || d.TotalBytes <= 0 || d.UsableBytes <= 0 || d.UsableBytes > d.TotalBytes {
			t.Errorf("log dir %q total %d usable %d", d.Dir, d.TotalBytes, d.UsableBytes)
		}
		out := map[tp]int64{}
		for _, rt := range d.Topics {
			for _, p := range rt.Partitions {
				out[tp{rt.Topic, p.Partition}] = p.Size
			}
		}
		return out
	}

	before := sizes(true)
	if len(before) != 3 {
		t.Fatalf("all log dirs: %d partitions, want 3: %v", len(before), before)
	}
	raw := plainBatch(1000, strings.Repeat("x", 4000)).build(t)
	rc.produceOK("ld", 1, raw)
	rc.produceOK("ld", 1, raw)
	after := sizes(false)
	if len(after) != 2 {
		t.Fatalf("log dirs of ld: %d partitions, want 2: %v", len(after), after)
	}
	if grow := after[tp{"ld", 1}] - before[tp{"ld", 1}]; grow != int64(2*len(raw)) {
		t.Errorf("ld-1 grew by %d bytes after producing %d", grow, 2*len(raw))
	}
	if after[tp{"ld", 0}] != before[tp{"ld", 0}] {
		t.Errorf("ld-0 changed size without produce: %d -> %d", before[tp{"ld", 0}], after[tp{"ld", 0}])
	}
}
