package network

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"strata/broker/config"
)

// Options configure a Server.
type Options struct {
	// Config is the broker configuration: socket.request.max.bytes,
	// connections.max.idle.ms, queued.max.request.bytes and
	// socket.sendfile.enable are read from it.
	Config *config.Broker
	Logger *slog.Logger
	// Context ends the accept loop and the waits for request memory when
	// done (the broker's lifetime); nil: until Close.
	Context context.Context
	// Handler handles the requests.
	Handler Handler
	// Limits returns the connection limits in force, read at each accept
	// (conn_limits.go).
	Limits func() Limits
	// DecodeCharge is the memory a request body (after the header's
	// tagged fields) may take once decoded, beyond the frame itself,
	// reserved from queued.max.request.bytes (Conn.ReserveDecode). nil:
	// nothing beyond the frame.
	DecodeCharge func(key, version int16, body []byte) int64
	// ConnOpened and ConnClosed, if set, run as an admitted connection
	// starts and stops being served (the broker's connection count).
	ConnOpened, ConnClosed func()
}

// Server is the network layer of a broker: it accepts connections within
// the connection limits, reads their requests and writes the Handler's
// responses.
type Server struct {
	opts    Options
	cfg     *config.Broker
	log     *slog.Logger
	handler Handler

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	lnMu   sync.Mutex
	lns    []net.Listener // one accept loop each (listener.go)

	copyBufs *copyPool // fetch responses' copy buffers (sendfile.go)

	connMu sync.Mutex
	conns  map[*Conn]struct{}
	limits connLimits // max.connections*, queued.max.request.bytes (conn_limits.go)

	// lastRequest is when the last request arrived (unix nanoseconds).
	lastRequest atomic.Int64

	jwksMu sync.Mutex
	jwks   map[string]*jwks // OAUTHBEARER's keys by endpoint (oauth.go)
}

// New makes a Server; Serve starts accepting.
func New(opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	parent := opts.Context
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithCancel(parent)
	return &Server{
		opts:     opts,
		cfg:      opts.Config,
		log:      opts.Logger,
		handler:  opts.Handler,
		ctx:      ctx,
		cancel:   cancel,
		copyBufs: newCopyPool(copyBuffers),
		conns:    map[*Conn]struct{}{},
	}
}

func (s *Server) maxRequestBytes() int32 { return s.cfg.SocketRequestMaxBytes }

func (s *Server) idleTimeout() time.Duration {
	return time.Duration(s.cfg.ConnectionsMaxIdleMs) * time.Millisecond
}

// Serve accepts connections on ln in a goroutine until Close, as a
// PLAINTEXT listener named PLAINTEXT (ServeListener).
func (s *Server) Serve(ln net.Listener) {
	s.ServeListener(ln, Listener{Name: "PLAINTEXT", Protocol: "PLAINTEXT"})
}

// ServeListener accepts connections on ln in a goroutine until Close, as
// listener l: each listener has its own accept loop, and the connection
// limits count the connections of all of them.
func (s *Server) ServeListener(ln net.Listener, l Listener) {
	s.lnMu.Lock()
	s.lns = append(s.lns, ln)
	s.lnMu.Unlock()
	s.wg.Add(1)
	go s.acceptLoop(ln, &l)
}

// Close stops accepting and closes every connection; Wait waits for them
// to finish.
func (s *Server) Close() {
	s.cancel()
	s.lnMu.Lock()
	for _, ln := range s.lns {
		ln.Close()
	}
	s.lnMu.Unlock()
	s.connMu.Lock()
	for cc := range s.conns {
		cc.close()
	}
	s.connMu.Unlock()
}

// QuietFor is how long no request has arrived on any connection: a
// broker shutting down serves on until its clients are quiet.
func (s *Server) QuietFor() time.Duration {
	last := s.lastRequest.Load()
	if last == 0 {
		return time.Duration(1<<63 - 1)
	}
	return time.Since(time.Unix(0, last))
}

// Wait waits until the accept loop and every connection have finished.
func (s *Server) Wait() { s.wg.Wait() }

func (s *Server) acceptLoop(ln net.Listener, l *Listener) {
	defer s.wg.Done()
	var backoff acceptBackoff // accept_errors.go
	for {
		c, err := ln.Accept()
		if err != nil {
			if s.ctx.Err() != nil {
				return
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			s.acceptFailed(&backoff, err) // logs once, backs off (EMFILE)
			continue
		}
		s.acceptWorked(&backoff)
		if !s.admitConn(c) { // closed: over max.connections or max.connections.per.ip
			continue
		}
		cc := newConn(s, c, l)
		s.connMu.Lock()
		s.conns[cc] = struct{}{}
		s.connMu.Unlock()
		if s.opts.ConnOpened != nil {
			s.opts.ConnOpened()
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := cc.handshake(); err != nil {
				cc.log.Debug("closing connection", "err", err)
				cc.close()
			} else {
				cc.serve()
			}
			s.connMu.Lock()
			delete(s.conns, cc)
			s.connMu.Unlock()
			s.releaseConn(c)
			if s.opts.ConnClosed != nil {
				s.opts.ConnClosed()
			}
		}()
	}
}

// ServeConn serves c until it closes, outside the connection limits and
// count (tests).
func (s *Server) ServeConn(c net.Conn) {
	newConn(s, c, &Listener{Name: "PLAINTEXT", Protocol: "PLAINTEXT"}).serve()
}

// Conns returns the number of connections served (tests).
func (s *Server) Conns() int {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	return len(s.conns)
}

// RequestMemoryInUse returns the bytes reserved from
// queued.max.request.bytes (tests).
func (s *Server) RequestMemoryInUse() int64 { return s.requestMemory().inUse() }

// CopyBuffersLent returns how many fetch copy buffers are lent (tests).
func (s *Server) CopyBuffersLent() int {
	p := s.copyBufs
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out
}

// ConnsByListener returns the number of connections served per listener
// name (tests).
func (s *Server) ConnsByListener() map[string]int {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	out := map[string]int{}
	for cc := range s.conns {
		out[cc.listener.Name]++
	}
	return out
}

// HasPrincipal reports whether a connection that authenticated with SASL
// as principal (e.g. "User:alice") is served (tests).
func (s *Server) HasPrincipal(principal string) bool {
	s.connMu.Lock()
	defer s.connMu.Unlock()
	for cc := range s.conns {
		if p := cc.saslPrincipal.Load(); p != nil && p.String() == principal {
			return true
		}
	}
	return false
}
