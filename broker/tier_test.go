package broker

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/twmb/franz-go/pkg/kgo"

	"strata/broker/config"
	"strata/index"
	"strata/internal/testenv"
	"strata/tier"
)

// failCounter counts the store's failed Puts and Gets, so that a test knows that
// upload passes ran against a bucket that was down.
type failCounter struct {
	tier.ObjectStore
	fails atomic.Int64
}

func (f *failCounter) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	err := f.ObjectStore.Put(ctx, key, r, size)
	if err != nil {
		f.fails.Add(1)
	}
	return err
}

func (f *failCounter) Get(ctx context.Context, key string, off, length int64) (io.ReadCloser, error) {
	r, err := f.ObjectStore.Get(ctx, key, off, length)
	if err != nil && !errors.Is(err, tier.ErrNotFound) {
		f.fails.Add(1)
	}
	return r, err
}

// tierMetric reads a kafka_server_brokertopicmetrics_* metric from the
// broker's registry.
func tierMetric(t *testing.T, srv *Server, name string) float64 {
	t.Helper()
	fams, err := srv.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == "kafka_server_brokertopicmetrics_"+name && len(f.GetMetric()) == 1 {
			m := f.GetMetric()[0]
			if g := m.GetGauge(); g != nil {
				return g.GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	t.Fatalf("no metric %s", name)
	return 0
}

const tierValueSize = 1000

func tierValue(i int) []byte {
	v := fmt.Appendf(nil, "%06d-", i)
	return append(v, bytes.Repeat([]byte{byte('a' + i%26)}, tierValueSize-len(v))...)
}

// TestTieredUploadAndLocalRetention runs a broker with an S3 tier on a real
// MinIO: sealed segments go to the bucket and local copies are deleted by
// local.retention.bytes only once uploaded; with MinIO stopped, produce
// and fetch go on, nothing more is deleted locally, and uploads resume
// when it is back. The bucket is inspected with minio-go.
func TestTieredUploadAndLocalRetention(t *testing.T) {
	m := testenv.StartMinIO(t)
	t.Setenv("AWS_ACCESS_KEY_ID", m.AccessKey())
	t.Setenv("AWS_SECRET_ACCESS_KEY", m.SecretKey())
	const prefix = "tiered-test"
	s3s, err := tier.NewS3Store(tier.S3Config{Bucket: m.Bucket(), Prefix: prefix, Endpoint: m.Endpoint(), Region: testenv.MinIORegion,
		MaxAttempts: 2, MaxBackoff: 50 * time.Millisecond, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	store := &failCounter{ObjectStore: s3s}
	dir := t.TempDir()
	cfg, err := config.Load(map[string]string{
		"broker.id": "0", "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": dir,
		"remote.log.storage.system.enable":    "true",
		"remote.log.manager.task.interval.ms": "100",
		"log.retention.check.interval.ms":     "100",
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(Options{Config: cfg, Listen: cfg.ListenAddr(), TierStore: store})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	ts := &testServer{Server: srv, dir: dir}

	const topic, localBytes, segBytes = "tiered", 40000, 16384
	ctx := testCtx(t)
	adm := ts.admin(t)
	str := func(s string) *string { return &s }
	if _, err := adm.CreateTopic(ctx, 1, 1, map[string]*string{
		"remote.storage.enable": str("true"), "segment.bytes": str(fmt.Sprint(segBytes)),
		"local.retention.bytes": str(fmt.Sprint(localBytes)), "file.delete.delay.ms": str("0"),
	}, topic); err != nil {
		t.Fatal(err)
	}
	cl := ts.client(t, kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.ProducerLinger(0))
	produced := 0
	produce := func(n int) {
		t.Helper()
		for n > 0 {
			var recs []*kgo.Record
			for range min(n, 10) {
				recs = append(recs, &kgo.Record{Topic: topic, Value: tierValue(produced + len(recs))})
			}
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			produced += len(recs)
			n -= len(recs)
		}
	}
	var p *partition
	waitFor(t, "the partition", 10*time.Second, func() bool { p = srv.partition(topic, 0); return p != nil })
	tp := index.TopicIDPartition{TopicID: index.UUID(p.TopicID()), Partition: 0}
	partDir := filepath.Join(dir, topic+"-0")

	// lastSealedEnd is the last offset of the newest sealed segment.
	lastSealedEnd := func() int64 {
		end := int64(-1)
		for _, s := range p.Log().Segments() {
			if s.Sealed {
				end = s.NextOffset - 1
			}
		}
		return end
	}
	remoteEnd := func() int64 {
		end, ok, err := srv.tier.idx.LogEnd(tp)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return -1
		}
		return end
	}
	settled := func() bool {
		return remoteEnd() == lastSealedEnd() && p.Log().Size() <= localBytes+segBytes
	}

	produce(200)
	waitFor(t, "every sealed segment uploaded and local retention applied", 30*time.Second, settled)
	waitFor(t, "no copy lag", 10*time.Second, func() bool {
		return tierMetric(t, srv, "remotecopylagsegments") == 0 && tierMetric(t, srv, "remotecopylagbytes") == 0
	})
	if n := tierMetric(t, srv, "remotecopyrequests_total"); n == 0 || tierMetric(t, srv, "remotecopybytes_total") == 0 {
		t.Fatalf("remotecopyrequests %v, remotecopybytes %v after uploads", n, tierMetric(t, srv, "remotecopybytes_total"))
	}
	start0 := p.Log().LogStartOffset()
	if start0 == 0 {
		t.Fatalf("local log start still 0 after %d bytes produced", 200*tierValueSize)
	}

	// The bucket down: produce and fetch go on, uploads fail, and no
	// segment is deleted locally however far past local.retention.bytes.
	m.Stop(t)
	uploadedEnd := remoteEnd()
	fails := store.fails.Load()
	produce(200)
	waitFor(t, "upload passes failing against the stopped bucket", 60*time.Second, func() bool { return store.fails.Load() >= fails+3 })
	waitFor(t, "copy lag while the bucket is down", 10*time.Second, func() bool { return tierMetric(t, srv, "remotecopylagsegments") > 0 })
	if tierMetric(t, srv, "remotecopyerrors_total") == 0 {
		t.Fatal("no remotecopyerrors counted with the bucket down")
	}
	// Segments uploaded before the stop may go; none after.
	if got := p.Log().LogStartOffset(); got > uploadedEnd+1 {
		t.Fatalf("local log start %d while the bucket was down, past the uploaded end %d", got, uploadedEnd)
	}
	if got := remoteEnd(); got != uploadedEnd {
		t.Fatalf("remote end moved from %d to %d with the bucket down", uploadedEnd, got)
	}
	start0 = p.Log().LogStartOffset()
	if sz := p.Log().Size(); sz <= localBytes+segBytes {
		t.Fatalf("local size %d: expected the not-uploaded segments to be kept", sz)
	}
	// From the local log start: earliest is the remote log start, whose
	// reads fail while the bucket is down.
	recs := consumeAll(t, ts, topic, produced-int(start0),
		kgo.ConsumeResetOffset(kgo.NewOffset().At(start0)))
	if recs[0].Offset != start0 || !bytes.Equal(recs[len(recs)-1].Value, tierValue(produced-1)) {
		t.Fatalf("fetch with the bucket down: first offset %d, want %d", recs[0].Offset, start0)
	}

	// Sealed local files, kept to compare with the bucket.
	localLogs := map[int64][]byte{}
	for _, s := range p.Log().Segments() {
		if s.Sealed {
			b, err := os.ReadFile(filepath.Join(partDir, fmt.Sprintf("%020d.log", s.BaseOffset)))
			if err != nil {
				t.Fatal(err)
			}
			localLogs[s.BaseOffset] = b
		}
	}

	m.Start(t)
	waitFor(t, "uploads resumed and local retention applied", 60*time.Second, settled)
	start1 := p.Log().LogStartOffset()
	if start1 <= start0 {
		t.Fatalf("local log start %d did not move past %d after uploads resumed", start1, start0)
	}

	// What the bucket holds, through minio-go.
	mc := m.Client(t)
	objects := map[string]int64{}
	for o := range mc.ListObjects(ctx, m.Bucket(), minio.ListObjectsOptions{Prefix: prefix + "/", Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		objects[strings.TrimPrefix(o.Key, prefix+"/")] = o.Size
	}
	get := func(key string) []byte {
		t.Helper()
		o, err := mc.GetObject(ctx, m.Bucket(), prefix+"/"+key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer o.Close()
		b, err := io.ReadAll(o)
		if err != nil {
			t.Fatalf("get %s: %v", key, err)
		}
		return b
	}
	var manifests []index.SegmentMetadata
	for key := range objects {
		if !strings.HasSuffix(key, tier.ManifestSuffix) {
			continue
		}
		md, err := index.DecodeManifest(get(key))
		if err != nil {
			t.Fatalf("manifest %s: %v", key, err)
		}
		if md.State != index.CopySegmentFinished {
			t.Fatalf("manifest %s in %s", key, md.State)
		}
		manifests = append(manifests, md)
	}
	sort.Slice(manifests, func(i, j int) bool { return manifests[i].StartOffset < manifests[j].StartOffset })
	listed := map[string]bool{}
	next := int64(0)
	for _, md := range manifests {
		if md.StartOffset != next {
			t.Fatalf("remote segments not contiguous: %d after end %d", md.StartOffset, next-1)
		}
		next = md.EndOffset + 1
		listed[tier.ManifestKey(&md)] = true
		for _, o := range md.Objects {
			if o.Packed {
				continue // in the .indexes object, checked below
			}
			key := tier.ObjectKey(&md, o.Kind)
			listed[key] = true
			if objects[key] != o.Size {
				t.Fatalf("%s: %d bytes in the bucket, manifest says %d", key, objects[key], o.Size)
			}
		}
		for _, k := range []index.ObjectKind{index.ObjectLog, index.ObjectIndexes, index.ObjectOffsetIndex, index.ObjectTimeIndex, index.ObjectLeaderEpochCheckpoint} {
			if _, ok := md.Object(k); !ok {
				t.Fatalf("segment %d has no %s object", md.StartOffset, k.Suffix())
			}
		}
		// The small objects are packed in .indexes: the checkpoint is
		// Kafka's text format, at the offset the manifest gives.
		packs := get(tier.ObjectKey(&md, index.ObjectIndexes))
		if o, _ := md.Object(index.ObjectLeaderEpochCheckpoint); !o.Packed || o.Offset+o.Size > int64(len(packs)) ||
			!strings.HasPrefix(string(packs[o.Offset:o.Offset+o.Size]), "0\n") {
			t.Fatalf("segment %d: packed leader-epoch-checkpoint %+v in %d bytes of .indexes", md.StartOffset, o, len(packs))
		}
		logBytes := get(tier.ObjectKey(&md, index.ObjectLog))
		if local, ok := localLogs[md.StartOffset]; ok && !bytes.Equal(local, logBytes) {
			t.Fatalf("segment %d: .log in the bucket differs from the local file", md.StartOffset)
		}
		// Every record, by offset, is the one produced.
		off := md.StartOffset
		for _, b := range splitBatches(t, logBytes) {
			if b.FirstOffset != off {
				t.Fatalf("segment %d: batch at %d, want %d", md.StartOffset, b.FirstOffset, off)
			}
			rs := b.Records
			for range b.NumRecords {
				n, vn := binary.Varint(rs)
				if vn <= 0 || int(n)+vn > len(rs) {
					t.Fatalf("segment %d: bad record at %d", md.StartOffset, off)
				}
				if !bytes.Contains(rs[vn:vn+int(n)], tierValue(int(off))) {
					t.Fatalf("segment %d: offset %d is not record %d", md.StartOffset, off, off)
				}
				rs = rs[vn+int(n):]
				off++
			}
		}
		if off != md.EndOffset+1 {
			t.Fatalf("segment %d: records up to %d, manifest end %d", md.StartOffset, off-1, md.EndOffset)
		}
	}
	if next-1 != lastSealedEnd() || next < start1 {
		t.Fatalf("bucket holds offsets below %d; sealed end %d, local start %d", next, lastSealedEnd(), start1)
	}
	for key := range objects {
		if !listed[key] && !strings.HasPrefix(key, tier.SnapshotPrefix) {
			t.Errorf("object %s belongs to no uploaded segment", key)
		}
	}
	// Below the local log start nothing is left on disk.
	start1 = p.Log().LogStartOffset()
	ents, err := os.ReadDir(partDir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if base, ok := strings.CutSuffix(e.Name(), ".log"); ok {
			b, err := strconv.ParseInt(base, 10, 64)
			if err != nil || b < start1 {
				t.Fatalf("local segment %s below the log start %d", e.Name(), start1)
			}
		}
	}
}
