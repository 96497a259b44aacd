package config

import (
	"strings"
	"testing"
)

// Configs whose names say they hold a secret are of type PASSWORD, so that
// DescribeConfigs answers them null with is_sensitive and the bucket's
// snapshot leaves them out. A config added with a secret in a STRING would
// fail here.
func TestSecretConfigsArePasswords(t *testing.T) {
	secret := func(name string) bool {
		return strings.Contains(name, "password") || strings.Contains(name, "secret") ||
			strings.HasSuffix(name, "jaas.config") || strings.HasSuffix(name, "keystore.key")
	}
	n := 0
	for _, defs := range [][]*Def{BrokerDefs(), TopicDefs()} {
		for _, d := range defs {
			if !secret(d.Name) {
				continue
			}
			n++
			if !d.Sensitive() || !SensitiveName(d.Name) {
				t.Errorf("%s is of type %v, want PASSWORD (sensitive)", d.Name, d.Type)
			}
		}
	}
	if n == 0 {
		t.Fatal("no secret config found; password.encoder.secret at least is one")
	}
}

func TestSensitiveName(t *testing.T) {
	for name, want := range map[string]bool{
		"password.encoder.secret":                       true,
		"log.retention.ms":                              false,
		"retention.ms":                                  false,
		"min.insync.replicas":                           false,
		"listener.name.internal.min.insync.replicas":    false, // a known non-password config
		"listener.name.sasl_ssl.plain.sasl.jaas.config": true,
		"listener.name.ssl.ssl.keystore.password":       true,
		"listener.name.ssl.password.encoder.secret":     true,
		"sasl.jaas.config":                              true, // unknown to Strata: may be a secret
		"some.config.strata.does.not.know":              true,
		"listener.name.":                                true,
		"listener.name.x":                               true,
	} {
		if got := SensitiveName(name); got != want {
			t.Errorf("SensitiveName(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestWithoutSensitive(t *testing.T) {
	in := map[string]string{"log.retention.ms": "1000", "password.encoder.secret": "s3cret", "listener.name.ssl.ssl.key.password": "pw"}
	out := WithoutSensitive(in)
	if len(out) != 1 || out["log.retention.ms"] != "1000" {
		t.Fatalf("WithoutSensitive: %v", out)
	}
	if len(in) != 3 {
		t.Fatalf("WithoutSensitive changed its argument: %v", in)
	}
	plain := map[string]string{"retention.ms": "5"}
	if out := WithoutSensitive(plain); len(out) != 1 || out["retention.ms"] != "5" {
		t.Fatalf("WithoutSensitive of plain configs: %v", out)
	}
	if out := WithoutSensitive(nil); len(out) != 0 {
		t.Fatalf("WithoutSensitive(nil): %v", out)
	}
}
