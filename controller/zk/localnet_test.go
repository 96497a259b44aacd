package zk

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/controller"
)

// localNet carries the controller's inter-broker requests between the
// Controllers of one test process, in place of brokers listening on the
// network. cut brokers are unreachable.
type localNet struct {
	mu  sync.Mutex
	cs  map[int32]*Controller
	cut map[int32]bool
}

// testNet is the net of the running test (the package's tests are not
// parallel); join registers a controller on it until the test ends.
var testNet = &localNet{cs: map[int32]*Controller{}, cut: map[int32]bool{}}

func (n *localNet) join(t *testing.T, c *Controller) {
	n.mu.Lock()
	n.cs[c.opts.Broker.ID] = c
	n.mu.Unlock()
	t.Cleanup(func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.cs[c.opts.Broker.ID] == c {
			delete(n.cs, c.opts.Broker.ID)
		}
		delete(n.cut, c.opts.Broker.ID)
	})
}

func (n *localNet) setCut(id int32, cut bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.cut[id] = cut
}

func (n *localNet) Open(to controller.Broker) Link { return localLink{n, to} }

// localLink reaches whichever Controller of its broker id is on the net.
type localLink struct {
	n  *localNet
	to controller.Broker
}

func (l localLink) Send(ctx context.Context, req kmsg.Request) (kmsg.Response, error) {
	return l.n.send(ctx, l.to, req)
}

func (localLink) Close() {}

func (n *localNet) send(ctx context.Context, to controller.Broker, req kmsg.Request) (kmsg.Response, error) {
	n.mu.Lock()
	c, cut := n.cs[to.ID], n.cut[to.ID]
	n.mu.Unlock()
	if c == nil || cut {
		return nil, fmt.Errorf("broker %d unreachable", to.ID)
	}
	switch r := req.(type) {
	case *kmsg.LeaderAndISRRequest:
		return c.HandleLeaderAndISR(ctx, r), nil
	case *kmsg.StopReplicaRequest:
		return c.HandleStopReplica(ctx, r), nil
	case *kmsg.UpdateMetadataRequest:
		return c.HandleUpdateMetadata(ctx, r), nil
	}
	return nil, fmt.Errorf("unexpected request %T", req)
}

func (n *localNet) Close() {}

// hasBroker tells whether md lists broker id.
func hasBroker(md *controller.Metadata, id int32) bool {
	for _, b := range md.Brokers {
		if b.ID == id {
			return true
		}
	}
	return false
}
