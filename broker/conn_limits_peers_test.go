package broker

import (
	"context"
	"testing"

	"strata/broker/config"
	"strata/controller"
)

// startWithController starts a broker on the in-memory controller m.
func startWithController(t *testing.T, m *controller.Memory, sets map[string]string) *testServer {
	t.Helper()
	props := map[string]string{"broker.id": "0", "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": t.TempDir()}
	for k, v := range sets {
		props[k] = v
	}
	cfg, err := config.Load(props)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Config: cfg, Listen: cfg.ListenAddr(), Controller: m})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &testServer{Server: s, dir: props["log.dirs"], sets: sets}
}

// Before the fix a peer broker's connection (its replica fetcher) was
// refused once clients filled max.connections, and replication stopped
// until a client left. Kafka never refuses its inter-broker listener for
// max.connections; Strata admits connections from another registered
// broker's address (not one of this machine's, which a local client
// shares), still bound by max.connections.per.ip.
func TestMaxConnectionsAdmitsPeerBrokers(t *testing.T) {
	m := controller.NewMemory()
	ts := startWithController(t, m, map[string]string{
		"max.connections":                  "2",
		"max.connections.per.ip.overrides": "127.0.0.5:2",
	})
	// Broker 1 on another host, 127.0.0.5; broker 2 on this machine.
	for _, b := range []controller.Broker{{ID: 1, Host: "127.0.0.5", Port: 9092}, {ID: 2, Host: "127.0.0.1", Port: 9093}} {
		if err := m.RegisterBroker(context.Background(), b); err != nil {
			t.Fatal(err)
		}
	}
	for i, from := range []string{"127.0.0.2", "127.0.0.3"} {
		if !served(dialFrom(t, from, ts.addr())) {
			t.Fatalf("client connection %d refused under max.connections=2", i+1)
		}
	}
	if served(dialFrom(t, "127.0.0.4", ts.addr())) {
		t.Fatal("a 3rd client connection was served; max.connections=2")
	}
	if served(dialFrom(t, "127.0.0.1", ts.addr())) {
		t.Fatal("a connection from this machine's address (broker 2's host) was served over max.connections")
	}
	for i := range 2 {
		if !served(dialFrom(t, "127.0.0.5", ts.addr())) {
			t.Fatalf("connection %d from peer broker 1 refused over max.connections", i+1)
		}
	}
	if served(dialFrom(t, "127.0.0.5", ts.addr())) {
		t.Fatal("a 3rd connection from broker 1 was served; its max.connections.per.ip override is 2")
	}
	// The peer's connections count: clients stay refused.
	if served(dialFrom(t, "127.0.0.6", ts.addr())) {
		t.Fatal("a client connection was served over max.connections")
	}
}
