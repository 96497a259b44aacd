package config

import (
	"maps"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

func sp(s string) *string { return &s }

func op(name string, o kmsg.IncrementalAlterConfigOp, v *string) kmsg.IncrementalAlterConfigsRequestResourceConfig {
	c := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	c.Name, c.Op, c.Value = name, o, v
	return c
}

func set(name, v string) kmsg.AlterConfigsRequestResourceConfig {
	c := kmsg.NewAlterConfigsRequestResourceConfig()
	c.Name, c.Value = name, &v
	return c
}

const (
	opSet      = kmsg.IncrementalAlterConfigOpSet
	opDelete   = kmsg.IncrementalAlterConfigOpDelete
	opAppend   = kmsg.IncrementalAlterConfigOpAppend
	opSubtract = kmsg.IncrementalAlterConfigOpSubtract
)

func TestIncrementalAlterTopic(t *testing.T) {
	r := mustLoad(t, nil).Resolver(nil)
	cur := map[string]string{"retention.ms": "1000", "segment.bytes": "2048"}
	tests := []struct {
		name    string
		ops     []kmsg.IncrementalAlterConfigsRequestResourceConfig
		want    map[string]string
		errCode string // "config" or "request"
		errMsg  string
	}{
		{"set and delete", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("retention.ms", opSet, sp(" 5 ")), op("segment.bytes", opDelete, nil)},
			map[string]string{"retention.ms": "5"}, "", ""},
		{"append to default", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("cleanup.policy", opAppend, sp("compact"))},
			map[string]string{"retention.ms": "1000", "segment.bytes": "2048", "cleanup.policy": "delete,compact"}, "", ""},
		{"append existing is a no-op", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("cleanup.policy", opAppend, sp("delete"))},
			map[string]string{"retention.ms": "1000", "segment.bytes": "2048", "cleanup.policy": "delete"}, "", ""},
		{"subtract", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("leader.replication.throttled.replicas", opSubtract, sp("0:1"))},
			map[string]string{"retention.ms": "1000", "segment.bytes": "2048", "leader.replication.throttled.replicas": ""}, "", ""},
		{"delete unknown is fine", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("nope", opDelete, nil)},
			map[string]string{"retention.ms": "1000", "segment.bytes": "2048"}, "", ""},
		{"append to non-list", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("retention.ms", opAppend, sp("1"))},
			nil, "request", "Config value append is not allowed for config key: retention.ms"},
		{"subtract from non-list", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("retention.ms", opSubtract, sp("1"))},
			nil, "request", "Config value subtract is not allowed for config key: retention.ms"},
		{"append unknown", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("nope", opAppend, sp("1"))},
			nil, "config", "Unknown topic config name: nope"},
		{"set unknown", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("nope", opSet, sp("1"))},
			nil, "config", "Unknown topic config name: nope"},
		{"bad value", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("segment.ms", opSet, sp("0"))},
			nil, "config", "segment.ms: must be >= 1, got 0"},
		{"bad list entry", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("cleanup.policy", opAppend, sp("purge"))},
			nil, "config", "cleanup.policy: must be a list of [compact, delete]"},
		{"null set", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("retention.ms", opSet, nil)},
			nil, "request", "Null value not supported for : retention.ms"},
		{"duplicates", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("retention.ms", opSet, sp("1")), op("retention.ms", opDelete, nil)},
			nil, "request", "Error due to duplicate config keys"},
		{"unknown op", []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("retention.ms", 9, sp("1"))},
			nil, "request", "Unknown alter config operation 9"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := maps.Clone(cur)
			got, err := IncrementalAlterTopicConfigs(r, cur, tt.ops)
			if !maps.Equal(cur, before) {
				t.Fatal("current map was modified")
			}
			checkAlter(t, got, err, tt.want, tt.errCode, tt.errMsg)
		})
	}
}

func checkAlter(t *testing.T, got map[string]string, err error, want map[string]string, code, msg string) {
	t.Helper()
	if code == "" {
		if err != nil {
			t.Fatalf("error %v", err)
		}
		if !maps.Equal(got, want) {
			t.Fatalf("got %q, want %q", got, want)
		}
		return
	}
	if err == nil || !contains(err.Error(), msg) {
		t.Fatalf("error %v, want %q", err, msg)
	}
	if code == "config" && !isInvalidConfig(err) || code == "request" && !isInvalidRequest(err) {
		t.Fatalf("error %v has the wrong code, want invalid %s", err, code)
	}
}

func TestAlterTopicReplaces(t *testing.T) {
	r := mustLoad(t, nil).Resolver(nil)
	got, err := AlterTopicConfigs(r, []kmsg.AlterConfigsRequestResourceConfig{set("retention.ms", "10"), set("compression.type", "zstd")})
	checkAlter(t, got, err, map[string]string{"retention.ms": "10", "compression.type": "zstd"}, "", "")
	got, err = AlterTopicConfigs(r, nil)
	checkAlter(t, got, err, map[string]string{}, "", "")
	null := kmsg.NewAlterConfigsRequestResourceConfig()
	null.Name = "retention.ms"
	_, err = AlterTopicConfigs(r, []kmsg.AlterConfigsRequestResourceConfig{null})
	checkAlter(t, nil, err, nil, "request", "Null value not supported")
	_, err = AlterTopicConfigs(r, []kmsg.AlterConfigsRequestResourceConfig{set("remote.storage.enable", "true")})
	checkAlter(t, nil, err, nil, "config", "Tiered Storage functionality is disabled")
}

func TestAlterBroker(t *testing.T) {
	cur := map[string]string{"log.retention.ms": "1000"}
	tests := []struct {
		name      string
		perBroker bool
		ops       []kmsg.IncrementalAlterConfigsRequestResourceConfig
		want      map[string]string
		code, msg string
	}{
		{"dynamic on default", false, []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("message.max.bytes", opSet, sp("2000"))},
			map[string]string{"log.retention.ms": "1000", "message.max.bytes": "2000"}, "", ""},
		{"append list", true, []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("log.cleanup.policy", opAppend, sp("compact"))},
			map[string]string{"log.retention.ms": "1000", "log.cleanup.policy": "delete,compact"}, "", ""},
		{"delete", true, []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("log.retention.ms", opDelete, nil)},
			map[string]string{}, "", ""},
		{"read-only", true, []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("num.partitions", opSet, sp("3")), op("log.dirs", opSet, sp("/x"))},
			nil, "request", "Cannot update these configs dynamically: [log.dirs, num.partitions]"},
		{"ignored key is read-only", true, []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("num.replica.fetchers", opSet, sp("3"))},
			nil, "request", "Cannot update these configs dynamically: [num.replica.fetchers]"},
		{"unknown", true, []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("num.partitons", opSet, sp("3"))},
			nil, "config", "Unknown broker config name: num.partitons"},
		{"bad value", true, []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("min.insync.replicas", opSet, sp("0"))},
			nil, "request", "min.insync.replicas: must be >= 1, got 0"},
		{"append to non-list", true, []kmsg.IncrementalAlterConfigsRequestResourceConfig{op("message.max.bytes", opAppend, sp("1"))},
			nil, "request", "Config value append is not allowed for config key: message.max.bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := IncrementalAlterBrokerConfigs(tt.perBroker, cur, tt.ops)
			checkAlter(t, got, err, tt.want, tt.code, tt.msg)
		})
	}
	got, err := AlterBrokerConfigs(false, []kmsg.AlterConfigsRequestResourceConfig{set("log.retention.ms", "5"), set("unclean.leader.election.enable", "TRUE")})
	checkAlter(t, got, err, map[string]string{"log.retention.ms": "5", "unclean.leader.election.enable": "true"}, "", "")
	_, err = AlterBrokerConfigs(true, []kmsg.AlterConfigsRequestResourceConfig{set("broker.id", "5")})
	checkAlter(t, nil, err, nil, "request", "Cannot update these configs dynamically: [broker.id]")
}
