package config

import (
	"fmt"
	"regexp"
	"strings"
)

// PrincipalRules are parsed ssl.principal.mapping.rules (Kafka's
// SslPrincipalMapper): a list of rules, separated by commas or newlines,
// each DEFAULT (the distinguished name as it is) or
// RULE:pattern/replacement/[LU], where the pattern must match the whole
// distinguished name (RFC 2253, "CN=alice,OU=eng,O=example"), the
// replacement may name the pattern's groups as $1, and L or U turns the
// result to lower or upper case. The first rule that matches wins; a name
// no rule matches is refused.
type PrincipalRules []principalRule

type principalRule struct {
	isDefault bool
	re        *regexp.Regexp // anchored
	repl      string
	toLower   bool
	toUpper   bool
}

// ParsePrincipalRules parses ssl.principal.mapping.rules; "" is DEFAULT.
func ParsePrincipalRules(s string) (PrincipalRules, error) {
	var out PrincipalRules
	rest := strings.TrimSpace(s)
	if rest == "" {
		return PrincipalRules{{isDefault: true}}, nil
	}
	for rest != "" {
		rest = strings.TrimLeft(rest, " \t\r\n,")
		if rest == "" {
			break
		}
		switch {
		case strings.HasPrefix(rest, "DEFAULT"):
			out = append(out, principalRule{isDefault: true})
			rest = rest[len("DEFAULT"):]
		case strings.HasPrefix(rest, "RULE:"):
			rest = rest[len("RULE:"):]
			pat, r, ok := cutUnescaped(rest)
			if !ok {
				return nil, fmt.Errorf("rule %q: want RULE:pattern/replacement/[LU]", "RULE:"+rest)
			}
			repl, r, ok := cutUnescaped(r)
			if !ok {
				return nil, fmt.Errorf("rule %q: want RULE:pattern/replacement/[LU]", "RULE:"+rest)
			}
			pr := principalRule{repl: strings.ReplaceAll(repl, `\/`, "/")}
			if strings.HasPrefix(r, "L") {
				pr.toLower, r = true, r[1:]
			} else if strings.HasPrefix(r, "U") {
				pr.toUpper, r = true, r[1:]
			}
			re, err := regexp.Compile("^(?:" + strings.ReplaceAll(pat, `\/`, "/") + ")$")
			if err != nil {
				return nil, fmt.Errorf("rule pattern %q: %v", pat, err)
			}
			pr.re = re
			out = append(out, pr)
			rest = r
		default:
			return nil, fmt.Errorf("invalid rule %q: want DEFAULT or RULE:pattern/replacement/[LU]", firstLine(rest))
		}
		rest = strings.TrimLeft(rest, " \t")
		if rest != "" && rest[0] != ',' && rest[0] != '\n' && rest[0] != '\r' {
			return nil, fmt.Errorf("invalid rule text %q: rules are separated by commas", firstLine(rest))
		}
	}
	return out, nil
}

// cutUnescaped cuts s at its first '/' not preceded by a backslash.
func cutUnescaped(s string) (before, after string, ok bool) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '/':
			return s[:i], s[i+1:], true
		}
	}
	return "", "", false
}

func firstLine(s string) string {
	if i := strings.IndexAny(s, ",\n"); i >= 0 {
		return s[:i]
	}
	return s
}

// Apply maps a distinguished name to a principal name.
func (rs PrincipalRules) Apply(dn string) (string, error) {
	for _, r := range rs {
		if r.isDefault {
			return dn, nil
		}
		if !r.re.MatchString(dn) {
			continue
		}
		out := r.re.ReplaceAllString(dn, r.repl)
		switch {
		case r.toLower:
			out = strings.ToLower(out)
		case r.toUpper:
			out = strings.ToUpper(out)
		}
		return out, nil
	}
	return "", fmt.Errorf("no rule of ssl.principal.mapping.rules applies to %q", dn)
}
