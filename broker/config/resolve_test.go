package config

import (
	"math"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/plog"
)

func mustLoad(t *testing.T, props map[string]string) *Broker {
	t.Helper()
	b, err := Load(props)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestTopicValuePrecedence(t *testing.T) {
	const (
		dyn  = kmsg.ConfigSourceDynamicBrokerConfig
		ddef = kmsg.ConfigSourceDynamicDefaultBrokerConfig
		stat = kmsg.ConfigSourceStaticBrokerConfig
		def  = kmsg.ConfigSourceDefaultConfig
		top  = kmsg.ConfigSourceDynamicTopicConfig
	)
	tests := []struct {
		name                   string
		static, cluster, local map[string]string
		overrides              map[string]string
		key                    string
		want                   string
		src                    kmsg.ConfigSource
	}{
		{name: "kafka default", key: "retention.ms", want: "604800000", src: def},
		{name: "hours", static: map[string]string{"log.retention.hours": "24"}, key: "retention.ms", want: "86400000", src: stat},
		{name: "minutes over hours", static: map[string]string{"log.retention.hours": "24", "log.retention.minutes": "10"}, key: "retention.ms", want: "600000", src: stat},
		{name: "ms over minutes", static: map[string]string{"log.retention.ms": "5", "log.retention.minutes": "10", "log.retention.hours": "1"}, key: "retention.ms", want: "5", src: stat},
		{name: "negative retention is unlimited", static: map[string]string{"log.retention.hours": "-3"}, key: "retention.ms", want: "-1", src: stat},
		{name: "dynamic default over static", static: map[string]string{"log.retention.ms": "5"}, cluster: map[string]string{"log.retention.ms": "6"}, key: "retention.ms", want: "6", src: ddef},
		{name: "per broker over dynamic default", cluster: map[string]string{"log.retention.ms": "6"}, local: map[string]string{"log.retention.ms": "7"}, key: "retention.ms", want: "7", src: dyn},
		{name: "static ms over dynamic hours (unit order first)", static: map[string]string{"log.retention.ms": "5"}, local: map[string]string{"log.retention.hours": "1"}, key: "retention.ms", want: "5", src: stat},
		{name: "topic over all", local: map[string]string{"log.retention.ms": "7"}, overrides: map[string]string{"retention.ms": "-1"}, key: "retention.ms", want: "-1", src: top},
		{name: "roll hours", static: map[string]string{"log.roll.hours": "2"}, key: "segment.ms", want: "7200000", src: stat},
		{name: "roll ms", static: map[string]string{"log.roll.hours": "2", "log.roll.ms": "1000"}, key: "segment.ms", want: "1000", src: stat},
		{name: "flush scheduler stands in for flush.ms", static: map[string]string{"log.flush.scheduler.interval.ms": "50"}, key: "flush.ms", want: "50", src: stat},
		{name: "renamed synonym", static: map[string]string{"message.max.bytes": "2000"}, key: "max.message.bytes", want: "2000", src: stat},
		{name: "topic canonical form", overrides: map[string]string{"cleanup.policy": " compact , delete "}, key: "cleanup.policy", want: "compact,delete", src: top},
		{name: "no synonym", key: "remote.storage.enable", want: "false", src: def},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := mustLoad(t, tt.static)
			r := b.Resolver(map[string]map[string]string{"": tt.cluster, "0": tt.local, "1": {"log.retention.ms": "99"}})
			got, src := r.TopicValue(tt.overrides, tt.key)
			if got != tt.want || src != tt.src {
				t.Fatalf("TopicValue(%s) = %s (%v), want %s (%v)", tt.key, got, src, tt.want, tt.src)
			}
		})
	}
}

func TestLogConfigDefaults(t *testing.T) {
	b := mustLoad(t, nil)
	got := LogConfig(b.Resolver(nil), nil)
	want := plog.DefaultConfig()
	// Kafka 4 changed message.timestamp.after.max.ms to one hour.
	want.MessageTimestampAfterMaxMs = 3600000
	if got != want {
		t.Fatalf("LogConfig = %+v\nwant %+v", got, want)
	}
}

func TestTopicSettings(t *testing.T) {
	b := mustLoad(t, map[string]string{
		"log.retention.bytes":              "1000",
		"log.message.timestamp.type":       "LogAppendTime",
		"log.segment.bytes":                "1048576",
		"remote.log.storage.system.enable": "true",
	})
	r := b.Resolver(map[string]map[string]string{"": {"min.insync.replicas": "2"}})
	s := r.Topic(map[string]string{
		"remote.storage.enable": "true",
		"local.retention.ms":    "60000",
		"cleanup.policy":        "compact",
		"flush.messages":        "1",
	})
	if s.Log.RetentionBytes != 1000 || s.Log.TimestampType != plog.LogAppendTime || s.Log.SegmentBytes != 1<<20 ||
		s.Log.FlushMessages != 1 || s.Log.FlushMs != math.MaxInt64 {
		t.Errorf("log config %+v", s.Log)
	}
	if s.MinInsyncReplicas != 2 || !s.RemoteStorageEnable || s.LocalRetentionMs != 60000 ||
		s.LocalRetentionBytes != 1000 || !s.CleanupCompact() || s.CleanupDelete() || s.CompressionType != "producer" ||
		s.MinCleanableDirtyRatio != 0.5 {
		t.Errorf("settings %+v", s)
	}
}

func TestValidateTopic(t *testing.T) {
	on := mustLoad(t, map[string]string{"remote.log.storage.system.enable": "true"}).Resolver(nil)
	off := mustLoad(t, nil).Resolver(nil)
	tests := []struct {
		r    Resolver
		m    map[string]string
		want string // "" = valid
	}{
		{off, map[string]string{"retention.ms": "-1", "segment.bytes": "1024"}, ""},
		{off, map[string]string{"retention.msx": "1"}, "Unknown topic config name: retention.msx"},
		{off, map[string]string{"retention.ms": "-2"}, `Invalid value "-2" for configuration retention.ms: must be >= -1, got -2`},
		{off, map[string]string{"message.timestamp.type": "Now"}, "message.timestamp.type: must be one of"},
		{off, map[string]string{"remote.storage.enable": "true"}, "Tiered Storage functionality is disabled in the broker"},
		{on, map[string]string{"remote.storage.enable": "true", "retention.ms": "1000", "local.retention.ms": "2000"}, "Value must not be more than retention.ms property value: 1000"},
		{on, map[string]string{"remote.storage.enable": "true", "retention.bytes": "1000", "local.retention.bytes": "-1"}, "Value must not be -1 as retention.bytes value is set as 1000."},
		{on, map[string]string{"remote.storage.enable": "true", "local.retention.ms": "1000"}, ""},
		{off, map[string]string{"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, "min.compaction.lag.ms (10) > max.compaction.lag.ms (5)"},
		{off, map[string]string{"leader.replication.throttled.replicas": "0:1,1:2"}, ""},
		{off, map[string]string{"follower.replication.throttled.replicas": "x"}, "partition:broker"},
	}
	for _, tt := range tests {
		err := tt.r.ValidateTopic(tt.m)
		if tt.want == "" {
			if err != nil {
				t.Errorf("ValidateTopic(%v) = %v, want nil", tt.m, err)
			}
			continue
		}
		if err == nil || !contains(err.Error(), tt.want) {
			t.Errorf("ValidateTopic(%v) = %v, want %q", tt.m, err, tt.want)
			continue
		}
		if !isInvalidConfig(err) {
			t.Errorf("ValidateTopic(%v) = %v, not kerr.InvalidConfig", tt.m, err)
		}
	}
	if err := ValidateTopicConfigs(map[string]string{"segment.ms": "0"}); err == nil || !isInvalidConfig(err) {
		t.Errorf("ValidateTopicConfigs(segment.ms=0) = %v", err)
	}
}

func TestEffectiveBroker(t *testing.T) {
	b := mustLoad(t, map[string]string{"message.max.bytes": "2000"})
	r := b.Resolver(map[string]map[string]string{"": {"message.max.bytes": "3000"}})
	if r.Int("message.max.bytes") != 3000 {
		t.Errorf("message.max.bytes = %d", r.Int("message.max.bytes"))
	}
	if v, src := r.Effective("log.retention.ms"); v != nil || src != kmsg.ConfigSourceDefaultConfig {
		t.Errorf("log.retention.ms = %v %v, want nil DEFAULT_CONFIG", v, src)
	}
	if !r.Bool("auto.create.topics.enable") || r.String("compression.type") != "producer" {
		t.Error("defaults")
	}
}
