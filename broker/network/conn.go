package network

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Conn is one client connection. One goroutine reads a request, has the
// Handler handle it and writes its response before reading the next, as
// Kafka processes one request per connection at a time; writing inline
// saves a goroutine hand-off per request.
//
// Delayed responses are the exception: the broker answers an acks=-1
// produce at once with a Response whose Wait waits for replication, and
// that response goes to a writer goroutine, so that the next produce on
// the connection (a producer keeps up to five in flight) is appended
// while the first one waits, and followers fetch both at once. Responses
// still go out in request order: while any is queued, every response
// queues behind it, and the Handler drains the queue (Drain) before it
// handles a request other than Produce, so that request sees (and its
// answer follows) every earlier produce's outcome.
//
// A request must arrive, and each write of a response make progress,
// within connections.max.idle.ms; the memory of a request read and not yet
// handled is reserved from queued.max.request.bytes (conn_limits.go).
type Conn struct {
	s        *Server
	raw      net.Conn // the accepted socket, closed by close
	conn     net.Conn // raw, or the TLS connection over it after handshake
	listener *Listener
	// principal is who the connection authenticated as (listener.go).
	principal Principal
	log       *slog.Logger
	clientID  string
	closeMu   sync.Once
	marker    markerGen
	wbuf      []byte // response encoding buffer, reused; written by one goroutine at a time
	// copyBufs lends the buffers local records are read into when a fetch
	// response is copied rather than sent with sendfile; nil: sendfile.
	copyBufs *copyPool

	sasl saslState // on a SASL listener (sasl.go)
	// saslPrincipal is principal once SASL set it, for other goroutines
	// (Server.HasPrincipal).
	saslPrincipal atomic.Pointer[Principal]

	mem memReservation // queued.max.request.bytes held by the request being read or handled
	// writeTimeout bounds each write of a response (connections.max.idle.ms;
	// 0: none), see armWrite.
	writeTimeout time.Duration

	queue   chan outResp // to the writer goroutine; nil until the first delayed response
	writerD chan struct{}
	qmu     sync.Mutex
	qidle   *sync.Cond // signalled when queued reaches 0
	queued  int        // responses queued and not yet written (guarded by qmu)
	broken  bool       // a write failed: the connection is closing (guarded by qmu)
}

// maxQueuedResponses bounds the responses a connection holds for the
// writer; a reader that would exceed it waits (backpressure).
const maxQueuedResponses = 8

// Handler handles the requests read from connections: the broker, which
// knows the APIs.
type Handler interface {
	// ServeRequest handles one request read from c and returns its
	// response. It checks the API and version, skips the header's tagged
	// fields, reserves what decoding takes (c.ReserveDecode), decodes,
	// drains the responses queued ahead when the request may not overtake
	// them (c.Drain), and handles it. An error closes the connection (an
	// error wrapping net.ErrClosed closes it without a log line).
	ServeRequest(c *Conn, req *Request) (Response, error)
}

// Request is one request as read from a connection: the fields of the
// request header up to the client id, and the rest of the frame.
type Request struct {
	Key         int16
	Version     int16
	Correlation int32
	// Body is the frame after the client id: the header's tagged fields
	// (flexible versions) and the request body.
	Body []byte
	// frame is the size of the whole frame.
	frame int
}

// Response is a handler's response. Msg nil means no response (acks=0
// produce). Splices are fetch record ranges to be spliced in place of
// their markers (see sendfile.go); Wait, when set, completes the response
// (a delayed produce) before it is encoded; Release lets go of what the
// splices hold (remote reads' cached chunks) once the response is written
// or dropped.
type Response struct {
	Msg     kmsg.Response
	Splices []SpliceRef
	Wait    func()
	Release []func()
}

// outResp is a response waiting to be written.
type outResp struct {
	corr int32
	Response
}

// done runs the response's releases.
func (o *outResp) done() {
	for _, f := range o.Release {
		f()
	}
	o.Release = nil
}

func newConn(s *Server, c net.Conn, l *Listener) *Conn {
	cc := &Conn{
		s:            s,
		raw:          c,
		conn:         c,
		listener:     l,
		principal:    Anonymous,
		log:          s.log.With("remote", c.RemoteAddr().String(), "listener", l.Name),
		writeTimeout: s.idleTimeout(),
	}
	if !s.cfg.SocketSendfileEnable {
		cc.copyBufs = s.copyBufs
	}
	cc.marker.init()
	cc.qidle = sync.NewCond(&cc.qmu)
	return cc
}

// NetConn is the connection's socket (its remote address).
func (cc *Conn) NetConn() net.Conn { return cc.conn }

// ClientID is the client id of the connection's latest request that gave
// one.
func (cc *Conn) ClientID() string { return cc.clientID }

// NextMarker returns a marker unique on the connection, to put in a fetch
// response's Records field in place of a SpliceRef's records.
func (cc *Conn) NextMarker() [16]byte { return cc.marker.next() }

// respond writes o inline when nothing is queued and o is complete, and
// otherwise queues it for the writer goroutine. false means the
// connection is broken.
func (cc *Conn) respond(o outResp) bool {
	cc.qmu.Lock()
	if cc.broken {
		cc.qmu.Unlock()
		o.done()
		return false
	}
	if cc.queued == 0 && o.Wait == nil {
		cc.qmu.Unlock()
		ok := cc.send(o)
		o.done()
		return ok
	}
	cc.queued++
	cc.qmu.Unlock()
	if cc.queue == nil {
		cc.queue, cc.writerD = make(chan outResp, maxQueuedResponses), make(chan struct{})
		go cc.writer()
	}
	cc.queue <- o
	return true
}

// Drain waits until every queued response is written; it returns
// net.ErrClosed when the connection is broken (and must close).
func (cc *Conn) Drain() error {
	if !cc.drain() {
		return net.ErrClosed
	}
	return nil
}

// drain waits until every queued response is written; false means the
// connection is broken.
func (cc *Conn) drain() bool {
	cc.qmu.Lock()
	defer cc.qmu.Unlock()
	for cc.queued > 0 && !cc.broken {
		cc.qidle.Wait()
	}
	return !cc.broken
}

// writer writes queued responses in order, completing delayed ones first.
func (cc *Conn) writer() {
	defer close(cc.writerD)
	for o := range cc.queue {
		cc.qmu.Lock()
		broken := cc.broken
		cc.qmu.Unlock()
		ok := !broken && cc.complete(o) && cc.send(o)
		o.done()
		cc.qmu.Lock()
		cc.queued--
		if !ok && !cc.broken {
			cc.broken = true
			cc.close() // the reader's next read fails
		}
		if cc.queued == 0 || cc.broken {
			cc.qidle.Broadcast()
		}
		cc.qmu.Unlock()
	}
}

// complete runs a delayed response's wait, turning a panic into a closed
// connection as handle does.
func (cc *Conn) complete(o outResp) (ok bool) {
	if o.Wait == nil {
		return true
	}
	defer func() {
		if r := recover(); r != nil {
			cc.log.Error("handler panic", "api", kmsg.NameForKey(o.Msg.Key()), "panic", r)
			ok = false
		}
	}()
	o.Wait()
	return true
}

// stopWriter lets the writer finish what is queued and waits for it.
func (cc *Conn) stopWriter() {
	if cc.queue != nil {
		close(cc.queue)
		<-cc.writerD
	}
}

func (cc *Conn) close() {
	cc.closeMu.Do(func() { cc.raw.Close() })
}

// serve runs the connection until it closes.
func (cc *Conn) serve() {
	defer cc.close()
	defer cc.stopWriter()
	if err := cc.readLoop(); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		cc.log.Debug("closing connection", "err", err)
	}
}

// readFrame reads one size-prefixed request. The body buffer grows as bytes
// arrive, each growth reserved from queued.max.request.bytes first, so a
// peer that announces a large size but sends little costs little memory.
// The size must arrive within connections.max.idle.ms, and so must the
// body after it: a client trickling a request loses the connection.
func (cc *Conn) readFrame(maxSize int32) ([]byte, error) {
	var size [4]byte
	idle := cc.s.idleTimeout()
	if idle > 0 {
		cc.conn.SetReadDeadline(time.Now().Add(idle))
	}
	if _, err := io.ReadFull(cc.conn, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	minSize := int32(8)
	if cc.sasl.raw {
		minSize = 0 // a raw SASL token has no request header (sasl.go)
	}
	if n < minSize || n > maxSize {
		return nil, fmt.Errorf("invalid request size %d (socket.request.max.bytes=%d)", n, maxSize)
	}
	var deadline time.Time
	if idle > 0 {
		deadline = time.Now().Add(idle)
		cc.conn.SetReadDeadline(deadline)
	}
	// The buffer starts at 64 KiB, then 1 MiB (most requests fit), then
	// doubles.
	mem := cc.s.requestMemory()
	var body []byte
	for len(body) < int(n) {
		if len(body) == cap(body) {
			next := 64 << 10
			if cap(body) > 0 {
				next = max(2*cap(body), 1<<20)
			}
			c := min(int(n), next)
			if err := mem.grow(&cc.mem, int64(c-cap(body)), deadline, cc.s.ctx.Done()); err != nil {
				return nil, err
			}
			nb := make([]byte, len(body), c)
			copy(nb, body)
			body = nb
		}
		m, err := cc.conn.Read(body[len(body):cap(body)])
		body = body[:len(body)+m]
		if err != nil && len(body) < int(n) {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
	return body, nil
}

func (cc *Conn) readLoop() error {
	for {
		body, err := cc.readFrame(cc.saslMaxFrame(cc.s.maxRequestBytes()))
		more := err == nil
		if more && cc.sasl.raw {
			more, err = cc.serveRawToken(body) // after SaslHandshake v0 (sasl.go)
		} else if more {
			more, err = cc.serveFrame(body)
		}
		cc.mem.release() // the request is handled (Kafka releases its buffer then too)
		if !more {
			return err
		}
	}
}

// serveFrame reads a request's header and has the Handler handle it. more
// is false when the connection must close: err says why, or is nil when
// it broke.
func (cc *Conn) serveFrame(body []byte) (more bool, err error) {
	r := kbin.Reader{Src: body}
	key, version, corr := r.Int16(), r.Int16(), r.Int32()
	clientID := r.NullableString()
	if !r.Ok() {
		return false, errors.New("malformed request header")
	}
	if clientID != nil {
		cc.clientID = *clientID
	}
	cc.s.lastRequest.Store(time.Now().UnixNano())
	req := Request{Key: key, Version: version, Correlation: corr, Body: r.Src, frame: len(body)}
	if cc.listener.SASL != nil {
		if handled, more, err := cc.saslGate(&req); handled || !more {
			return more, err
		}
	}
	out, err := cc.s.handler.ServeRequest(cc, &req)
	if err != nil {
		return false, err // net.ErrClosed from Drain: broken, closed without a log line
	}
	if key == 18 {
		cc.saslVersionsAnswered(out.Msg)
	}
	if out.Msg == nil {
		return true, nil // acks=0
	}
	return cc.respond(outResp{corr: corr, Response: out}), nil
}

// ReserveDecode reserves from queued.max.request.bytes what decoding the
// request body (after the header's tagged fields) may take
// (Options.DecodeCharge), before the handler decodes it. A request whose
// frame and decoding would take more than the whole bound is refused:
// the handler returns the error and the connection closes, as for a
// frame over socket.request.max.bytes.
func (cc *Conn) ReserveDecode(req *Request, body []byte) error {
	mem := cc.s.requestMemory()
	if mem.max <= 0 {
		return nil
	}
	var charge int64
	if cc.s.opts.DecodeCharge != nil {
		charge = cc.s.opts.DecodeCharge(req.Key, req.Version, body)
	}
	key, version, frame := req.Key, req.Version, req.frame
	if int64(frame)+charge > mem.max {
		err := fmt.Errorf("%s v%d request of %d bytes may take %d bytes once decoded, over queued.max.request.bytes=%d",
			kmsg.NameForKey(key), version, frame, int64(frame)+charge, mem.max)
		cc.s.limits.warn(cc.s.log, "refused a request too large for queued.max.request.bytes", "remote", cc.conn.RemoteAddr().String(), "err", err)
		return err
	}
	var deadline time.Time
	if idle := cc.s.idleTimeout(); idle > 0 {
		deadline = time.Now().Add(idle)
	}
	return mem.grow(&cc.mem, charge, deadline, cc.s.ctx.Done())
}

// send encodes and writes one response; false means the connection is
// broken and must close.
func (cc *Conn) send(o outResp) bool {
	buf := append(cc.wbuf[:0], 0, 0, 0, 0, 0, 0, 0, 0) // size + correlation id
	if o.Msg.IsFlexible() && o.Msg.Key() != 18 {
		buf = append(buf, 0) // empty header tags (ApiVersions answers with header v0, KIP-511)
	}
	buf = o.Msg.AppendTo(buf)
	binary.BigEndian.PutUint32(buf[4:8], uint32(o.corr))
	var err error
	if len(o.Splices) == 0 {
		binary.BigEndian.PutUint32(buf[:4], uint32(len(buf)-4))
		cc.armWrite()
		_, err = cc.conn.Write(buf)
	} else {
		err = cc.writeSpliced(buf, o.Msg.IsFlexible(), o.Splices)
	}
	cc.wbuf = buf
	if cap(buf) > 4<<20 {
		cc.wbuf = nil // do not pin a huge buffer on an idle connection
	}
	if err != nil {
		cc.log.Debug("write failed", "err", err)
		return false
	}
	return true
}

// armWrite sets the deadline of the next write: a response that makes no
// progress for connections.max.idle.ms (a client that does not read)
// closes the connection, which gives back what the response holds (its
// releases: remote chunks pinned outside the cache bound, copy buffers).
// Kafka's writes do not block, and its idle expiry closes such a
// connection after as long.
func (cc *Conn) armWrite() {
	if cc.writeTimeout > 0 {
		cc.conn.SetWriteDeadline(time.Now().Add(cc.writeTimeout))
	}
}
