package compat

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"strata/internal/testenv"
)

// The Java program uses the Kafka version the bench runs against.
func TestJavaKafkaVersionMatchesBench(t *testing.T) {
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`<kafka.version>(.*)</kafka.version>`)
	version := func(path string) string {
		data, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			t.Fatal(err)
		}
		m := re.FindSubmatch(data)
		if m == nil {
			t.Fatalf("%s has no kafka.version", path)
		}
		return string(m[1])
	}
	if a, b := version("compat/java/pom.xml"), version("bench/kafka/pom.xml"); a != b {
		t.Errorf("compat/java/pom.xml kafka.version %s, bench/kafka/pom.xml %s", a, b)
	}
}

// Every declared cell names a known client and feature.
func TestDeclarationsName(t *testing.T) {
	known := map[string]bool{toolFeature: true}
	for _, f := range append(features, secFeatures...) {
		known[f.Key] = true
	}
	for c := range expectedFailures {
		if clientByKey(c.client) == nil || !known[c.feature] {
			t.Errorf("expectedFailures names %v", c)
		}
	}
	for _, c := range clients {
		for f := range c.NA {
			if !known[f] || f == toolFeature {
				t.Errorf("%s: NA names feature %q", c.Key, f)
			}
		}
		if !c.Tool && c.From == "" {
			t.Errorf("%s: no From (where its version comes from)", c.Key)
		}
		if _, na := c.NA["transactions"]; !na && !c.Tool && txnTopic(c.Key) == "" {
			t.Errorf("%s: runs the transactions check but has no txnTopic", c.Key)
		}
	}
}

// Problems holds the security section to the same rules as the rest: a
// client of the section must run each of its features or declare it not
// applicable, and a client outside it must not report one.
func TestProblemsSecurity(t *testing.T) {
	full := func() *Matrix {
		m := &Matrix{Versions: map[string]string{}, Outcomes: map[cell]Outcome{}}
		for _, c := range clients {
			m.Versions[c.Key] = "1"
			for _, f := range c.features() {
				if _, na := c.NA[f]; na {
					continue
				}
				m.Outcomes[cell{c.Key, f}] = Outcome{Status: Pass}
			}
		}
		return m
	}
	if p := full().Problems(); len(p) != 0 {
		t.Fatalf("a full matrix has problems: %q", p)
	}
	m := full()
	delete(m.Outcomes, cell{"kafkajs", "sec-mtls"})
	m.Outcomes[cell{"franz-go", "sec-plain"}] = Outcome{Status: Fail, Detail: "SASL_AUTHENTICATION_FAILED"}
	m.Outcomes[cell{"kafka-go", "sec-oauthbearer"}] = Outcome{Status: Pass}
	m.Outcomes[cell{"kafka-topics", "sec-tls"}] = Outcome{Status: Pass}
	want := []string{
		"franz-go sec-plain: FAIL: SASL_AUTHENTICATION_FAILED",
		"kafka-go sec-oauthbearer: declared not applicable",
		"kafka-topics reported sec-tls PASS, not one of its features",
		"kafkajs sec-mtls: not run",
	}
	got := m.Problems()
	if len(got) != len(want) {
		t.Fatalf("problems %q, want %d", got, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(got[i], w) {
			t.Errorf("problem %d = %q, want it to start with %q", i, got[i], w)
		}
	}
	if doc := m.Render(); !strings.Contains(doc, "| SASL_SSL: PLAIN | pass | **FAIL** |") {
		t.Errorf("the security table does not show franz-go's PLAIN failure:\n%s", doc)
	}
}

// The transactions check's verdict on what a read_committed reader read:
// the committed records pass; an aborted one, a missing one or a
// duplicate fail.
func TestTxnValues(t *testing.T) {
	if err := checkTxnValues(txnCommitted()); err != nil {
		t.Fatalf("the committed records: %v", err)
	}
	for name, got := range map[string][]string{
		"aborted":   append(txnCommitted(), "a-3"),
		"fenced":    append(txnCommitted(), "z-0"),
		"missing":   txnCommitted()[1:],
		"duplicate": append(txnCommitted(), "c-0"),
	} {
		if err := checkTxnValues(got); err == nil {
			t.Errorf("%s: passed", name)
		}
	}
}
