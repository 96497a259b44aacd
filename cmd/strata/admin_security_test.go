package main

import (
	"crypto/x509/pkix"
	"strings"
	"testing"

	"strata/internal/testenv"
)

// strata admin reaches a broker whose only listener is SASL_SSL (PLAIN,
// client certificates required) through a --command-config file with
// Kafka's client configs, or $STRATA_COMMAND_CONFIG; without one, or with
// a wrong password, it fails in one line rather than hanging.
func TestAdminCommandConfig(t *testing.T) {
	ca := testenv.NewCA(t, "strata-admin-ca")
	dir := t.TempDir()
	keystore := testenv.WriteFile(t, dir, "broker.pem", ca.Server(t, "broker").PEM())
	truststore := testenv.WriteFile(t, dir, "ca.pem", ca.PEM)
	client := testenv.WriteFile(t, dir, "client.pem", ca.Client(t, pkix.Name{CommonName: "admin-tool"}).PEM())
	b := testenv.StartBroker(t, testenv.BrokerOptions{Sets: []string{
		"listeners=SASL_SSL://127.0.0.1:0",
		"sasl.enabled.mechanisms=PLAIN",
		"sasl.mechanism.inter.broker.protocol=PLAIN",
		`listener.name.sasl_ssl.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="s3cret" user_admin="s3cret";`,
		"ssl.keystore.location=" + keystore,
		"ssl.truststore.location=" + truststore,
		"ssl.client.auth=required",
	}})
	addr := b.Addr()
	jaas := `sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="%s";`
	write := func(name, password string, extra ...string) string {
		lines := append([]string{"security.protocol=SASL_SSL", "sasl.mechanism=PLAIN", strings.Replace(jaas, "%s", password, 1),
			"ssl.truststore.type=PEM", "ssl.truststore.location=" + truststore, "ssl.keystore.type=PEM", "ssl.keystore.location=" + client}, extra...)
		return testenv.WriteFile(t, dir, name, []byte(strings.Join(lines, "\n")+"\n"))
	}
	good, wrong := write("admin.properties", "s3cret"), write("wrong.properties", "guess")
	typo := write("typo.properties", "s3cret", "sasl.mechansim=PLAIN")

	wantRun(t, "create with --command-config", admin(t, addr, "--command-config", good, "create", "secured", "-p", "2"), 0, []string{"created secured"}, nil)
	r := strataCLI(t, []string{"STRATA_COMMAND_CONFIG=" + good}, "admin", "--bootstrap", addr, "topics")
	wantRun(t, "topics with $STRATA_COMMAND_CONFIG", r, 0, []string{"secured\n"}, nil)
	wantRun(t, "a wrong password", admin(t, addr, "--command-config", wrong, "topics"), 1, nil, []string{"SASL"})
	wantRun(t, "a misspelt config", admin(t, addr, "--command-config", typo, "topics"), 1, nil, []string{"sasl.mechansim is not a client config"})
	wantRun(t, "a missing file", admin(t, addr, "--command-config", dir+"/none.properties", "topics"), 1, nil, []string{"command config"})
}

// The command config's mistakes are named before anything is dialled.
func TestCommandConfigRefusals(t *testing.T) {
	for _, c := range []struct {
		props map[string]string
		want  string
	}{
		{map[string]string{"security.protocol": "SASL_PLAINTEXT"}, "needs sasl.jaas.config"},
		{map[string]string{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI", "sasl.jaas.config": `x required username="a" password="b";`}, "sasl.mechanism=GSSAPI"},
		{map[string]string{"security.protocol": "PLAINTEXT", "sasl.mechanism": "PLAIN"}, "does not use SASL"},
		{map[string]string{"security.protocol": "TLS"}, "security.protocol=TLS"},
		{map[string]string{"security.protocol": "SSL", "ssl.truststore.type": "JKS"}, "PEM only"},
		{map[string]string{"security.protocol": "SSL", "ssl.keystore.key": "x"}, "go together"},
		{map[string]string{"security.protocol": "SSL", "ssl.truststore.certificates": "not a pem"}, "no PEM certificate"},
		{map[string]string{"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "dns"}, "want https or empty"},
	} {
		if _, err := securityOptsFrom(c.props); err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: %v, want one line with %q", c.props, err, c.want)
		}
	}
	if opts, err := securityOptsFrom(map[string]string{"security.protocol": "SSL"}); err != nil || len(opts) != 1 {
		t.Errorf("SSL with the system's roots: %d options, %v", len(opts), err)
	}
}
