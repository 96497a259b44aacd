package config

import (
	"errors"
	"fmt"
	"strings"
)

// JAASConfig is one JAAS login module configuration, as Kafka's
// sasl.jaas.config holds it:
//
//	org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret";
type JAASConfig struct {
	LoginModule string
	Flag        string // required, requisite, sufficient or optional
	Options     map[string]string
}

// Users are the PLAIN users of the config (user_<name>="<password>").
func (j *JAASConfig) Users() map[string]string {
	out := map[string]string{}
	for k, v := range j.Options {
		if name, ok := strings.CutPrefix(k, "user_"); ok && name != "" {
			out[name] = v
		}
	}
	return out
}

// ParseJAAS parses a sasl.jaas.config value as Kafka's JaasConfig does: a
// login module class, a control flag, options name=value (a value quoted
// with "…" may hold anything, with \ escaping the next character), and a
// closing ';'. Exactly one login module.
func ParseJAAS(s string) (*JAASConfig, error) {
	toks, err := jaasTokens(s)
	if err != nil {
		return nil, err
	}
	if len(toks) == 0 {
		return nil, errors.New("empty JAAS config")
	}
	j := &JAASConfig{Options: map[string]string{}}
	i := 0
	next := func() (jaasToken, bool) {
		if i >= len(toks) {
			return jaasToken{}, false
		}
		i++
		return toks[i-1], true
	}
	t, _ := next()
	if t.kind != 'w' {
		return nil, errors.New("JAAS config must start with a login module class")
	}
	j.LoginModule = t.s
	t, ok := next()
	if !ok || t.kind != 'w' {
		return nil, fmt.Errorf("login module %s: a control flag (required, requisite, sufficient, optional) must follow", j.LoginModule)
	}
	switch f := strings.ToLower(t.s); f {
	case "required", "requisite", "sufficient", "optional":
		j.Flag = f
	default:
		return nil, fmt.Errorf("login module %s: invalid control flag %q", j.LoginModule, t.s)
	}
	for {
		t, ok := next()
		if !ok {
			return nil, errors.New("JAAS config must end with ';'")
		}
		if t.kind == ';' {
			break
		}
		if t.kind != 'w' {
			return nil, fmt.Errorf("expected an option name, got %q", t.s)
		}
		name := t.s
		if eq, ok := next(); !ok || eq.kind != '=' {
			return nil, fmt.Errorf("option %s: expected '='", name)
		}
		v, ok := next()
		if !ok || (v.kind != 'w' && v.kind != '"') {
			return nil, fmt.Errorf("option %s: expected a value", name)
		}
		j.Options[name] = v.s
	}
	if i != len(toks) {
		return nil, errors.New("sasl.jaas.config must contain exactly one login module")
	}
	return j, nil
}

type jaasToken struct {
	kind byte // 'w' word, '"' quoted, '=' or ';'
	s    string
}

func jaasTokens(s string) ([]jaasToken, error) {
	var out []jaasToken
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '=' || c == ';':
			out = append(out, jaasToken{kind: c, s: string(c)})
			i++
		case c == '"':
			var b strings.Builder
			i++
			closed := false
			for i < len(s) {
				if s[i] == '\\' && i+1 < len(s) {
					b.WriteByte(s[i+1])
					i += 2
					continue
				}
				if s[i] == '"' {
					closed = true
					i++
					break
				}
				b.WriteByte(s[i])
				i++
			}
			if !closed {
				return nil, errors.New("unterminated quoted value")
			}
			out = append(out, jaasToken{kind: '"', s: b.String()})
		default:
			j := i
			for j < len(s) && !strings.ContainsRune(" \t\r\n=;\"", rune(s[j])) {
				j++
			}
			out = append(out, jaasToken{kind: 'w', s: s[i:j]})
			i = j
		}
	}
	return out, nil
}
