package config

import (
	"sort"
	"strconv"
	"strings"

	"strata/broker/plog"
)

// ValidateTopicConfigs checks topic overrides (CreateTopics configs,
// AlterConfigs on a TOPIC): every key must be a topic config and every
// value valid for it. The error is an *Error wrapping kerr.InvalidConfig,
// naming the first bad key in sorted order.
func ValidateTopicConfigs(m map[string]string) error {
	_, err := canonicalTopicConfigs(m)
	return err
}

// CanonicalTopicConfigs validates like ValidateTopicConfigs and returns the
// overrides in Kafka's string form, ready to store.
func CanonicalTopicConfigs(m map[string]string) (map[string]string, error) {
	return canonicalTopicConfigs(m)
}

func canonicalTopicConfigs(m map[string]string) (map[string]string, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := make(map[string]string, len(m))
	for _, k := range keys {
		d, ok := TopicDef(k)
		if !ok {
			return nil, invalidConfig("Unknown topic config name: %s", k)
		}
		c, err := d.Canonical(m[k])
		if err != nil {
			return nil, invalidConfig("Invalid value %q for configuration %s", m[k], err)
		}
		out[k] = c
	}
	return out, nil
}

// ValidateTopic checks topic overrides as ValidateTopicConfigs does, then
// the rules that involve other settings, with the broker's configuration
// for what the topic does not override (Kafka's LogConfig.validate):
// remote.storage.enable needs remote.log.storage.system.enable on the
// broker and cleanup.policy delete (or empty: no compaction of tiered
// topics); local.retention.ms/bytes must not exceed retention.ms/bytes,
// and must equal them (or be -2) with remote.log.copy.disable=true;
// min.compaction.lag.ms must not exceed max.compaction.lag.ms.
func (r Resolver) ValidateTopic(m map[string]string) error {
	c, err := canonicalTopicConfigs(m)
	if err != nil {
		return err
	}
	t := r.Topic(c)
	if t.RemoteStorageEnable && !r.Bool("remote.log.storage.system.enable") {
		return invalidConfig("Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.")
	}
	if t.RemoteStorageEnable {
		if len(t.CleanupPolicy) > 0 && (len(t.CleanupPolicy) != 1 || t.CleanupPolicy[0] != "delete") {
			return invalidConfig("Remote log storage only supports topics with cleanup.policy=delete or cleanup.policy being an empty list.")
		}
		if err := localWithin("local.retention.bytes", t.localRetentionBytes, "retention.bytes", t.Log.RetentionBytes); err != nil {
			return err
		}
		if err := localWithin("local.retention.ms", t.localRetentionMs, "retention.ms", t.Log.RetentionMs); err != nil {
			return err
		}
		if t.RemoteLogCopyDisable {
			if t.localRetentionBytes != -2 && t.localRetentionBytes != t.Log.RetentionBytes {
				return invalidConfig("When `remote.log.copy.disable` is set to true, the `local.retention.bytes` and `retention.bytes` must be set to the identical value because there will be no more logs copied to the remote storage.")
			}
			if t.localRetentionMs != -2 && t.localRetentionMs != t.Log.RetentionMs {
				return invalidConfig("When `remote.log.copy.disable` is set to true, the `local.retention.ms` and `retention.ms` must be set to the identical value because there will be no more logs copied to the remote storage.")
			}
		}
	}
	if t.MinCompactionLagMs > t.MaxCompactionLagMs {
		return invalidConfig("conflict topic config setting min.compaction.lag.ms (%d) > max.compaction.lag.ms (%d)",
			t.MinCompactionLagMs, t.MaxCompactionLagMs)
	}
	return nil
}

// ValidateTopicUpdate is the rule of an alter that involves the topic's
// current overrides as well as the new ones (Kafka's
// validateTurningOffRemoteStorageWithDelete): remote.storage.enable may go
// from true to false only with remote.log.delete.on.disable=true, which
// deletes the remote data; to keep it read only, remote.log.copy.disable
// is the switch. current and next are the overrides before and after.
func (r Resolver) ValidateTopicUpdate(current, next map[string]string) error {
	was, now := r.Topic(current), r.Topic(next)
	if was.RemoteStorageEnable && !now.RemoteStorageEnable && !now.RemoteLogDeleteOnDisable {
		return invalidConfig("It is invalid to disable remote storage without deleting remote data. " +
			"If you want to keep the remote data and turn to read only, please set `remote.storage.enable=true,remote.log.copy.disable=true`. " +
			"If you want to disable remote storage and delete all remote data, please set `remote.storage.enable=false,remote.log.delete.on.disable=true`.")
	}
	return nil
}

// localWithin is Kafka's rule for local.retention.*: -2 (use the total) is
// always fine; -1 (unlimited) needs an unlimited total; otherwise it must
// not exceed a limited total.
func localWithin(localKey string, local int64, totalKey string, total int64) error {
	switch {
	case local == -2:
		return nil
	case local == -1 && total != -1:
		return invalidConfig("Invalid value -1 for configuration %s: Value must not be -1 as %s value is set as %d.", localKey, totalKey, total)
	case total != -1 && local > total:
		return invalidConfig("Invalid value %d for configuration %s: Value must not be more than %s property value: %d", local, localKey, totalKey, total)
	}
	return nil
}

// TopicSettings are a topic's effective settings: Log for the partition
// log, the rest for the broker's handlers, replication and tiering.
type TopicSettings struct {
	Log plog.Config

	MinInsyncReplicas           int32
	CleanupPolicy               []string // "delete" and/or "compact"
	CompressionType             string   // producer, uncompressed, gzip, snappy, lz4, zstd
	UncleanLeaderElectionEnable bool
	SegmentJitterMs             int64
	DeleteRetentionMs           int64
	MinCompactionLagMs          int64
	MaxCompactionLagMs          int64
	MinCleanableDirtyRatio      float64

	RemoteStorageEnable      bool
	RemoteLogCopyDisable     bool
	RemoteLogDeleteOnDisable bool
	// LocalRetentionMs / LocalRetentionBytes are local.retention.* with -2
	// already replaced by retention.ms / retention.bytes; -1 = unlimited.
	LocalRetentionMs    int64
	LocalRetentionBytes int64

	localRetentionMs, localRetentionBytes int64 // as configured, -2 kept
}

// CleanupDelete reports whether cleanup.policy includes delete.
func (t TopicSettings) CleanupDelete() bool { return hasString(t.CleanupPolicy, "delete") }

// CleanupCompact reports whether cleanup.policy includes compact.
func (t TopicSettings) CleanupCompact() bool { return hasString(t.CleanupPolicy, "compact") }

func hasString(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// Topic resolves every topic setting for a topic with the given overrides
// (controller Topic.Configs): topic override, then the dynamic per-broker
// and cluster-wide broker synonyms, then static, then Kafka's default.
func (r Resolver) Topic(overrides map[string]string) TopicSettings {
	i := func(name string) int64 {
		v, _ := r.TopicValue(overrides, name)
		n, _ := strconv.ParseInt(v, 10, 64)
		return n
	}
	b := func(name string) bool {
		v, _ := r.TopicValue(overrides, name)
		return v == "true"
	}
	s := func(name string) string {
		v, _ := r.TopicValue(overrides, name)
		return v
	}
	ts := plog.CreateTime
	if s("message.timestamp.type") == "LogAppendTime" {
		ts = plog.LogAppendTime
	}
	t := TopicSettings{
		Log: plog.Config{
			SegmentBytes:                i("segment.bytes"),
			SegmentMs:                   i("segment.ms"),
			RetentionBytes:              i("retention.bytes"),
			RetentionMs:                 i("retention.ms"),
			MaxMessageBytes:             int32(i("max.message.bytes")),
			TimestampType:               ts,
			IndexIntervalBytes:          int32(i("index.interval.bytes")),
			SegmentIndexBytes:           int32(i("segment.index.bytes")),
			FlushMessages:               i("flush.messages"),
			FlushMs:                     i("flush.ms"),
			FileDeleteDelayMs:           i("file.delete.delay.ms"),
			MessageTimestampBeforeMaxMs: i("message.timestamp.before.max.ms"),
			MessageTimestampAfterMaxMs:  i("message.timestamp.after.max.ms"),
		},
		MinInsyncReplicas:           int32(i("min.insync.replicas")),
		CompressionType:             s("compression.type"),
		UncleanLeaderElectionEnable: b("unclean.leader.election.enable"),
		SegmentJitterMs:             i("segment.jitter.ms"),
		DeleteRetentionMs:           i("delete.retention.ms"),
		MinCompactionLagMs:          i("min.compaction.lag.ms"),
		MaxCompactionLagMs:          i("max.compaction.lag.ms"),
		RemoteStorageEnable:         b("remote.storage.enable"),
		RemoteLogCopyDisable:        b("remote.log.copy.disable"),
		RemoteLogDeleteOnDisable:    b("remote.log.delete.on.disable"),
		localRetentionMs:            i("local.retention.ms"),
		localRetentionBytes:         i("local.retention.bytes"),
	}
	if p := s("cleanup.policy"); p != "" {
		t.CleanupPolicy = strings.Split(p, ",")
	}
	t.MinCleanableDirtyRatio, _ = strconv.ParseFloat(s("min.cleanable.dirty.ratio"), 64)
	t.Log.Compact, t.Log.Delete = t.CleanupCompact(), t.CleanupDelete()
	t.Log.DeleteRetentionMs = t.DeleteRetentionMs
	t.Log.MinCompactionLagMs, t.Log.MaxCompactionLagMs = t.MinCompactionLagMs, t.MaxCompactionLagMs
	t.Log.MinCleanableDirtyRatio = t.MinCleanableDirtyRatio
	t.LocalRetentionMs, t.LocalRetentionBytes = t.localRetentionMs, t.localRetentionBytes
	if t.LocalRetentionMs == -2 {
		t.LocalRetentionMs = t.Log.RetentionMs
	}
	if t.LocalRetentionBytes == -2 {
		t.LocalRetentionBytes = t.Log.RetentionBytes
	}
	return t
}

// LogConfig is r.Topic(overrides).Log: the partition log's settings.
func LogConfig(r Resolver, overrides map[string]string) plog.Config {
	return r.Topic(overrides).Log
}
