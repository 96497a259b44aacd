package broker

// The principal an Envelope carries (KIP-590), in Kafka's format: what
// DefaultKafkaPrincipalBuilder serializes, DefaultPrincipalData v0 with
// its version in front:
//
//	int16         version (0)
//	compact str   type ("User")
//	compact str   name
//	bool          token authenticated
//	tagged fields
//
// The decoder reads bytes from the network and checks every field: the
// version, each length against what is left and maxPrincipalPart, UTF-8
// without control characters, a type with no ':', a bool of 0 or 1, the
// tagged fields, and nothing after them.

import (
	"errors"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kbin"
)

// maxPrincipalPart bounds a principal's type and name.
const maxPrincipalPart = 4096

// principalData is a decoded DefaultPrincipalData.
type principalData struct {
	Type, Name         string
	TokenAuthenticated bool
}

func (p principalData) String() string { return p.Type + ":" + p.Name }

// splitPrincipal reads "Type:Name", as Kafka's principal strings are
// written.
func splitPrincipal(s string) (principalData, error) {
	typ, name, ok := strings.Cut(s, ":")
	if !ok {
		return principalData{}, fmt.Errorf("principal %q is not Type:Name", s)
	}
	p := principalData{Type: typ, Name: name}
	return p, p.check()
}

func (p principalData) check() error {
	if p.Type == "" || strings.Contains(p.Type, ":") {
		return fmt.Errorf("principal type %q: empty or with ':'", p.Type)
	}
	for what, s := range map[string]string{"type": p.Type, "name": p.Name} {
		if len(s) > maxPrincipalPart {
			return fmt.Errorf("principal %s of %d bytes (at most %d)", what, len(s), maxPrincipalPart)
		}
		if !utf8.ValidString(s) {
			return fmt.Errorf("principal %s is not UTF-8", what)
		}
		if strings.ContainsFunc(s, unicode.IsControl) {
			return fmt.Errorf("principal %s holds a control character", what)
		}
	}
	return nil
}

// encodePrincipal serializes p as Kafka's DefaultPrincipalData v0.
func encodePrincipal(p principalData) ([]byte, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	dst := []byte{0, 0} // version 0
	dst = kbin.AppendCompactString(dst, p.Type)
	dst = kbin.AppendCompactString(dst, p.Name)
	dst = kbin.AppendBool(dst, p.TokenAuthenticated)
	return kbin.AppendUvarint(dst, 0), nil // no tagged fields
}

var errPrincipalTruncated = errors.New("principal truncated")

// decodePrincipal reads what encodePrincipal wrote, from anyone.
func decodePrincipal(b []byte) (principalData, error) {
	var p principalData
	if len(b) < 2 {
		return p, errPrincipalTruncated
	}
	if v := int16(b[0])<<8 | int16(b[1]); v != 0 {
		return p, fmt.Errorf("principal data version %d (only 0 is known)", v)
	}
	r := &kbin.Reader{Src: b[2:]}
	str := func(what string) (string, error) {
		n := r.Uvarint()
		if !r.Ok() {
			return "", errPrincipalTruncated
		}
		if n == 0 {
			return "", fmt.Errorf("principal %s is null", what)
		}
		n--
		if n > maxPrincipalPart {
			return "", fmt.Errorf("principal %s of %d bytes (at most %d)", what, n, maxPrincipalPart)
		}
		if int(n) > len(r.Src) {
			return "", errPrincipalTruncated
		}
		s := string(r.Src[:n])
		r.Src = r.Src[n:]
		return s, nil
	}
	var err error
	if p.Type, err = str("type"); err != nil {
		return principalData{}, err
	}
	if p.Name, err = str("name"); err != nil {
		return principalData{}, err
	}
	if len(r.Src) < 1 {
		return principalData{}, errPrincipalTruncated
	}
	switch r.Src[0] {
	case 0:
	case 1:
		p.TokenAuthenticated = true
	default:
		return principalData{}, fmt.Errorf("principal token-authenticated flag %d (0 or 1)", r.Src[0])
	}
	r.Src = r.Src[1:]
	ntags := r.Uvarint()
	if !r.Ok() {
		return principalData{}, errPrincipalTruncated
	}
	if ntags > uint32(len(r.Src)) { // each tag takes two bytes at least
		return principalData{}, errPrincipalTruncated
	}
	for range ntags {
		r.Uvarint() // tag
		size := r.Uvarint()
		if !r.Ok() || int64(size) > int64(len(r.Src)) {
			return principalData{}, errPrincipalTruncated
		}
		r.Src = r.Src[size:]
	}
	if len(r.Src) != 0 {
		return principalData{}, fmt.Errorf("%d bytes after the principal", len(r.Src))
	}
	if err := p.check(); err != nil {
		return principalData{}, err
	}
	return p, nil
}
