package broker

// Zero-copy fetch responses. The fetch handler puts a 16-byte marker in the
// Records field of each partition that has data on disk or in the remote
// reader's cache; kmsg encodes the response around it. The writer then
// sends the encoded bytes up to each marker, a corrected length prefix,
// and the records: segment bytes straight from the file with sendfile(2),
// so they never enter user space, or the cached chunks of a remote read
// with one writev(2), so the broker never copies them.

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"golang.org/x/sys/unix"

	"strata/broker/plog"
	"strata/internal/vfs"
)

// spliceRef is what replaces a marker: a file slice, or (memLen > 0)
// in-memory parts.
type spliceRef struct {
	marker [16]byte
	slice  plog.FileSlice
	mem    [][]byte
	memLen int64
}

func (r *spliceRef) len() int64 {
	if r.memLen > 0 {
		return r.memLen
	}
	return r.slice.Len
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
// are the size placeholder) with each marker replaced by its file slice.
func (cc *clientConn) writeSpliced(buf []byte, flexible bool, refs []spliceRef) error {
	type cut struct {
		start, end int // the marker's prefix+bytes in buf
		ref        *spliceRef
	}
	cuts := make([]cut, 0, len(refs))
	size := int64(len(buf) - 4)
	pos := 0
	mlen := bytesPrefixLen(16, flexible)
	for i := range refs {
		r := &refs[i]
		at := bytes.Index(buf[pos:], r.marker[:])
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

	tcp, _ := cc.conn.(*net.TCPConn)
	if tcp != nil {
		setCork(tcp, true)
		defer setCork(tcp, false)
	}
	prev := 0
	var scratch []byte
	for _, c := range cuts {
		scratch = append(scratch[:0], buf[prev:c.start]...)
		scratch = appendBytesPrefix(scratch, c.ref.len(), flexible)
		prev = c.end
		if c.ref.memLen > 0 {
			bufs := append(net.Buffers{scratch}, c.ref.mem...)
			if _, err := bufs.WriteTo(cc.conn); err != nil {
				return err
			}
			continue
		}
		if _, err := cc.conn.Write(scratch); err != nil {
			return err
		}
		if err := sendSlice(cc.conn, tcp, c.ref.slice); err != nil {
			return err
		}
	}
	_, err := cc.conn.Write(buf[prev:])
	return err
}

// sendSlice sends a file slice to the connection: sendfile where the file
// has a descriptor and the connection is TCP, a buffered copy otherwise.
func sendSlice(w io.Writer, tcp *net.TCPConn, s plog.FileSlice) error {
	if fder, ok := s.File.(vfs.Fder); ok && tcp != nil {
		return sendfile(tcp, int(fder.Fd()), s.Pos, s.Len)
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
