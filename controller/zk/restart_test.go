package zk

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"strata/controller"
	"strata/internal/testenv"
)

// sendFailures records the controller's failed sends by broker, and
// passes every record on to the test log.
type sendFailures struct {
	next slog.Handler
	errs *failedSends
}

type failedSends struct {
	mu   sync.Mutex
	errs map[int64][]string
}

func newSendFailures(t *testing.T) *sendFailures {
	return &sendFailures{next: slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}),
		errs: &failedSends{errs: map[int64][]string{}}}
}

func (h *sendFailures) Enabled(context.Context, slog.Level) bool { return true }

func (h *sendFailures) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "send to broker failed; retrying" {
		var to int64
		var msg string
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "to":
				to = a.Value.Int64()
			case "err":
				msg = a.Value.String()
			}
			return true
		})
		h.errs.mu.Lock()
		h.errs.errs[to] = append(h.errs.errs[to], msg)
		h.errs.mu.Unlock()
	}
	if h.next.Enabled(ctx, r.Level) {
		return h.next.Handle(ctx, r)
	}
	return nil
}

func (h *sendFailures) WithAttrs(as []slog.Attr) slog.Handler {
	return &sendFailures{next: h.next.WithAttrs(as), errs: h.errs}
}

func (h *sendFailures) WithGroup(name string) slog.Handler {
	return &sendFailures{next: h.next.WithGroup(name), errs: h.errs}
}

// take returns and forgets the failed sends to broker id.
func (h *sendFailures) take(id int64) []string {
	h.errs.mu.Lock()
	defer h.errs.mu.Unlock()
	errs := h.errs.errs[id]
	delete(h.errs.errs, id)
	return errs
}

// newWireController starts broker id's controller on the Kafka-protocol
// transport, registered at w's address, and serves its requests on w.
func newWireController(t *testing.T, z *testenv.ZooKeeper, w *wireBroker, id int32, log slog.Handler) *Controller {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := New(ctx, Options{
		Connect:           z.Addr() + testChroot,
		Broker:            w.broker(id),
		SessionTimeout:    2 * time.Second,
		ConnectionTimeout: 5 * time.Second,
		Logger:            slog.New(log).With("broker", id),
	})
	if err != nil {
		t.Fatalf("start controller of broker %d: %v", id, err)
	}
	t.Cleanup(func() { c.Close() })
	w.serveController(c)
	return c
}

// A broker restarted at the same address (a new process, a new
// registration) is sent its metadata at once: the controller's first
// request to the new registration does not go over its connection to the
// old process, which is dead, and so does not wait out a retry.
func TestRestartedBrokerToldAtOnce(t *testing.T) {
	z := testenv.StartZooKeeper(t)
	h := newSendFailures(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	c1 := newWireController(t, z, listenWire(t, "127.0.0.1:0"), 1, h)
	waitUntil(t, 10*time.Second, "broker 1 the controller", c1.IsActive)
	w2 := listenWire(t, "127.0.0.1:0")
	c2 := newWireController(t, z, w2, 2, h)
	if err := c2.WaitReady(ctx); err != nil {
		t.Fatalf("broker 2 never told the cluster: %v", err)
	}
	if _, err := c1.CreateTopic(ctx, controller.CreateTopicRequest{Name: "t", Assignments: [][]int32{{1, 2}, {2, 1}}}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "broker 2 told of topic t", func() bool { return c2.Metadata().Topics["t"] != nil })

	for i := range 3 {
		// Stop broker 2 as its process does: its connections close, then
		// its ZooKeeper session ends.
		addr := w2.ln.Addr().String()
		w2.close()
		c2.Close()
		waitUntil(t, 10*time.Second, "broker 2 gone", func() bool { return !hasBroker(c1.Metadata(), 2) })
		h.take(2) // the old registration's

		// Start it again at the same address.
		w2 = listenWire(t, addr)
		c2 = newWireController(t, z, w2, 2, h)
		start := time.Now()
		if err := c2.WaitReady(ctx); err != nil {
			t.Fatalf("restart %d: broker 2 never told the cluster: %v", i, err)
		}
		t.Logf("restart %d: told the cluster %v after registering", i, time.Since(start).Round(time.Millisecond))
		if errs := h.take(2); len(errs) > 0 {
			t.Errorf("restart %d: the controller's sends to the new registration failed: %q", i, errs)
		}
		if c2.Metadata().Topics["t"] == nil {
			t.Errorf("restart %d: broker 2 ready without topic t", i)
		}
	}
}
