package broker

import (
	"encoding/binary"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// pipeRoundTrip runs roundTrip against a peer that reads the request and
// answers with raw.
func pipeRoundTrip(req kmsg.Request, raw []byte) (kmsg.Response, error) {
	c, p := net.Pipe()
	defer c.Close()
	go func() {
		defer p.Close()
		var size [4]byte
		if _, err := p.Read(size[:]); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		for n := 0; n < len(body); {
			m, err := p.Read(body[n:])
			if err != nil {
				return
			}
			n += m
		}
		p.Write(raw)
	}()
	return roundTrip(c, "test", req)
}

func TestForwardRoundTrip(t *testing.T) {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.Version = 7
	want := req.ResponseKind().(*kmsg.CreateTopicsResponse)
	want.Version = 7
	st := kmsg.NewCreateTopicsResponseTopic()
	st.Topic, st.NumPartitions, st.ReplicationFactor = "t", 3, 2
	want.Topics = append(want.Topics, st)
	frame := []byte{0, 0, 0, 0, 0, 0, 0, 1, 0} // size, correlation id 1, no header tags
	frame = want.AppendTo(frame)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	resp, err := pipeRoundTrip(req, frame)
	if err != nil {
		t.Fatal(err)
	}
	got := resp.(*kmsg.CreateTopicsResponse)
	if got.Version != 7 || len(got.Topics) != 1 || got.Topics[0].Topic != "t" || got.Topics[0].NumPartitions != 3 {
		t.Fatalf("decoded %+v", got)
	}
	// A wrong correlation id and a lying size are errors, not panics.
	bad := append([]byte(nil), frame...)
	bad[7] = 2
	if _, err := pipeRoundTrip(req, bad); err == nil {
		t.Fatal("wrong correlation id accepted")
	}
	binary.BigEndian.PutUint32(bad, 1<<30)
	if _, err := pipeRoundTrip(req, bad); err == nil {
		t.Fatal("2^30-byte response size accepted")
	}
}

// FuzzForwardResponse feeds arbitrary bytes as the controller's answer to
// a forwarded request: roundTrip must return an error or a response,
// never panic or allocate beyond its bound.
func FuzzForwardResponse(f *testing.F) {
	f.Add([]byte{0, 0, 0, 5, 0, 0, 0, 1, 0})
	f.Add([]byte{0, 0, 0, 9, 0, 0, 0, 1, 0, 0, 0, 0, 2})
	f.Add([]byte{0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, raw []byte) {
		req := kmsg.NewPtrCreateTopicsRequest()
		req.Version = 7
		pipeRoundTrip(req, raw)
	})
}
