package broker

// Connections of the transaction machinery to the other brokers'
// inter-broker listeners (Kafka's inter-broker channels of the
// AddPartitionsToTxnManager and the TransactionMarkerChannelManager):
// the leader's verifications of transactional writes (txn_verify.go) and
// the coordinator's transaction markers (txn_markers.go) go through one
// peerClients, which keeps connections per destination broker instead of
// dialing (and, on a secured inter-broker listener, doing the TLS and
// SASL handshakes) for every request.
//
// A connection carries one request at a time; a request takes an idle
// connection to its broker or dials one, and gives it back once
// answered. Requests to one broker at once (the markers of several
// transactions) use as many connections, of which peerIdleMax stay open
// afterwards. Each request is bounded by its context: the connection's
// deadline is the context's, and a connection whose request failed or
// timed out is closed, never reused. A request that fails on a reused
// connection before any answer (the other broker restarted, or closed
// the connection as idle) is sent once more on a new one: both requests
// are idempotent (AddPartitionsToTxn, WriteTxnMarkers).
//
// Idle connections are closed when their broker leaves the metadata or
// changes its address, when they have been idle for half of
// connections.max.idle.ms (the other broker closes them at that age),
// and when the server closes.

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/controller"
)

// peerIdleMax is how many idle connections to one broker stay open.
const peerIdleMax = 4

// peerClients holds the idle connections to other brokers.
type peerClients struct {
	dial    func(ctx context.Context, addr string) (net.Conn, error)
	maxIdle time.Duration // 0: idle connections do not expire

	mu     sync.Mutex
	peers  map[int32]*peer
	closed bool

	// dials counts the connections dialed (tests).
	dials atomic.Int64
}

// peer is one destination broker: its address and idle connections.
type peer struct {
	addr string
	idle []*peerConn // the most recently used last
}

// peerConn is one connection to a broker.
type peerConn struct {
	net.Conn
	addr     string
	corr     int32
	lastUsed time.Time
}

func newPeerClients(s *Server) *peerClients {
	pc := &peerClients{peers: map[int32]*peer{}}
	pc.dial = func(ctx context.Context, addr string) (net.Conn, error) {
		return s.dialBroker(ctx, "tcp", addr) // listeners.go
	}
	if ms := s.cfg.ConnectionsMaxIdleMs; ms > 0 {
		pc.maxIdle = time.Duration(ms) * time.Millisecond / 2
	}
	return pc
}

// errPeersClosed answers requests once the server closes.
var errPeersClosed = errors.New("inter-broker connections closed")

// roundTrip sends req to broker id at addr and reads its answer, within
// ctx.
func (pc *peerClients) roundTrip(ctx context.Context, id int32, addr, clientID string, req kmsg.Request) (kmsg.Response, error) {
	for attempt := 0; ; attempt++ {
		c, reused, err := pc.get(ctx, id, addr)
		if err != nil {
			return nil, err
		}
		resp, keep, answered, err := c.do(ctx, clientID, req)
		if err == nil {
			if keep {
				pc.put(id, c)
			} else {
				c.Close()
			}
			return resp, nil
		}
		c.Close()
		if !reused || answered || attempt > 0 || ctx.Err() != nil {
			return nil, err
		}
		// The broker closed a kept connection (it restarted, or timed
		// idle connections out): the others it kept are as dead, so the
		// retry dials.
		pc.dropIdle(id)
	}
}

// dropIdle closes the idle connections to broker id.
func (pc *peerClients) dropIdle(id int32) {
	pc.mu.Lock()
	var idle []*peerConn
	if p := pc.peers[id]; p != nil {
		idle, p.idle = p.idle, nil
	}
	pc.mu.Unlock()
	for _, c := range idle {
		c.Close()
	}
}

// get returns an idle connection to broker id at addr (reused true), or
// dials one.
func (pc *peerClients) get(ctx context.Context, id int32, addr string) (c *peerConn, reused bool, err error) {
	now := time.Now()
	pc.mu.Lock()
	if pc.closed {
		pc.mu.Unlock()
		return nil, false, errPeersClosed
	}
	p := pc.peers[id]
	if p == nil {
		p = &peer{addr: addr}
		pc.peers[id] = p
	}
	var stale []*peerConn
	if p.addr != addr { // the broker moved: its old connections go
		stale, p.idle, p.addr = p.idle, nil, addr
	}
	for len(p.idle) > 0 && c == nil {
		c = p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		if pc.maxIdle > 0 && now.Sub(c.lastUsed) >= pc.maxIdle {
			stale, c = append(stale, c), nil
		}
	}
	pc.mu.Unlock()
	for _, s := range stale {
		s.Close()
	}
	if c != nil {
		return c, true, nil
	}
	pc.dials.Add(1)
	conn, err := pc.dial(ctx, addr)
	if err != nil {
		return nil, false, err
	}
	return &peerConn{Conn: conn, addr: addr}, false, nil
}

// put gives back a connection whose request was answered.
func (pc *peerClients) put(id int32, c *peerConn) {
	c.lastUsed = time.Now()
	pc.mu.Lock()
	p := pc.peers[id]
	if pc.closed || p == nil || p.addr != c.addr || len(p.idle) >= peerIdleMax {
		pc.mu.Unlock()
		c.Close()
		return
	}
	p.idle = append(p.idle, c)
	pc.mu.Unlock()
}

// prune closes the connections to brokers no longer in md.
func (pc *peerClients) prune(md *controller.Metadata) {
	var stale []*peerConn
	pc.mu.Lock()
	for id, p := range pc.peers {
		if _, ok := md.Broker(id); !ok {
			stale = append(stale, p.idle...)
			delete(pc.peers, id)
		}
	}
	pc.mu.Unlock()
	for _, c := range stale {
		c.Close()
	}
}

// close closes the idle connections; those in use are closed when their
// request ends.
func (pc *peerClients) close() {
	var stale []*peerConn
	pc.mu.Lock()
	pc.closed = true
	for id, p := range pc.peers {
		stale = append(stale, p.idle...)
		delete(pc.peers, id)
	}
	pc.mu.Unlock()
	for _, c := range stale {
		c.Close()
	}
}

// idleConns is the number of idle connections to broker id (tests).
func (pc *peerClients) idleConns(id int32) int {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if p := pc.peers[id]; p != nil {
		return len(p.idle)
	}
	return 0
}

// do sends one request on c within ctx. keep reports whether c can
// carry another request; answered whether any of the answer arrived (a
// failure after that is not retried).
func (c *peerConn) do(ctx context.Context, clientID string, req kmsg.Request) (resp kmsg.Response, keep, answered bool, err error) {
	dl, _ := ctx.Deadline() // zero: none
	if err := c.SetDeadline(dl); err != nil {
		return nil, false, false, err
	}
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	c.corr++
	resp, answered, err = roundTripCorr(c.Conn, clientID, c.corr, req) // forward.go
	// When ctx ended meanwhile, the deadline it set may come after this
	// request: the connection is not reused.
	keep = stop() && err == nil && c.SetDeadline(time.Time{}) == nil
	return resp, keep, answered, err
}
