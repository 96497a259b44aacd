package broker

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"strata/broker/config"
)

// testServer is an in-process broker on a free loopback port with its own
// data directory.
type testServer struct {
	*Server
	dir  string
	sets map[string]string
}

// startTestServer starts a broker; sets are Kafka config keys.
func startTestServer(t testing.TB, sets map[string]string) *testServer {
	t.Helper()
	return startTestServerDir(t, t.TempDir(), sets)
}

func startTestServerDir(t testing.TB, dir string, sets map[string]string) *testServer {
	t.Helper()
	props := map[string]string{
		"broker.id": "0",
		"listeners": "PLAINTEXT://127.0.0.1:0",
		"log.dirs":  dir,
	}
	for k, v := range sets {
		props[k] = v
	}
	cfg, err := config.Load(props)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	s, err := New(Options{Config: cfg, Listen: cfg.ListenAddr()})
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	if err := s.Start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	ts := &testServer{Server: s, dir: dir, sets: sets}
	t.Cleanup(func() { s.Close() })
	return ts
}

func (ts *testServer) addr() string { return ts.Addr().String() }

// client returns a franz-go client for the server, closed at cleanup.
func (ts *testServer) client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(ts.addr())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

func (ts *testServer) admin(t testing.TB) *kadm.Client {
	return kadm.NewClient(ts.client(t))
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}
