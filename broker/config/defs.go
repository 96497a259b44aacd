package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Types, with kmsg's numbering (DescribeConfigs v3+ ConfigType).
const (
	Boolean  = kmsg.ConfigTypeBoolean
	String   = kmsg.ConfigTypeString
	Int      = kmsg.ConfigTypeInt
	Short    = kmsg.ConfigTypeShort
	Long     = kmsg.ConfigTypeLong
	Double   = kmsg.ConfigTypeDouble
	List     = kmsg.ConfigTypeList
	Class    = kmsg.ConfigTypeClass
	Password = kmsg.ConfigTypePassword
)

// Dynamic tells whether a broker config can be changed at runtime with
// AlterConfigs / IncrementalAlterConfigs (Kafka's KIP-226 modes).
type Dynamic uint8

const (
	// ReadOnly configs are set in server.properties or --set only.
	ReadOnly Dynamic = iota
	// PerBroker configs can be altered for one broker only.
	PerBroker
	// ClusterWide configs can be altered for one broker or for the
	// cluster-wide default (the BROKER resource with an empty name).
	ClusterWide
)

// Def defines one config.
type Def struct {
	Name string
	Type kmsg.ConfigType
	// Default is Kafka's default in its string form; nil is Kafka's null
	// (no default: the key is described with a null value).
	Default *string
	Doc     string
	// Check validates the parsed value; nil accepts every value of Type.
	Check Validator
	// Dynamic applies to broker configs only.
	Dynamic Dynamic
}

// Sensitive reports whether values of d are hidden in DescribeConfigs.
func (d *Def) Sensitive() bool { return d.Type == Password }

// Validator checks a parsed value. v is bool, string, int64 (INT, SHORT,
// LONG), float64 or []string (LIST) by the Def's Type. It returns a short
// reason, without the key.
type Validator func(v any) error

func str(s string) *string { return &s }

// atLeast accepts numbers >= min.
func atLeast(min int64) Validator {
	return func(v any) error {
		if n := v.(int64); n < min {
			return fmt.Errorf("must be >= %d, got %d", min, n)
		}
		return nil
	}
}

// between accepts numbers in [lo, hi] (integers or doubles).
func between(lo, hi float64) Validator {
	return func(v any) error {
		var f float64
		switch n := v.(type) {
		case int64:
			f = float64(n)
		case float64:
			f = n
		}
		if f < lo || f > hi || math.IsNaN(f) {
			return fmt.Errorf("must be between %s and %s, got %s", fmtFloat(lo), fmtFloat(hi), fmtAny(v))
		}
		return nil
	}
}

// oneOf accepts the listed strings (exact case, as Kafka's ValidString).
func oneOf(allowed ...string) Validator {
	return func(v any) error {
		s := v.(string)
		for _, a := range allowed {
			if s == a {
				return nil
			}
		}
		return fmt.Errorf("must be one of [%s], got %q", strings.Join(allowed, ", "), s)
	}
}

// listOf accepts lists whose every element is one of allowed, without
// duplicates.
func listOf(allowed ...string) Validator {
	return func(v any) error {
		seen := map[string]bool{}
		for _, s := range v.([]string) {
			ok := false
			for _, a := range allowed {
				ok = ok || s == a
			}
			if !ok {
				return fmt.Errorf("must be a list of [%s], got %q", strings.Join(allowed, ", "), s)
			}
			if seen[s] {
				return fmt.Errorf("duplicate entry %q", s)
			}
			seen[s] = true
		}
		return nil
	}
}

// nonEmptyList accepts lists with at least one element and no duplicates.
func nonEmptyList(v any) error {
	l := v.([]string)
	if len(l) == 0 {
		return errors.New("must not be empty")
	}
	seen := map[string]bool{}
	for _, s := range l {
		if seen[s] {
			return fmt.Errorf("duplicate entry %q", s)
		}
		seen[s] = true
	}
	return nil
}

// throttledReplicas is Kafka's ThrottledReplicaListValidator: empty, "*",
// or partition:broker pairs.
func throttledReplicas(v any) error {
	l := v.([]string)
	if len(l) == 1 && l[0] == "*" {
		return nil
	}
	for _, s := range l {
		p, b, ok := strings.Cut(s, ":")
		_, perr := strconv.ParseUint(strings.TrimSpace(p), 10, 31)
		_, berr := strconv.ParseUint(strings.TrimSpace(b), 10, 31)
		if !ok || perr != nil || berr != nil {
			return fmt.Errorf("must be \"*\" or a list of partition:broker pairs, got %q", s)
		}
	}
	return nil
}

// Parse parses a raw value by d's Type (surrounding white space trimmed, as
// Kafka's ConfigDef does) and validates it. The error is one line naming
// the key.
func (d *Def) Parse(raw string) (any, error) {
	v, err := parseType(d.Type, raw)
	if err == nil && d.Check != nil {
		err = d.Check(v)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.Name, err)
	}
	return v, nil
}

// Canonical returns raw in Kafka's string form for d's Type (the form
// DescribeConfigs shows): trimmed, booleans lower-case, numbers in decimal,
// lists joined by ",". It validates like Parse.
func (d *Def) Canonical(raw string) (string, error) {
	v, err := d.Parse(raw)
	if err != nil {
		return "", err
	}
	if d.Type == String || d.Type == Class || d.Type == Password {
		return strings.TrimSpace(raw), nil
	}
	return fmtAny(v), nil
}

func parseType(t kmsg.ConfigType, raw string) (any, error) {
	s := strings.TrimSpace(raw)
	switch t {
	case Boolean:
		switch strings.ToLower(s) {
		case "true":
			return true, nil
		case "false":
			return false, nil
		}
		return nil, fmt.Errorf("expected true or false, got %q", raw)
	case Int, Short, Long:
		bits := map[kmsg.ConfigType]int{Int: 32, Short: 16, Long: 64}[t]
		n, err := strconv.ParseInt(s, 10, bits)
		if err != nil {
			return nil, fmt.Errorf("expected a %d-bit integer, got %q", bits, raw)
		}
		return n, nil
	case Double:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("expected a number, got %q", raw)
		}
		return f, nil
	case List:
		if s == "" {
			return []string{}, nil
		}
		parts := strings.Split(s, ",")
		for i := range parts {
			parts[i] = strings.TrimSpace(parts[i])
		}
		return parts, nil
	default: // String, Class, Password
		return s, nil
	}
}

func fmtAny(v any) string {
	switch x := v.(type) {
	case bool:
		return strconv.FormatBool(x)
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return fmtFloat(x)
	case []string:
		return strings.Join(x, ",")
	case string:
		return x
	}
	return fmt.Sprint(v)
}

// fmtFloat formats like Java's Double.toString for ordinary values: 0.5,
// 1.0.
func fmtFloat(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return s
}

// Error is a config error for a request handler: Code is the protocol error
// (kerr.InvalidConfig or kerr.InvalidRequest), Msg the response's
// ErrorMessage. errors.Is(err, kerr.InvalidConfig) works on it.
type Error struct {
	Code *kerr.Error
	Msg  string
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Code }

func invalidConfig(format string, args ...any) error {
	return &Error{Code: kerr.InvalidConfig, Msg: fmt.Sprintf(format, args...)}
}

func invalidRequest(format string, args ...any) error {
	return &Error{Code: kerr.InvalidRequest, Msg: fmt.Sprintf(format, args...)}
}

// table is an ordered set of definitions.
type table struct {
	defs  []*Def
	byKey map[string]*Def
}

func newTable(defs []*Def) *table {
	t := &table{defs: defs, byKey: make(map[string]*Def, len(defs))}
	for _, d := range defs {
		if t.byKey[d.Name] != nil {
			panic("config: duplicate definition " + d.Name) // programming error in the tables
		}
		t.byKey[d.Name] = d
	}
	return t
}

// BrokerDef returns the definition of a broker config.
// A per-listener key, listener.name.<listener>.ssl.*, is defined as the
// ssl.* config it overrides (listenerDef).
func BrokerDef(name string) (*Def, bool) {
	if d, ok := brokerTable.byKey[name]; ok {
		return d, ok
	}
	return listenerDef(name)
}

// TopicDef returns the definition of a topic config.
func TopicDef(name string) (*Def, bool) { d, ok := topicTable.byKey[name]; return d, ok }

// BrokerDefs returns every broker config definition, in describe order.
func BrokerDefs() []*Def { return brokerTable.defs }

// TopicDefs returns every topic config definition, in describe order.
func TopicDefs() []*Def { return topicTable.defs }
