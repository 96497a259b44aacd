package config

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

// EnvPrefix starts every environment variable that sets a broker config.
const EnvPrefix = "STRATA_"

// The environment convention is the one of the official apache/kafka
// image, with STRATA_ for KAFKA_: the config name upper-cased, with '.'
// written '_', '_' written '__' and '-' written '___'. So
// STRATA_LOG_RETENTION_MS sets log.retention.ms, and
// STRATA_LISTENER_NAME_SASL__SSL_SCRAM___SHA___256_SASL_JAAS_CONFIG sets
// listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config.
//
// Which STRATA_ variables are settings: one whose decoded name is a broker
// config Strata knows (or a Kafka key it accepts and ignores, as in a
// properties file) is taken. One whose decoded name is not, but whose
// first word is the first word of a known config (log., num., zookeeper.,
// remote., listener., …) or whose name is a flag of the command, is a
// mistake and refused with a one-line error naming the variable. Every
// other STRATA_ variable belongs to some other program (strata admin's
// STRATA_BOOTSTRAP, the test harness's STRATA_MINIO, …) and is left alone.

// EnvName returns the environment variable that sets config key.
func EnvName(key string) string {
	var b strings.Builder
	b.WriteString(EnvPrefix)
	for _, r := range key {
		switch r {
		case '.':
			b.WriteString("_")
		case '_':
			b.WriteString("__")
		case '-':
			b.WriteString("___")
		default:
			b.WriteString(strings.ToUpper(string(r)))
		}
	}
	return b.String()
}

// EnvKey decodes the config name of environment variable name (which
// must start with EnvPrefix): runs of underscores are read left to right,
// three as '-', two as '_', one as '.', as the apache/kafka image's sed
// script reads them; letters are lower-cased.
func EnvKey(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, EnvPrefix)
	if !ok || rest == "" {
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(rest); {
		switch {
		case strings.HasPrefix(rest[i:], "___"):
			b.WriteByte('-')
			i += 3
		case strings.HasPrefix(rest[i:], "__"):
			b.WriteByte('_')
			i += 2
		case rest[i] == '_':
			b.WriteByte('.')
			i++
		default:
			b.WriteString(strings.ToLower(rest[i : i+1]))
			i++
		}
	}
	return b.String(), true
}

// KnownBrokerKey tells whether key is a broker config a properties file,
// --set or the environment may carry: one Strata knows, or a Kafka key it
// accepts and ignores.
func KnownBrokerKey(key string) bool {
	if _, ok := BrokerDef(key); ok {
		return true
	}
	return ignoredKeys[key]
}

// FromEnv returns the broker configs set by the STRATA_ variables of
// environ (os.Environ's form, KEY=VALUE). flags are the names of the
// command's flags (serve's "tier", "s3-endpoint", …): a variable that
// names one is refused with a hint to use the flag. The error is one line
// naming the first bad variable, in sorted order.
func FromEnv(environ []string, flags []string) (map[string]string, error) {
	isFlag := make(map[string]bool, len(flags))
	for _, f := range flags {
		isFlag[f] = true
	}
	sorted := append([]string(nil), environ...)
	sort.Strings(sorted)
	out := map[string]string{}
	for _, kv := range sorted {
		name, value, _ := strings.Cut(kv, "=")
		key, ok := EnvKey(name)
		if !ok {
			continue
		}
		if KnownBrokerKey(key) {
			out[key] = value
			continue
		}
		if f := strings.ReplaceAll(key, ".", "-"); isFlag[f] {
			return nil, fmt.Errorf("environment %s: not a broker config; give --%s as a flag", name, f)
		}
		if settingNamespace(key) {
			if why := refusedReason(key); why != "" {
				return nil, fmt.Errorf("environment %s: %s: %s", name, key, why)
			}
			return nil, fmt.Errorf("environment %s: unknown broker config %q", name, key)
		}
	}
	return out, nil
}

var namespaces = sync.OnceValue(func() map[string]bool {
	m := map[string]bool{"listener": true, "ssl": true, "sasl": true}
	add := func(k string) {
		if w, _, ok := strings.Cut(k, "."); ok {
			m[w] = true
		}
	}
	for _, d := range BrokerDefs() {
		add(d.Name)
	}
	for k := range ignoredKeys {
		add(k)
	}
	return m
})

// settingNamespace tells whether key looks like a broker config: it has a
// dot and its first word starts some known config.
func settingNamespace(key string) bool {
	w, _, ok := strings.Cut(key, ".")
	return ok && namespaces()[w]
}

// settingGroups are configs that are one setting under several names (in
// Kafka's priority order): a layer that sets one of them replaces the
// others a lower layer set, or the lower layer's name would win.
var settingGroups = append([][]string{
	{"broker.id", "node.id"},
	{"log.dirs", "log.dir"},
}, brokerSynonymGroups...)

// MergeEnv lays the environment's configs over props (the properties
// file's): a key the environment sets replaces the file's value of it and
// of its synonyms. `strata serve` applies, in order, the properties file,
// the environment, the dedicated flags and the --set items; each later one
// wins.
func MergeEnv(props, env map[string]string) {
	for k := range env {
		for _, g := range settingGroups {
			for _, n := range g {
				if n == k {
					for _, other := range g {
						delete(props, other)
					}
				}
			}
		}
	}
	for k, v := range env {
		props[k] = v
	}
}
