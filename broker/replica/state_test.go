package replica

import (
	"context"
	"hash/crc32"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/config"
	"strata/broker/plog"
	"strata/controller"
	"strata/internal/vfs"
)

// fakeController commits every AlterPartition that names the current
// leader and partition epochs, as the controller does, and records them.
type fakeController struct {
	mu    sync.Mutex
	md    *controller.Metadata
	alter []controller.AlterPartitionRequest
}

func (c *fakeController) Metadata() *controller.Metadata {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.md
}

func (c *fakeController) AlterPartition(_ context.Context, req controller.AlterPartitionRequest) (controller.Partition, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.alter = append(c.alter, req)
	t := c.md.Topics[req.Topic]
	pm := t.Partitions[req.Partition]
	if req.LeaderEpoch != pm.LeaderEpoch {
		return controller.Partition{}, controller.ErrFencedLeaderEpoch
	}
	if req.PartitionEpoch != pm.PartitionEpoch {
		return controller.Partition{}, controller.ErrInvalidUpdateVersion
	}
	pm.PartitionEpoch++
	pm.ISR = slices.Clone(req.ISR)
	t.Partitions[req.Partition] = pm
	return pm, nil
}

func (c *fakeController) alters() []controller.AlterPartitionRequest {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.alter)
}

// testBatch is an uncompressed record batch of n records, as a producer
// sends it.
func testBatch(n int) []byte {
	var recs []byte
	for i := range n {
		rec := kmsg.Record{OffsetDelta: int32(i), Value: []byte("v")}
		rec.Length = int32(len(rec.AppendTo(nil)) - 1)
		recs = rec.AppendTo(recs)
	}
	ts := time.Now().UnixMilli()
	b := kmsg.RecordBatch{Magic: 2, LastOffsetDelta: int32(n - 1), FirstTimestamp: ts, MaxTimestamp: ts,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(n), Records: recs}
	raw := b.AppendTo(nil)
	b.Length = int32(len(raw) - 12)
	raw = b.AppendTo(raw[:0])
	b.CRC = int32(crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b.AppendTo(raw[:0])
}

// TestLeaderISRFromFollowerFetches drives a leader partition through
// follower fetch positions and time, with no network and no broker: the
// high watermark waits for the ISR, a follower that catches up joins the
// ISR through AlterPartition, and one that lags past
// replica.lag.time.max.ms is shrunk out of it, after which the high
// watermark moves on without it.
func TestLeaderISRFromFollowerFetches(t *testing.T) {
	cfg, err := config.Load(map[string]string{"broker.id": "1", "replica.lag.time.max.ms": "10000"})
	if err != nil {
		t.Fatal(err)
	}
	fs := vfs.NewCrashableMem()
	fs.MkdirAll("t-0", 0o755)
	l, err := plog.Open(plog.Options{FS: fs, Dir: "t-0", Config: plog.DefaultConfig(), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	pm := controller.Partition{Index: 0, Leader: 1, LeaderEpoch: 1, PartitionEpoch: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2}}
	ctrl := &fakeController{md: &controller.Metadata{Topics: map[string]*controller.Topic{
		"t": {Name: "t", ID: [16]byte{7}, Partitions: []controller.Partition{pm}},
	}}}
	var wg sync.WaitGroup
	m := NewManager(Options{Config: cfg, Logger: slog.New(slog.DiscardHandler), FS: fs,
		Controller: func() Controller { return ctrl }, Context: t.Context(), WG: &wg})
	p := NewPartition("t", 0, [16]byte{7}, l)
	e := m.Edit()
	e.Put(p)
	e.Done()

	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	p.ApplyLeader(1, pm, t0)
	if !m.IsLeader(p) {
		t.Fatal("the metadata's leader does not lead")
	}
	produce := func(n int) {
		t.Helper()
		if _, err := l.Append(testBatch(n), p.LeaderEpoch()); err != nil {
			t.Fatal(err)
		}
		p.AdvanceHW(l.LogEndOffset())
	}
	fetch := func(id int32, offset int64, now time.Time) {
		t.Helper()
		m.RecordFollowerFetch(p, id, offset, now)
		wg.Wait() // an AlterPartition it started
	}
	check := func(step string, hw int64, isr int, alters int) {
		t.Helper()
		if got := p.HW(); got != hw {
			t.Fatalf("%s: high watermark %d, want %d", step, got, hw)
		}
		if got := p.ISRSize(); got != isr {
			t.Fatalf("%s: ISR of %d, want %d", step, got, isr)
		}
		if got := len(ctrl.alters()); got != alters {
			t.Fatalf("%s: %d AlterPartition requests, want %d", step, got, alters)
		}
	}

	produce(3)
	check("appended, follower 2 of the ISR not heard of", 0, 2, 0)
	fetch(2, 3, at(time.Second))
	check("follower 2 at the log end", 3, 2, 0)
	fetch(3, 0, at(time.Second))
	check("follower 3 behind the high watermark", 3, 2, 0)
	fetch(3, 3, at(2*time.Second))
	check("follower 3 caught up", 3, 3, 1)
	if got := ctrl.alters()[0]; !slices.Equal(got.ISR, []int32{1, 2, 3}) || got.PartitionEpoch != 1 || got.LeaderEpoch != 1 {
		t.Fatalf("expansion proposed %+v, want ISR [1 2 3] at epochs 1/1", got)
	}

	produce(3)
	fetch(2, 6, at(5*time.Second))
	check("follower 3 of the ISR holds the high watermark", 3, 3, 1)

	m.ExpireISRs(at(11 * time.Second)) // 9 s since follower 3 caught up: within the lag
	wg.Wait()
	check("within replica.lag.time.max.ms", 3, 3, 1)

	m.ExpireISRs(at(13 * time.Second)) // 11 s: past it; follower 2 caught up 8 s ago
	wg.Wait()
	check("follower 3 shrunk out", 6, 2, 2)
	if got := ctrl.alters()[1]; !slices.Equal(got.ISR, []int32{1, 2}) || got.PartitionEpoch != 2 {
		t.Fatalf("shrink proposed %+v, want ISR [1 2] at partition epoch 2", got)
	}

	// A produce waiting for acks=-1 is answered once the ISR has it.
	produce(1)
	resp := kmsg.NewPtrProduceResponse()
	rt := kmsg.NewProduceResponseTopic()
	rt.Partitions = append(rt.Partitions, kmsg.NewProduceResponseTopicPartition())
	resp.Topics = append(resp.Topics, rt)
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.AwaitReplication(resp, []ProduceWait{{P: p, Required: 7}}, time.Now().Add(time.Minute),
			func(sp *kmsg.ProduceResponseTopicPartition, code int16, _ string) { sp.ErrorCode = code })
	}()
	for p.Waiters() == 0 {
		time.Sleep(time.Millisecond) // polling a condition, not synchronising by time
	}
	select {
	case <-done:
		t.Fatal("acks=-1 answered before the ISR replicated it")
	default:
	}
	fetch(2, 7, at(14*time.Second))
	<-done
	if code := resp.Topics[0].Partitions[0].ErrorCode; code != 0 || p.HW() != 7 {
		t.Fatalf("acks=-1 answered with error %d at high watermark %d, want 0 at 7", code, p.HW())
	}
}
