package config

import (
	"strings"
	"testing"
)

func TestParseJAAS(t *testing.T) {
	j, err := ParseJAAS(`org.apache.kafka.common.security.plain.PlainLoginModule required
		username="admin" password="a \"b\" \\c;=" user_admin="x" user_bob=plainword;`)
	if err != nil {
		t.Fatal(err)
	}
	if j.LoginModule != "org.apache.kafka.common.security.plain.PlainLoginModule" || j.Flag != "required" {
		t.Fatalf("module %q flag %q", j.LoginModule, j.Flag)
	}
	if got := j.Options["password"]; got != `a "b" \c;=` {
		t.Fatalf("password = %q", got)
	}
	if u := j.Users(); len(u) != 2 || u["admin"] != "x" || u["bob"] != "plainword" {
		t.Fatalf("users = %v", u)
	}
	for _, bad := range []string{
		``,
		`Module required username="a"`,   // no ';'
		`Module mandatory username="a";`, // bad flag
		`Module required username="a;`,   // unterminated quote
		`Module required username;`,      // no value
		`Module required a="1"; Other required b="2";`, // two modules
	} {
		if _, err := ParseJAAS(bad); err == nil {
			t.Errorf("ParseJAAS(%q) = nil error", bad)
		}
	}
}

func TestSASLListenerConfig(t *testing.T) {
	base := map[string]string{
		"listeners": "SASL_PLAINTEXT://127.0.0.1:0",
		"log.dirs":  t.TempDir(),
	}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for k, v := range base {
			m[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	jaas := `org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="p" user_admin="p";`
	for _, tc := range []struct {
		props map[string]string
		err   string
	}{
		{with(), "GSSAPI is not served"},
		{with("sasl.enabled.mechanisms", "PLAIN"), "PLAIN needs listener.name.sasl_plaintext.plain.sasl.jaas.config"},
		{with("sasl.enabled.mechanisms", "SCRAM-SHA-256"), "sasl.mechanism.inter.broker.protocol: GSSAPI is not enabled"},
		{with("sasl.enabled.mechanisms", "PLAIN", "sasl.mechanism.inter.broker.protocol", "PLAIN",
			"listener.name.sasl_plaintext.plain.sasl.jaas.config", "broken"), "plain.sasl.jaas.config"},
		{with("sasl.enabled.mechanisms", "SCRAM-SHA-512", "sasl.mechanism.inter.broker.protocol", "SCRAM-SHA-512"),
			"set them"},
		{with("sasl.enabled.mechanisms", "PLAIN,OAUTHBEARER", "sasl.mechanism.inter.broker.protocol", "PLAIN",
			"listener.name.sasl_plaintext.plain.sasl.jaas.config", jaas), "OAUTHBEARER needs sasl.oauthbearer.jwks.endpoint.url"},
		{with("sasl.enabled.mechanisms", "PLAIN,OAUTHBEARER", "sasl.mechanism.inter.broker.protocol", "PLAIN",
			"listener.name.sasl_plaintext.plain.sasl.jaas.config", jaas, "sasl.oauthbearer.jwks.endpoint.url", "https://idp.example/jwks",
			"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class", "com.example.Other"), "must be one of"},
		{with("sasl.enabled.mechanisms", "PLAIN,OAUTHBEARER", "sasl.mechanism.inter.broker.protocol", "PLAIN",
			"listener.name.sasl_plaintext.plain.sasl.jaas.config", jaas, "sasl.oauthbearer.jwks.endpoint.url", "https://idp.example/jwks",
			"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class", "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"), ""},
	} {
		b, err := Load(tc.props)
		if tc.err == "" {
			if err != nil {
				t.Fatalf("Load(%v) = %v", tc.props, err)
			}
			c, err := b.Resolver(nil).SASL("SASL_PLAINTEXT")
			if err != nil || c.JAAS["PLAIN"].Users()["admin"] != "p" {
				t.Fatalf("SASL config = %+v, %v", c, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.err) || strings.Contains(err.Error(), "\n") {
			t.Errorf("Load(%v) = %v, want one line with %q", tc.props, err, tc.err)
		}
	}
	// The JAAS config is a password: DescribeConfigs never shows it.
	if !SensitiveName("listener.name.sasl_plaintext.plain.sasl.jaas.config") || !SensitiveName("listener.name.x.scram-sha-256.sasl.jaas.config") {
		t.Fatal("a listener's sasl.jaas.config is not sensitive")
	}
	if d, ok := BrokerDef("listener.name.x.sasl.enabled.mechanisms"); !ok || d.Sensitive() {
		t.Fatal("listener.name.x.sasl.enabled.mechanisms is not a known, non-sensitive config")
	}
}
