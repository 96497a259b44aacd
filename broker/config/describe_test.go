package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// synString renders synonyms as SOURCE:name=value, like kafka-configs.sh.
func synString(syns []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym) string {
	var parts []string
	for _, s := range syns {
		v := "null"
		if s.Value != nil {
			v = *s.Value
		}
		parts = append(parts, fmt.Sprintf("%s:%s=%s", s.Source, s.Name, v))
	}
	return strings.Join(parts, ",")
}

func find(t *testing.T, cs []kmsg.DescribeConfigsResponseResourceConfig, name string) kmsg.DescribeConfigsResponseResourceConfig {
	t.Helper()
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("%s not described", name)
	return kmsg.DescribeConfigsResponseResourceConfig{}
}

func val(p *string) string {
	if p == nil {
		return "null"
	}
	return *p
}

func TestDescribeTopic(t *testing.T) {
	b := mustLoad(t, map[string]string{"log.retention.hours": "24", "log.segment.bytes": "2097152", "message.max.bytes": "5000"})
	r := b.Resolver(map[string]map[string]string{
		"":  {"log.segment.bytes": "3145728", "log.retention.ms": "1000"},
		"0": {"log.retention.ms": "2000"},
	})
	all := DescribeOptions{IncludeSynonyms: true, IncludeDocumentation: true, Version: 4}
	cs := DescribeTopic(r, map[string]string{"max.message.bytes": "7000"}, all)
	if len(cs) != len(TopicDefs()) {
		t.Fatalf("%d configs, want %d", len(cs), len(TopicDefs()))
	}
	tests := []struct {
		name, value string
		src         kmsg.ConfigSource
		syns        string
	}{
		{"max.message.bytes", "7000", kmsg.ConfigSourceDynamicTopicConfig,
			"DYNAMIC_TOPIC_CONFIG:max.message.bytes=7000,STATIC_BROKER_CONFIG:message.max.bytes=5000,DEFAULT_CONFIG:message.max.bytes=1048588"},
		{"segment.bytes", "3145728", kmsg.ConfigSourceDynamicDefaultBrokerConfig,
			"DYNAMIC_DEFAULT_BROKER_CONFIG:log.segment.bytes=3145728,STATIC_BROKER_CONFIG:log.segment.bytes=2097152,DEFAULT_CONFIG:log.segment.bytes=1073741824"},
		{"retention.ms", "2000", kmsg.ConfigSourceDynamicBrokerConfig,
			"DYNAMIC_BROKER_CONFIG:log.retention.ms=2000,DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=1000,STATIC_BROKER_CONFIG:log.retention.hours=24,DEFAULT_CONFIG:log.retention.hours=168"},
		{"remote.storage.enable", "false", kmsg.ConfigSourceDefaultConfig, ""},
	}
	for _, tt := range tests {
		c := find(t, cs, tt.name)
		if val(c.Value) != tt.value || c.Source != tt.src || synString(c.ConfigSynonyms) != tt.syns {
			t.Errorf("%s = %s %v [%s]\nwant %s %v [%s]", tt.name, val(c.Value), c.Source, synString(c.ConfigSynonyms), tt.value, tt.src, tt.syns)
		}
		if c.ReadOnly || c.IsSensitive || c.Documentation == nil || *c.Documentation == "" {
			t.Errorf("%s: ReadOnly=%v IsSensitive=%v doc=%v", tt.name, c.ReadOnly, c.IsSensitive, c.Documentation)
		}
	}
	if c := find(t, cs, "cleanup.policy"); c.ConfigType != kmsg.ConfigTypeList {
		t.Errorf("cleanup.policy type %v", c.ConfigType)
	}
	if c := find(t, cs, "min.cleanable.dirty.ratio"); c.ConfigType != kmsg.ConfigTypeDouble || val(c.Value) != "0.5" {
		t.Errorf("min.cleanable.dirty.ratio %v %s", c.ConfigType, val(c.Value))
	}
}

// TestDescribeTopicHoursQuirk pins Kafka's behaviour: a topic inheriting
// retention.ms from log.retention.hours shows the computed value with
// DEFAULT_CONFIG and no synonyms, because log.retention.ms itself is unset.
func TestDescribeTopicHoursQuirk(t *testing.T) {
	r := mustLoad(t, map[string]string{"log.retention.hours": "24"}).Resolver(nil)
	c := DescribeTopic(r, nil, DescribeOptions{Names: []string{"retention.ms"}, IncludeSynonyms: true, Version: 1})
	if len(c) != 1 || val(c[0].Value) != "86400000" || c[0].Source != kmsg.ConfigSourceDefaultConfig || len(c[0].ConfigSynonyms) != 0 {
		t.Fatalf("got %+v", c)
	}
}

func TestDescribeVersions(t *testing.T) {
	r := mustLoad(t, nil).Resolver(nil)
	ov := map[string]string{"retention.ms": "5"}
	v0 := DescribeTopic(r, ov, DescribeOptions{Names: []string{"retention.ms", "segment.ms", "nope"}, IncludeSynonyms: true, IncludeDocumentation: true, Version: 0})
	if len(v0) != 2 {
		t.Fatalf("v0: %d configs, want 2 (unknown names dropped)", len(v0))
	}
	if c := find(t, v0, "retention.ms"); c.IsDefault || c.ConfigSynonyms != nil || c.Documentation != nil {
		t.Errorf("v0 override: IsDefault=%v syns=%v doc=%v", c.IsDefault, c.ConfigSynonyms, c.Documentation)
	}
	if c := find(t, v0, "segment.ms"); !c.IsDefault {
		t.Error("v0 default: IsDefault false")
	}
	v1 := DescribeTopic(r, ov, DescribeOptions{Names: []string{"retention.ms"}, IncludeSynonyms: false, IncludeDocumentation: true, Version: 2})
	if v1[0].ConfigSynonyms != nil || v1[0].Documentation != nil {
		t.Error("v2: synonyms without IncludeSynonyms or documentation before v3")
	}
	// The response encodes and decodes at every version.
	for v := int16(0); v <= 4; v++ {
		resp := kmsg.NewPtrDescribeConfigsResponse()
		resp.Version = v
		res := kmsg.NewDescribeConfigsResponseResource()
		res.ResourceType = kmsg.ConfigResourceTypeTopic
		res.ResourceName = "t"
		res.Configs = DescribeTopic(r, ov, DescribeOptions{IncludeSynonyms: true, IncludeDocumentation: true, Version: v})
		resp.Resources = append(resp.Resources, res)
		back := kmsg.NewPtrDescribeConfigsResponse()
		back.Version = v
		if err := back.ReadFrom(resp.AppendTo(nil)); err != nil {
			t.Fatalf("v%d: %v", v, err)
		}
		if len(back.Resources[0].Configs) != len(TopicDefs()) {
			t.Fatalf("v%d: %d configs back", v, len(back.Resources[0].Configs))
		}
	}
}

func TestDescribeBroker(t *testing.T) {
	b := mustLoad(t, map[string]string{"log.retention.hours": "24", "num.partitions": "3", "password.encoder.secret": "s3cret"})
	r := b.Resolver(map[string]map[string]string{
		"":  {"log.retention.ms": "1000", "message.max.bytes": "9000"},
		"0": {"log.retention.ms": "2000"},
	})
	cs := DescribeBroker(r, DescribeOptions{IncludeSynonyms: true, Version: 4})
	if len(cs) != len(BrokerDefs()) {
		t.Fatalf("%d configs, want %d", len(cs), len(BrokerDefs()))
	}
	tests := []struct {
		name, value string
		src         kmsg.ConfigSource
		readOnly    bool
		syns        string
	}{
		{"log.retention.ms", "2000", kmsg.ConfigSourceDynamicBrokerConfig, false,
			"DYNAMIC_BROKER_CONFIG:log.retention.ms=2000,DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=1000,STATIC_BROKER_CONFIG:log.retention.hours=24,DEFAULT_CONFIG:log.retention.hours=168"},
		{"log.retention.hours", "24", kmsg.ConfigSourceStaticBrokerConfig, true,
			"STATIC_BROKER_CONFIG:log.retention.hours=24,DEFAULT_CONFIG:log.retention.hours=168"},
		{"log.retention.minutes", "null", kmsg.ConfigSourceDefaultConfig, true, ""},
		{"num.partitions", "3", kmsg.ConfigSourceStaticBrokerConfig, true,
			"STATIC_BROKER_CONFIG:num.partitions=3,DEFAULT_CONFIG:num.partitions=1"},
		{"message.max.bytes", "9000", kmsg.ConfigSourceDynamicDefaultBrokerConfig, false,
			"DYNAMIC_DEFAULT_BROKER_CONFIG:message.max.bytes=9000,DEFAULT_CONFIG:message.max.bytes=1048588"},
		{"broker.rack", "null", kmsg.ConfigSourceDefaultConfig, true, ""},
		{"password.encoder.secret", "null", kmsg.ConfigSourceStaticBrokerConfig, true,
			"STATIC_BROKER_CONFIG:password.encoder.secret=null"},
	}
	for _, tt := range tests {
		c := find(t, cs, tt.name)
		if val(c.Value) != tt.value || c.Source != tt.src || c.ReadOnly != tt.readOnly || synString(c.ConfigSynonyms) != tt.syns {
			t.Errorf("%s = %s %v ro=%v [%s]\nwant %s %v ro=%v [%s]", tt.name, val(c.Value), c.Source, c.ReadOnly, synString(c.ConfigSynonyms),
				tt.value, tt.src, tt.readOnly, tt.syns)
		}
	}
	if c := find(t, cs, "password.encoder.secret"); !c.IsSensitive || c.ConfigType != kmsg.ConfigTypePassword {
		t.Errorf("password: sensitive=%v type=%v", c.IsSensitive, c.ConfigType)
	}

	def := DescribeBrokerDefault(r, DescribeOptions{IncludeSynonyms: true, Version: 1})
	if len(def) != 2 {
		t.Fatalf("default resource: %d configs, want 2", len(def))
	}
	c := find(t, def, "log.retention.ms")
	if val(c.Value) != "1000" || c.Source != kmsg.ConfigSourceDynamicDefaultBrokerConfig ||
		synString(c.ConfigSynonyms) != "DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=1000" {
		t.Errorf("default resource log.retention.ms = %s %v [%s]", val(c.Value), c.Source, synString(c.ConfigSynonyms))
	}
}
