package tier

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/plog"
	"strata/index"
)

// txnBatch is a batch of n records of size bytes of producer pid, epoch
// 0, starting at sequence seq, transactional when txn; pid -1 for a
// batch without a producer. Timestamped now.
func txnBatch(pid int64, seq int32, n, size int, txn bool) []byte {
	var recs []byte
	for i := range n {
		rec := kmsg.Record{OffsetDelta: int32(i), Value: bytes.Repeat([]byte{byte('a' + i%26)}, size)}
		rec.Length = int32(len(rec.AppendTo(nil)) - 1)
		recs = rec.AppendTo(recs)
	}
	var attrs int16
	if txn {
		attrs = 0x10
	}
	ts := time.Now().UnixMilli() // as the markers' (no segment.ms roll between them)
	if pid < 0 {
		seq = -1
	}
	b := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: attrs, LastOffsetDelta: int32(n - 1), FirstTimestamp: ts, MaxTimestamp: ts,
		ProducerID: pid, ProducerEpoch: 0, FirstSequence: seq, NumRecords: int32(n), Records: recs}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// txnLog writes a log of small segments through which transactions run
// across segment boundaries (see the comments), flushed, and returns it
// with the offsets of interest.
type txnOffsets struct {
	abortedFirst, abortedMarker int64 // producer 1: records from the first segments, ABORT several segments later
	shortFirst, shortMarker     int64 // producer 2: aborted within one segment
	committedFirst              int64 // producer 3: committed
	openFirst                   int64 // producer 4: still open at the end
}

func txnLog(t *testing.T) (*plog.Log, string, txnOffsets) {
	t.Helper()
	l, dir := openTestLog(t, 2048, 100)
	var o txnOffsets
	seqs := map[int64]int32{}
	app := func(pid int64, txn bool) int64 {
		t.Helper()
		info, err := l.Append(txnBatch(pid, seqs[pid], 3, 100, txn), 0)
		if err != nil {
			t.Fatalf("append of producer %d: %v", pid, err)
		}
		seqs[pid] += 3
		return info.FirstOffset
	}
	plain := func(n int) {
		for range n {
			if _, err := l.Append(txnBatch(-1, -1, 3, 100, false), 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	end := func(pid int64, typ plog.ControlType) int64 {
		t.Helper()
		info, err := l.AppendControl(pid, 0, plog.EndTxnMarker{Type: typ}, 0, 0)
		if err != nil {
			t.Fatalf("marker of producer %d: %v", pid, err)
		}
		return info.FirstOffset
	}
	plain(2)
	o.abortedFirst = app(1, true)
	for range 6 {
		plain(1)
		app(1, true)
	}
	o.shortFirst = app(2, true)
	plain(1)
	o.shortMarker = end(2, plog.ControlAbort)
	plain(2)
	o.abortedMarker = end(1, plog.ControlAbort)
	o.committedFirst = app(3, true)
	plain(6)
	end(3, plog.ControlCommit)
	plain(8)
	o.openFirst = app(4, true)
	plain(8)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	if o.abortedFirst >= l.Segments()[0].NextOffset || segmentOf(l, o.abortedMarker) <= segmentOf(l, o.abortedFirst)+1 {
		t.Fatalf("want producer 1's records from the first segment and its marker two segments later or more: %+v, %+v", o, l.Segments())
	}
	if segmentOf(l, o.shortFirst) != segmentOf(l, o.shortMarker) {
		t.Fatalf("want producer 2 within one segment: %+v, %+v", o, l.Segments())
	}
	return l, dir, o
}

// segmentOf is the index of the local segment holding offset.
func segmentOf(l *plog.Log, offset int64) int {
	for i, s := range l.Segments() {
		if offset >= s.BaseOffset && offset < s.NextOffset {
			return i
		}
	}
	return -1
}

// TestUploaderStopsAtLastStableOffset: with a transaction open, a pass
// given the partition's last stable offset uploads no segment holding
// its records (nor anything after); once it ends, the rest go up, each
// with its .txnindex: the ABORT markers' entries where they are, an
// empty one (size 0, no bytes in the bucket) elsewhere.
func TestUploaderStopsAtLastStableOffset(t *testing.T) {
	l, dir := openTestLog(t, 2048, 100)
	u, store := newTestUploader(t)
	ctx := context.Background()
	for range 8 {
		if _, err := l.Append(rawBatch(1_700_000_000_000, 3, 100), 0); err != nil {
			t.Fatal(err)
		}
	}
	first, err := l.Append(txnBatch(9, 0, 3, 100, true), 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 16 {
		if _, err := l.Append(rawBatch(1_700_000_000_000, 3, 100), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	hw := l.LogEndOffset()
	lso := l.LastStableOffset(hw)
	if lso != first.FirstOffset {
		t.Fatalf("LSO %d, want the open transaction's first offset %d", lso, first.FirstOffset)
	}
	if _, err := u.CopyPartition(ctx, upTP, "t", l, lso, Leadership{}); err != nil {
		t.Fatal(err)
	}
	segs, _ := u.Index.Segments(upTP)
	if len(segs) == 0 {
		t.Fatal("nothing uploaded below the open transaction")
	}
	for _, m := range segs {
		if m.EndOffset >= first.FirstOffset {
			t.Fatalf("segment [%d, %d] uploaded with the open transaction at %d", m.StartOffset, m.EndOffset, first.FirstOffset)
		}
	}
	var below []plog.SegmentInfo
	for _, s := range sealed(l) {
		if s.NextOffset <= lso {
			below = append(below, s)
		}
	}
	checkUploaded(t, u, store, localFiles(t, dir), below)

	// The transaction aborts: everything sealed goes up, the marker's
	// segment with its entry.
	marker, err := l.AppendControl(9, 0, plog.EndTxnMarker{Type: plog.ControlAbort}, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	for range 16 {
		if _, err := l.Append(rawBatch(1_700_000_000_000, 3, 100), 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	lso = l.LastStableOffset(l.LogEndOffset())
	if lso != l.LogEndOffset() {
		t.Fatalf("LSO %d after the abort, want the log end %d", lso, l.LogEndOffset())
	}
	if _, err := u.CopyPartition(ctx, upTP, "t", l, lso, Leadership{}); err != nil {
		t.Fatal(err)
	}
	checkUploaded(t, u, store, localFiles(t, dir), sealed(l))
	segs, _ = u.Index.Segments(upTP)
	r := NewReader(ReaderConfig{Store: store, IndexCacheBytes: 1 << 20})
	defer r.Close()
	found := 0
	for _, m := range segs {
		o, _ := m.Object(index.ObjectTransactionIndex)
		got, err := r.TxnIndex(ctx, &m)
		if err != nil {
			t.Fatal(err)
		}
		if m.StartOffset <= marker.FirstOffset && marker.FirstOffset <= m.EndOffset {
			want := []plog.AbortedTxn{{ProducerID: 9, FirstOffset: first.FirstOffset, LastOffset: marker.FirstOffset, LastStableOffset: got[0].LastStableOffset}}
			if !slices.Equal(got, want) || o.Size != 34 {
				t.Fatalf("marker's segment: .txnindex %+v (%d bytes), want %+v", got, o.Size, want)
			}
			found++
		} else if len(got) != 0 || o.Size != 0 {
			t.Fatalf("segment [%d, %d]: .txnindex %+v (%d bytes), want empty", m.StartOffset, m.EndOffset, got, o.Size)
		}
	}
	if found != 1 {
		t.Fatalf("the marker at %d is in %d uploaded segments", marker.FirstOffset, found)
	}
	// Empty ones cost no GET: reading them all again reads nothing.
	gets := store.Calls(OpGet)
	r2 := NewReader(ReaderConfig{Store: store})
	defer r2.Close()
	for _, m := range segs {
		if m.StartOffset > marker.FirstOffset || marker.FirstOffset > m.EndOffset {
			if _, err := r2.TxnIndex(ctx, &m); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := store.Calls(OpGet) - gets; n != 0 {
		t.Fatalf("reading empty transaction indexes took %d GETs", n)
	}
}

// TestTxnIndexOfOldManifest: a segment whose manifest does not list a
// .txnindex (uploaded before transactions were served, when none could
// be aborted) has no aborted transaction, without a GET; one that lists a
// corrupt one is ErrCorruptSegment.
func TestTxnIndexOfOldManifest(t *testing.T) {
	store := NewMemStore()
	r := NewReader(ReaderConfig{Store: store, IndexCacheBytes: 1 << 20})
	defer r.Close()
	ctx := context.Background()
	m := &index.SegmentMetadata{Partition: upTP, SegmentID: index.NewUUID(), StartOffset: 100, EndOffset: 199, State: index.CopySegmentFinished,
		LeaderEpochs: []index.EpochEntry{{Epoch: 0, StartOffset: 100}}}
	got, err := r.TxnIndex(ctx, m)
	if err != nil || got != nil || store.Calls(OpGet) != 0 {
		t.Fatalf("old manifest: %+v, %v, %d GETs", got, err, store.Calls(OpGet))
	}
	for name, b := range map[string][]byte{
		"torn":           make([]byte, 33),
		"marker outside": plog.EncodeTxnIndex([]plog.AbortedTxn{{ProducerID: 1, FirstOffset: 100, LastOffset: 250, LastStableOffset: 100}}),
	} {
		m := *m
		m.SegmentID = index.NewUUID()
		m.Objects = []index.ObjectEntry{{Kind: index.ObjectTransactionIndex, Size: int64(len(b))}}
		if err := store.Put(ctx, ObjectKey(&m, index.ObjectTransactionIndex), bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
		if _, err := r.TxnIndex(ctx, &m); !errors.Is(err, ErrCorruptSegment) {
			t.Fatalf("%s .txnindex: %v, want ErrCorruptSegment", name, err)
		}
	}
}

// TestAbortedTransactionsAcrossTierBoundary compares, for every fetch
// range, the aborted transactions the tiered partition lists (remote
// segments' .txnindex, then the local log) with what the whole local log
// listed before anything was tiered, at each stage of tiering:
//
//  1. the records of an aborted transaction in the bucket, its ABORT
//     marker in the local log (only the segments before the marker's
//     uploaded, and deleted locally);
//  2. everything sealed uploaded, the local log starting inside a
//     segment the bucket holds too (DeleteRecords): markers held on
//     both sides are listed once;
//  3. everything uploaded that may be (up to the open transaction of
//     producer 4) and deleted locally: markers in later remote segments
//     than the fetch's.
//
// (A marker is never below its transaction's records, so "records local,
// marker remote" is a fetch served locally whose transaction began in the
// bucket: the local log lists it; checked at each stage too.)
//
// On the in-memory store and on S3 (MinIO).
func TestAbortedTransactionsAcrossTierBoundary(t *testing.T) {
	t.Run("mem", func(t *testing.T) { testAbortedTransactionsAcrossTierBoundary(t, NewMemStore()) })
	t.Run("s3", func(t *testing.T) {
		s, _ := newMinIOStore(t, nil)
		testAbortedTransactionsAcrossTierBoundary(t, s)
	})
}

func testAbortedTransactionsAcrossTierBoundary(t *testing.T, store ObjectStore) {
	l, _, o := txnLog(t)
	u, _ := newTestUploader(t)
	u.Store = store
	ctx := context.Background()
	leo := l.LogEndOffset()
	type rng struct{ from, upper int64 }
	truth := map[rng][]plog.AbortedTxn{}
	var ranges []rng
	for from := int64(0); from < leo; from++ {
		for _, n := range []int64{1, 4, 17, 60, leo} {
			r := rng{from, min(from+n, leo)}
			ranges = append(ranges, r)
			truth[r] = l.AbortedTransactions(r.from, r.upper)
		}
	}
	if got := truth[rng{o.abortedFirst, o.abortedFirst + 1}]; len(got) != 1 || got[0].FirstOffset != o.abortedFirst || got[0].LastOffset != o.abortedMarker {
		t.Fatalf("the local log lists %+v for producer 1's first record", got)
	}
	r := NewReader(ReaderConfig{Store: store, IndexCacheBytes: 1 << 20})
	defer r.Close()
	check := func(stage string) {
		t.Helper()
		localStart := l.LogStartOffset()
		for _, rg := range ranges {
			got, err := r.AbortedTransactions(ctx, u.Index, upTP, l, rg.from, rg.upper)
			if err != nil {
				t.Fatalf("%s: [%d, %d): %v", stage, rg.from, rg.upper, err)
			}
			if !slices.Equal(got, truth[rg]) {
				t.Fatalf("%s (local log from %d): aborted transactions of [%d, %d) = %+v, want %+v", stage, localStart, rg.from, rg.upper, got, truth[rg])
			}
		}
	}
	segs := l.Segments()
	markerSeg := segs[segmentOf(l, o.abortedMarker)]

	// 1: records remote, marker local.
	if _, err := u.CopyPartition(ctx, upTP, "t", l, markerSeg.BaseOffset, Leadership{}); err != nil {
		t.Fatal(err)
	}
	remoteEnd, _, _ := u.Index.LogEnd(upTP)
	if _, err := l.EnforceTieredRetention(plog.TieredRetention{LocalRetentionMs: -1, LocalRetentionBytes: 0, RemoteEnd: remoteEnd}); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != markerSeg.BaseOffset || o.abortedFirst >= l.LogStartOffset() {
		t.Fatalf("stage 1: local log from %d, want %d, above producer 1's records at %d", l.LogStartOffset(), markerSeg.BaseOffset, o.abortedFirst)
	}
	check("records remote, marker local")
	// Without the local log, the remote .txnindex alone misses producer 1.
	if got, _ := r.AbortedTransactions(ctx, u.Index, upTP, nil, o.abortedFirst, o.abortedFirst+1); len(got) != 0 {
		t.Fatalf("remote only: %+v, want none (producer 1's marker is local)", got)
	}

	// 2: everything sealed uploaded; the local log starts inside a
	// segment the bucket holds.
	if _, err := u.CopyPartition(ctx, upTP, "t", l, l.LastStableOffset(leo), Leadership{}); err != nil {
		t.Fatal(err)
	}
	// The local log starts just after producer 2's marker, in the segment
	// holding it (and producer 1's): one marker below the local log start
	// in both the bucket and the local segment, one above.
	if _, err := l.DeleteRecordsBefore(o.shortMarker + 1); err != nil {
		t.Fatal(err)
	}
	if s := l.Segments()[0]; s.BaseOffset > o.shortMarker || s.NextOffset <= o.abortedMarker {
		t.Fatalf("stage 2: the local log's first segment %+v does not hold the markers at %d and %d", s, o.shortMarker, o.abortedMarker)
	}
	check("overlapping remote and local segments")

	// 3: only the active segment local.
	remoteEnd, _, _ = u.Index.LogEnd(upTP)
	if _, err := l.EnforceTieredRetention(plog.TieredRetention{LocalRetentionMs: -1, LocalRetentionBytes: 0, RemoteEnd: remoteEnd}); err != nil {
		t.Fatal(err)
	}
	if got, want := l.LogStartOffset(), l.Segments()[segmentOf(l, o.openFirst)].BaseOffset; got != want {
		t.Fatalf("stage 3: local log from %d, want %d: the segment holding producer 4's open transaction is not uploaded", got, want)
	}
	check("uploaded up to the open transaction")
	// A range that no transaction open at its segment's end began in
	// reads that segment alone (its producer snapshot says so), not every
	// remote segment up to the local log.
	cl := &countingLookup{SegmentLookup: u.Index}
	if got, err := r.AbortedTransactions(ctx, cl, upTP, l, 0, o.abortedFirst); err != nil || len(got) != 0 || cl.n != 1 {
		t.Fatalf("aborted transactions of [0, %d): %+v, %v, after %d segment lookups; want none after 1", o.abortedFirst, got, err, cl.n)
	}
	// The abort entries came from the bucket: a GET of the marker's
	// .txnindex, cached.
	if st := r.Stats(); st.IndexBytes == 0 {
		t.Fatalf("no transaction index cached: %+v", st)
	}
}

// TestRebuiltReplicaKeepsOpenTransaction: a replica rebuilt from the
// bucket (the tail-only move of a follower, BuildAuxState, and the
// restore of a leader start their log at a remote segment's end with its
// producer snapshot) has the transaction that is open across that
// boundary open, with its first offset in the bucket; replaying the rest
// of the log then ends it and indexes the abort as the original did.
func TestRebuiltReplicaKeepsOpenTransaction(t *testing.T) {
	l, _, o := txnLog(t)
	u, store := newTestUploader(t)
	ctx := context.Background()
	if _, err := u.CopyPartition(ctx, upTP, "t", l, l.LastStableOffset(l.LogEndOffset()), Leadership{}); err != nil {
		t.Fatal(err)
	}
	// The remote segment just below the marker's: producer 1 is open at
	// its end.
	seg := l.Segments()[segmentOf(l, o.abortedMarker)-1]
	m, err := FindSegment(ctx, store, upTP, seg.NextOffset-1)
	if err != nil {
		t.Fatal(err)
	}
	rs := plog.Reset{Offset: m.EndOffset + 1}
	if rs.EpochCheckpoint, err = GetObject(ctx, store, &m, index.ObjectLeaderEpochCheckpoint, 1<<20); err != nil {
		t.Fatal(err)
	}
	if rs.ProducerSnapshot, err = GetObject(ctx, store, &m, index.ObjectProducerSnapshot, 1<<20); err != nil || rs.ProducerSnapshot == nil {
		t.Fatalf("producer snapshot of the remote segment: %v (%d bytes)", err, len(rs.ProducerSnapshot))
	}
	nl, _ := openTestLog(t, 2048, 100)
	if err := nl.ResetTo(rs); err != nil {
		t.Fatal(err)
	}
	if first, ok := nl.OpenTransaction(1); !ok || first != o.abortedFirst {
		t.Fatalf("rebuilt replica: producer 1's transaction %d, %v; want open at %d", first, ok, o.abortedFirst)
	}
	if lso := nl.LastStableOffset(nl.LogEndOffset()); lso != o.abortedFirst {
		t.Fatalf("rebuilt replica's LSO %d, want producer 1's first offset %d", lso, o.abortedFirst)
	}
	// Replicate the rest from the original log.
	for off := nl.LogEndOffset(); off < l.LogEndOffset(); {
		fs, err := l.Read(off, l.LogEndOffset(), 1<<20, true)
		if err != nil {
			t.Fatal(err)
		}
		b := make([]byte, fs.Len)
		if _, err := fs.File.ReadAt(b, fs.Pos); err != nil && err != io.EOF {
			t.Fatal(err)
		}
		if _, err := nl.AppendReplicated(b); err != nil {
			t.Fatalf("replicate from %d: %v", off, err)
		}
		off = nl.LogEndOffset()
	}
	if _, ok := nl.OpenTransaction(1); ok {
		t.Fatal("producer 1's transaction still open after its marker was replicated")
	}
	if first, ok := nl.OpenTransaction(4); !ok || first != o.openFirst {
		t.Fatalf("producer 4: %d, %v; want open at %d", first, ok, o.openFirst)
	}
	want := l.AbortedTransactions(o.abortedFirst, o.abortedMarker)
	if len(want) == 0 {
		t.Fatal("the original log lists no aborted transaction")
	}
	got, err := NewReader(ReaderConfig{Store: store}).AbortedTransactions(ctx, u.Index, upTP, nl, o.abortedFirst, o.abortedMarker)
	if err != nil || !slices.Equal(got, want) {
		t.Fatalf("rebuilt replica (remote + local) lists %+v, %v; the original %+v", got, err, want)
	}
	if got := nl.AbortedTransactions(nl.LogStartOffset(), nl.LogEndOffset()); !slices.ContainsFunc(got, func(a plog.AbortedTxn) bool {
		return a.ProducerID == 1 && a.FirstOffset == o.abortedFirst && a.LastOffset == o.abortedMarker
	}) {
		t.Fatalf("rebuilt replica's own .txnindex: %+v, want producer 1's abort of [%d, %d]", got, o.abortedFirst, o.abortedMarker)
	}
}

// countingLookup counts the segment lookups.
type countingLookup struct {
	SegmentLookup
	n int
}

func (c *countingLookup) SegmentForOffset(tp index.TopicIDPartition, offset int64) (index.SegmentMetadata, error) {
	c.n++
	return c.SegmentLookup.SegmentForOffset(tp, offset)
}
