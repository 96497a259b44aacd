package e2e

import (
	"io"
	"net"
	"sync"
	"testing"
)

// netCut is a TCP proxy to one address that a test can cut: while cut,
// every connection through it is closed and new ones are closed at once,
// as a network partition between one broker and ZooKeeper looks to both
// (the broker still reaches the bucket and its peers).
type netCut struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	cut    bool
	conns  map[net.Conn]struct{}
}

func newNetCut(t *testing.T, target string) *netCut {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &netCut{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() {
		ln.Close()
		p.Cut()
	})
	go p.accept()
	return p
}

func (p *netCut) Addr() string { return p.ln.Addr().String() }

func (p *netCut) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *netCut) serve(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	if !p.track(c, up) {
		c.Close()
		up.Close()
		return
	}
	var once sync.Once
	done := func() {
		once.Do(func() {
			c.Close()
			up.Close()
			p.mu.Lock()
			delete(p.conns, c)
			delete(p.conns, up)
			p.mu.Unlock()
		})
	}
	go func() { io.Copy(up, c); done() }()
	io.Copy(c, up)
	done()
}

// track registers a proxied pair, unless the link is cut.
func (p *netCut) track(cs ...net.Conn) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cut {
		return false
	}
	for _, c := range cs {
		p.conns[c] = struct{}{}
	}
	return true
}

// Cut closes every connection and refuses new ones until Heal.
func (p *netCut) Cut() {
	p.mu.Lock()
	p.cut = true
	conns := p.conns
	p.conns = map[net.Conn]struct{}{}
	p.mu.Unlock()
	for c := range conns {
		c.Close()
	}
}

// Heal lets connections through again.
func (p *netCut) Heal() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}
