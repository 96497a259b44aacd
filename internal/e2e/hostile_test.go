package e2e

import (
	"context"
	"encoding/binary"
	"hash/crc32"
	"io"
	"net"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/internal/testenv"
)

// The hostile-clients campaign's broker settings and bounds.
const (
	hostileQueuedBytes = 128 << 20 // queued.max.request.bytes
	hostilePerIP       = 48        // max.connections.per.ip (127.0.0.1, the hostile address)
	hostileIdleMs      = 4000      // connections.max.idle.ms
	hostilePhase       = 15 * time.Second

	// hostileRSSBound is the peak RSS the broker must stay under. What the
	// campaign can make it hold: requests within queued.max.request.bytes
	// (128 MiB; one request may exceed it when every holder waits, by at
	// most its own charge, which the amplifiers keep under 48 MiB), the
	// fetch copy buffers (32 MiB; never-reading fetchers hold them until
	// connections.max.idle.ms), 64 KiB per connection reading a request,
	// and about 64 MiB of baseline heap and runtime. The Go collector
	// lets the heap grow to twice what is live before it runs (GOGC=100),
	// hence 2 × (128 + 48 + 32 + 64) MiB ≈ 544 MiB, rounded to 576.
	hostileRSSBound = 576 << 20
)

// hostileFrom is the address the well-behaved clients connect from; the
// hostile ones use 127.0.0.1, so max.connections.per.ip caps them alone.
const hostileFrom = "127.0.0.2"

// hostileStats counts what the hostile clients did.
type hostileStats struct {
	dials, refused, closedByBroker atomic.Int64
	slowloris, neverRead, floods   atomic.Int64
	claims, lies, amplifiers       atomic.Int64
	lieAnswers, burstServed        atomic.Int64
	burstMaxServed                 atomic.Int64
	neverReadClosed, floodsClosed  atomic.Int64 // closed by the broker (connections.max.idle.ms)
}

// TestHostileClients is the hostile-clients campaign of the reliability
// issue: for 15 seconds, from 127.0.0.1, slowloris clients trickle
// requests, fetchers of a topic with data never read, floods of tiny
// requests are pipelined without reading, frames claim 2 GiB (and 100 MB
// while sending 20 bytes), produce requests carry record batches whose
// record counts lie, Metadata requests decode to a hundred times their
// size, and bursts of connections go over max.connections.per.ip. A
// well-behaved franz-go producer (acks=all, idempotent) and consumer
// connect from 127.0.0.2 meanwhile: every record they produce must come
// back, with produce latency and throughput within sane bounds, and the
// broker's peak RSS must stay under hostileRSSBound.
func TestHostileClients(t *testing.T) {
	testStart := time.Now()
	b := testenv.StartBroker(t, testenv.BrokerOptions{
		Sets: []string{
			"connections.max.idle.ms=" + strconv.Itoa(hostileIdleMs),
			"queued.max.request.bytes=" + strconv.Itoa(hostileQueuedBytes),
			"max.connections.per.ip=" + strconv.Itoa(hostilePerIP),
			"max.connections.per.ip.overrides=" + hostileFrom + ":200",
			"max.connections=1000",
		},
	})
	addr := b.Addr()
	createTopic(t, addr, "hostile-data", 1, nil)
	createTopic(t, addr, "hostile-lies", 1, nil)
	createTopic(t, addr, "well", 3, nil)

	// 32 MiB for the fetchers that never read.
	{
		cl := newClient(t, addr, kgo.DefaultProduceTopic("hostile-data"), kgo.ProducerBatchCompression(kgo.NoCompression()))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		for range 64 {
			cl.Produce(ctx, &kgo.Record{Value: make([]byte, 512<<10)}, nil)
		}
		if err := cl.Flush(ctx); err != nil {
			t.Fatalf("produce the fetchers' data: %v", err)
		}
		cancel()
		cl.Close()
	}
	rss0, _, err := b.RSS()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("set up in %v", time.Since(testStart).Round(time.Millisecond))

	// The hostile clients.
	var st hostileStats
	ctx, stop := context.WithTimeout(context.Background(), hostilePhase)
	defer stop()
	var wg sync.WaitGroup
	run := func(n int, f func(ctx context.Context)) {
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					f(ctx)
				}
			}()
		}
	}
	h := hostile{addr: addr, st: &st}
	run(8, h.slowloris)
	run(8, h.neverRead)
	run(3, h.flood)
	run(4, h.claims)
	run(1, h.lies)
	run(1, h.amplify)
	run(1, h.burst)

	// The RSS sampler.
	var peakSeen atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if rss, _, err := b.RSS(); err == nil && rss > peakSeen.Load() {
				peakSeen.Store(rss)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()

	// The well-behaved producer and consumer.
	dial := kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		d := net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(hostileFrom)}}
		return d.DialContext(ctx, network, host)
	})
	producer := newClient(t, addr, dial, kgo.DefaultProduceTopic("well"), kgo.RequiredAcks(kgo.AllISRAcks()))
	consumer := newClient(t, addr, dial, kgo.ConsumeTopics("well"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(500*time.Millisecond))
	var (
		mu        sync.Mutex
		latencies []time.Duration
		acked     = map[string]bool{}
		produceEr error
	)
	const rate = 500 // records a second, 1 KiB each
	planned := 0     // guarded by mu
	start := time.Now()
	pctx, pcancel := context.WithTimeout(context.Background(), hostilePhase+30*time.Second)
	defer pcancel()
	consumed := map[string]bool{}
	var consumeErr error
	cctx, ccancel := context.WithCancel(pctx)
	defer ccancel()
	cdone := make(chan struct{})
	go func() {
		defer close(cdone)
		for cctx.Err() == nil {
			fs := consumer.PollFetches(cctx)
			fs.EachError(func(_ string, _ int32, err error) {
				if cctx.Err() == nil {
					mu.Lock()
					consumeErr = err
					mu.Unlock()
				}
			})
			fs.EachRecord(func(r *kgo.Record) {
				mu.Lock()
				consumed[string(r.Key)] = true
				mu.Unlock()
			})
		}
	}()
	tick := time.NewTicker(20 * time.Millisecond)
	for ctx.Err() == nil {
		<-tick.C
		for range rate / 50 {
			mu.Lock()
			key := "well-" + strconv.Itoa(planned)
			planned++
			mu.Unlock()
			sent := time.Now()
			producer.Produce(pctx, &kgo.Record{Key: []byte(key), Value: make([]byte, 1024)}, func(r *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					produceEr = err
					return
				}
				latencies = append(latencies, time.Since(sent))
				acked[key] = true
			})
		}
	}
	tick.Stop()
	elapsed := time.Since(start)
	wg.Wait() // the hostile clients stop with the phase
	t.Logf("hostile clients stopped %v after the phase", time.Since(start.Add(hostilePhase)).Round(time.Millisecond))
	if err := producer.Flush(pctx); err != nil {
		t.Fatalf("flush the well-behaved producer: %v", err)
	}
	// The consumer has caught up when it has every acknowledged record.
	caughtUp := func() bool {
		mu.Lock()
		defer mu.Unlock()
		for k := range acked {
			if !consumed[k] {
				return false
			}
		}
		return true
	}
	for !caughtUp() && pctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	ccancel()
	<-cdone
	_, peak, err := b.RSS()
	if err != nil {
		t.Fatal(err)
	}
	peak = max(peak, peakSeen.Load())
	t.Logf("well-behaved clients done %v after the phase", time.Since(start.Add(hostilePhase)).Round(time.Millisecond))

	t.Logf("hostile clients: %d dials, %d refused at once (max.connections.per.ip=%d), %d closed by the broker; "+
		"%d slowloris, %d never-reading fetches (%d closed), %d floods (%d closed), %d oversized claims, %d lying batches (%d answered), %d amplifying requests; "+
		"bursts: at most %d of 100 connections served",
		st.dials.Load(), st.refused.Load(), hostilePerIP, st.closedByBroker.Load(),
		st.slowloris.Load(), st.neverRead.Load(), st.neverReadClosed.Load(), st.floods.Load(), st.floodsClosed.Load(),
		st.claims.Load(), st.lies.Load(), st.lieAnswers.Load(), st.amplifiers.Load(), st.burstMaxServed.Load())
	_, lieEnd := offsets(t, addr, "hostile-lies")
	t.Logf("hostile-lies: log end offset %d after %d lying batches of one record", lieEnd[0], st.lies.Load())
	mu.Lock()
	defer mu.Unlock()
	sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
	var p50, p99, worst time.Duration
	if n := len(latencies); n > 0 {
		p50, p99, worst = latencies[n/2], latencies[n*99/100], latencies[n-1]
	}
	t.Logf("well-behaved: %d records produced in %v (%.0f/s), produce latency p50 %v p99 %v max %v; %d consumed",
		len(acked), elapsed.Round(time.Millisecond), float64(len(acked))/elapsed.Seconds(), p50, p99, worst, len(consumed))
	t.Logf("broker RSS: %d MiB before the campaign, peak %d MiB (bound %d MiB)", rss0>>20, peak>>20, hostileRSSBound>>20)

	if !b.Running() {
		t.Fatalf("broker exited during the campaign; stderr tail:\n%s", lastLines(b.Logs(), 30))
	}
	if produceEr != nil {
		t.Errorf("well-behaved produce failed: %v", produceEr)
	}
	if len(acked) != planned {
		t.Errorf("%d of %d records acknowledged", len(acked), planned)
	}
	if want := int(0.8 * rate * hostilePhase.Seconds()); planned < want {
		t.Errorf("the well-behaved producer managed %d records in %v, want at least %d (%d/s)", planned, hostilePhase, want, rate)
	}
	missing := 0
	for k := range acked {
		if !consumed[k] {
			missing++
		}
	}
	if missing > 0 {
		t.Errorf("%d acknowledged records not consumed (last consume error: %v)", missing, consumeErr)
	}
	if p99 > 2*time.Second || worst > 10*time.Second {
		t.Errorf("well-behaved produce latency p99 %v, max %v: want under 2s and 10s", p99, worst)
	}
	if peak > hostileRSSBound {
		t.Errorf("broker peak RSS %d MiB, over the bound of %d MiB", peak>>20, hostileRSSBound>>20)
	}
	if st.neverReadClosed.Load() == 0 || st.floodsClosed.Load() == 0 {
		t.Errorf("connections.max.idle.ms=%d: %d never-reading fetchers and %d floods closed by the broker, want some of each",
			hostileIdleMs, st.neverReadClosed.Load(), st.floodsClosed.Load())
	}
	if lieEnd[0] > st.lies.Load() {
		t.Errorf("hostile-lies: log end offset %d after %d batches of one record each: a lying record count moved it", lieEnd[0], st.lies.Load())
	}
	if st.refused.Load() == 0 || st.burstMaxServed.Load() > hostilePerIP {
		t.Errorf("max.connections.per.ip=%d: %d connections refused, a burst had %d served", hostilePerIP, st.refused.Load(), st.burstMaxServed.Load())
	}
	if st.slowloris.Load() == 0 || st.neverRead.Load() == 0 || st.floods.Load() == 0 || st.claims.Load() == 0 || st.lies.Load() == 0 || st.amplifiers.Load() == 0 {
		t.Errorf("a kind of hostile client never ran: %+v", &st)
	}
}

// hostile holds the hostile clients' behaviours; each method is one round
// of one client, run in a loop until the campaign ends.
type hostile struct {
	addr string
	st   *hostileStats
}

// dial connects from 127.0.0.1. It returns nil (after a pause) when the
// broker refuses the connection at once, as it does over
// max.connections.per.ip.
func (h hostile) dial(ctx context.Context) net.Conn {
	h.st.dials.Add(1)
	d := net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP("127.0.0.1")}}
	c, err := d.DialContext(ctx, "tcp", h.addr)
	if err != nil {
		pause(ctx, 50*time.Millisecond)
		return nil
	}
	// A refused connection is closed before anything is read.
	c.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	var b [1]byte
	if _, err := c.Read(b[:]); err != nil {
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			h.st.refused.Add(1)
			c.Close()
			pause(ctx, 50*time.Millisecond)
			return nil
		}
	}
	c.SetReadDeadline(time.Time{})
	go func() { <-ctx.Done(); c.Close() }()
	return c
}

func pause(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// writeAll writes b with a deadline; false when the broker closed.
func (h hostile) writeAll(c net.Conn, b []byte, d time.Duration) bool {
	c.SetWriteDeadline(time.Now().Add(d))
	_, err := c.Write(b)
	return err == nil
}

// closed waits until the broker closes c (reading and dropping what it
// sends), up to d.
func (h hostile) closed(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	ne, ok := err.(net.Error)
	if ok && ne.Timeout() {
		return false
	}
	h.st.closedByBroker.Add(1)
	return true
}

// slowloris trickles a Metadata request a byte every 300ms.
func (h hostile) slowloris(ctx context.Context) {
	c := h.dial(ctx)
	if c == nil {
		return
	}
	defer c.Close()
	h.st.slowloris.Add(1)
	req := kmsg.NewPtrMetadataRequest()
	f := hostileEncode(req, 12, 1)
	for i := 0; i < len(f) && ctx.Err() == nil; i++ {
		if !h.writeAll(c, f[i:i+1], time.Second) {
			h.st.closedByBroker.Add(1)
			return
		}
		pause(ctx, 300*time.Millisecond)
	}
}

// neverRead sends a Fetch of 32 MiB and never reads; it notices the
// broker closing when a later write fails.
func (h hostile) neverRead(ctx context.Context) {
	c := h.dial(ctx)
	if c == nil {
		return
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(4 << 10)
	h.st.neverRead.Add(1)
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, 50<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = "hostile-data"
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.PartitionMaxBytes, rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = 50<<20, -1, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	for corr := int32(1); ctx.Err() == nil; corr++ {
		if !h.writeAll(c, hostileEncode(req, 12, corr), time.Second) {
			if ctx.Err() == nil {
				h.st.closedByBroker.Add(1)
				h.st.neverReadClosed.Add(1)
			}
			return
		}
		pause(ctx, 500*time.Millisecond)
	}
}

// flood pipelines ApiVersions and Metadata requests without reading.
func (h hostile) flood(ctx context.Context) {
	c := h.dial(ctx)
	if c == nil {
		return
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(4 << 10)
	h.st.floods.Add(1)
	av := kmsg.NewPtrApiVersionsRequest()
	av.ClientSoftwareName, av.ClientSoftwareVersion = "flood", "1"
	var chunk []byte
	for i := int32(0); len(chunk) < 64<<10; i++ {
		chunk = append(chunk, hostileEncode(av, 3, i)...)
		chunk = append(chunk, hostileEncode(kmsg.NewPtrMetadataRequest(), 12, i)...)
	}
	for ctx.Err() == nil {
		if !h.writeAll(c, chunk, 10*time.Second) {
			if ctx.Err() == nil {
				h.st.closedByBroker.Add(1)
				h.st.floodsClosed.Add(1)
			}
			return
		}
	}
}

// claims sends frames claiming 2 GiB (over socket.request.max.bytes, and
// negative as an int32), then one claiming 100 MB that sends 20 bytes and
// waits to be closed.
func (h hostile) claims(ctx context.Context) {
	for _, size := range []uint32{1<<31 - 1, 1 << 31} {
		c := h.dial(ctx)
		if c == nil {
			return
		}
		h.st.claims.Add(1)
		f := binary.BigEndian.AppendUint32(nil, size)
		f = append(f, hostileEncode(kmsg.NewPtrMetadataRequest(), 12, 1)[4:]...)
		if h.writeAll(c, f, time.Second) {
			h.closed(c, 5*time.Second)
		}
		c.Close()
	}
	c := h.dial(ctx)
	if c == nil {
		return
	}
	defer c.Close()
	h.st.claims.Add(1)
	f := binary.BigEndian.AppendUint32(nil, 100<<20)
	f = append(f, hostileEncode(kmsg.NewPtrMetadataRequest(), 12, 1)[4:24]...)
	if h.writeAll(c, f, time.Second) {
		h.closed(c, 2*hostileIdleMs*time.Millisecond)
	}
}

// lies produces record batches whose record count (and last offset delta)
// claim 10^9, 2^31-1, 0 or -1 records around one real record, with a
// correct CRC.
func (h hostile) lies(ctx context.Context) {
	c := h.dial(ctx)
	if c == nil {
		return
	}
	defer c.Close()
	for i, n := range []int32{1_000_000_000, 1<<31 - 1, 0, -1} {
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = 1, 5000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic = "hostile-lies"
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = hostileLyingBatch(n)
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		h.st.lies.Add(1)
		if !h.writeAll(c, hostileEncode(req, 9, int32(i)), time.Second) {
			return
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err != nil {
			h.st.closedByBroker.Add(1)
			return
		}
		if _, err := io.CopyN(io.Discard, c, int64(binary.BigEndian.Uint32(size[:]))); err != nil {
			return
		}
		h.st.lieAnswers.Add(1)
	}
	pause(ctx, 500*time.Millisecond)
}

// amplify sends Metadata v9 requests of empty topic names with one empty
// tagged field each, which decode to about a hundred times their size: 1
// MiB (refused: its decoding would exceed queued.max.request.bytes) and
// 256 KiB (served).
func (h hostile) amplify(ctx context.Context) {
	for _, n := range []int{1 << 18, 1 << 16} {
		c := h.dial(ctx)
		if c == nil {
			return
		}
		h.st.amplifiers.Add(1)
		body := binary.AppendUvarint(nil, uint64(n+1))
		for range n {
			body = append(body, 1, 1, 0, 0)
		}
		body = append(body, 0, 0, 0, 0)
		f := append(requestHeader(3, 9, 1, true), body...)
		if h.writeAll(c, frame(f), 5*time.Second) {
			h.closed(c, 10*time.Second)
		}
		c.Close()
	}
	pause(ctx, time.Second)
}

// burst opens 100 connections from 127.0.0.1 at once, counts those served
// (the others are refused over max.connections.per.ip), and closes them.
func (h hostile) burst(ctx context.Context) {
	var conns []net.Conn
	for range 100 {
		if c := h.dial(ctx); c != nil {
			conns = append(conns, c)
		}
	}
	served := int64(0)
	av := hostileEncode(kmsg.NewPtrApiVersionsRequest(), 0, 1)
	for _, c := range conns {
		if !h.writeAll(c, av, time.Second) {
			continue
		}
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		var size [4]byte
		if _, err := io.ReadFull(c, size[:]); err == nil {
			served++
		}
	}
	for _, c := range conns {
		c.Close()
	}
	if served > h.st.burstMaxServed.Load() {
		h.st.burstMaxServed.Store(served)
	}
	h.st.burstServed.Add(served)
	pause(ctx, 2*time.Second)
}

// hostileEncode frames req at version with correlation id corr.
func hostileEncode(req kmsg.Request, version int16, corr int32) []byte {
	req.SetVersion(version)
	return frame(req.AppendTo(requestHeader(req.Key(), version, corr, req.IsFlexible())))
}

// hostileLyingBatch is a v2 record batch of one record whose header claims
// n records (NumRecords and LastOffsetDelta), with a correct CRC.
func hostileLyingBatch(n int32) []byte {
	rec := kmsg.Record{Value: []byte("lie")}
	rec.Length = int32(len(rec.AppendTo(nil)) - 1)
	now := time.Now().UnixMilli()
	b := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: n - 1,
		FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: n, Records: rec.AppendTo(nil),
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}
