package config

import (
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// The functions here compute the new override map of one resource for
// AlterConfigs (full replace) and IncrementalAlterConfigs; the handler
// stores it with controller SetTopicConfigs / SetBrokerConfigs (unless
// ValidateOnly). Errors are *Error values: kerr.InvalidRequest for
// malformed requests, non-LIST APPEND/SUBTRACT and every broker-resource
// problem except unknown names (as Kafka maps ConfigException there),
// kerr.InvalidConfig for unknown names and bad topic values.

// AlterTopicConfigs returns a topic's new overrides for AlterConfigs: exactly
// the given set, validated and in canonical form.
func AlterTopicConfigs(r Resolver, cfgs []kmsg.AlterConfigsRequestResourceConfig) (map[string]string, error) {
	m, err := replaceSet(cfgs)
	if err != nil {
		return nil, err
	}
	return finishTopic(r, m)
}

// IncrementalAlterTopicConfigs applies IncrementalAlterConfigs operations
// (SET=0, DELETE=1, APPEND=2, SUBTRACT=3; the last two on LIST configs only)
// to a topic's current overrides and returns the new overrides. current is
// not modified.
func IncrementalAlterTopicConfigs(r Resolver, current map[string]string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig) (map[string]string, error) {
	m, err := applyOps(current, ops, func(name string) (*Def, error) {
		d, ok := TopicDef(name)
		if !ok {
			return nil, invalidConfig("Unknown topic config name: %s", name)
		}
		return d, nil
	})
	if err != nil {
		return nil, err
	}
	return finishTopic(r, m)
}

func finishTopic(r Resolver, m map[string]string) (map[string]string, error) {
	c, err := canonicalTopicConfigs(m)
	if err != nil {
		return nil, err
	}
	if err := r.ValidateTopic(c); err != nil {
		return nil, err
	}
	return c, nil
}

// AlterBrokerConfigs returns the new dynamic overrides of a BROKER resource
// for AlterConfigs: exactly the given set. perBroker is false for the
// cluster-wide default resource (empty name).
func AlterBrokerConfigs(perBroker bool, cfgs []kmsg.AlterConfigsRequestResourceConfig) (map[string]string, error) {
	m, err := replaceSet(cfgs)
	if err != nil {
		return nil, err
	}
	return finishBroker(perBroker, m)
}

// IncrementalAlterBrokerConfigs applies IncrementalAlterConfigs operations
// to the current dynamic overrides of a BROKER resource.
func IncrementalAlterBrokerConfigs(perBroker bool, current map[string]string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig) (map[string]string, error) {
	m, err := applyOps(current, ops, func(name string) (*Def, error) {
		d, ok := BrokerDef(name)
		if !ok {
			return nil, invalidConfig("Unknown broker config name: %s", name)
		}
		return d, nil
	})
	if err != nil {
		return nil, err
	}
	return finishBroker(perBroker, m)
}

// finishBroker is Kafka's DynamicBrokerConfig.validateConfigs.
func finishBroker(perBroker bool, m map[string]string) (map[string]string, error) {
	var unknown, nonDynamic, perBrokerOnly []string
	for k := range m {
		d, ok := BrokerDef(k)
		switch {
		case !ok && ignoredKeys[k]:
			nonDynamic = append(nonDynamic, k)
		case !ok:
			unknown = append(unknown, k)
		case d.Dynamic == ReadOnly:
			nonDynamic = append(nonDynamic, k)
		case d.Dynamic == PerBroker && !perBroker:
			perBrokerOnly = append(perBrokerOnly, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		return nil, invalidConfig("Unknown broker config name: %s", unknown[0])
	}
	if len(nonDynamic) > 0 {
		return nil, invalidRequest("Cannot update these configs dynamically: %s", setString(nonDynamic))
	}
	if len(perBrokerOnly) > 0 {
		return nil, invalidRequest("Cannot update these configs at default cluster level, broker id must be specified: %s", setString(perBrokerOnly))
	}
	keys := sortedKeys(m)
	out := make(map[string]string, len(m))
	for _, k := range keys {
		d, _ := BrokerDef(k)
		c, err := d.Canonical(m[k])
		if err != nil {
			return nil, invalidRequest("Invalid value %q for configuration %s", m[k], err)
		}
		out[k] = c
	}
	if err := CheckStrataConfigs(out, time.Now()); err != nil {
		return nil, err
	}
	return out, nil
}

// replaceSet turns AlterConfigs entries into a map, refusing duplicate
// names and null values.
func replaceSet(cfgs []kmsg.AlterConfigsRequestResourceConfig) (map[string]string, error) {
	m := make(map[string]string, len(cfgs))
	for _, c := range cfgs {
		if _, dup := m[c.Name]; dup {
			return nil, invalidRequest("Error due to duplicate config keys")
		}
		if c.Value == nil {
			return nil, invalidRequest("Null value not supported for : %s", c.Name)
		}
		m[c.Name] = *c.Value
	}
	return m, nil
}

// applyOps applies incremental operations to a copy of current. lookup
// resolves the definition of a name for APPEND and SUBTRACT (which need its
// type and default); SET values are validated afterwards with the rest.
func applyOps(current map[string]string, ops []kmsg.IncrementalAlterConfigsRequestResourceConfig, lookup func(string) (*Def, error)) (map[string]string, error) {
	seen := make(map[string]bool, len(ops))
	for _, op := range ops {
		if seen[op.Name] {
			return nil, invalidRequest("Error due to duplicate config keys")
		}
		seen[op.Name] = true
	}
	m := make(map[string]string, len(current)+len(ops))
	for k, v := range current {
		m[k] = v
	}
	for _, op := range ops {
		switch op.Op {
		case kmsg.IncrementalAlterConfigOpSet:
			if op.Value == nil {
				return nil, invalidRequest("Null value not supported for : %s", op.Name)
			}
			m[op.Name] = *op.Value
		case kmsg.IncrementalAlterConfigOpDelete:
			delete(m, op.Name)
		case kmsg.IncrementalAlterConfigOpAppend, kmsg.IncrementalAlterConfigOpSubtract:
			d, err := lookup(op.Name)
			if err != nil {
				return nil, err
			}
			verb := "append"
			if op.Op == kmsg.IncrementalAlterConfigOpSubtract {
				verb = "subtract"
			}
			if d.Type != List {
				return nil, invalidRequest("Config value %s is not allowed for config key: %s", verb, op.Name)
			}
			old, ok := m[op.Name]
			if !ok && d.Default != nil {
				old = *d.Default
			}
			var change []string
			if op.Value != nil {
				change = splitList(*op.Value)
			}
			list := splitList(old)
			if verb == "append" {
				for _, v := range change {
					if !hasString(list, v) {
						list = append(list, v)
					}
				}
			} else {
				kept := list[:0]
				for _, v := range list {
					if !hasString(change, v) {
						kept = append(kept, v)
					}
				}
				list = kept
			}
			m[op.Name] = strings.Join(list, ",")
		default:
			return nil, invalidRequest("Unknown alter config operation %d for config key: %s", op.Op, op.Name)
		}
	}
	return m, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// setString formats names as Kafka's messages do: [a, b].
func setString(names []string) string {
	sort.Strings(names)
	return "[" + strings.Join(names, ", ") + "]"
}
