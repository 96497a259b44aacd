package config

import (
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Resolver holds the layers of broker configuration for one broker. Values
// are looked up per-broker dynamic first, then the dynamic cluster-wide
// default, then static, then Kafka's default. The maps are only read.
type Resolver struct {
	Static         map[string]string // server.properties and --set (Broker.Static)
	ClusterDefault map[string]string // dynamic, BROKER resource "" (Metadata.BrokerConfigs[""])
	PerBroker      map[string]string // dynamic, this broker (Metadata.BrokerConfigs["<id>"])
}

// Resolver returns b's resolver over the dynamic broker configs of a
// controller.Metadata snapshot (BrokerConfigs: "" = cluster default, else
// the broker id in decimal). dynamic may be nil.
func (b *Broker) Resolver(dynamic map[string]map[string]string) Resolver {
	return Resolver{
		Static:         b.Static,
		ClusterDefault: dynamic[""],
		PerBroker:      dynamic[strconv.Itoa(int(b.ID))],
	}
}

// Lookup returns the value of a broker config set explicitly in one of the
// layers, and its source (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG
// or STATIC_BROKER_CONFIG); ok is false if no layer sets it.
func (r Resolver) Lookup(key string) (value string, src kmsg.ConfigSource, ok bool) {
	if v, ok := r.PerBroker[key]; ok {
		return v, kmsg.ConfigSourceDynamicBrokerConfig, true
	}
	if v, ok := r.ClusterDefault[key]; ok {
		return v, kmsg.ConfigSourceDynamicDefaultBrokerConfig, true
	}
	if v, ok := r.Static[key]; ok {
		return v, kmsg.ConfigSourceStaticBrokerConfig, true
	}
	return "", 0, false
}

// Effective returns the effective value of a broker config by itself (no
// synonyms: log.retention.ms is nil when only log.retention.hours is set,
// as Kafka describes it) and its source; DEFAULT_CONFIG when no layer sets
// it, with a nil value when Kafka's default is null.
func (r Resolver) Effective(key string) (*string, kmsg.ConfigSource) {
	if v, src, ok := r.Lookup(key); ok {
		return &v, src
	}
	if d, ok := BrokerDef(key); ok && d.Default != nil {
		v := *d.Default
		return &v, kmsg.ConfigSourceDefaultConfig
	}
	return nil, kmsg.ConfigSourceDefaultConfig
}

// Int returns the effective value of an INT, SHORT or LONG broker config (0
// when null).
func (r Resolver) Int(key string) int64 {
	v, _ := r.Effective(key)
	if v == nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(*v), 10, 64)
	return n
}

// Bool returns the effective value of a BOOLEAN broker config.
func (r Resolver) Bool(key string) bool {
	v, _ := r.Effective(key)
	return v != nil && strings.EqualFold(strings.TrimSpace(*v), "true")
}

// String returns the effective value of a broker config ("" when null).
func (r Resolver) String(key string) string {
	v, _ := r.Effective(key)
	if v == nil {
		return ""
	}
	return *v
}

// List returns the effective value of a LIST broker config, split on
// commas with blanks dropped.
func (r Resolver) List(key string) []string {
	var out []string
	for _, e := range strings.Split(r.String(key), ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// TopicValue returns the effective value of topic config name in Kafka's
// string form, given the topic's overrides: the override, else the first
// broker synonym set in any layer (converted from hours or minutes, and a
// negative retention meaning -1), else Kafka's topic default. src is where
// the value came from. Unknown names return "" and DEFAULT_CONFIG.
func (r Resolver) TopicValue(overrides map[string]string, name string) (value string, src kmsg.ConfigSource) {
	d, ok := TopicDef(name)
	if !ok {
		return "", kmsg.ConfigSourceDefaultConfig
	}
	if v, ok := overrides[name]; ok {
		if c, err := d.Canonical(v); err == nil {
			return c, kmsg.ConfigSourceDynamicTopicConfig
		}
	}
	for _, syn := range topicSynonyms[name] {
		v, src, ok := r.Lookup(syn.name)
		if !ok {
			continue
		}
		bd, _ := BrokerDef(syn.name)
		c, err := bd.Canonical(v)
		if err != nil {
			continue
		}
		if syn.mult != 1 || name == "retention.ms" {
			n, _ := strconv.ParseInt(c, 10, 64)
			n *= syn.mult
			if name == "retention.ms" && n < 0 {
				n = -1
			}
			c = strconv.FormatInt(n, 10)
		}
		if _, err := d.Parse(c); err != nil {
			continue // a broker value the topic config cannot take
		}
		return c, src
	}
	return *d.Default, kmsg.ConfigSourceDefaultConfig
}
