package config

import (
	"strings"
	"testing"
)

func TestLoadLifecycleAndReconciliation(t *testing.T) {
	b, err := Load(map[string]string{})
	if err != nil {
		t.Fatal(err)
	}
	if b.RemoteLogStorageLifecycleRulesEnable || b.RemoteLogStorageLifecycleMarginMs != 86400000 ||
		b.RemoteLogReconciliationIntervalMs != 3600000 || b.RemoteLogReconciliationGraceMs != 3600000 {
		t.Fatalf("defaults: %v %v %v %v", b.RemoteLogStorageLifecycleRulesEnable, b.RemoteLogStorageLifecycleMarginMs,
			b.RemoteLogReconciliationIntervalMs, b.RemoteLogReconciliationGraceMs)
	}
	b, err = Load(map[string]string{
		"remote.log.storage.lifecycle.rules.enable": "true", "remote.log.storage.lifecycle.margin.ms": "0",
		"remote.log.reconciliation.interval.ms": "-1", "remote.log.reconciliation.grace.ms": "0",
	})
	if err != nil || !b.RemoteLogStorageLifecycleRulesEnable || b.RemoteLogStorageLifecycleMarginMs != 0 ||
		b.RemoteLogReconciliationIntervalMs != -1 || b.RemoteLogReconciliationGraceMs != 0 {
		t.Fatalf("set: %+v, %v", b, err)
	}
	for _, tt := range []struct {
		props map[string]string
		want  string
	}{
		{map[string]string{"remote.log.reconciliation.interval.ms": "0"}, "remote.log.reconciliation.interval.ms: must be -1 (disabled) or >= 1, got 0"},
		{map[string]string{"remote.log.reconciliation.interval.ms": "-2"}, "remote.log.reconciliation.interval.ms: must be -1 (disabled) or >= 1, got -2"},
		{map[string]string{"remote.log.reconciliation.grace.ms": "-1"}, "remote.log.reconciliation.grace.ms: must be >= 0, got -1"},
		{map[string]string{"remote.log.storage.lifecycle.margin.ms": "-1"}, "remote.log.storage.lifecycle.margin.ms: must be >= 0, got -1"},
		{map[string]string{"remote.log.storage.lifecycle.rules.enable": "on"}, "remote.log.storage.lifecycle.rules.enable: expected true or false"},
	} {
		_, err := Load(tt.props)
		if err == nil || !strings.Contains(err.Error(), tt.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Load(%v) error = %v, want one line containing %q", tt.props, err, tt.want)
		}
	}
	hand := *b
	hand.RemoteLogReconciliationIntervalMs = 0
	if err := hand.Validate(); err == nil || !strings.Contains(err.Error(), "remote.log.reconciliation.interval.ms") {
		t.Errorf("hand-built interval 0: %v", err)
	}
}
