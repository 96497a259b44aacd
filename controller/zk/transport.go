package zk

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/controller"
)

// netTransport sends the controller's requests over the Kafka protocol to
// each broker's advertised address, one client per link (franz-go
// negotiates the versions with ApiVersions). A link's client, and so its
// connection, is its own: a broker restarted at the same address is
// reached on a new connection, not on the one to its old process.
type netTransport struct {
	clientID string
	listener string // the control-plane listener ("": first endpoint)
	dial     func(ctx context.Context, network, addr string) (net.Conn, error)

	mu     sync.Mutex
	links  map[*netLink]struct{} // open links
	closed bool
}

type netLink struct {
	t    *netTransport
	addr string

	mu     sync.Mutex
	cl     *kgo.Client // made at the first Send
	closed bool
}

func newNetTransport(self int32, listener string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *netTransport {
	return &netTransport{clientID: "strata-controller-" + strconv.Itoa(int(self)), listener: listener, dial: dial,
		links: map[*netLink]struct{}{}}
}

// brokerAddr is b's HOST:PORT on listener; a broker without it (or ""
// as listener) is reached at its first endpoint.
func brokerAddr(b controller.Broker, listener string) string {
	h, p, ok := b.Endpoint(listener)
	if !ok || listener == "" {
		h, p = b.Host, b.Port
	}
	return net.JoinHostPort(h, strconv.Itoa(int(p)))
}

func (t *netTransport) Open(to controller.Broker) Link {
	l := &netLink{t: t, addr: brokerAddr(to, t.listener)}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		l.closed = true
	} else {
		t.links[l] = struct{}{}
	}
	return l
}

func (t *netTransport) Close() {
	t.mu.Lock()
	links := t.links
	t.links, t.closed = map[*netLink]struct{}{}, true
	t.mu.Unlock()
	for l := range links {
		l.Close()
	}
}

func (l *netLink) client() (*kgo.Client, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil, errors.New("link closed")
	}
	if l.cl == nil {
		opts := []kgo.Opt{kgo.SeedBrokers(l.addr), kgo.ClientID(l.t.clientID),
			kgo.DialTimeout(5 * time.Second), kgo.RequestRetries(0)}
		if l.t.dial != nil {
			opts = append(opts, kgo.Dialer(l.t.dial))
		}
		cl, err := kgo.NewClient(opts...)
		if err != nil {
			return nil, err
		}
		l.cl = cl
	}
	return l.cl, nil
}

func (l *netLink) Send(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	cl, err := l.client()
	if err != nil {
		return nil, err
	}
	return cl.SeedBrokers()[0].Request(ctx, req)
}

func (l *netLink) Close() {
	l.mu.Lock()
	cl := l.cl
	l.cl, l.closed = nil, true
	l.mu.Unlock()
	if cl != nil {
		cl.Close()
	}
	l.t.mu.Lock()
	delete(l.t.links, l)
	l.t.mu.Unlock()
}
