package zk

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/controller"
)

// wireBroker is the listener of a broker process as the controller's
// network transport sees it: it answers ApiVersions, LeaderAndIsr,
// StopReplica and UpdateMetadata over the Kafka protocol. Requests wait
// until serve names their handler, as connections wait in a broker's
// accept backlog until it starts serving; close ends the process's side
// of every connection.
type wireBroker struct {
	t  *testing.T
	ln net.Listener

	handler func(context.Context, kmsg.Request) kmsg.Response
	set     chan struct{}   // closed by serve
	stop    chan struct{}   // closed by close
	ctx     context.Context // canceled by close
	cancel  context.CancelFunc

	mu    sync.Mutex
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
	once  sync.Once
}

// listenWire listens on addr ("127.0.0.1:0" for a free port).
func listenWire(t *testing.T, addr string) *wireBroker {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &wireBroker{t: t, ln: ln, set: make(chan struct{}), stop: make(chan struct{}),
		ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}
	w.wg.Add(1)
	go w.accept()
	t.Cleanup(w.close)
	return w
}

// broker is the controller.Broker of id at this listener's address.
func (w *wireBroker) broker(id int32) controller.Broker {
	host, port, _ := net.SplitHostPort(w.ln.Addr().String())
	p, _ := strconv.Atoi(port)
	return controller.Broker{ID: id, Host: host, Port: int32(p)}
}

// serve starts answering requests with h.
func (w *wireBroker) serve(h func(context.Context, kmsg.Request) kmsg.Response) {
	w.handler = h
	close(w.set)
}

// serveController answers requests as c's broker does.
func (w *wireBroker) serveController(c *Controller) {
	w.serve(func(ctx context.Context, req kmsg.Request) kmsg.Response {
		switch r := req.(type) {
		case *kmsg.LeaderAndISRRequest:
			return c.HandleLeaderAndISR(ctx, r)
		case *kmsg.StopReplicaRequest:
			return c.HandleStopReplica(ctx, r)
		case *kmsg.UpdateMetadataRequest:
			return c.HandleUpdateMetadata(ctx, r)
		}
		return nil
	})
}

// close stops listening and closes every connection, as the broker
// process exiting does.
func (w *wireBroker) close() {
	w.once.Do(func() {
		close(w.stop)
		w.cancel()
		w.ln.Close()
		w.mu.Lock()
		for c := range w.conns {
			c.Close()
		}
		w.mu.Unlock()
		w.wg.Wait()
	})
}

func (w *wireBroker) accept() {
	defer w.wg.Done()
	for {
		c, err := w.ln.Accept()
		if err != nil {
			return
		}
		w.mu.Lock()
		select {
		case <-w.stop:
			w.mu.Unlock()
			c.Close()
			return
		default:
		}
		w.conns[c] = struct{}{}
		w.wg.Add(1)
		w.mu.Unlock()
		go func() {
			defer w.wg.Done()
			defer c.Close()
			w.serveConn(c)
		}()
	}
}

func (w *wireBroker) serveConn(c net.Conn) {
	for {
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			return
		}
		body := make([]byte, binary.BigEndian.Uint32(size[:]))
		if _, err := io.ReadFull(c, body); err != nil {
			return
		}
		r := kbin.Reader{Src: body}
		key, version, corr := r.Int16(), r.Int16(), r.Int32()
		r.NullableString()
		req := kmsg.RequestForKey(key)
		if !r.Ok() || req == nil {
			return
		}
		req.SetVersion(version)
		if req.IsFlexible() {
			kmsg.SkipTags(&r)
		}
		if err := req.ReadFrom(r.Src); err != nil {
			w.t.Logf("wire broker: decode %s v%d: %v", kmsg.NameForKey(key), version, err)
			return
		}
		var resp kmsg.Response
		if _, ok := req.(*kmsg.ApiVersionsRequest); ok {
			av := req.ResponseKind().(*kmsg.ApiVersionsResponse)
			for _, k := range []int16{4, 5, 6, 18} {
				ak := kmsg.NewApiVersionsResponseApiKey()
				ak.ApiKey, ak.MaxVersion = k, kmsg.RequestForKey(k).MaxVersion()
				av.ApiKeys = append(av.ApiKeys, ak)
			}
			resp = av
		} else {
			select {
			case <-w.set:
			case <-w.stop:
				return
			}
			if resp = w.handler(w.ctx, req); resp == nil {
				return
			}
		}
		resp.SetVersion(version)
		out := make([]byte, 4, 256)
		out = kbin.AppendInt32(out, corr)
		if resp.IsFlexible() && key != 18 { // ApiVersions answers with header v0
			out = append(out, 0)
		}
		out = resp.AppendTo(out)
		binary.BigEndian.PutUint32(out, uint32(len(out)-4))
		if _, err := c.Write(out); err != nil {
			return
		}
	}
}
