package zk

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"strata/controller"
	"strata/internal/testenv"
)

// cutProxy forwards TCP connections to target until cut, which drops them
// all and refuses new ones until heal.
type cutProxy struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  []net.Conn
}

func startProxy(t *testing.T, target string) *cutProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{l: l, target: target}
	t.Cleanup(func() { l.Close(); p.setCut(true) })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cut {
				p.mu.Unlock()
				c.Close()
				continue
			}
			s, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, s)
			p.mu.Unlock()
			go func() { io.Copy(s, c); s.Close() }()
			go func() { io.Copy(c, s); c.Close() }()
		}
	}()
	return p
}

func (p *cutProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for _, c := range p.conns {
			c.Close()
		}
		p.conns = nil
	}
}

// TestControllerCutOffFromZooKeeper isolates the active controller from
// ZooKeeper until its session expires: it stops acting as controller at
// once, the others elect a new one with a higher epoch, and once healed it
// rejoins with a new session as a follower.
func TestControllerCutOffFromZooKeeper(t *testing.T) {
	z := testenv.StartZooKeeper(t)
	proxy := startProxy(t, z.Addr())
	ctx := context.Background()
	cut, err := New(ctx, Options{
		Connect:        proxy.l.Addr().String() + testChroot,
		Broker:         controller.Broker{ID: 1, Host: "127.0.0.1", Port: 9091},
		SessionTimeout: 1500 * time.Millisecond,
		Logger:         slog.New(slog.NewTextHandler(testWriter{t}, nil)).With("broker", 1),
		Transport:      testNet,
	})
	if err != nil {
		t.Fatal(err)
	}
	testNet.join(t, cut)
	t.Cleanup(func() { cut.Close() })
	waitUntil(t, 5*time.Second, "broker 1 to be controller", cut.IsActive)
	others := []*Controller{newController(t, z, 2), newController(t, z, 3)}
	waitUntil(t, 5*time.Second, "the controller to see three brokers", func() bool { return len(cut.Metadata().Brokers) == 3 })
	if _, err := cut.CreateTopic(ctx, controller.CreateTopicRequest{Name: "t", NumPartitions: 3, ReplicationFactor: 3}); err != nil {
		t.Fatal(err)
	}
	before := cut.ControllerEpoch()
	old := cut.Metadata().Topics["t"]

	proxy.setCut(true)
	waitUntil(t, 2*time.Second, "the cut-off controller to step down", func() bool {
		return !cut.IsActive() && cut.Metadata().ControllerID == -1
	})
	if _, err := cut.CreateTopic(ctx, controller.CreateTopicRequest{Name: "x", NumPartitions: 1, ReplicationFactor: 1}); !errors.Is(err, controller.ErrNotController) {
		t.Errorf("CreateTopic while cut off: %v, want ErrNotController", err)
	}
	act := activeOf(t, others...)
	if act.ControllerEpoch() <= before {
		t.Errorf("new controller epoch %d, want > %d", act.ControllerEpoch(), before)
	}
	checkMovedAway(t, others, old, 1, 1)

	proxy.setCut(false)
	waitUntil(t, 10*time.Second, "broker 1 back with the new controller", func() bool {
		md := cut.Metadata()
		return hasBroker(md, 1) && md.ControllerID == act.opts.Broker.ID && !cut.IsActive()
	})
	if !hasBroker(act.Metadata(), 1) {
		waitUntil(t, 5*time.Second, "the controller to see broker 1 again", func() bool { return hasBroker(act.Metadata(), 1) })
	}
}
