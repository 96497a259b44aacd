package e2e

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/internal/testenv"
)

// maxRequest is the socket.request.max.bytes the bad-input broker runs with.
const maxRequest = 200 << 20

// frame prefixes body with its size, as Kafka frames requests.
func frame(body []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(body))), body...)
}

// requestHeader encodes a request header v1 (key, version, correlation id,
// client id), plus the empty tagged-field section of header v2 if flexible.
func requestHeader(key, version int16, corr int32, flexible bool) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(key))
	b = binary.BigEndian.AppendUint16(b, uint16(version))
	b = binary.BigEndian.AppendUint32(b, uint32(corr))
	b = binary.BigEndian.AppendUint16(b, uint16(len("strata-e2e")))
	b = append(b, "strata-e2e"...)
	if flexible {
		b = append(b, 0)
	}
	return b
}

// TestBadInput sends what a broken or hostile client might over raw TCP
// and checks the broker's answer: a closed connection for frames it cannot
// serve, Kafka's UNSUPPORTED_VERSION answer for a too-new ApiVersions, no
// memory taken for a size announced but not sent, and service to other
// connections throughout.
func TestBadInput(t *testing.T) {
	b := testenv.StartBroker(t, testenv.BrokerOptions{
		Sets:    []string{"socket.request.max.bytes=" + strconv.Itoa(maxRequest)},
		Metrics: "127.0.0.1:0",
	})
	// A connection opened before any bad input must keep working, as must
	// new ones.
	kept := dialRaw(t, b.Addr())
	serving := func(t *testing.T) {
		t.Helper()
		if !b.Running() {
			t.Fatalf("broker process exited; stderr tail:\n%s", b.Logs())
		}
		for _, c := range []struct {
			name string
			rc   *rawConn
		}{{"a connection opened before", kept}, {"a new connection", dialRaw(t, b.Addr())}} {
			req := kmsg.NewPtrApiVersionsRequest()
			req.Version = 3
			req.ClientSoftwareName, req.ClientSoftwareVersion = "strata-e2e", "1"
			c.rc.t = t
			resp := c.rc.request(req).(*kmsg.ApiVersionsResponse)
			if resp.ErrorCode != 0 || len(resp.ApiKeys) == 0 {
				t.Fatalf("ApiVersions v3 on %s: error code %d, %d keys", c.name, resp.ErrorCode, len(resp.ApiKeys))
			}
		}
	}

	t.Run("size-over-socket.request.max.bytes", func(t *testing.T) {
		rc := dialRaw(t, b.Addr())
		hdr := binary.BigEndian.AppendUint32(nil, maxRequest+1)
		if err := rc.write(append(hdr, requestHeader(18, 3, 1, true)...)); err != nil {
			t.Fatalf("write: %v", err)
		}
		rc.waitClosed(10*time.Second, "size over socket.request.max.bytes")
		serving(t)
	})
	t.Run("negative-size", func(t *testing.T) {
		rc := dialRaw(t, b.Addr())
		if err := rc.write([]byte{0xff, 0xff, 0xff, 0xfe, 0, 18, 0, 3}); err != nil {
			t.Fatalf("write: %v", err)
		}
		rc.waitClosed(10*time.Second, "negative size")
		serving(t)
	})
	t.Run("garbage", func(t *testing.T) {
		rng := rand.New(rand.NewPCG(1, 2))
		for i := range 5 {
			body := randBytes(rng, 20+rng.IntN(500))
			if i%2 == 1 {
				// A known key and version, then a body of noise.
				copy(body, requestHeader(3, 12, int32(i), true))
				copy(body[len(requestHeader(3, 12, 0, true)):], []byte{0xff, 0xff, 0xff})
			}
			rc := dialRaw(t, b.Addr())
			if err := rc.write(frame(body)); err != nil {
				t.Fatalf("write: %v", err)
			}
			rc.waitClosed(10*time.Second, fmt.Sprintf("garbage frame %d (%x...)", i, body[:8]))
		}
		serving(t)
	})
	t.Run("unknown-api-key", func(t *testing.T) {
		rc := dialRaw(t, b.Addr())
		if err := rc.write(frame(requestHeader(999, 0, 1, false))); err != nil {
			t.Fatalf("write: %v", err)
		}
		rc.waitClosed(10*time.Second, "unknown API key 999")
		serving(t)
	})
	t.Run("api-versions-too-new", func(t *testing.T) {
		rc := dialRaw(t, b.Addr())
		// ApiVersions v99 as a future client would send it: header v2,
		// then a body the broker cannot know the shape of.
		body := requestHeader(18, 99, 42, true)
		body = append(body, 11)
		body = append(body, "strata-e2e"...)
		body = append(body, 2, '9', 0)
		if err := rc.write(frame(body)); err != nil {
			t.Fatalf("write: %v", err)
		}
		corr, rest, err := rc.readFrame()
		if err != nil {
			t.Fatalf("read ApiVersions v99 response: %v", err)
		}
		if corr != 42 {
			t.Errorf("correlation id %d, want 42", corr)
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = 0
		if err := resp.ReadFrom(rest); err != nil {
			t.Fatalf("decode response as ApiVersions v0: %v (%x)", err, rest)
		}
		if resp.ErrorCode != 35 {
			t.Errorf("error code %d, want 35 (UNSUPPORTED_VERSION)", resp.ErrorCode)
		}
		found := false
		for _, k := range resp.ApiKeys {
			if k.ApiKey == 18 {
				found = k.MinVersion == 0 && k.MaxVersion >= 3
			}
		}
		if !found {
			t.Errorf("response does not list ApiVersions 0..3+ among its %d keys, so the client cannot retry lower", len(resp.ApiKeys))
		}
		// The connection stays usable: the client retries at a version
		// the broker knows.
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 3
		req.ClientSoftwareName, req.ClientSoftwareVersion = "strata-e2e", "1"
		if r := rc.request(req).(*kmsg.ApiVersionsResponse); r.ErrorCode != 0 {
			t.Errorf("ApiVersions v3 after v99 on the same connection: error code %d", r.ErrorCode)
		}
		serving(t)
	})
	t.Run("announced-size-not-sent", func(t *testing.T) {
		const announced, conns = 100 << 20, 4
		before := allocatedBytes(t, b)
		for i := range conns {
			rc := dialRaw(t, b.Addr())
			hdr := binary.BigEndian.AppendUint32(nil, announced)
			if err := rc.write(append(hdr, requestHeader(0, 9, int32(i), true)[:10]...)); err != nil {
				t.Fatalf("write: %v", err)
			}
		}
		serving(t)
		// Watch for a second: a broker that allocates what a frame
		// announces does so as soon as it reads the size.
		for deadline := time.Now().Add(time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			rss, peak, err := b.RSS()
			if err != nil {
				t.Fatalf("read broker rss: %v", err)
			}
			if rss >= announced || peak >= announced {
				t.Fatalf("broker RSS %d MB (peak %d MB) with %d connections announcing %d MB each and sending 10 bytes", rss>>20, peak>>20, conns, announced>>20)
			}
			if d := allocatedBytes(t, b) - before; d >= announced/2 {
				t.Fatalf("broker allocated %d MB after %d connections announced %d MB each and sent 10 bytes; frames must be read incrementally", d>>20, conns, announced>>20)
			}
		}
	})
	t.Run("still-serving", func(t *testing.T) {
		createTopic(t, b.Addr(), "after-bad-input", 1, nil)
		cl := newClient(t, b.Addr(), kgo.DefaultProduceTopic("after-bad-input"))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		r := &kgo.Record{Value: []byte("still here")}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce after bad input: %v", err)
		}
		got := consumeAll(t, b.Addr(), "after-bad-input", map[int32]int64{0: r.Offset + 1})
		compareRecords(t, []*kgo.Record{r}, got)
	})
}

// allocatedBytes reads go_memstats_alloc_bytes_total, the bytes the
// broker's Go heap has ever allocated, from its metrics endpoint.
func allocatedBytes(t *testing.T, b *testenv.Broker) int64 {
	t.Helper()
	addr := b.MetricsAddr()
	if addr == "" {
		t.Fatalf("broker did not log its metrics address")
	}
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("get metrics: %v", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_alloc_bytes_total "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("metrics: go_memstats_alloc_bytes_total %q: %v", v, err)
			}
			return int64(f)
		}
	}
	t.Fatalf("metrics: no go_memstats_alloc_bytes_total (scan error %v)", sc.Err())
	return 0
}
