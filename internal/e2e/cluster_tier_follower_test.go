package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/internal/testenv"
)

// localLogBytes is the bytes of a partition's .log files under a broker's
// data directory.
func localLogBytes(t *testing.T, dataDir, topic string) int64 {
	t.Helper()
	var n int64
	dir := filepath.Join(dataDir, topic+"-0")
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if os.IsNotExist(err) {
				return nil
			}
			return err
		}
		if !d.IsDir() && strings.HasSuffix(d.Name(), ".log") {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", dir, err)
	}
	return n
}

// ownOffset asks broker id at addr for a ListOffsets timestamp of partition 0
// from its own log (Kafka's debugging replica id -2, which any replica
// answers); -1 and the error text when it cannot.
func ownOffset(ctx context.Context, t *testing.T, id int32, addr, topic string, timestamp int64) (int64, string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.ReplicaID = 9, -2
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = 0, -1, timestamp
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	kresp, err := cl.Broker(int(id)).Request(rctx, req)
	if err != nil {
		return -1, err.Error()
	}
	sp := kresp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
	if sp.ErrorCode != 0 {
		return -1, fmt.Sprintf("error %d", sp.ErrorCode)
	}
	return sp.Offset, ""
}

// waitState polls cond every 250ms until it holds, and fails with its last
// description after d.
func waitState(t *testing.T, d time.Duration, what string, cond func() (string, bool)) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		s, ok := cond()
		if ok {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s; last: %s", d, what, s)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestClusterTierFollowerFromLocalTail: three broker processes on a real
// ZooKeeper share a MinIO bucket; a tiered topic with RF=3,
// min.insync.replicas=2, small segments and a small local.retention.bytes
// gets far more than local retention. Every replica's local log shrinks to
// about the local retention (followers learn the leader's uploads). A
// follower is stopped, its data directory wiped, and restarted: it
// rejoins the ISR having copied only about the leader's local tail (its
// local log start is past 0, its bytes on disk about the local
// retention). Then the other two stop, it leads, and a consumer from
// offset 0 on it reads every acknowledged record, bit for bit, the old
// ones from the bucket.
func TestClusterTierFollowerFromLocalTail(t *testing.T) {
	zk := testenv.StartZooKeeper(t)
	m := testenv.SharedMinIO(t)
	bucket := m.NewBucket(t)
	t.Setenv("AWS_ACCESS_KEY_ID", m.AccessKey())
	t.Setenv("AWS_SECRET_ACCESS_KEY", m.SecretKey())
	sets := []string{
		"min.insync.replicas=2", "replica.lag.time.max.ms=3000", "zookeeper.session.timeout.ms=3000",
		"remote.log.manager.task.interval.ms=200", "log.retention.check.interval.ms=200",
	}
	args := []string{"--zookeeper", zk.Addr() + "/tierfollow", "--tier", "s3://" + bucket + "/strata",
		"--s3-endpoint", m.Endpoint(), "--s3-region", testenv.MinIORegion}
	bs := map[int32]*testenv.Broker{}
	var seeds []string
	for id := 1; id <= 3; id++ {
		b := testenv.StartBroker(t, testenv.BrokerOptions{ID: id, Sets: sets, Args: args})
		bs[int32(id)] = b
		seeds = append(seeds, b.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	const topic, segBytes, localBytes, valueSize = "tiered-rf3", 65536, 262144, 1000
	str := func(s string) *string { return &s }
	adm := kadm.NewClient(newClient(t, seeds[0], kgo.SeedBrokers(seeds...)))
	if r, err := adm.CreateTopic(ctx, 1, 3, map[string]*string{
		"remote.storage.enable": str("true"), "segment.bytes": str(strconv.Itoa(segBytes)),
		"local.retention.bytes": str(strconv.Itoa(localBytes)), "file.delete.delay.ms": str("0"),
		"min.insync.replicas": str("2"),
	}, topic); err != nil || r.Err != nil {
		t.Fatalf("create topic: %v %v", err, r.Err)
	}
	state := func() (leader int32, isr []int32) {
		md, err := clusterMetadata(ctx, seeds, topic)
		if err != nil {
			return -1, nil
		}
		p, ok := md.Topics[topic].Partitions[0]
		if !ok || p.Err != nil {
			return -1, nil
		}
		return p.Leader, p.ISR
	}
	waitFor(t, 30*time.Second, "a full ISR", func() bool {
		l, isr := state()
		return l > 0 && len(isr) == 3
	})

	value := func(i int) []byte {
		v := fmt.Appendf(nil, "%08d-", i)
		return append(v, bytes.Repeat([]byte{byte('a' + i%26)}, valueSize-len(v))...)
	}
	prod := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MetadataMinAge(100*time.Millisecond))
	acked := map[int64][]byte{}
	produce := func(n int) {
		t.Helper()
		for i := 0; i < n; i += 20 {
			var recs []*kgo.Record
			for range 20 {
				recs = append(recs, &kgo.Record{Value: value(len(acked) + len(recs)), Partition: 0})
			}
			res := prod.ProduceSync(ctx, recs...)
			if err := res.FirstErr(); err != nil {
				t.Fatalf("produce: %v", err)
			}
			for _, r := range res {
				acked[r.Record.Offset] = r.Record.Value
			}
		}
	}
	produce(4000) // about 4 MB: 15 times the local retention
	total := int64(len(acked)) * valueSize

	// Every replica keeps only about the local retention.
	last := waitState(t, 90*time.Second, "every replica's local log at about local.retention.bytes", func() (string, bool) {
		var sb strings.Builder
		ok := true
		for id := int32(1); id <= 3; id++ {
			b := bs[id]
			start, msg := ownOffset(ctx, t, id, b.Addr(), topic, -4)
			n := localLogBytes(t, b.DataDir(), topic)
			fmt.Fprintf(&sb, "broker %d: local start %d %s, %d bytes; ", id, start, msg, n)
			ok = ok && start > 0 && n <= localBytes+2*segBytes
		}
		return sb.String(), ok
	})
	t.Logf("after %d bytes produced: %s", total, last)

	leader, _ := state()
	follower := int32(1)
	for follower == leader {
		follower++
	}
	f := bs[follower]
	f.Stop()
	produce(300)
	if err := os.RemoveAll(f.DataDir()); err != nil {
		t.Fatal(err)
	}
	f.Restart()
	waitFor(t, 90*time.Second, fmt.Sprintf("wiped broker %d back in the ISR", follower), func() bool {
		_, isr := state()
		return len(isr) == 3 && slices.Contains(isr, follower)
	})
	start, msg := ownOffset(ctx, t, follower, f.Addr(), topic, -4)
	if start <= 0 {
		t.Fatalf("wiped follower's local log start %d (%s), want > 0: it copied the whole log", start, msg)
	}
	if !strings.Contains(f.Logs(), "rebuilt follower log from remote storage") {
		t.Fatal("the wiped follower did not rebuild its log from the leader's local tail")
	}
	var onDisk int64
	waitFor(t, 30*time.Second, "wiped follower holds about the local retention", func() bool {
		onDisk = localLogBytes(t, f.DataDir(), topic)
		return onDisk <= localBytes+2*segBytes
	})
	t.Logf("wiped follower %d rejoined: local log start %d, %d bytes on disk of %d produced", follower, start, onDisk, int64(len(acked))*valueSize)
	if onDisk*4 > int64(len(acked))*valueSize {
		t.Fatalf("wiped follower holds %d of %d bytes", onDisk, int64(len(acked))*valueSize)
	}

	// The wiped follower leads: stop the other two.
	for id, b := range bs {
		if id != follower {
			b.Stop()
		}
	}
	fseed := []string{f.Addr()}
	waitFor(t, 60*time.Second, fmt.Sprintf("broker %d leads", follower), func() bool {
		md, err := clusterMetadata(ctx, fseed, topic)
		if err != nil {
			return false
		}
		p, ok := md.Topics[topic].Partitions[0]
		return ok && p.Err == nil && p.Leader == follower
	})
	// Until its index is refreshed from the bucket the new leader answers
	// REPLICA_NOT_AVAILABLE (retriable), never its local log start.
	var earliest int64
	waitFor(t, 30*time.Second, "the new leader's earliest offset", func() bool {
		earliest, msg = ownOffset(ctx, t, follower, f.Addr(), topic, -2)
		if msg != "" && msg != fmt.Sprintf("error %d", kerr.ReplicaNotAvailable.Code) {
			t.Fatalf("earliest offset on the new leader: %s", msg)
		}
		return msg == ""
	})
	if earliest != 0 {
		t.Fatalf("earliest offset on the new leader %d (%s), want 0 (the remote log start)", earliest, msg)
	}
	cons := newClient(t, f.Addr(), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(200*time.Millisecond))
	seen := 0
	next := int64(0)
	for seen < len(acked) {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records before the deadline", seen, len(acked))
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("consume: %v", err) })
		for _, r := range fs.Records() {
			if r.Offset != next {
				t.Fatalf("consumer saw offset %d after %d", r.Offset, next-1)
			}
			want, ok := acked[r.Offset]
			if !ok {
				t.Fatalf("offset %d was never acknowledged", r.Offset)
			}
			if !bytes.Equal(r.Value, want) {
				t.Fatalf("offset %d: %q, acknowledged %q", r.Offset, r.Value[:min(len(r.Value), 16)], want[:16])
			}
			next++
			seen++
		}
	}
}
