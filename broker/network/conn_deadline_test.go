package network

import (
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/config"
)

// TestWriteDeadlineReleasesResponse: a response that the client never
// reads (here 64 MiB of in-memory records, as a remote read's pinned
// chunks) is dropped after connections.max.idle.ms without progress: the
// connection closes and the response's releases run.
func TestWriteDeadlineReleasesResponse(t *testing.T) {
	s := New(Options{Config: &config.Broker{ConnectionsMaxIdleMs: 300}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	_, server := tcpPair(t) // the client end never reads
	cc := newConn(s, server, &Listener{Name: "PLAINTEXT", Protocol: "PLAINTEXT"})

	resp := kmsg.NewPtrFetchResponse()
	resp.Version = 12
	rt := kmsg.NewFetchResponseTopic()
	rt.Topic = "t"
	rp := kmsg.NewFetchResponseTopicPartition()
	m := cc.marker.next()
	rp.RecordBatches = m[:]
	rt.Partitions = append(rt.Partitions, rp)
	resp.Topics = append(resp.Topics, rt)
	chunk := make([]byte, 4<<20)
	ref := SpliceRef{Marker: m}
	for range 16 {
		ref.Mem = append(ref.Mem, chunk)
		ref.MemLen += int64(len(chunk))
	}
	var released atomic.Int32
	o := outResp{corr: 1, Response: Response{Msg: resp, Splices: []SpliceRef{ref}, Release: []func(){func() { released.Add(1) }}}}
	sent := make(chan bool, 1)
	go func() { sent <- cc.respond(o) }()
	select {
	case ok := <-sent:
		if ok {
			t.Fatal("64 MiB written to a client that reads nothing")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the write to a client that never reads is still blocked after 5s (connections.max.idle.ms=300)")
	}
	if released.Load() != 1 {
		t.Fatalf("releases ran %d times, want 1", released.Load())
	}
}
