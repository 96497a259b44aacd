package compat

import (
	"os"
	"path/filepath"
	"regexp"
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
		if _, na := c.NA["transactions"]; !na && !c.Tool && c.TxnError == "" {
			t.Errorf("%s: runs the transactions check but has no TxnError", c.Key)
		}
	}
}
