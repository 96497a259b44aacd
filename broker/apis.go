package broker

import (
	"reflect"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// handler serves one request. It returns the response to send, or nil for
// no response (acks=0 produce). A returned error closes the connection.
type handler func(s *Server, cc *clientConn, req kmsg.Request) (kmsg.Response, error)

type apiEntry struct {
	min, max int16
	fn       handler
}

// apis is filled by each handler file's init (one file per API key, named
// by key), and ApiVersions is built from it.
var apis = map[int16]apiEntry{}

func register(key, min, max int16, fn handler) {
	if _, dup := apis[key]; dup {
		panic("broker: api key registered twice")
	}
	apis[key] = apiEntry{min: min, max: max, fn: fn}
}

// forwardable are the APIs that a broker forwards to the active
// controller (forward.go), and that the controller accepts in an Envelope
// (58_envelope.go).
var forwardable = map[int16]bool{}

// registerForwarded registers the handler of an API that only the
// controller carries out: forwarded (forward.go) and forwardable.
func registerForwarded(key, min, max int16, fn handler) {
	register(key, min, max, forwarded(fn))
	forwardable[key] = true
}

// apiEntry is the entry of an API key this server serves.
func (s *Server) apiEntry(key int16) (apiEntry, bool) {
	e, ok := apis[key]
	return e, ok
}

// apiVersionKeys returns the supported ranges sorted by key.
func apiVersionKeys() []kmsg.ApiVersionsResponseApiKey {
	keys := make([]kmsg.ApiVersionsResponseApiKey, 0, len(apis))
	add := func(k int16, e apiEntry) {
		v := kmsg.NewApiVersionsResponseApiKey()
		v.ApiKey, v.MinVersion, v.MaxVersion = k, e.min, e.max
		keys = append(keys, v)
	}
	for k, e := range apis {
		add(k, e)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ApiKey < keys[j].ApiKey })
	return keys
}

// unsupportedResponse builds an UNSUPPORTED_VERSION answer for a request
// kmsg knows but we do not serve at this version, when the response has a
// top-level error code to carry it. nil means the connection must close
// (Kafka does the same: it cannot answer a version it does not know).
func unsupportedResponse(kreq kmsg.Request, version int16) kmsg.Response {
	if version < 0 || version > kreq.MaxVersion() {
		return nil
	}
	resp := kreq.ResponseKind()
	resp.SetVersion(version)
	f := reflect.ValueOf(resp).Elem().FieldByName("ErrorCode")
	if !f.IsValid() || f.Kind() != reflect.Int16 || !f.CanSet() {
		return nil
	}
	f.SetInt(int64(kerr.UnsupportedVersion.Code))
	return resp
}
