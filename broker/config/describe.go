package config

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeOptions are the parts of a DescribeConfigs request resource that
// shape the answer.
type DescribeOptions struct {
	// Names are the requested config names; nil or empty means all.
	// Unknown names are left out, as Kafka does.
	Names                []string
	IncludeSynonyms      bool // v1+
	IncludeDocumentation bool // v3+
	Version              int16
}

func (o DescribeOptions) wants(name string) bool {
	if len(o.Names) == 0 {
		return true
	}
	for _, n := range o.Names {
		if n == name {
			return true
		}
	}
	return false
}

// entry builds one response config. IsDefault (v0) is Source ==
// DEFAULT_CONFIG; Source (v1+), ConfigType and Documentation (v3+) are set
// and encoded by kmsg only at the versions that carry them; synonyms only
// when asked for at v1+.
func (o DescribeOptions) entry(d *Def, value *string, syns []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym, readOnly bool) kmsg.DescribeConfigsResponseResourceConfig {
	c := kmsg.NewDescribeConfigsResponseResourceConfig()
	c.Name = d.Name
	c.IsSensitive = d.Sensitive()
	if !c.IsSensitive {
		c.Value = value
	}
	c.Source = kmsg.ConfigSourceDefaultConfig
	if len(syns) > 0 {
		c.Source = syns[0].Source
	}
	c.IsDefault = c.Source == kmsg.ConfigSourceDefaultConfig
	c.ReadOnly = readOnly
	c.ConfigType = d.Type
	if o.IncludeSynonyms && o.Version >= 1 {
		c.ConfigSynonyms = syns
	}
	if o.IncludeDocumentation && o.Version >= 3 {
		doc := d.Doc
		c.Documentation = &doc
	}
	return c
}

// configSynonyms is Kafka's ConfigHelper.configSynonyms: the broker configs
// among names that are set, by layer (dynamic per-broker, dynamic default,
// static, Kafka's default) and within a layer in names' priority order,
// dropping those before the first entry for name itself.
func (r Resolver) configSynonyms(name string, names []string, sensitive bool) []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym {
	var out []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
	add := func(n string, v string, src kmsg.ConfigSource) {
		s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
		s.Name = n
		if !sensitive {
			s.Value = &v
		}
		s.Source = src
		out = append(out, s)
	}
	layers := []struct {
		m   map[string]string
		src kmsg.ConfigSource
	}{
		{r.PerBroker, kmsg.ConfigSourceDynamicBrokerConfig},
		{r.ClusterDefault, kmsg.ConfigSourceDynamicDefaultBrokerConfig},
		{r.Static, kmsg.ConfigSourceStaticBrokerConfig},
	}
	for _, l := range layers {
		for _, n := range names {
			if v, ok := l.m[n]; ok {
				add(n, v, l.src)
			}
		}
	}
	for _, n := range names {
		if d, ok := BrokerDef(n); ok && d.Default != nil {
			add(n, *d.Default, kmsg.ConfigSourceDefaultConfig)
		}
	}
	for len(out) > 0 && out[0].Name != name {
		out = out[1:]
	}
	return out
}

// DescribeTopic answers DescribeConfigs for a TOPIC resource whose
// overrides are given (controller Topic.Configs), as Kafka does: every topic
// config with its effective value; the source is the first of the topic
// override and the synonyms of the config's primary broker synonym
// (per-broker dynamic, dynamic default, static, default). Topic configs are
// never read-only.
//
// Kafka's quirk is kept: synonyms of a lower-priority unit do not count for
// the source, so retention.ms inherited from log.retention.hours shows
// DEFAULT_CONFIG with the computed value.
func DescribeTopic(r Resolver, overrides map[string]string, o DescribeOptions) []kmsg.DescribeConfigsResponseResourceConfig {
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, d := range topicTable.defs {
		if !o.wants(d.Name) {
			continue
		}
		value, _ := r.TopicValue(overrides, d.Name)
		var syns []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
		if s := topicSynonyms[d.Name]; len(s) > 0 {
			primary := s[0].name
			syns = r.configSynonyms(primary, brokerSynonyms(primary), d.Sensitive())
		}
		if _, ok := overrides[d.Name]; ok {
			s := kmsg.NewDescribeConfigsResponseResourceConfigConfigSynonym()
			s.Name = d.Name
			v := value
			s.Value = &v
			s.Source = kmsg.ConfigSourceDynamicTopicConfig
			syns = append([]kmsg.DescribeConfigsResponseResourceConfigConfigSynonym{s}, syns...)
		}
		v := value
		out = append(out, o.entry(d, &v, syns, false))
	}
	return out
}

// DescribeBroker answers DescribeConfigs for this broker's BROKER resource
// (name = its id): every broker config with its effective value (nil when
// unset with a null default), its synonyms, and ReadOnly for configs that
// cannot be altered dynamically.
func DescribeBroker(r Resolver, o DescribeOptions) []kmsg.DescribeConfigsResponseResourceConfig {
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, d := range brokerTable.defs {
		if !o.wants(d.Name) {
			continue
		}
		value, _ := r.Effective(d.Name)
		syns := r.configSynonyms(d.Name, brokerSynonyms(d.Name), d.Sensitive())
		out = append(out, o.entry(d, value, syns, d.Dynamic == ReadOnly))
	}
	return out
}

// DescribeBrokerDefault answers DescribeConfigs for the cluster-wide default
// BROKER resource (empty name): only the configs set there, with synonyms
// limited to DYNAMIC_DEFAULT_BROKER_CONFIG.
func DescribeBrokerDefault(r Resolver, o DescribeOptions) []kmsg.DescribeConfigsResponseResourceConfig {
	var out []kmsg.DescribeConfigsResponseResourceConfig
	for _, d := range brokerTable.defs {
		v, ok := r.ClusterDefault[d.Name]
		if !ok || !o.wants(d.Name) {
			continue
		}
		var syns []kmsg.DescribeConfigsResponseResourceConfigConfigSynonym
		for _, s := range r.configSynonyms(d.Name, brokerSynonyms(d.Name), d.Sensitive()) {
			if s.Source == kmsg.ConfigSourceDynamicDefaultBrokerConfig {
				syns = append(syns, s)
			}
		}
		out = append(out, o.entry(d, &v, syns, d.Dynamic == ReadOnly))
	}
	return out
}
