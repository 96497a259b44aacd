package config

import (
	"maps"
	"strings"
	"testing"
)

func TestParseProperties(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want map[string]string
	}{
		{"empty", "", map[string]string{}},
		{"equals", "a=b", map[string]string{"a": "b"}},
		{"colon", "a:b", map[string]string{"a": "b"}},
		{"space separator", "a b", map[string]string{"a": "b"}},
		{"space around equals", "  a  =  b", map[string]string{"a": "b"}},
		{"trailing space kept", "a=b  ", map[string]string{"a": "b  "}},
		{"second equals is value", "a==b", map[string]string{"a": "=b"}},
		{"space then colon then space", "a \t: b", map[string]string{"a": "b"}},
		{"key only", "a", map[string]string{"a": ""}},
		{"key and separator only", "a=", map[string]string{"a": ""}},
		{"comments", "# x=y\n! z=w\n  # indented\na=1", map[string]string{"a": "1"}},
		{"hash inside value", "a=b#c", map[string]string{"a": "b#c"}},
		{"blank lines", "\n\n  \na=1\n\n", map[string]string{"a": "1"}},
		{"crlf and cr", "a=1\r\nb=2\rc=3", map[string]string{"a": "1", "b": "2", "c": "3"}},
		{"continuation", "a=one,\\\n    two,\\\n  three", map[string]string{"a": "one,two,three"}},
		{"even backslashes do not continue", "a=x\\\\\nb=y", map[string]string{"a": `x\`, "b": "y"}},
		{"continuation at eof", "a=x\\", map[string]string{"a": "x"}},
		{"continuation into blank line ends", "a=x\\\n\nb=y", map[string]string{"a": "x", "b": "y"}},
		{"comment line does not continue", "# c \\\na=1", map[string]string{"a": "1"}},
		{"continued line starting with hash is content", "a=x\\\n#y", map[string]string{"a": "x#y"}},
		{"escaped separator in key", `a\=b\:c\ d=v`, map[string]string{"a=b:c d": "v"}},
		{"escapes", `a=\t\n\r\f\\\q`, map[string]string{"a": "\t\n\r\f\\q"}},
		{"unicode escape", `a=\u00e9\u0041`, map[string]string{"a": "éA"}},
		{"surrogate pair", `a=\ud83d\ude00`, map[string]string{"a": "😀"}},
		{"utf8 passthrough", "ключ=значение", map[string]string{"ключ": "значение"}},
		{"bom", "\uFEFFa=1", map[string]string{"a": "1"}},
		{"last wins", "a=1\na=2", map[string]string{"a": "2"}},
		{"kafka sample", "broker.id=0\nlisteners=PLAINTEXT://:9092\nlog.dirs=/tmp/kafka-logs\nnum.partitions=1\n",
			map[string]string{"broker.id": "0", "listeners": "PLAINTEXT://:9092", "log.dirs": "/tmp/kafka-logs", "num.partitions": "1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseProperties([]byte(tt.in))
			if err != nil {
				t.Fatalf("ParseProperties(%q): %v", tt.in, err)
			}
			if !maps.Equal(got, tt.want) {
				t.Fatalf("ParseProperties(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestParsePropertiesErrors(t *testing.T) {
	for _, in := range []string{`a=\u12`, "x=1\nb=\\uZZZZ"} {
		_, err := ParseProperties([]byte(in))
		if err == nil || !strings.Contains(err.Error(), "line") {
			t.Errorf("ParseProperties(%q) error = %v, want a line-numbered error", in, err)
		}
	}
	_, err := ParseProperties([]byte("x=1\nb=\\uZZZZ"))
	if err == nil || !strings.HasPrefix(err.Error(), "line 2:") {
		t.Errorf("error %v does not name line 2", err)
	}
}

func TestApplySets(t *testing.T) {
	props := map[string]string{"a": "1"}
	if err := ApplySets(props, []string{"a=2", "b=x=y", " c =", "a=3"}); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "3", "b": "x=y", "c": ""}
	if !maps.Equal(props, want) {
		t.Fatalf("got %q, want %q", props, want)
	}
	for _, bad := range []string{"novalue", "=v", ""} {
		if err := ApplySets(map[string]string{}, []string{bad}); err == nil {
			t.Errorf("ApplySets(%q) = nil, want error", bad)
		}
	}
}

func FuzzParseProperties(f *testing.F) {
	for _, s := range []string{
		"a=b", "a\\\n b", "# c\n!d\ne:f", `\u00e9=\ud83d\ude00`, "k v \\\\\n", "\\", "\\u", "a=\\ud800", "\uFEFF\r\n\r",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := ParseProperties(data)
		if err != nil {
			return
		}
		// Every parsed key=value pair, written back escaped, parses to itself.
		var b strings.Builder
		for k, v := range m {
			b.WriteString(escapeForTest(k, true) + "=" + escapeForTest(v, false) + "\n")
		}
		back, err := ParseProperties([]byte(b.String()))
		if err != nil {
			t.Fatalf("re-parse of %q: %v", b.String(), err)
		}
		if !maps.Equal(m, back) {
			t.Fatalf("round trip changed %q into %q", m, back)
		}
	})
}

// escapeForTest writes s so that Properties parsing yields s back.
func escapeForTest(s string, key bool) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\\', '=', ':', '#', '!':
			b.WriteByte('\\')
			b.WriteByte(c)
		case ' ':
			if key || i == 0 {
				b.WriteString(`\ `)
			} else {
				b.WriteByte(c)
			}
		case '\t':
			b.WriteString(`\t`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\f':
			b.WriteString(`\f`)
		default:
			if strings.HasPrefix(s[i:], "\uFEFF") {
				b.WriteString(`\ufeff`)
				i += 2
				continue
			}
			b.WriteByte(c)
		}
	}
	return b.String()
}
