package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/index"
	"strata/internal/testenv"
	"strata/tier"
)

// fileBucket is what a file tier directory holds: object keys → bytes.
func fileBucket(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) && path != dir {
				return nil // a directory the store removed, emptied, meanwhile
			}
			return err
		}
		if d.IsDir() && d.Name() == ".tmp" {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			if os.IsNotExist(err) {
				return nil // deleted meanwhile
			}
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		out[filepath.ToSlash(rel)] = b
		return nil
	})
	if err != nil {
		t.Fatalf("walk the tier: %v", err)
	}
	return out
}

// tierState checks a file tier: every object belongs to a manifest, and
// the COPY_SEGMENT_FINISHED segments cover [0, end] without gaps. It
// returns end (-1: nothing) and a problem, if any.
func tierState(t *testing.T, objs map[string][]byte) ([]index.SegmentMetadata, int64, string) {
	t.Helper()
	var segs []index.SegmentMetadata
	named := map[string]bool{}
	for key, b := range objs {
		if !strings.HasSuffix(key, tier.ManifestSuffix) {
			continue
		}
		m, err := index.DecodeManifest(b)
		if err != nil {
			t.Fatalf("manifest %s: %v", key, err)
		}
		if m.State != index.CopySegmentFinished {
			return nil, -1, fmt.Sprintf("manifest %s in %s", key, m.State)
		}
		named[key] = true
		for _, o := range m.Objects {
			if o.Packed { // in the .indexes object
				k := tier.ObjectKey(&m, index.ObjectIndexes)
				if o.Offset+o.Size > int64(len(objs[k])) {
					return nil, -1, fmt.Sprintf("%s packed at [%d, +%d) of %s, which holds %d bytes", o.Kind.Suffix(), o.Offset, o.Size, k, len(objs[k]))
				}
				continue
			}
			k := tier.ObjectKey(&m, o.Kind)
			if int64(len(objs[k])) != o.Size {
				return nil, -1, fmt.Sprintf("%s: %d bytes, manifest says %d", k, len(objs[k]), o.Size)
			}
			named[k] = true
		}
		segs = append(segs, m)
	}
	for key := range objs {
		if !named[key] && !strings.HasPrefix(key, tier.SnapshotPrefix) { // the metadata snapshots are no segment's
			return nil, -1, fmt.Sprintf("object %s belongs to no finished segment", key)
		}
	}
	sort.Slice(segs, func(i, j int) bool { return segs[i].StartOffset < segs[j].StartOffset })
	next := int64(0)
	for _, m := range segs {
		if m.StartOffset != next {
			return nil, -1, fmt.Sprintf("segment at %d after end %d", m.StartOffset, next-1)
		}
		next = m.EndOffset + 1
	}
	return segs, next - 1, ""
}

// TestTierUploadKill9 kill -9s a broker with a file tier repeatedly while
// it uploads sealed segments, restarts it each time, and checks the end
// state: the tier holds contiguous COPY_SEGMENT_FINISHED segments from
// offset 0 and nothing else (every interrupted upload finished or cleaned
// up), their .log objects hold exactly the acknowledged records, and the
// local log starts no later than the tier ends.
func TestTierUploadKill9(t *testing.T) {
	tierDir := t.TempDir()
	b := testenv.StartBroker(t, testenv.BrokerOptions{
		Args: []string{"--tier", "file://" + tierDir},
		Sets: []string{"remote.log.manager.task.interval.ms=20", "log.retention.check.interval.ms=50"},
	})
	const topic, segBytes, localBytes, valueSize = "tiered", 16384, 40000, 1000
	str := func(s string) *string { return &s }
	createTopic(t, b.Addr(), topic, 1, map[string]*string{
		"remote.storage.enable": str("true"), "segment.bytes": str(fmt.Sprint(segBytes)),
		"local.retention.bytes": str(fmt.Sprint(localBytes)), "file.delete.delay.ms": str("0"),
	})
	value := func(i int64) []byte {
		v := fmt.Appendf(nil, "%08d-", i)
		return append(v, bytes.Repeat([]byte{byte('a' + i%26)}, valueSize-len(v))...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	acked := int64(0)
	rng := rand.New(rand.NewPCG(6, 6))
	for round := range 5 {
		cl := newClient(t, b.Addr(), kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordRetries(20))
		for range 12 {
			var recs []*kgo.Record
			for range 10 {
				recs = append(recs, &kgo.Record{Topic: topic, Value: value(acked + int64(len(recs)))})
			}
			res := cl.ProduceSync(ctx, recs...)
			if err := res.FirstErr(); err != nil {
				t.Fatalf("round %d: produce: %v", round, err)
			}
			for i, r := range res {
				if r.Record.Offset != acked+int64(i) {
					t.Fatalf("round %d: record %d at offset %d", round, acked+int64(i), r.Record.Offset)
				}
			}
			acked += int64(len(recs))
		}
		cl.Close()
		// Uploads of the segments just sealed are under way; kill at a
		// random point among them.
		time.Sleep(time.Duration(rng.IntN(60)) * time.Millisecond)
		b.Kill9()
		b.Restart()
	}

	// The restarted broker settles: everything sealed is uploaded (all but
	// the active segment, at most a segment's worth of records).
	perSeg := int64(segBytes/valueSize) + 1
	var segs []index.SegmentMetadata
	var end int64
	var problem string
	for deadline := time.Now().Add(60 * time.Second); ; {
		segs, end, problem = tierState(t, fileBucket(t, tierDir))
		if problem == "" && end >= acked-1-perSeg {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tier did not settle within 60s: tier end %d, acknowledged %d, problem %q", end, acked, problem)
		}
		time.Sleep(20 * time.Millisecond) // polling the bucket
	}
	objs := fileBucket(t, tierDir)
	segs, end, problem = tierState(t, objs)
	if problem != "" {
		t.Fatal(problem)
	}
	for _, m := range segs {
		off := m.StartOffset
		raw := objs[tier.ObjectKey(&m, index.ObjectLog)]
		for len(raw) > 0 {
			n := int(binary.BigEndian.Uint32(raw[8:])) + 12
			var rb kmsg.RecordBatch
			if err := rb.ReadFrom(raw[:n]); err != nil {
				t.Fatalf("segment %d: batch: %v", m.StartOffset, err)
			}
			raw = raw[n:]
			if rb.FirstOffset != off {
				t.Fatalf("segment %d: batch at %d, want %d", m.StartOffset, rb.FirstOffset, off)
			}
			rs := rb.Records
			for range rb.NumRecords {
				l, vn := binary.Varint(rs)
				if vn <= 0 || int(l)+vn > len(rs) || !bytes.Contains(rs[vn:vn+int(l)], value(off)) {
					t.Fatalf("segment %d: offset %d is not the acknowledged record", m.StartOffset, off)
				}
				rs = rs[vn+int(l):]
				off++
			}
		}
		if off != m.EndOffset+1 {
			t.Fatalf("segment %d: records to %d, manifest end %d", m.StartOffset, off-1, m.EndOffset)
		}
	}
	start, endOff := offsets(t, b.Addr(), topic)
	if start[0] != 0 {
		t.Fatalf("earliest offset %d, want the remote log start 0", start[0])
	}
	if local := listOffset(t, b.Addr(), topic, -4); local == 0 || local > end+1 {
		t.Fatalf("local log start %d; the tier ends at %d", local, end)
	}
	if tiered := listOffset(t, b.Addr(), topic, -5); tiered != end {
		t.Fatalf("latest tiered offset %d; the tier ends at %d", tiered, end)
	}
	if endOff[0] != acked {
		t.Fatalf("log end %d, acknowledged %d", endOff[0], acked)
	}
	resumed := 0
	for _, line := range strings.Split(b.Logs(), "\n") {
		if strings.Contains(line, "copied segments to remote storage") && !strings.Contains(line, "finished=0 cleaned_up=0") {
			resumed++
		}
	}
	t.Logf("%d records, %d segments in the tier up to %d, local log from %d; %d passes finished or cleaned up an interrupted upload",
		acked, len(segs), end, start[0], resumed)
}

// listOffset asks ListOffsets v9 for one timestamp (-4 EARLIEST_LOCAL, -5
// LATEST_TIERED, KIP-1005) of partition 0.
func listOffset(t *testing.T, addr, topic string, timestamp int64) int64 {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.ReplicaID = 9, -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = 0, -1, timestamp
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, newClient(t, addr))
	if err != nil {
		t.Fatalf("list offsets %d of %s: %v", timestamp, topic, err)
	}
	sp := resp.Topics[0].Partitions[0]
	if sp.ErrorCode != 0 {
		t.Fatalf("list offsets %d of %s: error %d", timestamp, topic, sp.ErrorCode)
	}
	return sp.Offset
}
