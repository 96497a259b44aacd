package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// newClient returns a franz-go client for addr, closed when the test ends.
func newClient(t testing.TB, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	opts = append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// createTopic creates a topic with a replication factor of 1.
func createTopic(t testing.TB, addr, topic string, partitions int32, configs map[string]*string) {
	t.Helper()
	adm := kadm.NewClient(newClient(t, addr))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r, err := adm.CreateTopic(ctx, partitions, 1, configs, topic)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		t.Fatalf("create topic %s: %v (%s)", topic, err, r.ErrMessage)
	}
}

// offsets returns the start and end offsets of every partition of topic
// (opts: the client's, e.g. TLS and SASL).
func offsets(t testing.TB, addr, topic string, opts ...kgo.Opt) (start, end map[int32]int64) {
	t.Helper()
	adm := kadm.NewClient(newClient(t, addr, opts...))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	so, err := adm.ListStartOffsets(ctx, topic)
	if err == nil {
		err = so.Error()
	}
	if err != nil {
		t.Fatalf("list start offsets of %s: %v", topic, err)
	}
	eo, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = eo.Error()
	}
	if err != nil {
		t.Fatalf("list end offsets of %s: %v", topic, err)
	}
	start, end = map[int32]int64{}, map[int32]int64{}
	so.Each(func(o kadm.ListedOffset) { start[o.Partition] = o.Offset })
	eo.Each(func(o kadm.ListedOffset) { end[o.Partition] = o.Offset })
	return start, end
}

// consumeAll reads every partition of topic from its start up to the
// given end offsets with a fresh client (no consumer group) and returns the
// records ordered by partition, then offset.
func consumeAll(t testing.TB, addr, topic string, end map[int32]int64) []*kgo.Record {
	t.Helper()
	parts := map[int32]kgo.Offset{}
	for p := range end {
		parts[p] = kgo.NewOffset().AtStart()
	}
	cl := newClient(t, addr,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.FetchMaxWait(200*time.Millisecond),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	next := map[int32]int64{} // next offset expected to be seen, per partition
	done := func() bool {
		for p, e := range end {
			if next[p] < e {
				return false
			}
		}
		return true
	}
	var recs []*kgo.Record
	var lastErr error
	for !done() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consume %s: timed out with next offsets %v, want end offsets %v (last fetch error: %v)", topic, next, end, lastErr)
		}
		fs.EachError(func(_ string, _ int32, err error) { lastErr = err })
		fs.EachRecord(func(r *kgo.Record) {
			recs = append(recs, r)
			if r.Offset+1 > next[r.Partition] {
				next[r.Partition] = r.Offset + 1
			}
		})
	}
	sort.SliceStable(recs, func(i, j int) bool {
		if recs[i].Partition != recs[j].Partition {
			return recs[i].Partition < recs[j].Partition
		}
		return recs[i].Offset < recs[j].Offset
	})
	return recs
}

// rawConn is a plain TCP connection speaking the Kafka framing, for
// requests a well-behaved client would not send and for looking at the
// bytes the broker stores.
type rawConn struct {
	t    testing.TB
	c    net.Conn
	corr int32
	fmtr *kmsg.RequestFormatter
}

func dialRaw(t testing.TB, addr string) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, fmtr: kmsg.NewRequestFormatter(kmsg.FormatterClientID("strata-e2e"))}
}

// request sends req at the version it carries and decodes the response.
func (rc *rawConn) request(req kmsg.Request) kmsg.Response {
	rc.t.Helper()
	rc.corr++
	if err := rc.write(rc.fmtr.AppendRequest(nil, req, rc.corr)); err != nil {
		rc.t.Fatalf("send %s v%d: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	corr, body, err := rc.readFrame()
	if err != nil {
		rc.t.Fatalf("read %s v%d response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	if corr != rc.corr {
		rc.t.Fatalf("%s response correlation id %d, want %d", kmsg.NameForKey(req.Key()), corr, rc.corr)
	}
	// Flexible responses carry a tagged-field section in their header,
	// except ApiVersions, whose response header is always v0.
	if req.IsFlexible() && req.Key() != 18 {
		if body, err = skipTags(body); err != nil {
			rc.t.Fatalf("%s response header: %v", kmsg.NameForKey(req.Key()), err)
		}
	}
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if err := resp.ReadFrom(body); err != nil {
		rc.t.Fatalf("decode %s v%d response: %v", kmsg.NameForKey(req.Key()), req.GetVersion(), err)
	}
	return resp
}

func (rc *rawConn) write(b []byte) error {
	rc.c.SetWriteDeadline(time.Now().Add(10 * time.Second))
	_, err := rc.c.Write(b)
	return err
}

// readFrame reads one size-prefixed response and returns its correlation
// id and the rest.
func (rc *rawConn) readFrame() (int32, []byte, error) {
	rc.c.SetReadDeadline(time.Now().Add(15 * time.Second))
	var hdr [4]byte
	if _, err := io.ReadFull(rc.c, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n < 4 || n > 64<<20 {
		return 0, nil, fmt.Errorf("implausible response size %d", n)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(rc.c, buf); err != nil {
		return 0, nil, err
	}
	return int32(binary.BigEndian.Uint32(buf)), buf[4:], nil
}

// waitClosed waits for the broker to close the connection: it reads until
// EOF or a reset, and fails the test if the connection is still open after
// d or if the broker answers with a response instead.
func (rc *rawConn) waitClosed(d time.Duration, what string) {
	rc.t.Helper()
	rc.c.SetReadDeadline(time.Now().Add(d))
	var buf [512]byte
	n, err := io.ReadAtLeast(rc.c, buf[:], 1)
	var ne net.Error
	switch {
	case err == nil:
		rc.t.Errorf("%s: broker answered %d bytes (%x) instead of closing the connection", what, n, buf[:n])
	case errors.As(err, &ne) && ne.Timeout():
		rc.t.Errorf("%s: broker kept the connection open for %v", what, d)
	}
	// io.EOF or a connection reset: closed, as wanted.
}

// skipTags skips a tagged-field section (KIP-482).
func skipTags(b []byte) ([]byte, error) {
	n, used := binary.Uvarint(b)
	if used <= 0 {
		return nil, errors.New("bad tag count")
	}
	b = b[used:]
	for range n {
		_, used = binary.Uvarint(b) // tag
		if used <= 0 {
			return nil, errors.New("bad tag")
		}
		b = b[used:]
		size, used := binary.Uvarint(b)
		if used <= 0 || uint64(len(b)-used) < size {
			return nil, errors.New("bad tag size")
		}
		b = b[used+int(size):]
	}
	return b, nil
}

// batchCodecs fetches partition p of topic from offset 0 to end over a raw
// connection and returns the compression codec (attributes & 7) of every
// stored record batch, as the broker serves it.
func batchCodecs(t testing.TB, addr, topic string, p int32, end int64) []int8 {
	t.Helper()
	rc := dialRaw(t, addr)
	var codecs []int8
	deadline := time.Now().Add(30 * time.Second)
	for off := int64(0); off < end; {
		if time.Now().After(deadline) {
			t.Fatalf("raw fetch %s/%d: stuck at offset %d of %d", topic, p, off, end)
		}
		req := kmsg.NewPtrFetchRequest()
		req.Version = 11 // topic names, not ids
		req.ReplicaID = -1
		req.MaxWaitMillis = 100
		req.MinBytes = 1
		req.MaxBytes = 16 << 20
		req.SessionEpoch = -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition = p
		rp.FetchOffset = off
		rp.PartitionMaxBytes = 8 << 20
		rp.CurrentLeaderEpoch = -1
		rp.LogStartOffset = -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp := rc.request(req).(*kmsg.FetchResponse)
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			t.Fatalf("raw fetch %s/%d: response has %d topics, want 1 with 1 partition", topic, p, len(resp.Topics))
		}
		part := resp.Topics[0].Partitions[0]
		if part.ErrorCode != 0 {
			t.Fatalf("raw fetch %s/%d at %d: error code %d", topic, p, off, part.ErrorCode)
		}
		b := part.RecordBatches
		for len(b) >= 12 {
			size := 12 + int(int32(binary.BigEndian.Uint32(b[8:12])))
			if size > len(b) {
				break // partial batch at the end of the response
			}
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(b[:size]); err != nil {
				t.Fatalf("raw fetch %s/%d: decode batch at %d: %v", topic, p, off, err)
			}
			if rb.FirstOffset+int64(rb.LastOffsetDelta) >= off {
				codecs = append(codecs, int8(rb.Attributes&7))
				off = rb.FirstOffset + int64(rb.LastOffsetDelta) + 1
			}
			b = b[size:]
		}
	}
	return codecs
}
