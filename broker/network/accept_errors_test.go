package network

import (
	"bytes"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"strata/broker/config"
)

// emfileListener fails Accept with EMFILE, as a process out of file
// descriptors does, fails times times, then blocks until closed.
type emfileListener struct {
	mu       sync.Mutex
	fails    int
	attempts int
	closed   chan struct{}
}

func (l *emfileListener) Accept() (net.Conn, error) {
	l.mu.Lock()
	l.attempts++
	fail := l.attempts <= l.fails
	l.mu.Unlock()
	if fail {
		return nil, &net.OpError{Op: "accept", Net: "tcp", Err: os.NewSyscallError("accept4", syscall.EMFILE)}
	}
	<-l.closed
	return nil, net.ErrClosed
}
func (l *emfileListener) Close() error   { close(l.closed); return nil }
func (l *emfileListener) Addr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// Accepts failing with EMFILE back off (a few attempts, not thousands,
// in 300 ms) and are logged once, not per attempt.
func TestAcceptEMFILEBacksOffAndLogsOnce(t *testing.T) {
	var logs syncBuffer
	s := New(Options{Config: &config.Broker{ConnectionsMaxIdleMs: 1000}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ln := &emfileListener{fails: 1 << 30, closed: make(chan struct{})}
	s.Serve(ln)
	time.Sleep(300 * time.Millisecond)
	s.Close()
	s.Wait()
	ln.mu.Lock()
	attempts := ln.attempts
	ln.mu.Unlock()
	// 5, 10, 20, 40, 80, 160 ms: about 7 attempts in 300 ms.
	if attempts < 3 || attempts > 12 {
		t.Fatalf("%d accepts in 300 ms while out of descriptors, want a backoff's few", attempts)
	}
	if n := strings.Count(logs.String(), "no file descriptor left"); n != 1 {
		t.Fatalf("%d log lines for %d failed accepts, want 1:\n%s", n, attempts, logs.String())
	}
}

// Once accepts work again, the loop says so once and backs off anew from
// the shortest delay next time.
func TestAcceptRecoversAfterEMFILE(t *testing.T) {
	var logs syncBuffer
	s := New(Options{Config: &config.Broker{ConnectionsMaxIdleMs: 1000}, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	var b acceptBackoff
	for range 4 {
		s.acceptFailed(&b, fmt.Errorf("accept: %w", syscall.EMFILE))
	}
	if b.delay != 40*time.Millisecond {
		t.Fatalf("delay after 4 failures %v, want 40ms", b.delay)
	}
	s.acceptWorked(&b)
	s.acceptWorked(&b)
	if b.failures != 0 || b.delay != 0 {
		t.Fatalf("state after a working accept: %+v", b)
	}
	// Failing and working in turn (descriptors freed and taken again)
	// logs nothing more within the minute.
	for range 3 {
		s.acceptFailed(&b, fmt.Errorf("accept: %w", syscall.EMFILE))
		if b.delay != acceptBackoffMin {
			t.Fatalf("delay after a new first failure %v, want %v", b.delay, acceptBackoffMin)
		}
		s.acceptWorked(&b)
	}
	out := logs.String()
	if strings.Count(out, "no file descriptor left") != 1 || strings.Count(out, "accepting connections again") != 1 {
		t.Fatalf("logs:\n%s", out)
	}
}
