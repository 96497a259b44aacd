package deploy

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"strata/broker/config"
)

// propertiesPath is where the example server.properties is installed;
// the unit and the file's own header say so.
const propertiesPath = "/etc/strata/server.properties"

// TestExampleProperties: the broker's parser takes deploy/server.properties
// as it stands, and every commented-out setting in it ("#key=value") is a
// known broker config with a valid value, so that uncommenting one never
// stops the broker with "unknown broker config".
func TestExampleProperties(t *testing.T) {
	data := readFile(t, "deploy/server.properties")
	props, err := config.ParseProperties(data)
	if err != nil {
		t.Fatal(err)
	}
	if len(props) < 20 {
		t.Errorf("%d settings: the example should show every setting an operator changes", len(props))
	}
	cfg, err := config.Load(props)
	if err != nil {
		t.Fatalf("the broker refuses deploy/server.properties: %v", err)
	}
	if cfg.DataDir != "/var/lib/strata" {
		t.Errorf("data directory %s, want /var/lib/strata (the unit's StateDirectory)", cfg.DataDir)
	}
	if !strings.Contains(string(data), propertiesPath) {
		t.Errorf("the file does not say it is installed as %s", propertiesPath)
	}

	commented := regexp.MustCompile(`(?m)^#([a-z][a-z0-9._-]*)=(.*)$`)
	n := 0
	for _, m := range commented.FindAllStringSubmatch(string(data), -1) {
		n++
		key, value := m[1], m[2]
		d, ok := config.BrokerDef(key)
		if !ok {
			t.Errorf("commented setting %s is not a broker config", key)
			continue
		}
		if _, err := d.Canonical(value); err != nil {
			t.Errorf("commented setting %s=%s: %v", key, value, err)
		}
	}
	if n == 0 {
		t.Error("no commented-out optional settings found")
	}

	// Every line that sets something is preceded by a comment saying
	// what it is for (a block of settings may share one).
	lines := strings.Split(string(data), "\n")
	for i, l := range lines {
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		j := i - 1
		for j >= 0 && lines[j] != "" && !strings.HasPrefix(lines[j], "# ") {
			j--
		}
		if j < 0 || lines[j] == "" {
			t.Errorf("line %d %q: no comment above it", i+1, l)
		}
	}
}

// TestSystemdUnit: deploy/systemd/strata.service runs `strata serve` on
// the example properties file's install path, as a user, with room for a
// controlled shutdown, enough file descriptors, and the hardening that
// leaves the broker only its network and its data directory.
func TestSystemdUnit(t *testing.T) {
	unit := parseUnit(t, string(readFile(t, "deploy/systemd/strata.service")))
	svc := unit["Service"]
	exec := strings.Fields(svc.one(t, "ExecStart"))
	if len(exec) < 4 || !strings.HasPrefix(exec[0], "/") || !strings.HasSuffix(exec[0], "/strata") || exec[1] != "serve" {
		t.Fatalf("ExecStart %q: want /…/strata serve …", exec)
	}
	config := ""
	for i, a := range exec {
		if a == "--config" && i+1 < len(exec) {
			config = exec[i+1]
		}
	}
	if config != propertiesPath {
		t.Errorf("ExecStart --config %q, want %s (where deploy/server.properties is installed)", config, propertiesPath)
	}
	if u := svc.one(t, "User"); u == "" || u == "root" || u == "0" {
		t.Errorf("User=%s: the broker must not run as root", u)
	}
	if d := svc.one(t, "StateDirectory"); d != "strata" {
		t.Errorf("StateDirectory=%s, want strata (/var/lib/strata, the example's log.dirs)", d)
	}

	// TimeoutStopSec covers controlled shutdown with every retry of the
	// example's settings, and a margin to close the logs.
	props, err := configProps(t)
	if err != nil {
		t.Fatal(err)
	}
	retries, _ := strconv.Atoi(props["controlled.shutdown.max.retries"])
	backoff, _ := strconv.Atoi(props["controlled.shutdown.retry.backoff.ms"])
	need := time.Duration(retries+1)*(time.Duration(backoff)*time.Millisecond+10*time.Second) + 60*time.Second
	stop, err := strconv.Atoi(svc.one(t, "TimeoutStopSec"))
	if err != nil {
		t.Fatalf("TimeoutStopSec=%s: want seconds", svc.one(t, "TimeoutStopSec"))
	}
	if time.Duration(stop)*time.Second < need {
		t.Errorf("TimeoutStopSec=%d: a controlled shutdown with %d retries %d ms apart may need %v", stop, retries, backoff, need)
	}
	if s := svc.one(t, "KillSignal"); s != "SIGTERM" {
		t.Errorf("KillSignal=%s, want SIGTERM (it starts a controlled shutdown)", s)
	}
	if n, err := strconv.Atoi(svc.one(t, "LimitNOFILE")); err != nil || n < 100000 {
		t.Errorf("LimitNOFILE=%s, want at least 100000", svc.one(t, "LimitNOFILE"))
	}
	for k, want := range map[string]string{
		"NoNewPrivileges":        "yes",
		"ProtectSystem":          "strict",
		"ProtectHome":            "yes",
		"PrivateTmp":             "yes",
		"PrivateDevices":         "yes",
		"CapabilityBoundingSet":  "",
		"RestrictNamespaces":     "yes",
		"MemoryDenyWriteExecute": "yes",
	} {
		if got := svc.one(t, k); got != want {
			t.Errorf("%s=%s, want %s", k, got, want)
		}
	}
	if w := unit["Install"].one(t, "WantedBy"); w != "multi-user.target" {
		t.Errorf("WantedBy=%s", w)
	}

	// SERVE_ARGS in the example environment file are serve flags without
	// a config key, and its STRATA_ lines are settings.
	env := string(readFile(t, "deploy/systemd/strata.env"))
	if !strings.Contains(svc.one(t, "ExecStart"), "$SERVE_ARGS") || !strings.Contains(env, "\nSERVE_ARGS=") {
		t.Error("the unit and strata.env do not agree on SERVE_ARGS")
	}
	var environ []string
	for _, l := range strings.Split(env, "\n") {
		l = strings.TrimPrefix(l, "#")
		if strings.HasPrefix(l, "STRATA_") {
			environ = append(environ, l)
		}
		if a, ok := strings.CutPrefix(l, "SERVE_ARGS="); ok {
			for _, f := range strings.Fields(a) {
				if name, ok := strings.CutPrefix(f, "--"); ok && !containsString(argFlags, name) {
					t.Errorf("SERVE_ARGS flag --%s is not one of %v", name, argFlags)
				}
			}
		}
	}
	if len(environ) == 0 {
		t.Error("strata.env shows no STRATA_ setting")
	}
	if _, err := configFromEnv(environ); err != nil {
		t.Errorf("strata.env: %v", err)
	}
}

func containsString(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func configProps(t *testing.T) (map[string]string, error) {
	return config.ParseProperties(readFile(t, "deploy/server.properties"))
}

func configFromEnv(environ []string) (map[string]string, error) {
	env, err := config.FromEnv(environ, argFlags)
	if err == nil && len(env) != len(environ) {
		err = errors.New("some STRATA_ variables are not broker configs")
	}
	return env, err
}

// unitSection is one section of a unit file: key -> values, in order.
type unitSection map[string][]string

func (s unitSection) one(t *testing.T, key string) string {
	t.Helper()
	v := s[key]
	if len(v) != 1 {
		t.Errorf("%s appears %d times, want once", key, len(v))
		if len(v) == 0 {
			return ""
		}
	}
	return v[len(v)-1]
}

// parseUnit reads a systemd unit file: [Section] headers, Key=Value
// lines, '#' and ';' comments, trailing-backslash continuations.
func parseUnit(t *testing.T, text string) map[string]unitSection {
	t.Helper()
	out := map[string]unitSection{}
	var cur unitSection
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		for strings.HasSuffix(l, `\`) && i+1 < len(lines) {
			i++
			l = strings.TrimSuffix(l, `\`) + " " + strings.TrimSpace(lines[i])
		}
		switch {
		case l == "" || l[0] == '#' || l[0] == ';':
		case l[0] == '[' && l[len(l)-1] == ']':
			cur = unitSection{}
			out[l[1:len(l)-1]] = cur
		default:
			k, v, ok := strings.Cut(l, "=")
			if !ok || cur == nil {
				t.Fatalf("unit line %d %q: not Key=Value in a section", i+1, l)
			}
			cur[strings.TrimSpace(k)] = append(cur[strings.TrimSpace(k)], strings.TrimSpace(v))
		}
	}
	for _, s := range []string{"Unit", "Service", "Install"} {
		if out[s] == nil {
			t.Fatalf("unit has no [%s] section", s)
		}
	}
	return out
}
