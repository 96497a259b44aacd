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
// handles it and writes its response before reading the next: Kafka
// processes one request per connection at a time, and writing inline
// saves a goroutine hand-off per request.
type clientConn struct {
	s        *Server
	conn     net.Conn
	log      *slog.Logger
	clientID string
	closeMu  sync.Once
	marker   markerGen
	wbuf     []byte // response encoding buffer, reused
}

// outResp is a response waiting to be written. slices are fetch record
// ranges to be spliced in place of their markers (see sendfile.go).
type outResp struct {
	corr   int32
	kresp  kmsg.Response
	slices []spliceRef
}

func newClientConn(s *Server, c net.Conn) *clientConn {
	cc := &clientConn{
		s:    s,
		conn: c,
		log:  s.log.With("remote", c.RemoteAddr().String()),
	}
	cc.marker.init()
	return cc
}

func (cc *clientConn) close() {
	cc.closeMu.Do(func() { cc.conn.Close() })
}

// serve runs the connection until it closes.
func (cc *clientConn) serve() {
	defer cc.close()
	if err := cc.readLoop(); err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		cc.log.Debug("closing connection", "err", err)
	}
}

// readFrame reads one size-prefixed request. The body buffer grows as bytes
// arrive, so a peer that announces a large size but sends little costs
// little memory.
func (cc *clientConn) readFrame(max int32) ([]byte, error) {
	var size [4]byte
	if idle := cc.s.idleTimeout(); idle > 0 {
		cc.conn.SetReadDeadline(time.Now().Add(idle))
	}
	if _, err := io.ReadFull(cc.conn, size[:]); err != nil {
		return nil, err
	}
	n := int32(binary.BigEndian.Uint32(size[:]))
	if n < 8 || n > max {
		return nil, fmt.Errorf("invalid request size %d (socket.request.max.bytes=%d)", n, max)
	}
	const chunk = 1 << 20
	body := make([]byte, 0, min(int(n), chunk))
	for len(body) < int(n) {
		want := min(int(n)-len(body), chunk)
		if cap(body)-len(body) < want {
			nb := make([]byte, len(body), min(int(n), 2*cap(body)+want))
			copy(nb, body)
			body = nb
		}
		m, err := io.ReadFull(cc.conn, body[len(body):len(body)+want])
		body = body[:len(body)+m]
		if err != nil {
			return nil, err
		}
	}
	return body, nil
}

func (cc *clientConn) readLoop() error {
	for {
		body, err := cc.readFrame(cc.s.maxRequestBytes())
		if err != nil {
			return err
		}
		r := kbin.Reader{Src: body}
		key, version, corr := r.Int16(), r.Int16(), r.Int32()
		clientID := r.NullableString()
		if !r.Ok() {
			return errors.New("malformed request header")
		}
		if clientID != nil {
			cc.clientID = *clientID
		}
		entry, ok := apis[key]
		if key == 18 && (!ok || version > entry.max || version < 0) {
			// KIP-511: answer at v0 without parsing the body.
			if !cc.send(outResp{corr: corr, kresp: unsupportedApiVersions()}) {
				return nil
			}
			continue
		}
		kreq := kmsg.RequestForKey(key)
		if kreq == nil {
			return fmt.Errorf("unknown api key %d", key)
		}
		if !ok || version < entry.min || version > entry.max {
			if resp := unsupportedResponse(kreq, version); resp != nil {
				if !cc.send(outResp{corr: corr, kresp: resp}) {
					return nil
				}
				continue
			}
			return fmt.Errorf("unsupported %s version %d", kmsg.NameForKey(key), version)
		}
		kreq.SetVersion(version)
		if kreq.IsFlexible() {
			kmsg.SkipTags(&r)
			if !r.Ok() {
				return errors.New("malformed request header tags")
			}
		}
		if err := kreq.ReadFrom(r.Src); err != nil {
			return fmt.Errorf("decode %s v%d: %w", kmsg.NameForKey(key), version, err)
		}
		out, err := cc.handle(entry.fn, kreq)
		if err != nil {
			return err
		}
		if out.kresp == nil {
			continue // acks=0
		}
		out.corr = corr
		if !cc.send(out) {
			return nil
		}
	}
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
