package broker

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// clientConn is one client connection. One goroutine reads a request,
// handles it and writes its response before reading the next, as Kafka
// processes one request per connection at a time; writing inline saves a
// goroutine hand-off per request.
//
// Produce requests are the exception: an acks=-1 produce is appended at
// once and its response, which waits for replication, goes to a writer
// goroutine, so that the next produce on the connection (a producer keeps
// up to five in flight) is appended while the first one waits, and
// followers fetch both at once. Responses still go out in request order:
// while any is queued, every response queues behind it, and a request
// other than Produce is not handled before the queue is empty, so it
// sees (and its answer follows) every earlier produce's outcome.
//
// A request must arrive, and each write of a response make progress,
// within connections.max.idle.ms; the memory of a request read and not yet
// handled is reserved from queued.max.request.bytes (conn_limits.go).
type clientConn struct {
	s        *Server
	conn     net.Conn
	log      *slog.Logger
	clientID string
	closeMu  sync.Once
	marker   markerGen
	wbuf     []byte // response encoding buffer, reused; written by one goroutine at a time
	// copyBufs lends the buffers local records are read into when a fetch
	// response is copied rather than sent with sendfile; nil: sendfile.
	copyBufs *copyPool

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

// outResp is a response waiting to be written. slices are fetch record
// ranges to be spliced in place of their markers (see sendfile.go); wait,
// when set, completes the response (a delayed produce) before it is
// encoded; release lets go of what the slices hold (remote reads' cached
// chunks) once the response is written or dropped.
type outResp struct {
	corr    int32
	kresp   kmsg.Response
	slices  []spliceRef
	wait    func()
	release []func()
}

// done runs the response's releases.
func (o *outResp) done() {
	for _, f := range o.release {
		f()
	}
	o.release = nil
}

// delayedResponse is a handler's response that is complete only once
// wait has returned: an acks=-1 produce waiting for replication.
type delayedResponse struct {
	kmsg.Response
	wait func()
}

func newClientConn(s *Server, c net.Conn) *clientConn {
	cc := &clientConn{
		s:            s,
		conn:         c,
		log:          s.log.With("remote", c.RemoteAddr().String()),
		writeTimeout: s.idleTimeout(),
	}
	if !s.cfg.SocketSendfileEnable {
		cc.copyBufs = s.copyBufs
	}
	cc.marker.init()
	cc.qidle = sync.NewCond(&cc.qmu)
	return cc
}

// respond writes o inline when nothing is queued and o is complete, and
// otherwise queues it for the writer goroutine. false means the
// connection is broken.
func (cc *clientConn) respond(o outResp) bool {
	cc.qmu.Lock()
	if cc.broken {
		cc.qmu.Unlock()
		o.done()
		return false
	}
	if cc.queued == 0 && o.wait == nil {
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

// drain waits until every queued response is written; false means the
// connection is broken.
func (cc *clientConn) drain() bool {
	cc.qmu.Lock()
	defer cc.qmu.Unlock()
	for cc.queued > 0 && !cc.broken {
		cc.qidle.Wait()
	}
	return !cc.broken
}

// writer writes queued responses in order, completing delayed ones first.
func (cc *clientConn) writer() {
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
func (cc *clientConn) complete(o outResp) (ok bool) {
	if o.wait == nil {
		return true
	}
	defer func() {
		if r := recover(); r != nil {
			cc.log.Error("handler panic", "api", kmsg.NameForKey(o.kresp.Key()), "panic", r)
			ok = false
		}
	}()
	o.wait()
	return true
}

// stopWriter lets the writer finish what is queued and waits for it.
func (cc *clientConn) stopWriter() {
	if cc.queue != nil {
		close(cc.queue)
		<-cc.writerD
	}
}

func (cc *clientConn) close() {
	cc.closeMu.Do(func() { cc.conn.Close() })
}

// serve runs the connection until it closes.
func (cc *clientConn) serve() {
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
func (cc *clientConn) readFrame(maxSize int32) ([]byte, error) {
	var size [4]byte
	idle := cc.s.idleTimeout()
	if idle > 0 {
		cc.conn.SetReadDeadline(time.Now().Add(idle))
	}
	if _, err := io.ReadFull(cc.conn, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 8 || n > maxSize {
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

func (cc *clientConn) readLoop() error {
	for {
		body, err := cc.readFrame(cc.s.maxRequestBytes())
		more := err == nil
		if more {
			more, err = cc.serveFrame(body)
		}
		cc.mem.release() // the request is handled (Kafka releases its buffer then too)
		if !more {
			return err
		}
	}
}

// serveFrame decodes and handles one request. more is false when the
// connection must close: err says why, or is nil when it broke.
func (cc *clientConn) serveFrame(body []byte) (more bool, err error) {
	r := kbin.Reader{Src: body}
	key, version, corr := r.Int16(), r.Int16(), r.Int32()
	clientID := r.NullableString()
	if !r.Ok() {
		return false, errors.New("malformed request header")
	}
	if clientID != nil {
		cc.clientID = *clientID
	}
	entry, ok := apis[key]
	if key == 18 && (!ok || version > entry.max || version < 0) {
		// KIP-511: answer at v0 without parsing the body.
		return cc.respond(outResp{corr: corr, kresp: unsupportedApiVersions()}), nil
	}
	kreq := kmsg.RequestForKey(key)
	if kreq == nil {
		return false, fmt.Errorf("unknown api key %d", key)
	}
	if !ok || version < entry.min || version > entry.max {
		if resp := unsupportedResponse(kreq, version); resp != nil {
			return cc.respond(outResp{corr: corr, kresp: resp}), nil
		}
		return false, fmt.Errorf("unsupported %s version %d", kmsg.NameForKey(key), version)
	}
	kreq.SetVersion(version)
	if kreq.IsFlexible() {
		kmsg.SkipTags(&r)
		if !r.Ok() {
			return false, errors.New("malformed request header tags")
		}
	}
	if err := cc.reserveDecode(key, version, len(body), r.Src); err != nil {
		return false, err
	}
	if err := kreq.ReadFrom(r.Src); err != nil {
		return false, fmt.Errorf("decode %s v%d: %w", kmsg.NameForKey(key), version, err)
	}
	if key != 0 && !cc.drain() { // only produces overtake queued responses
		return false, nil
	}
	out, err := cc.handle(entry.fn, kreq)
	if err != nil {
		return false, err
	}
	if out.kresp == nil {
		return true, nil // acks=0
	}
	out.corr = corr
	return cc.respond(out), nil
}

// reserveDecode reserves from queued.max.request.bytes what decoding a
// request body may take (decodeCharge), before kmsg allocates it. A
// request whose frame and decoding would take more than the whole bound
// is refused: the connection closes, as for a frame over
// socket.request.max.bytes.
func (cc *clientConn) reserveDecode(key, version int16, frame int, body []byte) error {
	mem := cc.s.requestMemory()
	if mem.max <= 0 {
		return nil
	}
	charge := decodeCharge(key, version, body)
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

// handle runs a handler, turning a panic into a closed connection rather
// than a dead broker.
func (cc *clientConn) handle(fn handler, kreq kmsg.Request) (out outResp, err error) {
	defer func() {
		if r := recover(); r != nil {
			cc.log.Error("handler panic", "api", kmsg.NameForKey(kreq.Key()), "panic", r)
			err = fmt.Errorf("internal error handling %s", kmsg.NameForKey(kreq.Key()))
		}
	}()
	cc.s.metrics.requests.WithLabelValues(kmsg.NameForKey(kreq.Key())).Inc()
	if kreq.Key() == 1 {
		return cc.s.handleFetchSpliced(cc, kreq.(*kmsg.FetchRequest))
	}
	resp, err := fn(cc.s, cc, kreq)
	if d, ok := resp.(*delayedResponse); ok {
		return outResp{kresp: d.Response, wait: d.wait}, err
	}
	return outResp{kresp: resp}, err
}

// send encodes and writes one response; false means the connection is
// broken and must close.
func (cc *clientConn) send(o outResp) bool {
	buf := append(cc.wbuf[:0], 0, 0, 0, 0, 0, 0, 0, 0) // size + correlation id
	if o.kresp.IsFlexible() && o.kresp.Key() != 18 {
		buf = append(buf, 0) // empty header tags
	}
	buf = o.kresp.AppendTo(buf)
	binary.BigEndian.PutUint32(buf[4:8], uint32(o.corr))
	var err error
	if len(o.slices) == 0 {
		binary.BigEndian.PutUint32(buf[:4], uint32(len(buf)-4))
		cc.armWrite()
		_, err = cc.conn.Write(buf)
	} else {
		err = cc.writeSpliced(buf, o.kresp.IsFlexible(), o.slices)
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
func (cc *clientConn) armWrite() {
	if cc.writeTimeout > 0 {
		cc.conn.SetWriteDeadline(time.Now().Add(cc.writeTimeout))
	}
}
