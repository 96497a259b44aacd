package broker

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/plog"
	"strata/index"
	"strata/tier"
)

// txnRecords is a transactional batch of n records of producer pid,
// epoch 0, from sequence seq.
func txnRecords(pid int64, seq int32, n int) []byte {
	var recs []byte
	for i := range n {
		rec := kmsg.Record{OffsetDelta: int32(i), Value: bytes.Repeat([]byte{'t'}, 100)}
		rec.Length = int32(len(rec.AppendTo(nil)) - 1)
		recs = rec.AppendTo(recs)
	}
	ts := time.Now().UnixMilli()
	b := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: 0x10, LastOffsetDelta: int32(n - 1), FirstTimestamp: ts, MaxTimestamp: ts,
		ProducerID: pid, ProducerEpoch: 0, FirstSequence: seq, NumRecords: int32(n), Records: recs}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// TestTieredTransactionBoundary runs a tiered partition on a broker
// with the bucket in memory: while a transaction is open, the tier pass
// uploads nothing at or after its first offset, however much is sealed
// after it; once it aborts, the rest goes up, local retention deletes the
// transaction's first segments, and the aborted transactions that a
// read_committed fetch of its first records gets (the broker's
// abortedTransactions, remotelog.Manager.AbortedTransactions) list it,
// its records in the bucket and its ABORT marker in the local log. A
// leader restored from the bucket then has the transaction open again,
// from its first offset in the bucket.
func TestTieredTransactionBoundary(t *testing.T) {
	const topic = "txtier"
	store := tier.NewMemStore()
	ts, p, tp := tieredBroker(t, store, topic, 1, 300)
	srv := ts.Server
	ctx := testCtx(t)
	cl := ts.client(t, kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	produce := func(n int) {
		t.Helper()
		for i := range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: tierValue(i)}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
	}
	// The transaction: its data appended as the leader does, the high
	// watermark moved over it (one replica).
	const pid = 1 << 40
	l := p.Log()
	info, err := l.Append(txnRecords(pid, 0, 3), p.LeaderEpoch())
	if err != nil {
		t.Fatal(err)
	}
	first := info.FirstOffset
	p.AdvanceHW(l.LogEndOffset())
	// Several segments sealed after it, some with more of its records.
	for i := range 5 {
		produce(60)
		if _, err := l.Append(txnRecords(pid, int32(3*(i+1)), 3), p.LeaderEpoch()); err != nil {
			t.Fatal(err)
		}
		p.AdvanceHW(l.LogEndOffset())
	}
	produce(60)
	// The last offset before the segment holding the transaction's first
	// records (a local segment: it cannot have been uploaded).
	below := int64(-2)
	for _, s := range l.Segments() {
		if s.BaseOffset <= first && first < s.NextOffset {
			below = s.BaseOffset - 1
		}
	}
	if below < 0 {
		t.Fatalf("the transaction at %d is in no local segment after the first: %+v", first, l.Segments())
	}
	if sealedAfter := l.Segments()[len(l.Segments())-2].BaseOffset; sealedAfter <= first {
		t.Fatalf("no segment sealed after the transaction at %d: %+v", first, l.Segments())
	}
	if lso := p.LastStableOffset(); lso != first {
		t.Fatalf("LSO %d, want the transaction's first offset %d", lso, first)
	}
	waitFor(t, "uploads up to the transaction", 30*time.Second, func() bool {
		end, ok, _ := srv.tier.idx.LogEnd(tp)
		return ok && end >= below
	})
	srv.rlm().PausePasses() // the pass under way has finished
	srv.rlm().ResumePasses()
	if end, _, _ := srv.tier.idx.LogEnd(tp); end != below {
		t.Fatalf("remote log end %d with a transaction open from %d: want %d, the end of the segment before it", end, first, below)
	}

	// Abort: everything sealed goes up; the transaction's first segments
	// leave the local log, its marker stays.
	abortAt := time.Now().UnixMilli()
	minfo, err := l.AppendControl(pid, 0, plog.EndTxnMarker{Type: plog.ControlAbort}, p.LeaderEpoch(), 0)
	if err != nil {
		t.Fatal(err)
	}
	marker := minfo.FirstOffset
	p.AdvanceHW(l.LogEndOffset())
	if lso := p.LastStableOffset(); lso != l.LogEndOffset() {
		t.Fatalf("LSO %d after the abort, want the log end %d", lso, l.LogEndOffset())
	}
	waitFor(t, "the transaction's first records leave the local log", 60*time.Second, func() bool {
		return l.LogStartOffset() > first
	})
	if marker < l.LogStartOffset() {
		t.Fatalf("the marker at %d left the local log (from %d) too: the test wants it local", marker, l.LogStartOffset())
	}
	segs, err := srv.tier.idx.Segments(tp)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range segs {
		if m.EndOffset >= first && m.EventTimestamp < abortAt {
			t.Fatalf("segment [%d, %d] holding the open transaction's records finished uploading at %d, before the abort at %d",
				m.StartOffset, m.EndOffset, m.EventTimestamp, abortAt)
		}
		if _, ok := m.Object(index.ObjectTransactionIndex); !ok {
			t.Fatalf("segment [%d, %d] uploaded without its .txnindex listed", m.StartOffset, m.EndOffset)
		}
	}
	want := []plog.AbortedTxn{{ProducerID: pid, FirstOffset: first, LastOffset: marker}}
	got, code := srv.abortedTransactions(p, first, first+1)
	if code != 0 || len(got) != 1 || got[0].ProducerID != pid || got[0].FirstOffset != first || got[0].LastOffset != marker {
		t.Fatalf("aborted transactions of [%d, %d) (remote records, local marker) = %+v, code %d; want %+v", first, first+1, got, code, want)
	}
	// A fetch served locally at the marker's segment lists it too, and one
	// past the marker does not.
	if got, _ := srv.abortedTransactions(p, marker, marker+1); len(got) != 1 || got[0].LastOffset != marker {
		t.Fatalf("aborted transactions at the marker = %+v", got)
	}
	if got, _ := srv.abortedTransactions(p, marker+1, l.LogEndOffset()); len(got) != 0 {
		t.Fatalf("aborted transactions after the marker = %+v", got)
	}

	// Restore from the bucket (a broker on an empty disk leading the
	// partition): the last uploaded segment ends inside the transaction,
	// whose marker was not uploaded, so the restored leader has it open
	// from its first offset in the bucket, and its LSO there; the marker
	// written again (as its coordinator does) ends it and indexes the
	// abort over the remote records.
	srv.rlm().PausePasses()
	defer srv.rlm().ResumePasses()
	end, ok, err := srv.tier.idx.LogEnd(tp)
	if err != nil || !ok || end >= marker {
		t.Fatalf("remote log end %d (%v, %v): want the marker at %d not uploaded", end, ok, err, marker)
	}
	ps := ts.replicas.Edit()
	if err := l.ResetTo(plog.Reset{Offset: 0}); err != nil {
		ps.Done()
		t.Fatal(err)
	}
	p.StoreHW(0)
	ts.tier.ForgetRestore(tierPart{p})
	ps.Done()
	waitFor(t, "the leader restored from the bucket", 15*time.Second, func() bool {
		return l.LogEndOffset() == end+1 && p.HW() == end+1
	})
	if open, ok := l.OpenTransaction(pid); !ok || open != first {
		t.Fatalf("restored leader: transaction of %d open at %d (%v), want open at %d", pid, open, ok, first)
	}
	if lso := p.LastStableOffset(); lso != first {
		t.Fatalf("restored leader's LSO %d, want the open transaction's first offset %d", lso, first)
	}
	minfo, err = l.AppendControl(pid, 0, plog.EndTxnMarker{Type: plog.ControlAbort}, p.LeaderEpoch(), 0)
	if err != nil {
		t.Fatal(err)
	}
	p.AdvanceHW(l.LogEndOffset())
	got, code = srv.abortedTransactions(p, first, first+1)
	if code != 0 || len(got) != 1 || got[0].ProducerID != pid || got[0].FirstOffset != first || got[0].LastOffset != minfo.FirstOffset {
		t.Fatalf("restored leader: aborted transactions of [%d, %d) = %+v, code %d; want producer %d's from %d to its new marker at %d",
			first, first+1, got, code, pid, first, minfo.FirstOffset)
	}
}

// TestTieredFollowerRebuildKeepsOpenTransaction: a follower whose disk
// is wiped rebuilds from the bucket (KIP-1023: it starts after the last
// tiered offset, with that segment's producer snapshot) at a point where
// an aborted transaction is open: its records lie in the bucket, its
// marker in the leader's local log. The rebuilt follower has the
// transaction open from its first offset in the bucket, so replicating
// the marker indexes the abort as on the leader, and the aborted
// transactions a fetch of the remote records gets from it list it.
func TestTieredFollowerRebuildKeepsOpenTransaction(t *testing.T) {
	const topic, segBytes, localBytes = "tftxn", 8192, 20000
	store := tier.NewMemStore()
	c := startTierCluster(t, 2, tierClusterSets(), store)
	c.createTopic(topic, []int32{0, 1}, map[string]string{
		"remote.storage.enable": "true", "segment.bytes": fmt.Sprint(segBytes),
		"local.retention.bytes": fmt.Sprint(localBytes), "file.delete.delay.ms": "0",
	})
	leader := c.partition(topic).Leader
	follower := 1 - leader
	c.waitISR(topic, 0, 1)
	ctx := testCtx(t)
	prod, err := kgo.NewClient(kgo.SeedBrokers(c.servers[leader].Addr().String()), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	produce := func(n int) {
		t.Helper()
		for i := range n {
			if err := prod.ProduceSync(ctx, &kgo.Record{Value: tierValue(i), Partition: 0}).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
		}
	}
	p0 := c.servers[leader].partition(topic, 0)
	l0 := p0.Log()
	const pid = 1 << 41
	produce(100)
	info, err := l0.Append(txnRecords(pid, 0, 3), p0.LeaderEpoch())
	if err != nil {
		t.Fatal(err)
	}
	first := info.FirstOffset
	for i := range 6 {
		produce(60)
		if _, err := l0.Append(txnRecords(pid, int32(3*(i+1)), 3), p0.LeaderEpoch()); err != nil {
			t.Fatal(err)
		}
	}
	produce(10)
	minfo, err := l0.AppendControl(pid, 0, plog.EndTxnMarker{Type: plog.ControlAbort}, p0.LeaderEpoch(), 0)
	if err != nil {
		t.Fatal(err)
	}
	marker := minfo.FirstOffset
	produce(1) // moves the high watermark over the marker
	tp := tierPartition(p0)
	waitFor(t, "uploads past the transaction's first records and local retention", 60*time.Second, func() bool {
		end, ok, _ := c.servers[leader].tier.idx.LogEnd(tp)
		return ok && end > first && l0.LogStartOffset() > first
	})
	end, _, _ := c.servers[leader].tier.idx.LogEnd(tp)
	if end >= marker {
		t.Fatalf("remote log end %d: the test wants the marker at %d local", end, marker)
	}

	c.kill(follower)
	if err := os.RemoveAll(c.dirs[follower]); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(c.dirs[follower], 0o755); err != nil {
		t.Fatal(err)
	}
	c.start(follower)
	c.waitISR(topic, 0, 1)
	p1 := c.servers[follower].partition(topic, 0)
	waitFor(t, "the wiped follower caught up", 30*time.Second, func() bool { return p1.Log().LogEndOffset() == l0.LogEndOffset() })
	if start := p1.Log().LogStartOffset(); start <= first || start > marker {
		t.Fatalf("the wiped follower's log starts at %d: want it rebuilt from the bucket inside the transaction (%d, %d]", start, first, marker)
	}
	if _, ok := p1.Log().OpenTransaction(pid); ok {
		t.Fatal("the transaction is still open on the follower after its marker was replicated")
	}
	want := l0.AbortedTransactions(marker, marker+1)
	if len(want) != 1 || want[0].FirstOffset != first {
		t.Fatalf("leader's abort index: %+v", want)
	}
	if got := p1.Log().AbortedTransactions(p1.Log().LogStartOffset(), p1.Log().LogEndOffset()); !slices.Equal(got, want) {
		t.Fatalf("rebuilt follower's abort index %+v, the leader's %+v: the open transaction was not carried over", got, want)
	}
	waitFor(t, "the follower's index knows the uploads", 30*time.Second, func() bool {
		e, ok, _ := c.servers[follower].tier.idx.LogEnd(tp)
		return ok && e >= end
	})
	got, code := c.servers[follower].abortedTransactions(p1, first, first+1)
	if code != 0 || !slices.Equal(got, want) {
		t.Fatalf("the follower lists %+v (code %d) for [%d, %d); want %+v", got, code, first, first+1, want)
	}
}
