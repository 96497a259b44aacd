package broker

import (
	"context"
	"encoding/binary"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// heapAllocated is the bytes this process's heap has ever allocated.
func heapAllocated() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.TotalAlloc
}

// TestQueuedMaxRequestBytesNoDeadlock: four producers each send most of a
// request of nearly queued.max.request.bytes, so that every one holds part
// of the bound and needs more; all are answered at once, not after
// connections.max.idle.ms.
func TestQueuedMaxRequestBytesNoDeadlock(t *testing.T) {
	const bound = 1 << 20
	ts := startTestServer(t, map[string]string{
		"queued.max.request.bytes": strconv.Itoa(bound),
		"socket.request.max.bytes": strconv.Itoa(bound),
		"connections.max.idle.ms":  "60000",
	})
	dialRaw(t, ts.addr()).createTopic("big", 1, nil)
	value := make([]byte, 900<<10)
	batch := plainBatch(time.Now().UnixMilli(), string(value)).build(t)
	frame := encodeRequest(produceReq("big", 0, 1, batch), 9, 1)
	var conns []*rawConn
	for range 4 {
		rc := dialRaw(t, ts.addr())
		rc.writeFrame(frame[:300<<10])
		conns = append(conns, rc)
	}
	mem := ts.network
	holdsWithin(2*time.Second, func() bool { return mem.RequestMemoryInUse() >= bound })
	for _, rc := range conns {
		rc.writeFrame(frame[300<<10:])
	}
	start := time.Now()
	for i, rc := range conns {
		resp := kmsg.NewPtrProduceResponse()
		resp.Version = 9
		rc.recv(1, resp)
		if c := resp.Topics[0].Partitions[0].ErrorCode; c != 0 {
			t.Fatalf("producer %d: error code %d", i, c)
		}
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("answers took %v", took)
	}
	// Each request's memory is given back just after its answer is sent.
	if !holdsWithin(5*time.Second, func() bool { return mem.RequestMemoryInUse() == 0 }) {
		t.Fatalf("%d bytes still reserved after every request was answered", mem.RequestMemoryInUse())
	}
}

// TestAnnouncedSizeHoldsLittle: connections that announce requests of the
// largest size and send a few bytes reserve only what they sent, so that
// they cannot take queued.max.request.bytes from other clients.
func TestAnnouncedSizeHoldsLittle(t *testing.T) {
	const bound = 8 << 20
	ts := startTestServer(t, map[string]string{
		"queued.max.request.bytes": strconv.Itoa(bound),
		"socket.request.max.bytes": strconv.Itoa(bound),
	})
	for i := range 40 {
		rc := dialRaw(t, ts.addr())
		hdr := binary.BigEndian.AppendUint32(nil, bound)
		rc.writeFrame(append(hdr, encodeRequest(produceReq("x", 0, 1, nil), 9, int32(i))[4:20]...))
	}
	mem := ts.network
	holdsWithin(time.Second, func() bool { return mem.RequestMemoryInUse() > 0 })
	if got := mem.RequestMemoryInUse(); got > 40*64<<10 {
		t.Fatalf("40 connections that sent 20 bytes each hold %d bytes of queued.max.request.bytes", got)
	}
	cl := ts.client(t, kgo.DefaultProduceTopic("ok"), kgo.AllowAutoTopicCreation())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for i := range 20 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: make([]byte, 100<<10)}).FirstErr(); err != nil {
			t.Fatalf("produce %d beside the announcing connections: %v", i, err)
		}
	}
}

// TestClaimedArrayCountNotAllocated: a small frame claiming 2^31-1 array
// elements allocates nothing of the sort (kmsg checks the count against
// the bytes left before it allocates) and closes the connection.
func TestClaimedArrayCountNotAllocated(t *testing.T) {
	cases := []struct {
		name    string
		key     int16
		version int16
		body    []byte
	}{
		// Metadata v4: topics array of 2^31-1, then nothing.
		{"Metadata v4", 3, 4, []byte{0x7f, 0xff, 0xff, 0xff, 0, 0}},
		// Metadata v12 (flexible): compact array of 2^31-2.
		{"Metadata v12", 3, 12, append(binary.AppendUvarint(nil, 1<<31-1), 0, 0, 0)},
		// Produce v7: no transactional id, acks, timeout, 2^31-1 topics.
		{"Produce v7", 0, 7, []byte{0xff, 0xff, 0, 1, 0, 0, 0x27, 0x10, 0x7f, 0xff, 0xff, 0xff, 0, 0}},
		// Produce v9: one topic "t" with 2^31-2 partitions.
		{"Produce v9", 0, 9, append([]byte{0, 0, 1, 0, 0, 0x27, 0x10, 2, 2, 't'}, append(binary.AppendUvarint(nil, 1<<31-1), 0, 0)...)},
		// OffsetCommit v2: group, generation, member, retention, 2^31-1 topics.
		{"OffsetCommit v2", 8, 2, []byte{0, 1, 'g', 0, 0, 0, 1, 0, 1, 'm', 0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req := kmsg.RequestForKey(c.key)
			req.SetVersion(c.version)
			before := heapAllocated()
			err := req.ReadFrom(c.body)
			if got := heapAllocated() - before; got > 1<<20 {
				t.Fatalf("decoding a %d-byte body allocated %d MB", len(c.body), got>>20)
			}
			if err == nil {
				t.Fatal("decoded without error")
			}
		})
	}
	ts := startTestServer(t, nil)
	for _, c := range cases {
		t.Run(c.name+"/conn", func(t *testing.T) {
			hdr := encodeRequest(kmsg.RequestForKey(c.key), c.version, 1)
			n := 4 + 2 + 2 + 4 + 2 + 5
			if c.version >= flexibleFrom(c.key) {
				n++
			}
			frame := append(append([]byte(nil), hdr[:n]...), c.body...)
			binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
			rc := dialRaw(t, ts.addr())
			before := heapAllocated()
			rc.writeFrame(frame)
			if !closedSoon(rc.c, 5*time.Second) {
				t.Fatal("connection still open 5s after a frame claiming 2^31-1 elements")
			}
			if got := heapAllocated() - before; got > 16<<20 {
				t.Fatalf("the broker allocated %d MB for a %d-byte frame", got>>20, len(frame))
			}
		})
	}
}

// flexibleFrom is the first flexible version of a request.
func flexibleFrom(key int16) int16 {
	req := kmsg.RequestForKey(key)
	for v := int16(0); v <= req.MaxVersion(); v++ {
		req.SetVersion(v)
		if req.IsFlexible() {
			return v
		}
	}
	return 1 << 14
}

// metadataAmplifier is a Metadata v9 body of n topics, each an empty name
// and one empty tagged field: four bytes that kmsg decodes into a struct
// and a map, about 100 bytes of heap per byte of frame.
func metadataAmplifier(n int) []byte {
	b := binary.AppendUvarint(nil, uint64(n+1))
	for range n {
		b = append(b, 1, 1, 0, 0) // name "", one tag: key 0, size 0
	}
	return append(b, 0, 0, 0, 0) // allow auto creation, include cluster and topic authorized operations: false; no tags
}

// TestDecodeAmplificationRefused: a 4 MB Metadata request whose decoding
// would take about 400 MB is refused before kmsg decodes it (the
// connection closes): the broker allocates little.
func TestDecodeAmplificationRefused(t *testing.T) {
	body := metadataAmplifier(1 << 20)
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 9
	if err := req.ReadFrom(body); err != nil || len(req.Topics) != 1<<20 {
		t.Fatalf("the amplifier does not decode: %v (%d topics)", err, len(req.Topics))
	}
	req = nil
	ts := startTestServer(t, nil)
	hdr := encodeRequest(kmsg.NewPtrMetadataRequest(), 9, 1)[:4+2+2+4+2+5+1]
	frame := append(append([]byte(nil), hdr...), body...)
	binary.BigEndian.PutUint32(frame, uint32(len(frame)-4))
	rc := dialRaw(t, ts.addr())
	runtime.GC()
	before := heapAllocated()
	rc.writeFrame(frame)
	closed := closedSoon(rc.c, 10*time.Second)
	if got := heapAllocated() - before; got > 64<<20 {
		t.Fatalf("the broker allocated %d MB for a %d MB request", got>>20, len(frame)>>20)
	}
	if !closed {
		t.Fatal("connection still open 10s after the request")
	}
	dialRaw(t, ts.addr()).do(kmsg.NewPtrMetadataRequest(), 12)
}

// amplifierBodies are adversarial request bodies of n bytes for one
// request version: a fill pattern, with an array count claiming as many
// elements as the bytes left could hold at 2 or 3 bytes each written at
// an offset near the start, as a compact (uvarint) or int32 length.
func amplifierBodies(n int, each func(body []byte)) {
	patterns := [][]byte{{0}, {1}, {0, 1}, {1, 1}, {0, 0, 0, 1}, {0, 0, 1, 1}, {0, 1, 1, 1}, {1, 1, 0, 0}}
	body := make([]byte, n)
	for _, p := range patterns {
		for pos := 0; pos < 14; pos++ {
			for _, compact := range []bool{true, false} {
				for _, per := range []int{2, 3} {
					for i := range body {
						body[i] = p[i%len(p)]
					}
					count := (n - pos - 5) / per
					if compact {
						binary.PutUvarint(body[pos:], uint64(count+1))
					} else {
						binary.BigEndian.PutUint32(body[pos:], uint32(count))
					}
					each(body)
				}
			}
		}
	}
}

// TestDecodeAmplification checks decodeFactor and produceDecodeCost
// against adversarial bodies of every request version the broker serves:
// decoding never takes more heap than decodeCharge says.
func TestDecodeAmplification(t *testing.T) {
	const n = 8 << 10
	worst, worstWhat := 0.0, ""
	for key, e := range apis {
		versions := []int16{e.min, e.max}
		if f := flexibleFrom(key); f > e.min && f <= e.max {
			versions = append(versions, f-1, f)
		}
		for _, v := range versions {
			amplifierBodies(n, func(body []byte) {
				req := kmsg.RequestForKey(key)
				req.SetVersion(v)
				charge := decodeCharge(key, v, body)
				before := heapAllocated()
				req.ReadFrom(body)
				got := heapAllocated() - before
				if int64(got) > charge+4096 {
					t.Errorf("%s v%d: decoding %d bytes took %d bytes, charged %d", kmsg.NameForKey(key), v, len(body), got, charge)
				}
				if r := float64(got) / float64(len(body)); r > worst {
					worst, worstWhat = r, kmsg.NameForKey(key)+" v"+strconv.Itoa(int(v))
				}
			})
		}
	}
	t.Logf("worst: %.1f bytes of heap per byte of body (%s); decodeFactor %d", worst, worstWhat, decodeFactor)
}

// TestProduceDecodeCost: Produce requests are charged what decoding them
// takes, counted from the frame: empty topics with tagged fields (the most
// heap per byte) and ordinary records alike.
func TestProduceDecodeCost(t *testing.T) {
	build := func(version int16, topics, parts int, tags bool, records []byte) []byte {
		req := kmsg.NewPtrProduceRequest()
		req.Version = version
		req.Acks = 1
		for i := range topics {
			rt := kmsg.NewProduceRequestTopic()
			rt.Topic = "t" + strconv.Itoa(i)
			for j := range parts {
				rp := kmsg.NewProduceRequestTopicPartition()
				rp.Partition = int32(j)
				rp.Records = records
				if tags {
					rp.UnknownTags.Set(7, []byte{1})
				}
				rt.Partitions = append(rt.Partitions, rp)
			}
			if tags {
				rt.UnknownTags.Set(9, nil)
			}
			req.Topics = append(req.Topics, rt)
		}
		return req.AppendTo(nil)
	}
	for _, c := range []struct {
		version       int16
		topics, parts int
		tags          bool
		records       int
	}{
		{3, 10000, 0, false, 0},
		{8, 100, 100, false, 0},
		{9, 10000, 0, true, 0},
		{9, 100, 100, true, 0},
		{12, 10, 10, false, 10 << 10},
	} {
		body := build(c.version, c.topics, c.parts, c.tags, make([]byte, c.records))
		cost, ok := produceDecodeCost(body, c.version)
		if !ok {
			t.Fatalf("v%d %d topics × %d partitions: not walked", c.version, c.topics, c.parts)
		}
		req := kmsg.NewPtrProduceRequest()
		req.Version = c.version
		before := heapAllocated()
		if err := req.ReadFrom(body); err != nil {
			t.Fatal(err)
		}
		got := heapAllocated() - before
		if int64(got) > cost {
			t.Errorf("v%d %d topics × %d partitions (tags %v): decoding took %d bytes, charged %d", c.version, c.topics, c.parts, c.tags, got, cost)
		}
		if c.records > 0 && cost > int64(len(body))/4 {
			t.Errorf("v%d: %d bytes of records charged %d beyond the frame", c.version, len(body), cost)
		}
	}
	// A body kmsg would not decode falls back to the generic charge.
	if _, ok := produceDecodeCost([]byte{0, 0, 1}, 9); ok {
		t.Error("a truncated Produce was walked")
	}
}
