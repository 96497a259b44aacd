package broker

import (
	"errors"
	"io"
	"net"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// holdsWithin polls cond every 10ms until it holds or d passes.
func holdsWithin(d time.Duration, cond func() bool) bool {
	for end := time.Now().Add(d); ; time.Sleep(10 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
	}
}

// connCount is the number of connections the server serves.
func (ts *testServer) connCount() int { return ts.network.Conns() }

// closedSoon reports whether the broker closed c within d: a read ends in
// EOF or a reset rather than a timeout (data the broker sent first is
// skipped).
func closedSoon(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !(errors.As(err, &ne) && ne.Timeout())
}

// TestFetchNeverReadClosed: consumers that send a Fetch of a topic with
// data and never read lose the connection after connections.max.idle.ms,
// and the copy buffers their responses held go back to the pool.
func TestFetchNeverReadClosed(t *testing.T) {
	for _, sendfile := range []bool{false, true} {
		t.Run("sendfile="+strconv.FormatBool(sendfile), func(t *testing.T) {
			ts := startTestServer(t, map[string]string{
				"connections.max.idle.ms": "500",
				"socket.sendfile.enable":  strconv.FormatBool(sendfile),
			})
			cl := ts.client(t, kgo.DefaultProduceTopic("data"), kgo.AllowAutoTopicCreation(),
				kgo.ProducerBatchMaxBytes(1<<20), kgo.ProducerBatchCompression(kgo.NoCompression()))
			ctx := testCtx(t)
			for range 48 {
				cl.Produce(ctx, &kgo.Record{Value: make([]byte, 512<<10)}, nil)
			}
			if err := cl.Flush(ctx); err != nil {
				t.Fatal(err)
			}
			for range 3 {
				rc := dialRaw(t, ts.addr())
				rc.c.(*net.TCPConn).SetReadBuffer(4 << 10)
				rc.send(fetchReq(0, 0, 32<<20, fetchPart{"data", 0, 0, 32 << 20}), 12)
			}
			if !sendfile && !holdsWithin(5*time.Second, func() bool { return ts.network.CopyBuffersLent() > 0 }) {
				t.Fatal("the fetch responses never held copy buffers")
			}
			if !holdsWithin(5*time.Second, func() bool { return ts.connCount() == 0 }) {
				t.Fatalf("%d connections that never read are still open 5s after their fetch (connections.max.idle.ms=500)", ts.connCount())
			}
			if n := ts.network.CopyBuffersLent(); n != 0 {
				t.Fatalf("%d copy buffers still lent after the connections closed", n)
			}
		})
	}
}

// TestRequestFloodBackpressure: a client that pipelines ApiVersions
// requests and never reads the answers is not read further once its
// responses fill the socket (the broker holds one request, not a queue),
// and is closed after connections.max.idle.ms.
func TestRequestFloodBackpressure(t *testing.T) {
	ts := startTestServer(t, map[string]string{"connections.max.idle.ms": "1000"})
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "flood", "1"
	one := encodeRequest(req, 3, 1)
	var chunk []byte
	for len(chunk) < 64<<10 {
		chunk = append(chunk, one...)
	}
	rc := dialRaw(t, ts.addr())
	rc.c.(*net.TCPConn).SetReadBuffer(4 << 10)
	var written atomic.Int64
	werr := make(chan error, 1)
	go func() {
		for written.Load() < 2<<30 {
			rc.c.SetWriteDeadline(time.Now().Add(30 * time.Second))
			n, err := rc.c.Write(chunk)
			written.Add(int64(n))
			if err != nil {
				werr <- err
				return
			}
		}
		werr <- nil
	}()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	peak := before.HeapInuse
	// The flood ends when the client's write fails or when the broker has
	// closed the connection: a client blocked on a zero window may not
	// hear of the close until its own timeouts (TCP's zero-window probes
	// draw no reset from an orphaned socket).
	deadline := time.After(20 * time.Second)
	opened := false
wait:
	for {
		select {
		case err := <-werr:
			if err == nil {
				t.Fatalf("the broker read all %d MB of requests whose answers were never read", written.Load()>>20)
			}
			break wait
		case <-deadline:
			t.Fatalf("the flood is still being read or held after 20s (%d MB written, %d connections open); connections.max.idle.ms=1000", written.Load()>>20, ts.connCount())
		case <-time.After(20 * time.Millisecond):
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak = max(peak, m.HeapInuse)
			n := ts.connCount()
			opened = opened || n > 0
			if opened && n == 0 {
				break wait
			}
		}
	}
	if n := written.Load(); n > 64<<20 {
		t.Fatalf("the broker read %d MB of requests whose answers were never read before pushing back", n>>20)
	}
	if grew := int64(peak) - int64(before.HeapInuse); grew > 32<<20 {
		t.Fatalf("heap grew by %d MB during the flood", grew>>20)
	}
	t.Logf("flood: %d KB written before the broker stopped reading and closed; heap grew %d KB", written.Load()>>10, (int64(peak)-int64(before.HeapInuse))>>10)
}

// TestSlowlorisClosed: a client trickling a request a byte at a time is
// closed connections.max.idle.ms after it began, and other clients are
// served meanwhile.
func TestSlowlorisClosed(t *testing.T) {
	ts := startTestServer(t, map[string]string{"connections.max.idle.ms": "500"})
	frame := encodeRequest(kmsg.NewPtrMetadataRequest(), 12, 1)
	rc := dialRaw(t, ts.addr())
	start := time.Now()
	closed := make(chan time.Duration, 1)
	go func() {
		for i := 0; i < len(frame); i++ {
			rc.c.SetWriteDeadline(time.Now().Add(time.Second))
			if _, err := rc.c.Write(frame[i : i+1]); err != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		closedSoon(rc.c, 10*time.Second)
		closed <- time.Since(start)
	}()
	other := dialRaw(t, ts.addr())
	other.do(kmsg.NewPtrMetadataRequest(), 12)
	select {
	case d := <-closed:
		if d > 3*time.Second {
			t.Fatalf("slowloris closed after %v (connections.max.idle.ms=500)", d)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("slowloris connection still open after 15s")
	}
	dialRaw(t, ts.addr()).do(kmsg.NewPtrMetadataRequest(), 12)
}
