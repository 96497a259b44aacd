package config

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// ParseProperties parses Java .properties text (java.util.Properties.load):
// '#' and '!' comment lines, key=value, key:value or "key value", logical
// lines continued by an odd number of trailing backslashes (the next line's
// leading white space dropped), and the escapes \t \n \r \f \uXXXX and
// \<any> for the character itself. A later key replaces an earlier one.
// Input is read as UTF-8. Errors name the line.
func ParseProperties(data []byte) (map[string]string, error) {
	text := strings.TrimPrefix(string(data), "\uFEFF")
	lines := splitLines(text)
	out := make(map[string]string)
	for i := 0; i < len(lines); i++ {
		lineNo := i + 1
		logical := trimLeftSpace(lines[i])
		if logical == "" || logical[0] == '#' || logical[0] == '!' {
			continue
		}
		for trailingBackslashes(logical)%2 == 1 {
			logical = logical[:len(logical)-1]
			if i+1 >= len(lines) {
				break
			}
			i++
			logical += trimLeftSpace(lines[i])
		}
		rawKey, rawValue := splitKeyValue(logical)
		key, err := unescape(rawKey)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", lineNo, err)
		}
		value, err := unescape(rawValue)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", lineNo, err)
		}
		out[key] = value
	}
	return out, nil
}

// ReadPropertiesFile reads and parses a server.properties file.
func ReadPropertiesFile(path string) (map[string]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	props, err := ParseProperties(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return props, nil
}

// ApplySets applies --set key=value items to props, in order (a later item
// wins). The value is everything after the first '='.
func ApplySets(props map[string]string, items []string) error {
	for _, it := range items {
		k, v, ok := strings.Cut(it, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return fmt.Errorf("--set %q: expected key=value", it)
		}
		props[k] = v
	}
	return nil
}

func splitLines(s string) []string {
	var lines []string
	for len(s) > 0 {
		i := strings.IndexAny(s, "\r\n")
		if i < 0 {
			lines = append(lines, s)
			break
		}
		lines = append(lines, s[:i])
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		s = s[i+1:]
	}
	return lines
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\f' }

func trimLeftSpace(s string) string {
	i := 0
	for i < len(s) && isSpace(s[i]) {
		i++
	}
	return s[i:]
}

func trailingBackslashes(s string) int {
	n := 0
	for i := len(s) - 1; i >= 0 && s[i] == '\\'; i-- {
		n++
	}
	return n
}

// splitKeyValue splits a logical line as Properties.load does: the key ends
// at the first unescaped '=', ':' or white space; then white space, at most
// one '=' or ':' (if the key did not end on one), and white space are
// skipped. The value keeps its trailing white space.
func splitKeyValue(s string) (key, value string) {
	end, hasSep := len(s), false
	for j := 0; j < len(s); j++ {
		c := s[j]
		if c == '\\' {
			j++
			continue
		}
		if c == '=' || c == ':' {
			end, hasSep = j, true
			break
		}
		if isSpace(c) {
			end = j
			break
		}
	}
	v := end
	if hasSep {
		v++
	}
	for v < len(s) {
		c := s[v]
		if !isSpace(c) {
			if hasSep || (c != '=' && c != ':') {
				break
			}
			hasSep = true
		}
		v++
	}
	return s[:end], s[v:]
}

// unescape processes Properties escapes.
func unescape(s string) (string, error) {
	if !strings.Contains(s, `\`) {
		return s, nil
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(s) {
			break // a lone trailing backslash is dropped, as in Java
		}
		switch c = s[i]; c {
		case 't':
			b.WriteByte('\t')
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 'f':
			b.WriteByte('\f')
		case 'u':
			r, n, err := unicodeEscape(s[i+1:])
			if err != nil {
				return "", err
			}
			i += n
			b.WriteRune(r)
		default:
			// \<char> is the char itself; keep multi-byte runes whole.
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b.WriteByte(c)
			} else {
				b.WriteString(s[i : i+size])
				i += size - 1
			}
		}
	}
	return b.String(), nil
}

// unicodeEscape decodes the XXXX of \uXXXX at the start of s, joining a
// UTF-16 surrogate pair written as two escapes. n is the bytes consumed.
func unicodeEscape(s string) (r rune, n int, err error) {
	hex4 := func(s string) (rune, bool) {
		if len(s) < 4 {
			return 0, false
		}
		v, err := strconv.ParseUint(s[:4], 16, 16)
		return rune(v), err == nil
	}
	hi, ok := hex4(s)
	if !ok {
		return 0, 0, fmt.Errorf(`malformed \uxxxx escape`)
	}
	if utf16.IsSurrogate(hi) && len(s) >= 10 && s[4] == '\\' && s[5] == 'u' {
		if lo, ok := hex4(s[6:]); ok {
			if r := utf16.DecodeRune(hi, lo); r != utf8.RuneError {
				return r, 10, nil
			}
		}
	}
	return hi, 4, nil
}
