package zk

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Every link of the network transport has its own connection: a link
// opened for a broker restarted at the same address reaches the new
// process on its first request, though an earlier link's connection went
// to the old one.
func TestNetTransportLinkPerRegistration(t *testing.T) {
	ok := func(_ context.Context, req kmsg.Request) kmsg.Response { return req.ResponseKind() }
	w := listenWire(t, "127.0.0.1:0")
	w.serve(ok)
	to := w.broker(2)
	tr := newNetTransport(1, "", nil)
	defer tr.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	send := func(l Link) error {
		_, err := l.Send(ctx, kmsg.NewPtrUpdateMetadataRequest())
		return err
	}

	old := tr.Open(to)
	if err := send(old); err != nil {
		t.Fatalf("send to the first process: %v", err)
	}
	// The process exits; another starts on the same address.
	w.close()
	w = listenWire(t, w.ln.Addr().String())
	w.serve(ok)
	old.Close()
	l := tr.Open(to)
	if err := send(l); err != nil {
		t.Fatalf("first send to the restarted process: %v", err)
	}
	if err := send(old); err == nil {
		t.Error("send on a closed link succeeded")
	}
	tr.Close()
	if err := send(l); err == nil {
		t.Error("send on a link of a closed transport succeeded")
	}
	if err := send(tr.Open(to)); err == nil {
		t.Error("send on a link opened after the transport closed succeeded")
	}
}
