package config

import (
	"strings"
	"testing"
)

// The connection and request-memory limits: Kafka's names, types and
// defaults, except queued.max.request.bytes (bounded by default), and
// Kafka's cross-checks.
func TestConnectionLimitConfigs(t *testing.T) {
	b, err := Load(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if b.QueuedMaxRequestBytes != 512<<20 || b.MaxConnections != 1<<31-1 || b.MaxConnectionsPerIP != 1<<31-1 || len(b.MaxConnectionsPerIPOverrides) != 0 {
		t.Errorf("defaults: queued.max.request.bytes=%d max.connections=%d max.connections.per.ip=%d overrides=%v",
			b.QueuedMaxRequestBytes, b.MaxConnections, b.MaxConnectionsPerIP, b.MaxConnectionsPerIPOverrides)
	}
	for name, want := range map[string]struct {
		typ     string
		dynamic Dynamic
	}{
		"queued.max.request.bytes":         {"LONG", ReadOnly},
		"max.connections":                  {"INT", ClusterWide},
		"max.connections.per.ip":           {"INT", ClusterWide},
		"max.connections.per.ip.overrides": {"STRING", ClusterWide},
	} {
		d, ok := BrokerDef(name)
		if !ok {
			t.Errorf("%s: not defined", name)
			continue
		}
		if d.Type.String() != want.typ || d.Dynamic != want.dynamic {
			t.Errorf("%s: type %s dynamic %d, want %s %d", name, d.Type, d.Dynamic, want.typ, want.dynamic)
		}
	}

	b, err = Load(map[string]string{
		"queued.max.request.bytes":         "-1",
		"max.connections":                  "100",
		"max.connections.per.ip":           "0",
		"max.connections.per.ip.overrides": " 10.0.0.1:5 , broker-host:0,::1:7",
	})
	if err != nil {
		t.Fatal(err)
	}
	if b.QueuedMaxRequestBytes != -1 || b.MaxConnections != 100 || b.MaxConnectionsPerIP != 0 {
		t.Errorf("values: %d %d %d", b.QueuedMaxRequestBytes, b.MaxConnections, b.MaxConnectionsPerIP)
	}
	want := map[string]int32{"10.0.0.1": 5, "broker-host": 0, "::1": 7}
	if len(b.MaxConnectionsPerIPOverrides) != len(want) {
		t.Errorf("overrides %v, want %v", b.MaxConnectionsPerIPOverrides, want)
	}
	for k, v := range want {
		if b.MaxConnectionsPerIPOverrides[k] != v {
			t.Errorf("override %s = %d, want %d", k, b.MaxConnectionsPerIPOverrides[k], v)
		}
	}

	for _, c := range []struct {
		props map[string]string
		want  string
	}{
		{map[string]string{"queued.max.request.bytes": "1000"}, "queued.max.request.bytes: must be <= 0 (no bound) or >= socket.request.max.bytes"},
		{map[string]string{"max.connections.per.ip": "0"}, "max.connections.per.ip: can be 0 only if max.connections.per.ip.overrides is set"},
		{map[string]string{"max.connections": "-1"}, "max.connections: must be >= 0"},
		{map[string]string{"max.connections.per.ip.overrides": "host"}, "max.connections.per.ip.overrides"},
		{map[string]string{"max.connections.per.ip.overrides": "host:-1"}, "max.connections.per.ip.overrides"},
		{map[string]string{"max.connections.per.ip.overrides": ":4"}, "max.connections.per.ip.overrides"},
	} {
		_, err := Load(c.props)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Load(%v): %v, want an error containing %q", c.props, err, c.want)
		}
	}
}
