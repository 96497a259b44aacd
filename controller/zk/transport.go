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
// each broker's advertised address, one client per broker (franz-go
// negotiates the versions with ApiVersions).
type netTransport struct {
	clientID string

	mu      sync.Mutex
	clients map[int32]*netClient
	closed  bool
}

type netClient struct {
	addr string
	cl   *kgo.Client
}

func newNetTransport(self int32) *netTransport {
	return &netTransport{clientID: "strata-controller-" + strconv.Itoa(int(self)), clients: map[int32]*netClient{}}
}

func (t *netTransport) client(to controller.Broker) (*kgo.Client, error) {
	addr := net.JoinHostPort(to.Host, strconv.Itoa(int(to.Port)))
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, errors.New("transport closed")
	}
	if c := t.clients[to.ID]; c != nil {
		if c.addr == addr {
			return c.cl, nil
		}
		c.cl.Close()
		delete(t.clients, to.ID)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ClientID(t.clientID),
		kgo.DialTimeout(5*time.Second), kgo.RequestRetries(0))
	if err != nil {
		return nil, err
	}
	t.clients[to.ID] = &netClient{addr: addr, cl: cl}
	return cl, nil
}

func (t *netTransport) Send(ctx context.Context, to controller.Broker, req kmsg.Request) (kmsg.Response, error) {
	cl, err := t.client(to)
	if err != nil {
		return nil, err
	}
	return cl.SeedBrokers()[0].Request(ctx, req)
}

func (t *netTransport) Close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	for id, c := range t.clients {
		c.cl.Close()
		delete(t.clients, id)
	}
}
