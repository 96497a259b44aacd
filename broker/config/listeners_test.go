package config

import (
	"testing"
)

func TestListeners(t *testing.T) {
	b, err := Load(map[string]string{
		"listeners":                                  "CLIENT://:9093,INTERNAL://10.0.0.1:9094,CONTROL://10.0.0.1:9095",
		"advertised.listeners":                       "CLIENT://kafka.example:443",
		"listener.security.protocol.map":             "CLIENT:SSL,INTERNAL:SSL,CONTROL:PLAINTEXT",
		"inter.broker.listener.name":                 "internal",
		"control.plane.listener.name":                "CONTROL",
		"ssl.keystore.location":                      "/k.pem",
		"ssl.client.auth":                            "required",
		"ssl.truststore.location":                    "/ca.pem",
		"listener.name.client.ssl.client.auth":       "none",
		"listener.name.client.ssl.keystore.location": "/client-facing.pem",
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := b.AdvertisedListeners[0]; got.Host != "kafka.example" || got.Port != 443 || got.Protocol != SSL {
		t.Fatalf("advertised CLIENT = %+v", got)
	}
	if got := b.AdvertisedListeners[1]; got.Host != "10.0.0.1" || got.Port != 9094 || got.Protocol != SSL {
		t.Fatalf("advertised INTERNAL (not in advertised.listeners) = %+v", got)
	}
	if n, p := b.InterBroker(); n != "INTERNAL" || p != SSL {
		t.Fatalf("InterBroker = %s %s", n, p)
	}
	if n, p := b.ControlPlane(); n != "CONTROL" || p != PLAINTEXT {
		t.Fatalf("ControlPlane = %s %s", n, p)
	}
	r := b.Resolver(map[string]map[string]string{"0": {"listener.name.internal.ssl.keystore.location": "/rotated.pem"}})
	if c := r.SSL("CLIENT"); c.ClientAuth != "none" || c.KeystoreLocation != "/client-facing.pem" || c.TruststoreLocation != "/ca.pem" {
		t.Fatalf("SSL(CLIENT) = %+v", c)
	}
	if c := r.SSL("INTERNAL"); c.ClientAuth != "required" || c.KeystoreLocation != "/rotated.pem" || len(c.EnabledProtocols) != 2 || c.EndpointIdentification != "https" {
		t.Fatalf("SSL(INTERNAL) = %+v", c)
	}

	// One listener of any name is the inter-broker one when nothing says.
	b, err = Load(map[string]string{"listeners": "SSL://:9093", "ssl.keystore.location": "/k"})
	if err != nil {
		t.Fatal(err)
	}
	if n, p := b.InterBroker(); n != "SSL" || p != SSL {
		t.Fatalf("InterBroker = %s %s", n, p)
	}
	// The defaults: one PLAINTEXT listener.
	b, err = Load(nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, p := b.InterBroker(); n != "PLAINTEXT" || p != PLAINTEXT || b.Listeners[0].Protocol != PLAINTEXT {
		t.Fatalf("default InterBroker = %s %s", n, p)
	}
}

func TestListenerKeysAlterable(t *testing.T) {
	m, err := AlterBrokerConfigs(true, nil)
	if err != nil || len(m) != 0 {
		t.Fatal(m, err)
	}
	if _, err := finishBroker(true, map[string]string{"listener.name.internal.ssl.keystore.location": "/new.pem"}); err != nil {
		t.Fatalf("per-broker keystore update refused: %v", err)
	}
	if _, err := finishBroker(false, map[string]string{"listener.name.internal.ssl.keystore.location": "/new.pem"}); err == nil {
		t.Fatal("cluster-wide keystore update accepted")
	}
	if _, err := finishBroker(true, map[string]string{"listener.name.internal.ssl.client.auth": "none"}); err == nil {
		t.Fatal("ssl.client.auth altered dynamically")
	}
}

func TestPrincipalRules(t *testing.T) {
	rules, err := ParsePrincipalRules(`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/, RULE:^CN=([^,]*),O=(.*)$/$1@$2/L,
DEFAULT`)
	if err != nil {
		t.Fatal(err)
	}
	for dn, want := range map[string]string{
		"CN=kafka1,OU=ServiceUsers,O=Example": "kafka1",
		"CN=Alice,O=Example":                  "alice@example",
		"CN=bob,OU=eng,O=x,C=US":              "CN=bob,OU=eng,O=x,C=US",
	} {
		if got, err := rules.Apply(dn); err != nil || got != want {
			t.Errorf("Apply(%q) = %q, %v; want %q", dn, got, err, want)
		}
	}
	only, err := ParsePrincipalRules(`RULE:^CN=([^,]*)$/$1/U`)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := only.Apply("CN=alice"); got != "ALICE" {
		t.Errorf("U: %q", got)
	}
	if _, err := only.Apply("CN=alice,O=x"); err == nil {
		t.Error("a name no rule matches was mapped")
	}
	if _, err := ParsePrincipalRules("RULE:[/x/"); err == nil {
		t.Error("bad regexp accepted")
	}
}
