package config

import "strings"

// SensitiveName reports whether the value of the config name must not be
// shown or written out (DescribeConfigs answers it null with
// is_sensitive; the bucket's metadata snapshot leaves it out). Kafka's
// rule: a config of type PASSWORD is sensitive, and so is a name whose
// type is unknown (KafkaConfig.maybeSensitive), since it may hold one.
// A per-listener name (listener.name.<listener>.<config>, and
// listener.name.<listener>.<mechanism>.sasl.jaas.config) takes the type
// of the config it sets.
func SensitiveName(name string) bool {
	if d, ok := BrokerDef(name); ok {
		return d.Sensitive()
	}
	if d, ok := TopicDef(name); ok {
		return d.Sensitive()
	}
	if rest, ok := strings.CutPrefix(name, "listener.name."); ok {
		if _, cfg, ok := strings.Cut(rest, "."); ok {
			if _, known := BrokerDef(cfg); known {
				return SensitiveName(cfg)
			}
			// <mechanism>.sasl.jaas.config and other names Strata has no
			// definition of: unknown, so sensitive.
		}
	}
	return true
}

// WithoutSensitive returns configs without the sensitive ones
// (SensitiveName); configs itself when it holds none.
func WithoutSensitive(configs map[string]string) map[string]string {
	n := 0
	for k := range configs {
		if SensitiveName(k) {
			n++
		}
	}
	if n == 0 {
		return configs
	}
	out := make(map[string]string, len(configs)-n)
	for k, v := range configs {
		if !SensitiveName(k) {
			out[k] = v
		}
	}
	return out
}
