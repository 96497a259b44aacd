package tier

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/plog"
	"strata/index"
)

var upTP = index.TopicIDPartition{TopicID: topicX, Partition: 3}

// rawBatch is one record batch of n records of size bytes each, as a
// producer sends it.
func rawBatch(ts int64, n, size int) []byte {
	var recs []byte
	for i := range n {
		rec := kmsg.Record{OffsetDelta: int32(i), Value: bytes.Repeat([]byte{byte('a' + i%26)}, size)}
		rec.Length = int32(len(rec.AppendTo(nil)) - 1)
		recs = rec.AppendTo(recs)
	}
	b := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, LastOffsetDelta: int32(n - 1), FirstTimestamp: ts, MaxTimestamp: ts,
		ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1, NumRecords: int32(n), Records: recs}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// openTestLog opens an empty partition log in a temporary directory with
// the given segment.bytes and index.interval.bytes, closed at the end of
// the test.
func openTestLog(t *testing.T, segmentBytes int64, indexInterval int32) (*plog.Log, string) {
	t.Helper()
	dir := t.TempDir()
	cfg := plog.DefaultConfig()
	cfg.SegmentBytes = segmentBytes
	cfg.IndexIntervalBytes = indexInterval
	cfg.FileDeleteDelayMs = 0
	l, err := plog.Open(plog.Options{Dir: dir, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, dir
}

// testLog is a real partition log in a temporary directory with small
// segments, holding batches appends of about 500 bytes in leader epoch 0,
// then 5 more in epoch 2; everything flushed.
func testLog(t *testing.T, appends int) (*plog.Log, string) {
	t.Helper()
	return testLogSized(t, 2048, appends)
}

// testLogSized is testLog with segments of segmentBytes: two replicas of
// one partition hold the same records in segments of other boundaries.
func testLogSized(t *testing.T, segmentBytes int64, appends int) (*plog.Log, string) {
	t.Helper()
	l, dir := openTestLog(t, segmentBytes, 100)
	for i := range appends + 5 {
		epoch := int32(0)
		if i >= appends {
			epoch = 2
		}
		if _, err := l.Append(rawBatch(1_700_000_000_000+int64(i), 4, 100), epoch); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	return l, dir
}

func newTestUploader(t *testing.T) (*Uploader, *MemStore) {
	t.Helper()
	idx, err := index.Open(index.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { idx.Close() })
	store := NewMemStore()
	return &Uploader{Store: store, Index: idx, BrokerID: 7}, store
}

func sealed(l *plog.Log) []plog.SegmentInfo {
	var out []plog.SegmentInfo
	for _, s := range l.Segments() {
		if s.Sealed {
			out = append(out, s)
		}
	}
	return out
}

// checkUploaded checks that the index holds exactly the given segments in
// COPY_SEGMENT_FINISHED, that the bucket holds their objects equal to the
// local files and a FINISHED manifest, and nothing else.
// localFiles reads every file of a partition directory, by name.
func localFiles(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = b
	}
	return out
}

func checkUploaded(t *testing.T, u *Uploader, store *MemStore, files map[string][]byte, want []plog.SegmentInfo) {
	t.Helper()
	ctx := context.Background()
	segs, err := u.Index.Segments(upTP)
	if err != nil {
		t.Fatal(err)
	}
	if len(segs) != len(want) {
		t.Fatalf("index holds %d segments, want %d: %+v", len(segs), len(want), segs)
	}
	keys := map[string]bool{}
	for i, m := range segs {
		w := want[i]
		if m.State != index.CopySegmentFinished || m.StartOffset != w.BaseOffset || m.EndOffset != w.NextOffset-1 || m.SegmentSize != w.Size || m.BrokerID != 7 {
			t.Fatalf("segment %d: %+v, want %+v", i, m, w)
		}
		var packedBytes int64
		for _, o := range m.Objects {
			key := ObjectKey(&m, o.Kind)
			var got []byte
			var err error
			switch {
			case o.Packed:
				// In the .indexes object, one after another.
				if o.Offset != packedBytes {
					t.Fatalf("%s packed at %d, want %d", o.Kind.Suffix(), o.Offset, packedBytes)
				}
				packedBytes += o.Size
				key = ObjectKey(&m, index.ObjectIndexes) + "@" + o.Kind.Suffix()
				got, err = GetObject(ctx, store, &m, o.Kind, 1<<30)
				if got == nil {
					got = []byte{}
				}
			case o.Kind == index.ObjectLog || o.Kind == index.ObjectIndexes:
				keys[key] = true
				got, err = ReadAll(ctx, store, key)
			default:
				t.Fatalf("%s uploaded as an object of its own, not packed", o.Kind.Suffix())
			}
			if err != nil {
				t.Fatalf("%s: %v", key, err)
			}
			if int64(len(got)) != o.Size {
				t.Fatalf("%s: %d bytes, manifest says %d", key, len(got), o.Size)
			}
			switch o.Kind {
			case index.ObjectLog, index.ObjectOffsetIndex, index.ObjectTimeIndex:
				name := fmt.Sprintf("%020d%s", m.StartOffset, o.Kind.Suffix())
				local, ok := files[name]
				if !ok {
					t.Fatalf("no local %s to compare %s with", name, key)
				}
				if !bytes.Equal(got, local) {
					t.Fatalf("%s differs from the local file (%d vs %d bytes)", key, len(got), len(local))
				}
			case index.ObjectTransactionIndex:
				// The local .txnindex, or empty (KIP-1058) when the segment has none.
				name := fmt.Sprintf("%020d.txnindex", m.StartOffset)
				if !bytes.Equal(got, files[name]) {
					t.Fatalf("%s = %x, local %s = %x", key, got, name, files[name])
				}
			case index.ObjectLeaderEpochCheckpoint:
				var sb strings.Builder
				fmt.Fprintf(&sb, "0\n%d\n", len(m.LeaderEpochs))
				for _, e := range m.LeaderEpochs {
					fmt.Fprintf(&sb, "%d %d\n", e.Epoch, e.StartOffset)
				}
				if string(got) != sb.String() {
					t.Fatalf("%s = %q, want %q", key, got, sb.String())
				}
			}
		}
		if _, ok := m.Object(index.ObjectLog); !ok {
			t.Fatalf("segment %d: no .log object", i)
		}
		if _, ok := m.Object(index.ObjectTransactionIndex); !ok {
			t.Fatalf("segment %d: no .txnindex listed (KIP-1058: an empty one is listed with size 0): %+v", i, m.Objects)
		}
		if o, ok := m.Object(index.ObjectIndexes); !ok || o.Size != packedBytes {
			t.Fatalf("segment %d: .indexes object %+v, want %d bytes of packed objects", i, o, packedBytes)
		}
		mk := ManifestKey(&m)
		keys[mk] = true
		man, err := readManifest(ctx, store, mk)
		if err != nil || man.State != index.CopySegmentFinished || man.SegmentID != m.SegmentID {
			t.Fatalf("manifest %s: %+v, %v", mk, man, err)
		}
	}
	for _, k := range store.Keys() {
		if !keys[k] {
			t.Errorf("bucket holds %s, which no uploaded segment lists", k)
		}
	}
}

func TestUploaderCopiesSealedSegmentsBelowHW(t *testing.T) {
	l, dir := testLog(t, 20)
	u, store := newTestUploader(t)
	segs := sealed(l)
	if len(segs) < 5 {
		t.Fatalf("only %d sealed segments", len(segs))
	}
	ctx := context.Background()
	// The high watermark inside the third segment: only two go.
	hw := segs[2].BaseOffset + 1
	st, err := u.CopyPartition(ctx, upTP, "t", l, hw, Leadership{})
	if err != nil || st.Copied != 2 {
		t.Fatalf("CopyPartition below %d = %+v, %v; want 2 copied", hw, st, err)
	}
	checkUploaded(t, u, store, localFiles(t, dir), segs[:2])

	st, err = u.CopyPartition(ctx, upTP, "t", l, l.LogEndOffset(), Leadership{})
	if err != nil || st.Copied != len(segs)-2 {
		t.Fatalf("CopyPartition = %+v, %v; want %d copied", st, err, len(segs)-2)
	}
	checkUploaded(t, u, store, localFiles(t, dir), segs)

	// Idempotent: nothing more to do, nothing written.
	puts := store.Calls(OpPut)
	if st, err := u.CopyPartition(ctx, upTP, "t", l, l.LogEndOffset(), Leadership{}); err != nil || st != (CopyStats{}) {
		t.Fatalf("third pass = %+v, %v", st, err)
	}
	if store.Calls(OpPut) != puts {
		t.Fatalf("third pass wrote %d objects", store.Calls(OpPut)-puts)
	}

	// Epochs: the last sealed segments straddle or follow the change to
	// epoch 2, and the first are all epoch 0.
	all, _ := u.Index.Segments(upTP)
	if e := all[0].LeaderEpochs; len(e) != 1 || e[0] != (index.EpochEntry{Epoch: 0, StartOffset: 0}) {
		t.Fatalf("first segment epochs %+v", e)
	}
	if e := all[len(all)-1].LeaderEpochs; e[len(e)-1].Epoch != 2 {
		t.Fatalf("last sealed segment epochs %+v, want epoch 2 last", e)
	}
	// Producer snapshots written at rolls are uploaded beside the segments.
	if _, ok := all[0].Object(index.ObjectProducerSnapshot); !ok {
		t.Fatalf("first segment has no producer snapshot object: %+v", all[0].Objects)
	}
}

// TestUploaderFailuresResume: a bucket failing midway leaves the uploaded
// segments FINISHED and one STARTED; local retention deletes only the
// FINISHED ones; once the bucket is back, the next pass cleans up the
// attempt and uploads the rest.
func TestUploaderFailuresResume(t *testing.T) {
	l, dir := testLog(t, 20)
	u, store := newTestUploader(t)
	segs := sealed(l)
	files := localFiles(t, dir)
	ctx := context.Background()
	down := errors.New("bucket down")
	// The .log PUTs of the third segment on fail (by offset: two
	// segments' PUTs are under way at once, in no fixed order).
	store.SetFault(func(op Op, key string) error {
		if op == OpPut && strings.HasSuffix(key, ".log") {
			if k, err := ParseSegmentKey(key); err == nil && k.BaseOffset >= segs[2].BaseOffset {
				return down
			}
		}
		return nil
	})
	st, err := u.CopyPartition(ctx, upTP, "t", l, l.LogEndOffset(), Leadership{})
	if !errors.Is(err, down) || st.Copied != 2 {
		t.Fatalf("CopyPartition = %+v, %v; want 2 copied, then the failure", st, err)
	}
	// The failed segment is left COPY_SEGMENT_STARTED, and so is the next
	// one, started while the failed one's objects went up.
	idxSegs, _ := u.Index.Segments(upTP)
	if len(idxSegs) != 4 || idxSegs[2].State != index.CopySegmentStarted || idxSegs[3].State != index.CopySegmentStarted {
		t.Fatalf("index after the failure: %+v", idxSegs)
	}
	started := idxSegs[2:]

	// Local retention may delete only what is uploaded.
	end, ok, err := u.Index.LogEnd(upTP)
	if err != nil || !ok || end != segs[1].NextOffset-1 {
		t.Fatalf("remote log end = %d, %v, %v; want %d", end, ok, err, segs[1].NextOffset-1)
	}
	n, err := l.EnforceTieredRetention(plog.TieredRetention{LocalRetentionMs: -1, LocalRetentionBytes: 0, RemoteEnd: end})
	if err != nil || n != 2 {
		t.Fatalf("EnforceTieredRetention = %d, %v; want the 2 uploaded segments", n, err)
	}
	if got := l.LogStartOffset(); got != segs[2].BaseOffset {
		t.Fatalf("log start %d, want %d", got, segs[2].BaseOffset)
	}
	// Nothing more without uploads, however small local.retention.bytes is.
	if n, err := l.EnforceTieredRetention(plog.TieredRetention{LocalRetentionMs: 0, LocalRetentionBytes: 0, RemoteEnd: end}); err != nil || n != 0 {
		t.Fatalf("second EnforceTieredRetention = %d, %v; want nothing deleted", n, err)
	}

	// Still down, now for everything: the pass fails, the index is unchanged.
	store.SetFault(func(Op, string) error { return down })
	if _, err := u.CopyPartition(ctx, upTP, "t", l, l.LogEndOffset(), Leadership{}); !errors.Is(err, down) {
		t.Fatalf("CopyPartition with the bucket down = %v", err)
	}
	if again, _ := u.Index.Segments(upTP); len(again) != 4 || again[2].State != index.CopySegmentStarted || again[3].State != index.CopySegmentStarted {
		t.Fatalf("index changed while the bucket was down: %+v", again)
	}

	store.SetFault(nil)
	st, err = u.CopyPartition(ctx, upTP, "t", l, l.LogEndOffset(), Leadership{})
	if err != nil || st.Abandoned != 2 || st.Copied != len(segs)-2 {
		t.Fatalf("CopyPartition after recovery = %+v, %v; want 2 abandoned, %d copied", st, err, len(segs)-2)
	}
	for _, k := range store.Keys() {
		for _, a := range started {
			if strings.Contains(k, a.SegmentID.String()) {
				t.Fatalf("object %s of the abandoned attempt is still in the bucket", k)
			}
		}
	}
	checkUploaded(t, u, store, files, segs) // the first two are gone locally but stay uploaded
}

// TestUploaderCrashRecovery: entries a crashed process left in
// COPY_SEGMENT_STARTED are finished when their FINISHED manifest made it
// to the bucket, and deleted (objects included) when it did not.
func TestUploaderCrashRecovery(t *testing.T) {
	l, dir := testLog(t, 8)
	u, store := newTestUploader(t)
	segs := sealed(l)
	ctx := context.Background()
	put := func(key string, b []byte) {
		if err := store.Put(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	// Segment 0: everything uploaded, FINISHED manifest written, the
	// process died before the index update.
	if _, err := u.CopyPartition(ctx, upTP, "t", l, segs[0].NextOffset, Leadership{}); err != nil {
		t.Fatal(err)
	}
	m0, _ := u.Index.Segments(upTP)
	x2, err := index.Open(index.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer x2.Close()
	crashed := m0[0].Clone()
	crashed.State = index.CopySegmentStarted
	if err := x2.AddSegment(crashed); err != nil {
		t.Fatal(err)
	}
	// Segment 1: STARTED manifest and the .log object only.
	m1 := index.SegmentMetadata{Partition: upTP, SegmentID: index.NewUUID(), StartOffset: segs[1].BaseOffset, EndOffset: segs[1].NextOffset - 1,
		MaxTimestamp: -1, SegmentSize: 3, LeaderEpochs: []index.EpochEntry{{Epoch: 0, StartOffset: segs[1].BaseOffset}}, State: index.CopySegmentStarted,
		Objects: []index.ObjectEntry{{Kind: index.ObjectLog, Size: 3}}}
	if err := x2.AddSegment(m1); err != nil {
		t.Fatal(err)
	}
	b, _ := index.EncodeManifest(&m1)
	put(ManifestKey(&m1), b)
	put(ObjectKey(&m1, index.ObjectLog), []byte("abc"))

	u2 := &Uploader{Store: store, Index: x2, BrokerID: 7}
	st, err := u2.CopyPartition(ctx, upTP, "t", l, l.LogEndOffset(), Leadership{})
	if err != nil || st.Finished != 1 || st.Abandoned != 1 || st.Copied != len(segs)-1 {
		t.Fatalf("CopyPartition = %+v, %v; want 1 finished, 1 abandoned, %d copied", st, err, len(segs)-1)
	}
	got, _ := x2.Segments(upTP)
	if got[0].SegmentID != crashed.SegmentID {
		t.Fatalf("segment 0 is %s, want the crashed upload %s finished", got[0].SegmentID, crashed.SegmentID)
	}
	checkUploaded(t, u2, store, localFiles(t, dir), segs)
}

// TestUploaderThrottle: remote.log.manager.copy.max.bytes.per.second
// paces the uploads (a lower bound only: a slow machine takes longer).
func TestUploaderThrottle(t *testing.T) {
	l, _ := testLog(t, 20)
	u, _ := newTestUploader(t)
	const rate = 8000
	u.Throttle = NewThrottle(rate)
	start := time.Now()
	st, err := u.CopyPartition(context.Background(), upTP, "t", l, l.LogEndOffset(), Leadership{})
	if err != nil || st.Copied == 0 {
		t.Fatalf("CopyPartition = %+v, %v", st, err)
	}
	// One second of burst, then the rate.
	if want := time.Duration(float64(st.Bytes-rate) / rate * float64(time.Second)); time.Since(start) < want-100*time.Millisecond {
		t.Fatalf("%d bytes in %v at %d B/s; want at least %v", st.Bytes, time.Since(start), rate, want)
	}
	if NewThrottle(1<<63-1) != nil || NewThrottle(0) != nil {
		t.Fatal("Kafka's default (Long.MAX_VALUE) and 0 must mean no limit")
	}
}

// TestUploaderManifestBeforeObjects: a segment's objects go up only once
// its COPY_SEGMENT_STARTED manifest is in the bucket. A leader's refresh
// replaces its index with what the manifests say, so objects uploaded
// before their manifest by a process that then died would be known to
// no index, and no pass would clean them up.
func TestUploaderManifestBeforeObjects(t *testing.T) {
	l, _ := testLog(t, 20)
	u, store := newTestUploader(t)
	down := errors.New("manifest refused")
	// The second segment's STARTED manifest (the first PUT of its
	// manifest key) fails: none of its objects may go up. (The hook runs
	// on the uploads' goroutines.)
	second := fmt.Sprintf("/%020d-", sealed(l)[1].BaseOffset)
	var mu sync.Mutex
	var objects []string
	store.SetFault(func(op Op, key string) error {
		if op != OpPut || !strings.Contains(key, second) {
			return nil
		}
		if strings.HasSuffix(key, ManifestSuffix) {
			return down
		}
		mu.Lock()
		objects = append(objects, key)
		mu.Unlock()
		return nil
	})
	if _, err := u.CopyPartition(context.Background(), upTP, "t", l, l.LogEndOffset(), Leadership{}); !errors.Is(err, down) {
		t.Fatalf("CopyPartition: %v, want the manifest's failure", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(objects) != 0 {
		t.Fatalf("objects PUT without their segment's manifest: %v", objects)
	}
}

// TestUploaderPipelinesSegments: the next segment's upload starts while
// the previous one's objects are still going up, and segments are
// finished in order: the remote log end never passes a segment that is
// not uploaded.
func TestUploaderPipelinesSegments(t *testing.T) {
	l, dir := testLog(t, 8)
	u, store := newTestUploader(t)
	segs := sealed(l)
	secondStarted := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	logs, manifests := 0, 0
	store.SetFault(func(op Op, key string) error {
		if op != OpPut {
			return nil
		}
		mu.Lock()
		if strings.HasSuffix(key, ManifestSuffix) {
			// The first segment's STARTED manifest, then the second's
			// (in series, the first segment's FINISHED one would be next).
			if manifests++; manifests == 2 {
				once.Do(func() { close(secondStarted) })
			}
		}
		first := strings.HasSuffix(key, ".log") && logs == 0
		if strings.HasSuffix(key, ".log") {
			logs++
		}
		mu.Unlock()
		if first {
			select { // the first .log waits for the second segment to start
			case <-secondStarted:
			case <-time.After(5 * time.Second):
				return errors.New("the second segment did not start while the first one's .log was going up")
			}
			if end, ok, _ := u.Index.LogEnd(upTP); ok {
				return fmt.Errorf("remote log end %d before the first segment finished", end)
			}
		}
		return nil
	})
	st, err := u.CopyPartition(context.Background(), upTP, "t", l, l.LogEndOffset(), Leadership{})
	if err != nil || st.Copied != len(segs) {
		t.Fatalf("CopyPartition = %+v, %v; want %d copied", st, err, len(segs))
	}
	store.SetFault(nil)
	checkUploaded(t, u, store, localFiles(t, dir), segs)
}
