package network

// Fetch responses without a copy of the records in the encoder. The fetch
// handler puts a 16-byte marker (Conn.NextMarker) in the Records field of
// each partition
// that has data on disk or in the remote reader's cache; kmsg encodes the
// response around it. The writer then sends the encoded bytes up to each
// marker, a corrected length prefix, and the records: the cached chunks
// of a remote read as they are, and segment bytes either read with
// pread(2) into pooled buffers and sent with the rest of the response in
// one writev(2) (the default), or, with socket.sendfile.enable=true,
// straight from the file with sendfile(2), so they never enter user space.

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"strata/broker/plog"
	"strata/internal/vfs"
)

// SpliceRef is what replaces a marker in an encoded response: a file
// slice, or (MemLen > 0) in-memory parts.
type SpliceRef struct {
	Marker [16]byte
	Slice  plog.FileSlice
	Mem    [][]byte
	MemLen int64
}

func (r *SpliceRef) len() int64 {
	if r.MemLen > 0 {
		return r.MemLen
	}
	return r.Slice.Len
}

type markerGen struct {
	prefix [8]byte
	n      uint64
}

func (g *markerGen) init() { rand.Read(g.prefix[:]) }

func (g *markerGen) next() (m [16]byte) {
	g.n++
	copy(m[:8], g.prefix[:])
	binary.BigEndian.PutUint64(m[8:], g.n)
	return m
}

// bytesPrefixLen is the size of the length prefix of a bytes field holding
// n bytes: compact (uvarint n+1) for flexible versions, int32 otherwise.
func bytesPrefixLen(n int64, flexible bool) int {
	if !flexible {
		return 4
	}
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], uint64(n+1))
}

func appendBytesPrefix(dst []byte, n int64, flexible bool) []byte {
	if !flexible {
		return binary.BigEndian.AppendUint32(dst, uint32(n))
	}
	return binary.AppendUvarint(dst, uint64(n+1))
}

// writeSpliced writes buf (a full encoded response whose first four bytes
// are the size placeholder) with each marker replaced by its records.
func (cc *Conn) writeSpliced(buf []byte, flexible bool, refs []SpliceRef) error {
	type cut struct {
		start, end int // the marker's prefix+bytes in buf
		ref        *SpliceRef
	}
	cuts := make([]cut, 0, len(refs))
	size := int64(len(buf) - 4)
	pos := 0
	mlen := bytesPrefixLen(16, flexible)
	for i := range refs {
		r := &refs[i]
		at := bytes.Index(buf[pos:], r.Marker[:])
		if at < 0 {
			return errors.New("fetch marker missing from encoded response")
		}
		at += pos
		if at-mlen < 8 {
			return errors.New("fetch marker misplaced")
		}
		cuts = append(cuts, cut{start: at - mlen, end: at + 16, ref: r})
		size += r.len() - 16 + int64(bytesPrefixLen(r.len(), flexible)-mlen)
		pos = at + 16
	}
	if size > 1<<31-1 {
		return fmt.Errorf("fetch response too large: %d bytes", size)
	}
	binary.BigEndian.PutUint32(buf[:4], uint32(size))

	w := splicedWriter{conn: cc.conn, pool: cc.copyBufs, timeout: cc.writeTimeout}
	w.tcp, _ = cc.conn.(*net.TCPConn)
	defer w.finish()
	prefixes := make([]byte, 0, len(cuts)*binary.MaxVarintLen32) // never grows: its slices stay put
	prev := 0
	for _, c := range cuts {
		at := len(prefixes)
		prefixes = appendBytesPrefix(prefixes, c.ref.len(), flexible)
		w.bufs = append(w.bufs, buf[prev:c.start], prefixes[at:])
		prev = c.end
		if c.ref.MemLen > 0 {
			w.bufs = append(w.bufs, c.ref.Mem...)
			continue
		}
		if err := w.slice(c.ref.Slice); err != nil {
			return err
		}
	}
	w.bufs = append(w.bufs, buf[prev:])
	return w.flush()
}

// Copied fetch responses (socket.sendfile.enable=false) read local records
// into buffers of copyBufSize lent by a copyPool and write each response
// with as few writev(2) calls as the buffers allow: one for a response of
// up to copyWindow buffers. In a paravirtualised guest system calls and
// the page-by-page splicing of sendfile cost hypercalls, so there one
// pread per MiB and one writev per response cost less than sendfile, for
// the broker and for the consumer receiving (bench/RESULTS.md).
const (
	copyBufSize = 1 << 20
	copyWindow  = 8  // buffers one response holds before it writes them out
	copyBuffers = 32 // buffers a broker lends at most (32 MiB)
)

// copyPool lends buffers of copyBufSize: at most max exist, each kept for
// reuse once made (its pages stay faulted in). A connection that finds none
// free writes out what it holds and, if there is still none, sends with
// sendfile: the pool bounds memory and never makes a response wait.
type copyPool struct {
	mu   sync.Mutex
	free [][]byte
	made int
	max  int
	out  int // buffers lent and not given back
	// onGet, if set, runs at the start of each get with mu held (tests:
	// other connections taking buffers).
	onGet func()
}

func newCopyPool(max int) *copyPool { return &copyPool{max: max} }

// get returns a buffer, or nil when all max are lent.
func (p *copyPool) get() []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.onGet != nil {
		p.onGet()
	}
	if n := len(p.free); n > 0 {
		b := p.free[n-1]
		p.free = p.free[:n-1]
		p.out++
		return b
	}
	if p.made == p.max {
		return nil
	}
	p.made++
	p.out++
	return make([]byte, copyBufSize)
}

func (p *copyPool) put(b []byte) {
	p.mu.Lock()
	p.free = append(p.free, b[:copyBufSize])
	p.out--
	p.mu.Unlock()
}

// splicedWriter gathers the pieces of one fetch response and writes them
// with writev; file slices are copied into pool buffers, or (no pool, or
// none free) sent with sendfile after what was gathered before them, with
// TCP_CORK holding the pieces together.
type splicedWriter struct {
	conn   net.Conn
	tcp    *net.TCPConn
	pool   *copyPool
	bufs   net.Buffers
	held   [][]byte // pool buffers in bufs
	corked bool
	// timeout bounds each write (connections.max.idle.ms; 0: none): a
	// client that stops reading fails the write, and the response's
	// buffers are given back.
	timeout time.Duration
}

// arm sets the deadline of the next write.
func (w *splicedWriter) arm() {
	if w.timeout > 0 {
		w.conn.SetWriteDeadline(time.Now().Add(w.timeout))
	}
}

// slice adds a file slice's bytes to the response.
func (w *splicedWriter) slice(s plog.FileSlice) error {
	off, n := s.Pos, s.Len
	for n > 0 && w.pool != nil {
		if len(w.held) == copyWindow {
			if err := w.flush(); err != nil {
				return err
			}
		}
		b := w.pool.get()
		if b == nil && len(w.held) > 0 {
			if err := w.flush(); err != nil { // gives back what this response held
				return err
			}
			b = w.pool.get()
		}
		if b == nil {
			break // every buffer is lent to other connections
		}
		w.held = append(w.held, b)
		b = b[:min(n, int64(len(b)))]
		m, err := s.File.ReadAt(b, off)
		if m < len(b) {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF // file shorter than the slice
			}
			return err
		}
		w.bufs = append(w.bufs, b)
		off += int64(m)
		n -= int64(m)
	}
	if n == 0 {
		return nil
	}
	if w.tcp != nil && !w.corked {
		setCork(w.tcp, true)
		w.corked = true
	}
	if err := w.flush(); err != nil {
		return err
	}
	s.Pos, s.Len = off, n
	w.arm()
	return sendSlice(w.conn, w.tcp, s)
}

// flush writes what was gathered and gives back its pool buffers.
func (w *splicedWriter) flush() error {
	var err error
	if len(w.bufs) > 0 {
		bufs := w.bufs // WriteTo consumes its receiver
		w.arm()
		_, err = bufs.WriteTo(w.conn)
	}
	clear(w.bufs)
	w.bufs = w.bufs[:0]
	w.release()
	return err
}

func (w *splicedWriter) release() {
	for _, b := range w.held {
		w.pool.put(b)
	}
	clear(w.held)
	w.held = w.held[:0]
}

// finish gives back the buffers of a response that failed and uncorks.
func (w *splicedWriter) finish() {
	w.release()
	if w.corked {
		setCork(w.tcp, false)
	}
}

// sendSlice sends a file slice to the connection: sendfile where the file
// has a descriptor and the connection is TCP, a buffered copy otherwise.
func sendSlice(w io.Writer, tcp *net.TCPConn, s plog.FileSlice) error {
	if ff, ok := s.File.(vfs.FdFile); ok && tcp != nil {
		rc, err := ff.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		if err := rc.Control(func(fd uintptr) { serr = sendfile(tcp, int(fd), s.Pos, s.Len) }); err != nil {
			return err // closed (its segment deleted)
		}
		return serr
	}
	_, err := io.Copy(w, io.NewSectionReader(s.File, s.Pos, s.Len))
	return err
}

func sendfile(tcp *net.TCPConn, src int, off, n int64) error {
	rc, err := tcp.SyscallConn()
	if err != nil {
		return err
	}
	var werr error
	for n > 0 && werr == nil {
		err := rc.Write(func(fd uintptr) bool {
			for n > 0 {
				m, err := unix.Sendfile(int(fd), src, &off, int(min(n, 1<<30)))
				if m > 0 {
					n -= int64(m)
				}
				switch {
				case err == syscall.EAGAIN:
					return false // wait until writable
				case err == syscall.EINTR:
					continue
				case err != nil:
					werr = err
					return true
				case m == 0:
					werr = io.ErrUnexpectedEOF // file shorter than the slice
					return true
				}
			}
			return true
		})
		if err != nil {
			return err
		}
	}
	return werr
}

func setCork(tcp *net.TCPConn, on bool) {
	rc, err := tcp.SyscallConn()
	if err != nil {
		return
	}
	v := 0
	if on {
		v = 1
	}
	rc.Control(func(fd uintptr) { unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_CORK, v) })
}
