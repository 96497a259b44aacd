package broker

import (
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// dialFrom connects to addr from the local IP from (a loopback address).
func dialFrom(t testing.TB, from, addr string) *rawConn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatalf("dial %s from %s: %v", addr, from, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c}
}

// served reports whether the broker answers an ApiVersions on rc (false:
// it closed the connection).
func served(rc *rawConn) bool {
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "limits", "1"
	rc.c.SetWriteDeadline(time.Now().Add(5 * time.Second))
	if _, err := rc.c.Write(encodeRequest(req, 3, 1)); err != nil {
		return false
	}
	rc.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(rc.c, size[:]); err != nil {
		return false
	}
	_, err := io.CopyN(io.Discard, rc.c, int64(binary.BigEndian.Uint32(size[:])))
	return err == nil
}

// TestMaxConnectionsPerIP: over max.connections.per.ip (or the address's
// max.connections.per.ip.overrides entry) a new connection is closed at
// once; closing one makes room; other addresses are not affected.
func TestMaxConnectionsPerIP(t *testing.T) {
	ts := startTestServer(t, map[string]string{
		"max.connections.per.ip":           "3",
		"max.connections.per.ip.overrides": "127.0.0.2:5, localhost6:7",
	})
	var first []*rawConn
	for i := range 3 {
		rc := dialFrom(t, "127.0.0.1", ts.addr())
		if !served(rc) {
			t.Fatalf("connection %d from 127.0.0.1 refused under max.connections.per.ip=3", i+1)
		}
		first = append(first, rc)
	}
	if served(dialFrom(t, "127.0.0.1", ts.addr())) {
		t.Fatal("a 4th connection from 127.0.0.1 was served; max.connections.per.ip=3")
	}
	for i := range 5 {
		if !served(dialFrom(t, "127.0.0.2", ts.addr())) {
			t.Fatalf("connection %d from 127.0.0.2 refused; its override is 5", i+1)
		}
	}
	if served(dialFrom(t, "127.0.0.2", ts.addr())) {
		t.Fatal("a 6th connection from 127.0.0.2 was served; its override is 5")
	}
	first[0].c.Close()
	if !holdsWithin(5*time.Second, func() bool { return served(dialFrom(t, "127.0.0.1", ts.addr())) }) {
		t.Fatal("no connection from 127.0.0.1 served after one of its three closed")
	}
	for _, rc := range first[1:] {
		if !served(rc) {
			t.Fatal("an admitted connection stopped being served")
		}
	}
}

// TestMaxConnections: over max.connections the newest connection is
// closed at once, whatever its address.
func TestMaxConnections(t *testing.T) {
	ts := startTestServer(t, map[string]string{"max.connections": "4"})
	var open []*rawConn
	for i, from := range []string{"127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.1"} {
		rc := dialFrom(t, from, ts.addr())
		if !served(rc) {
			t.Fatalf("connection %d refused under max.connections=4", i+1)
		}
		open = append(open, rc)
	}
	if served(dialFrom(t, "127.0.0.4", ts.addr())) {
		t.Fatal("a 5th connection was served; max.connections=4")
	}
	open[1].c.Close()
	if !holdsWithin(5*time.Second, func() bool { return served(dialFrom(t, "127.0.0.4", ts.addr())) }) {
		t.Fatal("no new connection served after one of four closed")
	}
}

// TestMaxConnectionsPerIPDynamic: max.connections.per.ip is a dynamic
// cluster-wide config, applied to the next connection.
func TestMaxConnectionsPerIPDynamic(t *testing.T) {
	ts := startTestServer(t, nil)
	admin := dialFrom(t, "127.0.0.9", ts.addr())
	wantCode(t, "SET max.connections.per.ip", incrementalAlter(t, admin, brokerRes, "", false, cfgSet("max.connections.per.ip", "2")), nil)
	for i := range 2 {
		if !served(dialFrom(t, "127.0.0.1", ts.addr())) {
			t.Fatalf("connection %d refused under max.connections.per.ip=2", i+1)
		}
	}
	if served(dialFrom(t, "127.0.0.1", ts.addr())) {
		t.Fatal("a 3rd connection was served after max.connections.per.ip was set to 2")
	}
	if code := incrementalAlter(t, admin, brokerRes, "", false, cfgSet("max.connections.per.ip.overrides", "127.0.0.1")); code == 0 {
		t.Fatal("an override without a count was accepted")
	}
	wantCode(t, "SET an override", incrementalAlter(t, admin, brokerRes, "", false, cfgSet("max.connections.per.ip.overrides", "127.0.0.1:3")), nil)
	if !served(dialFrom(t, "127.0.0.1", ts.addr())) {
		t.Fatal("a 3rd connection refused after its address's override was set to 3")
	}
}
