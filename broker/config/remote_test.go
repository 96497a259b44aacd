package config

import "testing"

// Kafka's rules for tiered topics: no compaction, copy-disable retention
// identity, and no turning remote storage off without deleting its data.
func TestTieredTopicRules(t *testing.T) {
	r := mustLoad(t, map[string]string{"remote.log.storage.system.enable": "true"}).Resolver(nil)
	on := map[string]string{"remote.storage.enable": "true"}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	for _, c := range []struct {
		m   map[string]string
		msg string
	}{
		{with(on), ""},
		{with(on, "cleanup.policy", "delete"), ""},
		{with(on, "cleanup.policy", ""), ""},
		{with(on, "cleanup.policy", "compact"), "Remote log storage only supports topics with cleanup.policy=delete or cleanup.policy being an empty list."},
		{with(on, "cleanup.policy", "compact,delete"), "Remote log storage only supports topics with cleanup.policy=delete"},
		{map[string]string{"cleanup.policy": "compact"}, ""},
		{with(on, "remote.log.copy.disable", "true"), ""},
		{with(on, "remote.log.copy.disable", "true", "retention.ms", "1000", "local.retention.ms", "1000"), ""},
		{with(on, "remote.log.copy.disable", "true", "retention.ms", "1000", "local.retention.ms", "500"),
			"When `remote.log.copy.disable` is set to true, the `local.retention.ms` and `retention.ms` must be set to the identical value"},
		{with(on, "remote.log.copy.disable", "true", "retention.bytes", "1000", "local.retention.bytes", "500"),
			"the `local.retention.bytes` and `retention.bytes` must be set to the identical value"},
	} {
		err := r.ValidateTopic(c.m)
		switch {
		case c.msg == "" && err != nil:
			t.Errorf("%v: %v", c.m, err)
		case c.msg != "" && (err == nil || !isInvalidConfig(err) || !contains(err.Error(), c.msg)):
			t.Errorf("%v: got %v, want INVALID_CONFIG %q", c.m, err, c.msg)
		}
	}

	off := map[string]string{"remote.storage.enable": "false"}
	for _, c := range []struct {
		cur, next map[string]string
		ok        bool
	}{
		{on, off, false},
		{on, map[string]string{}, false},
		{on, with(off, "remote.log.delete.on.disable", "true"), true},
		{on, with(on, "remote.log.copy.disable", "true"), true},
		{map[string]string{}, off, true},
		{off, on, true},
	} {
		err := r.ValidateTopicUpdate(c.cur, c.next)
		if c.ok != (err == nil) {
			t.Errorf("%v -> %v: %v", c.cur, c.next, err)
		}
		if err != nil && (!isInvalidConfig(err) || !contains(err.Error(), "It is invalid to disable remote storage without deleting remote data. If you want to keep the remote data and turn to read only, please set `remote.storage.enable=true,remote.log.copy.disable=true`.")) {
			t.Errorf("error %v", err)
		}
	}
}
