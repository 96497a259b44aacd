package broker

import (
	"bytes"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestSendMemParts: a fetch response whose partitions' records are
// in-memory parts (a remote read's cached chunks) goes out as one frame
// that decodes to each partition's parts joined, with the size prefix and
// the records' length prefixes right, for a flexible and an older version.
func TestSendMemParts(t *testing.T) {
	parts := [][][]byte{
		{[]byte("first chunk's tail|"), bytes.Repeat([]byte{7}, 300), []byte("|next chunk's head")},
		{bytes.Repeat([]byte("x"), 70000)}, // a length prefix of three varint bytes
	}
	for _, version := range []int16{11, 12} { // 12 is flexible
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		accepted := make(chan net.Conn, 1)
		go func() {
			c, _ := ln.Accept()
			accepted <- c
		}()
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		server := <-accepted
		defer server.Close()
		cc := &clientConn{conn: server, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
		cc.marker.init()

		resp := kmsg.NewPtrFetchResponse()
		resp.Version = version
		o := outResp{corr: 42, kresp: resp}
		rt := kmsg.NewFetchResponseTopic()
		rt.Topic = "t"
		released := 0
		for i, ps := range parts {
			rp := kmsg.NewFetchResponseTopicPartition()
			rp.Partition = int32(i)
			m := cc.marker.next()
			rp.RecordBatches = m[:]
			var n int64
			for _, p := range ps {
				n += int64(len(p))
			}
			o.slices = append(o.slices, spliceRef{marker: m, mem: ps, memLen: n})
			o.release = append(o.release, func() { released++ })
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
		sent := make(chan bool, 1)
		go func() { sent <- cc.respond(o) }()

		var size [4]byte
		if _, err := io.ReadFull(client, size[:]); err != nil {
			t.Fatal(err)
		}
		frame := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(client, frame); err != nil {
			t.Fatal(err)
		}
		if !<-sent {
			t.Fatalf("v%d: respond failed", version)
		}
		if released != len(parts) {
			t.Fatalf("v%d: %d releases ran, want %d", version, released, len(parts))
		}
		if corr := int32(binary.BigEndian.Uint32(frame)); corr != 42 {
			t.Fatalf("v%d: correlation id %d", version, corr)
		}
		body := frame[4:]
		if version >= 12 {
			body = body[1:] // header tags
		}
		got := kmsg.NewPtrFetchResponse()
		got.Version = version
		if err := got.ReadFrom(body); err != nil {
			t.Fatalf("v%d: decode: %v", version, err)
		}
		if len(got.Topics) != 1 || len(got.Topics[0].Partitions) != len(parts) {
			t.Fatalf("v%d: %d topics", version, len(got.Topics))
		}
		for i, rp := range got.Topics[0].Partitions {
			if want := bytes.Join(parts[i], nil); !bytes.Equal(rp.RecordBatches, want) {
				t.Fatalf("v%d: partition %d: %d record bytes, want %d", version, i, len(rp.RecordBatches), len(want))
			}
		}
	}
}
