package broker

// Disks that fail (issue 15), seen by clients: a failing fsync takes the
// log directory offline (KAFKA_STORAGE_ERROR everywhere, leadership moves
// away), a full disk refuses produces until space returns. The broker's
// filesystem is the OS's with faults injected (vfs.FaultFS).

import (
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/config"
	"strata/controller"
	"strata/internal/vfs"
)

// startServerFS starts a broker on dir whose logs use fsys.
func startServerFS(t testing.TB, dir string, fsys vfs.FS, sets map[string]string) *testServer {
	t.Helper()
	props := map[string]string{"broker.id": "0", "listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": dir}
	for k, v := range sets {
		props[k] = v
	}
	cfg, err := config.Load(props)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	s, err := New(Options{Config: cfg, Listen: cfg.ListenAddr(), FS: fsys})
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	if err := s.Start(); err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return &testServer{Server: s, dir: dir, sets: sets}
}

func offsetForEpochReq(topic string, part, epoch int32) *kmsg.OffsetForLeaderEpochRequest {
	req := kmsg.NewPtrOffsetForLeaderEpochRequest()
	req.ReplicaID = -1
	rt := kmsg.NewOffsetForLeaderEpochRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewOffsetForLeaderEpochRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.LeaderEpoch = part, -1, epoch
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	return req
}

// wantOffline checks that every request on a partition of an offline log
// directory answers KAFKA_STORAGE_ERROR.
func wantOffline(t *testing.T, rc *rawConn, topic string, part int32) {
	t.Helper()
	what := topic + "-" + strconv.Itoa(int(part))
	wantCode(t, "produce to "+what, rc.producePart(topic, part, plainBatch(time.Now().UnixMilli(), "x").build(t)).ErrorCode, kerr.KafkaStorageError)
	wantCode(t, "fetch of "+what, rc.fetchOne(topic, part, 0, 1<<20).ErrorCode, kerr.KafkaStorageError)
	wantCode(t, "list offsets of "+what, rc.listOffset(topic, part, -1).ErrorCode, kerr.KafkaStorageError)
	ofle := rc.do(offsetForEpochReq(topic, part, 0), 4).(*kmsg.OffsetForLeaderEpochResponse)
	wantCode(t, "OffsetForLeaderEpoch of "+what, ofle.Topics[0].Partitions[0].ErrorCode, kerr.KafkaStorageError)
}

// A failed fsync takes the log directory offline: the partition whose
// fsync failed refuses the produce and everything after it, even once
// the disk answers again (before the fix the next produce succeeded and
// its fsync moved the recovery point over the dropped pages), the other
// partitions follow, the broker keeps answering what needs no log, and a
// restart recovers everything acknowledged.
func TestLogDirOfflineAfterFailedFsync(t *testing.T) {
	dir := t.TempDir()
	ff := vfs.NewFaultFS(vfs.OS)
	ts := startServerFS(t, dir, ff, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("d", 2, map[string]string{"flush.messages": "1"})
	rc.createTopic("other", 1, nil)
	now := time.Now().UnixMilli()
	rc.produceOK("d", 0, plainBatch(now, "a0").build(t))
	rc.produceOK("d", 1, plainBatch(now, "b0").build(t))
	rc.produceOK("other", 0, plainBatch(now, "c0").build(t))

	ff.SetInjector(vfs.FailWith(vfs.OpSync, filepath.Join(dir, "d-0")+string(filepath.Separator), syscall.EIO))
	got := rc.producePart("d", 0, plainBatch(now, "a1").build(t))
	wantCode(t, "produce whose fsync failed", got.ErrorCode, kerr.KafkaStorageError)
	ff.SetInjector(nil) // the disk answers again: the directory stays offline
	got = rc.producePart("d", 0, plainBatch(now, "a2").build(t))
	wantCode(t, "produce after a failed fsync", got.ErrorCode, kerr.KafkaStorageError)

	waitFor(t, "every partition offline", 5*time.Second, func() bool {
		for _, p := range ts.allPartitions() {
			if p.Log().Err() == nil {
				return false
			}
		}
		return true
	})
	for _, tp := range []struct {
		topic string
		part  int32
	}{{"d", 0}, {"d", 1}, {"other", 0}} {
		wantOffline(t, rc, tp.topic, tp.part)
	}
	dl := rc.do(kmsg.NewPtrDescribeLogDirsRequest(), 4).(*kmsg.DescribeLogDirsResponse)
	if len(dl.Dirs) == 0 || dl.Dirs[0].ErrorCode != kerr.KafkaStorageError.Code || len(dl.Dirs[0].Topics) != 0 {
		t.Fatalf("DescribeLogDirs of the offline directory: %+v", dl.Dirs)
	}
	md := rc.do(metadataReq("d"), 12).(*kmsg.MetadataResponse)
	if mt := mdTopic(md, "d"); mt == nil || len(mt.Partitions) != 2 {
		t.Fatalf("metadata while offline: %+v", md.Topics)
	}

	// Restart on a working disk: everything acknowledged is there.
	ts.Close()
	ts2 := startServerFS(t, dir, nil, nil)
	rc2 := dialRaw(t, ts2.addr())
	for _, topic := range []string{"d", "other"} {
		rc2.produceOK(topic, 0, plainBatch(now, "after").build(t))
	}
	recs := consumeAll(t, ts2, "d", 3)
	var vals []string
	for _, r := range recs {
		if r.Partition == 0 {
			vals = append(vals, string(r.Value))
		}
	}
	if len(vals) < 2 || vals[0] != "a0" || vals[len(vals)-1] != "after" {
		t.Fatalf("d-0 after restart: %q", vals)
	}
}

// In a cluster the broker with the offline directory leaves: leadership
// moves to the other ISR member, which takes produces, and the records
// acknowledged before the failure are read back from it.
func TestLogDirOfflineMovesLeadership(t *testing.T) {
	c := &testCluster{t: t, m: controller.NewMemory(), dirs: map[int32]string{}, servers: map[int32]*Server{}}
	ff := vfs.NewFaultFS(vfs.OS)
	t.Cleanup(func() {
		for _, s := range c.servers {
			s.Close()
		}
	})
	for id := int32(0); id < 2; id++ {
		c.dirs[id] = t.TempDir()
		props := map[string]string{"broker.id": strconv.Itoa(int(id)), "listeners": "PLAINTEXT://127.0.0.1:0",
			"log.dirs": c.dirs[id], "replica.lag.time.max.ms": "500", "controlled.shutdown.retry.backoff.ms": "100"}
		cfg, err := config.Load(props)
		if err != nil {
			t.Fatal(err)
		}
		opts := Options{Config: cfg, Listen: cfg.ListenAddr(), Controller: c.m}
		if id == 0 {
			opts.FS = ff
		}
		s, err := New(opts)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(); err != nil {
			t.Fatal(err)
		}
		c.servers[id] = s
	}
	c.createTopic("m", []int32{0, 1}, map[string]string{"flush.messages": "1"})
	c.waitISR("m", 0, 1)
	rc0 := c.rc(0)
	now := time.Now().UnixMilli()
	for _, v := range []string{"a", "b"} {
		rc0.produceOK("m", 0, plainBatch(now, v).build(t))
	}

	ff.SetInjector(vfs.FailWith(vfs.OpSync, filepath.Join(c.dirs[0], "m-0"), syscall.EIO))
	wantCode(t, "produce whose fsync failed", rc0.producePart("m", 0, plainBatch(now, "x").build(t)).ErrorCode, kerr.KafkaStorageError)
	ff.SetInjector(nil)
	waitFor(t, "leadership moved to broker 1", 10*time.Second, func() bool {
		p := c.partition("m")
		return p.Leader == 1 && slices.Equal(p.ISR, []int32{1})
	})
	wantCode(t, "produce to the old leader", rc0.producePart("m", 0, plainBatch(now, "y").build(t)).ErrorCode, kerr.KafkaStorageError)
	rc1 := c.rc(1)
	waitFor(t, "broker 1 leads", 10*time.Second, func() bool { return c.servers[1].isLeader(c.servers[1].partition("m", 0)) })
	rc1.produceOK("m", 0, plainBatch(now, "c").build(t))
	recs := consumeAll(t, &testServer{Server: c.servers[1]}, "m", 3)
	var vals []string
	for _, r := range recs {
		vals = append(vals, string(r.Value))
	}
	if vals[0] != "a" || vals[1] != "b" || vals[len(vals)-1] != "c" {
		t.Fatalf("records on the new leader: %q", vals)
	}
}

// A full disk refuses the produce with a retriable KAFKA_STORAGE_ERROR
// (before the fix: UNKNOWN_SERVER_ERROR), takes nothing offline, and the
// partition takes produces again when space returns; no partial batch
// is ever served.
func TestDiskFullProduceResumes(t *testing.T) {
	dir := t.TempDir()
	ff := vfs.NewFaultFS(vfs.OS)
	ts := startServerFS(t, dir, ff, nil)
	rc := dialRaw(t, ts.addr())
	rc.createTopic("f", 1, nil)
	now := time.Now().UnixMilli()
	rc.produceOK("f", 0, plainBatch(now, "a").build(t))

	ff.SetInjector(vfs.FailWith(vfs.OpWrite, filepath.Join(dir, "f-0"), &vfs.ShortWrite{N: 17, Err: vfs.ErrNoSpace}))
	for range 3 {
		got := rc.producePart("f", 0, plainBatch(now, "refused").build(t))
		wantCode(t, "produce on a full disk", got.ErrorCode, kerr.KafkaStorageError)
	}
	if err := ts.logDirErr(); err != nil {
		t.Fatalf("a full disk took the log directory offline: %v", err)
	}
	fp := rc.fetchOne("f", 0, 0, 1<<20)
	wantCode(t, "fetch on a full disk", fp.ErrorCode, nil)
	if fp.HighWatermark != 1 {
		t.Fatalf("high watermark %d on a full disk, want 1", fp.HighWatermark)
	}

	ff.SetInjector(nil) // space returns
	if off := rc.produceOK("f", 0, plainBatch(now, "b").build(t)); off != 1 {
		t.Fatalf("offset %d after space returned, want 1", off)
	}
	recs := consumeAll(t, ts, "f", 2)
	if len(recs) != 2 || string(recs[0].Value) != "a" || string(recs[1].Value) != "b" || recs[1].Offset != 1 {
		t.Fatalf("records: %v", recs)
	}
}
