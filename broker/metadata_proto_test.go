package broker

// Protocol tests: ApiVersions, Metadata, DescribeCluster.

import (
	"encoding/binary"
	"net"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The APIs the issue requires, with the lowest max version the clients we
// serve (franz-go, librdkafka 2.x, kafkajs) need to be useful.
var requiredAPIs = map[int16]int16{
	0:  7,  // Produce (librdkafka 2.x wants >= 7 for zstd)
	1:  11, // Fetch (KIP-392 fields; franz-go uses up to the broker's max)
	2:  5,  // ListOffsets
	3:  9,  // Metadata (flexible)
	18: 3,  // ApiVersions (flexible)
	19: 5,  // CreateTopics (configs in response)
	20: 4,  // DeleteTopics
	21: 1,  // DeleteRecords
	22: 2,  // InitProducerId
	23: 3,  // OffsetForLeaderEpoch
	32: 1,  // DescribeConfigs
	33: 1,  // AlterConfigs
	35: 1,  // DescribeLogDirs
	37: 1,  // CreatePartitions
	44: 0,  // IncrementalAlterConfigs
	60: 0,  // DescribeCluster
}

func TestProtoApiVersions(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())

	for _, v := range []int16{0, 1, 2, 3, 4} {
		resp := rc.do(apiVersionsReq(), v).(*kmsg.ApiVersionsResponse)
		wantCode(t, "ApiVersions v"+strconv.Itoa(int(v)), resp.ErrorCode, nil)
		have := map[int16]kmsg.ApiVersionsResponseApiKey{}
		for _, k := range resp.ApiKeys {
			if k.MinVersion < 0 || k.MinVersion > k.MaxVersion {
				t.Errorf("v%d: api %d has range %d-%d", v, k.ApiKey, k.MinVersion, k.MaxVersion)
			}
			if kreq := kmsg.RequestForKey(k.ApiKey); kreq != nil && k.MaxVersion > kreq.MaxVersion() {
				t.Errorf("v%d: api %d max %d is above what kmsg can encode (%d)", v, k.ApiKey, k.MaxVersion, kreq.MaxVersion())
			}
			have[k.ApiKey] = k
		}
		for key, minMax := range requiredAPIs {
			k, ok := have[key]
			switch {
			case !ok:
				t.Errorf("v%d: api %s (%d) not advertised", v, kmsg.NameForKey(key), key)
			case k.MaxVersion < minMax:
				t.Errorf("v%d: api %s max version %d, want >= %d", v, kmsg.NameForKey(key), k.MaxVersion, minMax)
			}
		}
	}

	// v3+ validates the client software name and version (KIP-511).
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "bad name!", "1.0"
	resp := rc.do(req, 3).(*kmsg.ApiVersionsResponse)
	wantCode(t, "ApiVersions v3 with a bad software name", resp.ErrorCode, kerr.InvalidRequest)

	// The connection still works afterwards.
	req = kmsg.NewPtrApiVersionsRequest()
	resp = rc.do(req, 0).(*kmsg.ApiVersionsResponse)
	wantCode(t, "ApiVersions v0 after an error", resp.ErrorCode, nil)
}

// A version the broker does not know is answered at v0 with
// UNSUPPORTED_VERSION and the ApiVersions range (KIP-511).
func TestProtoApiVersionsTooHigh(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	for _, version := range []int16{5, 99} {
		rc := dialRaw(t, ts.addr())
		// Handwritten frame: ApiVersions, the version, a correlation id, a
		// client id, header tags and a flexible body (two empty compact
		// strings and no tags), as a newer client would send.
		b := []byte{0, 0, 0, 0, 0, 18}
		b = binary.BigEndian.AppendUint16(b, uint16(version))
		b = binary.BigEndian.AppendUint32(b, 77)
		b = append(b, 0, 3, 'n', 'e', 'w', 0, 1, 1, 0)
		binary.BigEndian.PutUint32(b, uint32(len(b)-4))
		rc.writeFrame(b)
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = 0
		rc.recv(77, resp)
		wantCode(t, "ApiVersions v"+strconv.Itoa(int(version)), resp.ErrorCode, kerr.UnsupportedVersion)
		found := false
		for _, k := range resp.ApiKeys {
			if k.ApiKey == 18 {
				found = true
				if k.MaxVersion < 3 || k.MinVersion != 0 {
					t.Errorf("ApiVersions range in the v0 answer: %d-%d", k.MinVersion, k.MaxVersion)
				}
			}
		}
		if !found {
			t.Errorf("v%d: UNSUPPORTED_VERSION answer lacks the ApiVersions range", version)
		}
		// The client retries lower on the same connection.
		ok := rc.do(apiVersionsReq(), 3).(*kmsg.ApiVersionsResponse)
		wantCode(t, "ApiVersions v3 retry", ok.ErrorCode, nil)
	}
}

// A known request at a version the broker does not serve gets
// UNSUPPORTED_VERSION where the response has an error code, and the
// connection stays usable.
func TestProtoUnsupportedVersion(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	req := kmsg.NewPtrDescribeClusterRequest()
	req.EndpointType = 1
	max := kmsg.NewPtrDescribeClusterRequest().MaxVersion()
	if e, ok := apis[60]; !ok || e.max >= max {
		t.Skipf("DescribeCluster served up to kmsg's max %d; nothing above to ask", max)
	}
	resp := rc.do(req, max).(*kmsg.DescribeClusterResponse)
	wantCode(t, "DescribeCluster above the served range", resp.ErrorCode, kerr.UnsupportedVersion)
	ok := rc.do(apiVersionsReq(), 3).(*kmsg.ApiVersionsResponse)
	wantCode(t, "ApiVersions after UNSUPPORTED_VERSION", ok.ErrorCode, nil)
}

func apiVersionsReq() *kmsg.ApiVersionsRequest {
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "strata-test", "1.0.0"
	return req
}

// metadataReq asks for the named topics (none: all), allowing
// auto-creation as clients do by default.
func metadataReq(topics ...string) *kmsg.MetadataRequest {
	req := kmsg.NewPtrMetadataRequest()
	req.AllowAutoTopicCreation = true
	if topics == nil {
		return req // null: all topics
	}
	req.Topics = []kmsg.MetadataRequestTopic{}
	for _, n := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(n)
		req.Topics = append(req.Topics, rt)
	}
	return req
}

func mdTopic(resp *kmsg.MetadataResponse, name string) *kmsg.MetadataResponseTopic {
	for i := range resp.Topics {
		if t := resp.Topics[i].Topic; t != nil && *t == name {
			return &resp.Topics[i]
		}
	}
	return nil
}

func TestProtoMetadata(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, map[string]string{"num.partitions": "3"})
	rc := dialRaw(t, ts.addr())
	idA := rc.createTopic("meta-a", 2, nil)
	idB := rc.createTopic("meta-b", 1, nil)

	for _, v := range []int16{1, 4, 9, 12} {
		resp := rc.do(metadataReq(), v).(*kmsg.MetadataResponse)
		if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 0 {
			t.Fatalf("v%d: brokers %+v, want node 0", v, resp.Brokers)
		}
		host, port, _ := net.SplitHostPort(ts.addr())
		if b := resp.Brokers[0]; b.Host != host || strconv.Itoa(int(b.Port)) != port {
			t.Errorf("v%d: broker at %s:%d, want %s", v, b.Host, b.Port, ts.addr())
		}
		if resp.ControllerID != 0 {
			t.Errorf("v%d: controller %d, want 0", v, resp.ControllerID)
		}
		if v >= 2 && (resp.ClusterID == nil || *resp.ClusterID == "") {
			t.Errorf("v%d: no cluster id", v)
		}
		for name, parts := range map[string]int{"meta-a": 2, "meta-b": 1} {
			mt := mdTopic(resp, name)
			if mt == nil {
				t.Fatalf("v%d: all-topics metadata lacks %s", v, name)
			}
			wantCode(t, "metadata "+name, mt.ErrorCode, nil)
			if len(mt.Partitions) != parts {
				t.Fatalf("v%d: %s has %d partitions, want %d", v, name, len(mt.Partitions), parts)
			}
			for _, p := range mt.Partitions {
				wantCode(t, "metadata partition", p.ErrorCode, nil)
				if p.Leader != 0 || len(p.Replicas) != 1 || len(p.ISR) != 1 {
					t.Errorf("v%d: %s-%d leader %d replicas %v isr %v", v, name, p.Partition, p.Leader, p.Replicas, p.ISR)
				}
			}
		}
	}

	// Named; topic ids from v10.
	resp := rc.do(metadataReq("meta-a"), 12).(*kmsg.MetadataResponse)
	if len(resp.Topics) != 1 || mdTopic(resp, "meta-a") == nil {
		t.Fatalf("named metadata returned %d topics", len(resp.Topics))
	}
	if got := mdTopic(resp, "meta-a").TopicID; got != idA || got == ([16]byte{}) {
		t.Errorf("meta-a topic id %x, want %x from CreateTopics", got, idA)
	}
	// Lookup by id (v12: null name, topic id).
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.TopicID = idB
	req.Topics = append(req.Topics, rt)
	resp = rc.do(req, 12).(*kmsg.MetadataResponse)
	if mt := mdTopic(resp, "meta-b"); mt == nil || mt.TopicID != idB {
		t.Errorf("metadata by topic id did not return meta-b: %+v", resp.Topics)
	}

	// Invalid name.
	resp = rc.do(metadataReq("bad name!"), 12).(*kmsg.MetadataResponse)
	if mt := mdTopic(resp, "bad name!"); mt == nil {
		t.Fatalf("invalid name left out of the response")
	} else {
		wantCode(t, "metadata invalid name", mt.ErrorCode, kerr.InvalidTopicException)
	}

	// Auto-create (on by default) with num.partitions.
	resp = rc.do(metadataReq("meta-auto"), 12).(*kmsg.MetadataResponse)
	mt := mdTopic(resp, "meta-auto")
	if mt == nil {
		t.Fatalf("auto-created topic missing")
	}
	wantCode(t, "metadata auto-create", mt.ErrorCode, nil)
	if len(mt.Partitions) != 3 {
		t.Errorf("auto-created topic has %d partitions, want num.partitions=3", len(mt.Partitions))
	}
	// It is usable at once.
	rc.produceOK("meta-auto", 2, plainBatch(1000, "x").build(t))

	// v4+ AllowAutoTopicCreation=false is obeyed.
	req = metadataReq("meta-noauto")
	req.AllowAutoTopicCreation = false
	resp = rc.do(req, 12).(*kmsg.MetadataResponse)
	if mt := mdTopic(resp, "meta-noauto"); mt == nil {
		t.Fatalf("unknown topic left out of the response")
	} else {
		wantCode(t, "metadata with AllowAutoTopicCreation=false", mt.ErrorCode, kerr.UnknownTopicOrPartition)
	}
}

func TestProtoMetadataAutoCreateOff(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, map[string]string{"auto.create.topics.enable": "false"})
	rc := dialRaw(t, ts.addr())
	for _, v := range []int16{1, 12} {
		req := metadataReq("nope")
		req.AllowAutoTopicCreation = true
		resp := rc.do(req, v).(*kmsg.MetadataResponse)
		mt := mdTopic(resp, "nope")
		if mt == nil {
			t.Fatalf("v%d: unknown topic left out of the response", v)
		}
		wantCode(t, "metadata unknown topic", mt.ErrorCode, kerr.UnknownTopicOrPartition)
	}
	all := rc.do(metadataReq(), 12).(*kmsg.MetadataResponse)
	if len(all.Topics) != 0 {
		t.Errorf("topics exist after metadata with auto-create off: %d", len(all.Topics))
	}
	// Produce to an unknown topic does not create it either.
	p := rc.producePart("nope", 0, plainBatch(1000, "x").build(t))
	wantCode(t, "produce to an unknown topic", p.ErrorCode, kerr.UnknownTopicOrPartition)
}

func TestProtoDescribeCluster(t *testing.T) {
	t.Parallel()
	ts := startTestServer(t, nil)
	rc := dialRaw(t, ts.addr())
	md := rc.do(metadataReq(), 12).(*kmsg.MetadataResponse)
	for _, v := range []int16{0, 1} {
		req := kmsg.NewPtrDescribeClusterRequest()
		req.EndpointType = 1
		resp := rc.do(req, v).(*kmsg.DescribeClusterResponse)
		wantCode(t, "DescribeCluster", resp.ErrorCode, nil)
		if md.ClusterID == nil || resp.ClusterID != *md.ClusterID || resp.ClusterID == "" {
			t.Errorf("v%d: cluster id %q, metadata says %v", v, resp.ClusterID, md.ClusterID)
		}
		if resp.ControllerID != 0 {
			t.Errorf("v%d: controller id %d, want 0", v, resp.ControllerID)
		}
		if len(resp.Brokers) != 1 || resp.Brokers[0].NodeID != 0 {
			t.Fatalf("v%d: brokers %+v", v, resp.Brokers)
		}
		b := resp.Brokers[0]
		if net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port))) != ts.addr() {
			t.Errorf("v%d: broker %s:%d, want %s", v, b.Host, b.Port, ts.addr())
		}
	}
	req := kmsg.NewPtrDescribeClusterRequest()
	req.EndpointType = 2 // controllers
	resp := rc.do(req, 1).(*kmsg.DescribeClusterResponse)
	wantCode(t, "DescribeCluster for controllers", resp.ErrorCode, kerr.UnsupportedEndpointType)
}
