package e2e

// The campaign harness of chaos_tier_test.go: a three-broker cluster on
// ZooKeeper with a tiered RF=3 topic on MinIO, rate-limited idempotent
// acks=-1 producers whose records can be regenerated from their key, a
// bucket scanner built on minio-go (the independent client), and the
// verifier that reads everything back.

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/index"
	"strata/internal/testenv"
	"strata/tier"
)

// chaosLong reports whether the long campaigns run (`make chaos` sets
// STRATA_CHAOS=1); otherwise the short ones of `make test` do.
func chaosLong() bool {
	v := os.Getenv("STRATA_CHAOS")
	return v != "" && v != "0"
}

// chaosEnvInt reads a positive integer from the environment, else def.
func chaosEnvInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// chaosSeed is the seed of the campaign's random choices: STRATA_CHAOS_SEED
// to replay one, else the time.
func chaosSeed(t *testing.T) uint64 {
	t.Helper()
	if v := os.Getenv("STRATA_CHAOS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("STRATA_CHAOS_SEED=%q: %v", v, err)
		}
		return n
	}
	return uint64(time.Now().UnixNano())
}

const (
	chaosTopic      = "chaos"
	chaosPartitions = 3
	chaosSegBytes   = 256 << 10
	chaosLocalBytes = 2 * chaosSegBytes
	chaosPrefix     = "chaos"
	// chaosTaskMs is remote.log.manager.task.interval.ms.
	chaosTaskMs = 500
)

// chaosTier is how a campaign's cluster uploads.
type chaosTier struct {
	// copyRate is remote.log.manager.copy.max.bytes.per.second, for
	// each broker's uploads together (with a second's burst).
	copyRate int
	// graceMs is remote.log.reconciliation.grace.ms: the settle grace is
	// max(graceMs, 10 × chaosTaskMs), and an upload may write its
	// COPY_SEGMENT_FINISHED state only within half of it after its
	// latest heartbeat (one every eighth of the grace); the campaigns keep
	// their uploads shorter than half of it anyway, as before heartbeats.
	graceMs int
}

// chaosCluster is three brokers on a ZooKeeper of their own, tiering to
// a MinIO bucket, and one tiered topic of chaosPartitions partitions with
// RF=3 and min.insync.replicas=2.
type chaosCluster struct {
	t      *testing.T
	ctx    context.Context
	start  time.Time
	m      *testenv.MinIO
	bucket string
	bs     map[int32]*testenv.Broker
	seeds  []string
	scan   *bucketScan
	// zk is each broker's own link to ZooKeeper, which a campaign can
	// cut while the broker still reaches the bucket and its peers.
	zk map[int32]*netCut
	// admin are the options of the harness's own clients (metadata,
	// ElectLeaders, ListOffsets, the verifier's offsets), load those of
	// the producers and of the verifying consumer: TLS and SASL in a
	// secured cluster (chaosSecurity), none otherwise.
	admin, load []kgo.Opt
}

// startChaosCluster starts the cluster, secured as sec says (nil: not
// at all).
func startChaosCluster(t *testing.T, ctx context.Context, m *testenv.MinIO, bucket string, ct chaosTier, sec *chaosSecurity) *chaosCluster {
	t.Helper()
	c := &chaosCluster{t: t, ctx: ctx, start: time.Now(), m: m, bucket: bucket, bs: map[int32]*testenv.Broker{}, zk: map[int32]*netCut{}}
	zk := testenv.StartZooKeeper(t)
	if sec != nil {
		sec.prepare(t, zk.Addr(), "/chaos")
		c.admin, c.load = sec.adminOpts(), sec.clientOpts()
	}
	t.Setenv("AWS_ACCESS_KEY_ID", m.AccessKey())
	t.Setenv("AWS_SECRET_ACCESS_KEY", m.SecretKey())
	sets := []string{
		"min.insync.replicas=2", "unclean.leader.election.enable=false",
		"zookeeper.session.timeout.ms=6000", "replica.lag.time.max.ms=5000",
		// Leadership moves only when the campaign moves it.
		"auto.leader.rebalance.enable=false",
		"remote.log.storage.system.enable=true",
		fmt.Sprintf("remote.log.manager.task.interval.ms=%d", chaosTaskMs),
		"log.retention.check.interval.ms=1000",
		fmt.Sprintf("remote.log.manager.copy.max.bytes.per.second=%d", ct.copyRate),
		fmt.Sprintf("remote.log.reconciliation.grace.ms=%d", ct.graceMs),
	}
	for id := 1; id <= 3; id++ {
		link := newNetCut(t, zk.Addr())
		c.zk[int32(id)] = link
		args := []string{"--zookeeper", link.Addr() + "/chaos", "--tier", "s3://" + bucket + "/" + chaosPrefix,
			"--s3-endpoint", m.Endpoint(), "--s3-region", testenv.MinIORegion}
		bsets := sets
		if sec != nil {
			bsets = append(slices.Clone(sets), sec.brokerSets(t, int32(id))...)
		}
		b := testenv.StartBroker(t, testenv.BrokerOptions{ID: id, Sets: bsets, Args: args, Metrics: "127.0.0.1:0", ReadyTimeout: 60 * time.Second})
		c.bs[int32(id)] = b
		c.seeds = append(c.seeds, b.Addr())
	}
	if dir := os.Getenv("STRATA_CHAOS_LOGS"); dir != "" {
		// Keep the brokers' logs for a look after the test.
		t.Cleanup(func() {
			for id, b := range c.bs {
				name := filepath.Join(dir, fmt.Sprintf("%s-broker-%d.log", t.Name(), id))
				if err := os.WriteFile(name, []byte(b.Logs()), 0o644); err != nil {
					t.Logf("keep broker %d log: %v", id, err)
				}
			}
		})
	}
	c.scan = &bucketScan{mc: m.Client(t), bucket: bucket, prefix: chaosPrefix, finished: map[string]index.SegmentMetadata{}}
	str := func(s string) *string { return &s }
	adm := kadm.NewClient(newClient(t, c.seeds[0], append([]kgo.Opt{kgo.SeedBrokers(c.seeds...)}, c.admin...)...))
	r, err := adm.CreateTopic(ctx, chaosPartitions, 3, map[string]*string{
		"remote.storage.enable": str("true"), "segment.bytes": str(strconv.Itoa(chaosSegBytes)),
		"local.retention.bytes": str(strconv.Itoa(chaosLocalBytes)), "file.delete.delay.ms": str("0"),
		"min.insync.replicas": str("2"),
	}, chaosTopic)
	if err == nil {
		err = r.Err
	}
	if err != nil {
		t.Fatalf("create topic: %v", err)
	}
	c.waitFullISR(60*time.Second, "after creation", true)
	return c
}

// logf logs with the time since the cluster started.
func (c *chaosCluster) logf(format string, args ...any) {
	c.t.Helper()
	c.t.Logf("[%5.1fs] %s", time.Since(c.start).Seconds(), fmt.Sprintf(format, args...))
}

func (c *chaosCluster) metadata() (kadm.Metadata, error) {
	return clusterMetadata(c.ctx, c.seeds, chaosTopic, c.admin...)
}

// leaders returns each partition's leader and preferred leader.
func (c *chaosCluster) leaders() (leader, preferred map[int32]int32, err error) {
	md, err := c.metadata()
	if err != nil {
		return nil, nil, err
	}
	leader, preferred = map[int32]int32{}, map[int32]int32{}
	ps := md.Topics[chaosTopic].Partitions
	if len(ps) != chaosPartitions {
		return nil, nil, fmt.Errorf("%d partitions in metadata", len(ps))
	}
	for _, p := range ps {
		if p.Err != nil {
			return nil, nil, fmt.Errorf("partition %d: %v", p.Partition, p.Err)
		}
		leader[p.Partition] = p.Leader
		if len(p.Replicas) > 0 {
			preferred[p.Partition] = p.Replicas[0]
		}
	}
	return leader, preferred, nil
}

// clusterState describes the partitions and reports whether every one
// has a live leader and all three replicas in its ISR (and, with
// preferred, is led by its preferred replica).
func (c *chaosCluster) clusterState(preferred bool) (string, bool) {
	md, err := c.metadata()
	if err != nil {
		return err.Error(), false
	}
	var sb strings.Builder
	ok := len(md.Brokers) == 3
	fmt.Fprintf(&sb, "%d brokers, controller %d; ", len(md.Brokers), md.Controller)
	ps := md.Topics[chaosTopic].Partitions.Sorted()
	ok = ok && len(ps) == chaosPartitions
	for _, p := range ps {
		fmt.Fprintf(&sb, "p%d leader %d isr %v; ", p.Partition, p.Leader, p.ISR)
		ok = ok && p.Err == nil && p.Leader > 0 && len(p.ISR) == 3
		if preferred {
			ok = ok && len(p.Replicas) > 0 && p.Leader == p.Replicas[0]
		}
	}
	return sb.String(), ok
}

func (c *chaosCluster) waitFullISR(d time.Duration, when string, preferred bool) {
	c.t.Helper()
	waitState(c.t, d, "a full ISR "+when, func() (string, bool) { return c.clusterState(preferred) })
}

// electPreferred runs ElectLeaders (preferred replicas) on every partition
// of the topic and waits until each is led by its preferred replica; it
// returns how many partitions moved.
func (c *chaosCluster) electPreferred() int {
	c.t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.seeds...)}, c.admin...)...)
	if err != nil {
		c.t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	set := kadm.TopicsSet{}
	for p := range int32(chaosPartitions) {
		set.Add(chaosTopic, p)
	}
	moved := 0
	for {
		res, err := kadm.NewClient(cl).ElectLeaders(ctx, kadm.ElectPreferredReplica, set)
		if err != nil {
			c.t.Fatalf("elect leaders: %v", err)
		}
		set = kadm.TopicsSet{}
		for p, r := range res[chaosTopic] {
			switch {
			case r.Err == nil:
				moved++
			case errors.Is(r.Err, kerr.ElectionNotNeeded):
			case errors.Is(r.Err, kerr.PreferredLeaderNotAvailable):
				// A broker that woke from SIGSTOP, or whose link to
				// ZooKeeper healed, is in the ISR before its new
				// session has registered it again: ask again.
				set.Add(chaosTopic, p)
			default:
				c.t.Fatalf("elect leaders: partition %d: %v %s", p, r.Err, r.ErrMessage)
			}
		}
		if len(set) == 0 {
			break
		}
		select {
		case <-ctx.Done():
			c.t.Fatalf("elect leaders: the preferred leaders of %v not available for 30s", set)
		case <-time.After(200 * time.Millisecond):
		}
	}
	c.waitFullISR(30*time.Second, "led by the preferred replicas after ElectLeaders", true)
	return moved
}

// ownOffsets asks broker id for ListOffsets timestamp ts of every
// partition from its own log (Kafka's debugging replica id -2, which any
// replica answers): -1 and a note for partitions it could not answer.
// opts are the client's (TLS, SASL).
func ownOffsets(ctx context.Context, b *testenv.Broker, id int32, ts int64, opts ...kgo.Opt) (map[int32]int64, string) {
	out := map[int32]int64{}
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(b.Addr())}, opts...)...)
	if err != nil {
		return out, err.Error()
	}
	defer cl.Close()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.ReplicaID = 9, -2
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = chaosTopic
	for p := range int32(chaosPartitions) {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = p, -1, ts
		rt.Partitions = append(rt.Partitions, rp)
		out[p] = -1
	}
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	kresp, err := cl.Broker(int(id)).Request(rctx, req)
	if err != nil {
		return out, err.Error()
	}
	var notes []string
	for _, t := range kresp.(*kmsg.ListOffsetsResponse).Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				notes = append(notes, fmt.Sprintf("p%d: %v", p.Partition, kerr.ErrorForCode(p.ErrorCode)))
				continue
			}
			out[p.Partition] = p.Offset
		}
	}
	return out, strings.Join(notes, ", ")
}

// leaderOffsets asks each partition's leader for timestamp ts from its
// own log.
func (c *chaosCluster) leaderOffsets(ts int64) (map[int32]int64, error) {
	leader, _, err := c.leaders()
	if err != nil {
		return nil, err
	}
	out := map[int32]int64{}
	byBroker := map[int32]map[int32]int64{}
	for p, l := range leader {
		got, ok := byBroker[l]
		if !ok {
			b := c.bs[l]
			if b == nil {
				return nil, fmt.Errorf("partition %d: leader %d", p, l)
			}
			var note string
			got, note = ownOffsets(c.ctx, b, l, ts, c.admin...)
			if note != "" {
				return nil, fmt.Errorf("broker %d: ListOffsets %d: %s", l, ts, note)
			}
			byBroker[l] = got
		}
		out[p] = got[p]
	}
	return out, nil
}

// metricSum adds up an unlabelled metric over the three brokers.
func (c *chaosCluster) metricSum(name string) float64 {
	c.t.Helper()
	var n float64
	for id := int32(1); id <= 3; id++ {
		n += metricValue(c.t, c.bs[id], name)
	}
	return n
}

// partitionLogBytes is the bytes of a partition's .log files under a
// broker's data directory.
func partitionLogBytes(dataDir string, p int32) int64 {
	m, _ := filepath.Glob(filepath.Join(dataDir, fmt.Sprintf("%s-%d", chaosTopic, p), "*.log"))
	var n int64
	for _, f := range m {
		if fi, err := os.Stat(f); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// brokerLogCounts counts the lines of the brokers' logs (all their runs)
// that match each of the given regular expressions.
func (c *chaosCluster) brokerLogCounts(patterns ...string) map[string]int {
	out := map[string]int{}
	res := make([]*regexp.Regexp, len(patterns))
	for i, p := range patterns {
		res[i] = regexp.MustCompile(p)
	}
	for _, b := range c.bs {
		for line := range strings.Lines(b.Logs()) {
			for i, re := range res {
				if re.MatchString(line) {
					out[patterns[i]]++
				}
			}
		}
	}
	return out
}

// chaosLogPatterns are the broker log lines a campaign reports: the
// uploader's fencing and settling at work.
var chaosLogPatterns = []string{
	"stopped copying to remote storage: fenced",
	"abandon upload",
	"deleted own unfinished uploads",
	"waiting for another broker's unfinished uploads",
	`copied segments to remote storage.* finished=[1-9]`,
	`copied segments to remote storage.* cleaned_up=[1-9]`,
	"rebuilt follower log from remote storage",
	"copy segments to remote storage; retrying next pass",
	"fenced on the store",
	"remote segment's objects are missing",
	"deleted a remote segment whose objects were missing",
}

// ---- load ----

// prodSeq names a record: its producer and that producer's sequence
// number. Everything else in the record is derived from it.
type prodSeq struct{ prod, seq int32 }

func (ps prodSeq) String() string { return fmt.Sprintf("p%d-%d", ps.prod, ps.seq) }

func chaosKey(ps prodSeq) []byte { return fmt.Appendf(nil, "p%d-%d", ps.prod, ps.seq) }

// chaosValue is the value of record ps: a header naming it, then 300 to
// 899 pseudo-random bytes seeded by it.
func chaosValue(ps prodSeq) []byte {
	rng := rand.New(rand.NewPCG(uint64(ps.prod)<<32|uint64(uint32(ps.seq)), 0xc4a05))
	v := fmt.Appendf(nil, "p%d-s%d|", ps.prod, ps.seq)
	return append(v, randBytes(rng, 300+rng.IntN(600))...)
}

// parseChaos checks that a record is one of the campaign's, unchanged,
// and names it.
func parseChaos(key, value []byte, headers []kgo.RecordHeader) (prodSeq, error) {
	var ps prodSeq
	if _, err := fmt.Sscanf(string(key), "p%d-%d", &ps.prod, &ps.seq); err != nil || !bytes.Equal(key, chaosKey(ps)) {
		return ps, fmt.Errorf("key %q is not the campaign's", trunc(key))
	}
	if !bytes.Equal(value, chaosValue(ps)) {
		return ps, fmt.Errorf("record %s: value %q (%d bytes) differs from what was produced", ps, trunc(value), len(value))
	}
	if headers != nil {
		if len(headers) != 2 || headers[0].Key != "producer" || string(headers[0].Value) != strconv.Itoa(int(ps.prod)) ||
			headers[1].Key != "seq" || string(headers[1].Value) != strconv.Itoa(int(ps.seq)) {
			return ps, fmt.Errorf("record %s: headers %v", ps, headers)
		}
	}
	return ps, nil
}

// chaosLoad is the producers: each a franz-go client with acks=-1 and
// idempotence (the default), writing keyed records spread over the
// partitions at a bounded rate, and a ledger of what was acknowledged.
type chaosLoad struct {
	mu       sync.Mutex
	acked    map[int32]map[int64]prodSeq
	byRecord map[prodSeq]int64 // acknowledged record → partition<<48 | offset, to catch one record acknowledged twice
	count    int
	bytes    int64
	produced int
	failed   []string
	clashes  []string

	stop    chan struct{}
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	clients []*kgo.Client
	stopped bool
}

// startChaosLoad starts producers, each producing perTick records every
// 10 ms (about perTick × 60 KB/s each); opts are their clients' further
// options (TLS, SASL).
func startChaosLoad(t *testing.T, seeds []string, producers, perTick int, opts ...kgo.Opt) *chaosLoad {
	t.Helper()
	l := &chaosLoad{acked: map[int32]map[int64]prodSeq{}, byRecord: map[prodSeq]int64{}, stop: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	for prod := range producers {
		cl := newClient(t, seeds[0], append([]kgo.Opt{
			kgo.SeedBrokers(seeds...),
			kgo.RequiredAcks(kgo.AllISRAcks()), // idempotent by default
			kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.ProducerLinger(5 * time.Millisecond), kgo.MaxBufferedRecords(5000),
			kgo.MetadataMinAge(250 * time.Millisecond), kgo.DefaultProduceTopic(chaosTopic),
		}, opts...)...)
		l.clients = append(l.clients, cl)
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			seq := int32(0)
			for {
				select {
				case <-l.stop:
					return
				case <-tick.C:
				}
				for range perTick {
					ps := prodSeq{int32(prod), seq}
					seq++
					r := &kgo.Record{Key: chaosKey(ps), Value: chaosValue(ps), Headers: []kgo.RecordHeader{
						{Key: "producer", Value: []byte(strconv.Itoa(prod))},
						{Key: "seq", Value: []byte(strconv.Itoa(int(ps.seq)))},
					}}
					l.mu.Lock()
					l.produced++
					l.mu.Unlock()
					cl.Produce(ctx, r, func(r *kgo.Record, err error) { l.ack(ps, r, err) })
				}
			}
		}()
	}
	t.Cleanup(func() {
		cancel()
		l.halt()
	})
	return l
}

func (l *chaosLoad) ack(ps prodSeq, r *kgo.Record, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.failed = append(l.failed, fmt.Sprintf("%s: %v", ps, err))
		return
	}
	m := l.acked[r.Partition]
	if m == nil {
		m = map[int64]prodSeq{}
		l.acked[r.Partition] = m
	}
	if prev, ok := m[r.Offset]; ok {
		l.clashes = append(l.clashes, fmt.Sprintf("partition %d offset %d acknowledged for %s and %s", r.Partition, r.Offset, prev, ps))
	}
	if prev, ok := l.byRecord[ps]; ok {
		l.clashes = append(l.clashes, fmt.Sprintf("record %s acknowledged twice: partition %d offset %d and partition %d offset %d",
			ps, prev>>48, prev&(1<<48-1), r.Partition, r.Offset))
	}
	m[r.Offset] = ps
	l.byRecord[ps] = int64(r.Partition)<<48 | r.Offset
	l.count++
	l.bytes += int64(len(r.Value))
}

func (l *chaosLoad) acks() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count
}

// waitAcks waits for n more acknowledgements.
func (l *chaosLoad) waitAcks(t *testing.T, n int, d time.Duration, what string) {
	t.Helper()
	target := l.acks() + n
	waitFor(t, d, fmt.Sprintf("%d acknowledged records %s", target, what), func() bool { return l.acks() >= target })
}

func (l *chaosLoad) halt() {
	if !l.stopped {
		l.stopped = true
		close(l.stop)
	}
	l.wg.Wait()
}

// finish stops producing and waits for every record produced to be
// acknowledged or failed.
func (l *chaosLoad) finish(t *testing.T) {
	t.Helper()
	l.halt()
	for i, cl := range l.clients {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		if err := cl.Flush(ctx); err != nil {
			t.Errorf("producer %d: flush: %v", i, err)
		}
		cancel()
	}
}

// ---- the bucket, through minio-go ----

// bucketScan reads the campaign's prefix of the bucket with minio-go,
// not with the brokers' S3 client.
type bucketScan struct {
	mc             *minio.Client
	bucket, prefix string
	// finished holds manifests read in COPY_SEGMENT_FINISHED: such a
	// manifest changes only when the segment is deleted, which the
	// campaign never asks for, so it is not read again.
	finished map[string]index.SegmentMetadata
}

// bucketView is one listing: every manifest (decoded) and the size of
// every other object, by key relative to the prefix.
type bucketView struct {
	manifests map[string]index.SegmentMetadata
	objects   map[string]int64
}

func (s *bucketScan) list(ctx context.Context) (bucketView, error) {
	v := bucketView{manifests: map[string]index.SegmentMetadata{}, objects: map[string]int64{}}
	if err := s.listInto(ctx, &v, minio.ListObjectsOptions{Prefix: s.prefix + "/", Recursive: true}); err != nil {
		return v, err
	}
	// A manifest read finished but no longer listed was deleted.
	for k := range s.finished {
		if _, ok := v.manifests[k]; !ok {
			delete(s.finished, k)
		}
	}
	return v, nil
}

// tail lists only the newest keys of each partition: from its third
// newest finished segment on (the whole prefix until every partition has
// finished segments). That is where uploads under way are, and it stays
// cheap to poll as the bucket grows.
func (s *bucketScan) tail(ctx context.Context) (bucketView, error) {
	bases := map[index.TopicIDPartition][]int64{}
	for _, m := range s.finished {
		bases[m.Partition] = append(bases[m.Partition], m.StartOffset)
	}
	if len(bases) < chaosPartitions {
		return s.list(ctx)
	}
	v := bucketView{manifests: map[string]index.SegmentMetadata{}, objects: map[string]int64{}}
	for tp, bs := range bases {
		sort.Slice(bs, func(i, j int) bool { return bs[i] > bs[j] })
		from := bs[min(2, len(bs)-1)]
		pp := s.prefix + "/" + tier.PartitionPrefix(tp)
		opts := minio.ListObjectsOptions{Prefix: pp, Recursive: true, StartAfter: pp + fmt.Sprintf("%020d", from-1)}
		if err := s.listInto(ctx, &v, opts); err != nil {
			return v, err
		}
	}
	return v, nil
}

// listInto adds the keys that opts lists to v, reading manifests not
// known finished.
func (s *bucketScan) listInto(ctx context.Context, v *bucketView, opts minio.ListObjectsOptions) error {
	lctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for o := range s.mc.ListObjects(lctx, s.bucket, opts) {
		if o.Err != nil {
			return fmt.Errorf("list the bucket: %w", o.Err)
		}
		key := strings.TrimPrefix(o.Key, s.prefix+"/")
		if !strings.HasSuffix(key, tier.ManifestSuffix) {
			v.objects[key] = o.Size
			continue
		}
		if m, ok := s.finished[key]; ok {
			v.manifests[key] = m
			continue
		}
		b, err := s.get(lctx, key)
		if errors.Is(err, errNoSuchKey) {
			continue // deleted meanwhile
		}
		if err != nil {
			return err
		}
		m, err := index.DecodeManifest(b)
		if err != nil {
			return fmt.Errorf("manifest %s: %w", key, err)
		}
		if m.State == index.CopySegmentFinished {
			s.finished[key] = m
		}
		v.manifests[key] = m
	}
	return nil
}

var errNoSuchKey = errors.New("no such key")

func (s *bucketScan) get(ctx context.Context, key string) ([]byte, error) {
	obj, err := s.mc.GetObject(ctx, s.bucket, s.prefix+"/"+key, minio.GetObjectOptions{})
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", key, err)
	}
	defer obj.Close()
	b, err := io.ReadAll(obj)
	if err != nil {
		if minio.ToErrorResponse(err).Code == "NoSuchKey" {
			return nil, errNoSuchKey
		}
		return nil, fmt.Errorf("read %s: %w", key, err)
	}
	return b, nil
}

// unfinished returns the manifests not in COPY_SEGMENT_FINISHED.
func (v bucketView) unfinished() []index.SegmentMetadata {
	var out []index.SegmentMetadata
	for _, m := range v.manifests {
		if m.State != index.CopySegmentFinished {
			out = append(out, m)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].StartOffset < out[j].StartOffset })
	return out
}

// logUploaded reports whether a manifest's .log object is in the listing.
func (v bucketView) logUploaded(m *index.SegmentMetadata) bool {
	_, ok := v.objects[tier.ObjectKey(m, index.ObjectLog)]
	return ok
}

// finishedByPartition returns the COPY_SEGMENT_FINISHED segments of each
// partition by start offset.
func (v bucketView) finishedByPartition() map[int32][]index.SegmentMetadata {
	out := map[int32][]index.SegmentMetadata{}
	for _, m := range v.manifests {
		if m.State == index.CopySegmentFinished {
			out[m.Partition.Partition] = append(out[m.Partition.Partition], m)
		}
	}
	for _, segs := range out {
		sort.Slice(segs, func(i, j int) bool {
			if segs[i].StartOffset != segs[j].StartOffset {
				return segs[i].StartOffset < segs[j].StartOffset
			}
			return segs[i].EndOffset < segs[j].EndOffset
		})
	}
	return out
}

// coverage checks that a partition's finished segments cover [0, end]
// without a gap (segments of different leaders may overlap) and returns
// end (-1: none) and the number of overlapping segments.
func coverage(segs []index.SegmentMetadata) (end int64, overlaps int, problem string) {
	end = -1
	for _, m := range segs {
		if m.StartOffset > end+1 {
			return end, overlaps, fmt.Sprintf("gap: no finished segment holds offsets [%d, %d]", end+1, m.StartOffset-1)
		}
		if m.StartOffset <= end {
			overlaps++
		}
		end = max(end, m.EndOffset)
	}
	return end, overlaps, ""
}

// orphans returns the objects that no COPY_SEGMENT_FINISHED manifest
// names.
func (v bucketView) orphans() []string {
	named := map[string]bool{}
	for _, m := range v.manifests {
		if m.State != index.CopySegmentFinished {
			continue
		}
		for _, o := range m.Objects {
			if o.Packed {
				named[tier.ObjectKey(&m, index.ObjectIndexes)] = true
			} else {
				named[tier.ObjectKey(&m, o.Kind)] = true
			}
		}
	}
	var out []string
	for k := range v.objects {
		if !named[k] && !strings.HasPrefix(k, tier.SnapshotPrefix) { // the metadata snapshots are no segment's
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// ---- settling and verification ----

// settle stops the load, waits for a full ISR led by the preferred
// replicas, and then for the tier to settle: no unfinished upload or
// deletion in the bucket, no object outside a finished segment, every
// partition's finished segments contiguous from 0, the leaders' latest
// tiered offsets equal to the bucket's ends, no copy lag, and every
// replica's local log start past 0 (local retention ran) and not past
// the remote log end + 1. A stuck upload fails the test here.
func (c *chaosCluster) settle(load *chaosLoad, d time.Duration) bucketView {
	c.t.Helper()
	load.finish(c.t)
	c.logf("load stopped: %d records produced, %d acknowledged (%.1f MB), %d failed", load.produced, load.count, float64(load.bytes)/1e6, len(load.failed))
	c.waitFullISR(90*time.Second, "after the campaign", false)
	var view bucketView
	began := time.Now()
	waitState(c.t, d, "the tier to settle (a stuck upload?)", func() (string, bool) {
		var err error
		view, err = c.scan.list(c.ctx)
		if err != nil {
			return err.Error(), false
		}
		var sb strings.Builder
		ok := true
		if u := view.unfinished(); len(u) > 0 {
			ok = false
			fmt.Fprintf(&sb, "%d unfinished manifests (first: p%d %d-%d %s by broker %d); ", len(u), u[0].Partition.Partition, u[0].StartOffset, u[0].EndOffset, u[0].State, u[0].BrokerID)
		}
		if o := view.orphans(); len(o) > 0 {
			ok = false
			fmt.Fprintf(&sb, "%d objects outside finished segments (first %s); ", len(o), o[0])
		}
		fin := view.finishedByPartition()
		ends := map[int32]int64{}
		for p := range int32(chaosPartitions) {
			end, _, problem := coverage(fin[p])
			ends[p] = end
			if problem != "" || end < 0 {
				ok = false
				fmt.Fprintf(&sb, "p%d: end %d %s; ", p, end, problem)
			}
		}
		tiered, err := c.leaderOffsets(-5)
		if err != nil {
			return sb.String() + err.Error(), false
		}
		for p, e := range ends {
			if tiered[p] != e {
				ok = false
				fmt.Fprintf(&sb, "p%d: leader's latest tiered %d, bucket's end %d; ", p, tiered[p], e)
			}
		}
		if lag := c.metricSum("kafka_server_brokertopicmetrics_remotecopylagsegments"); lag != 0 {
			ok = false
			fmt.Fprintf(&sb, "copy lag %v segments; ", lag)
		}
		for id := int32(1); id <= 3; id++ {
			local, note := ownOffsets(c.ctx, c.bs[id], id, -4, c.admin...)
			if note != "" {
				ok = false
				fmt.Fprintf(&sb, "broker %d: %s; ", id, note)
				continue
			}
			for p, s := range local {
				if s <= 0 || s > ends[p]+1 {
					ok = false
					fmt.Fprintf(&sb, "broker %d p%d: local log start %d (remote end %d); ", id, p, s, ends[p])
				}
			}
		}
		return sb.String(), ok
	})
	c.logf("tier settled in %.1fs", time.Since(began).Seconds())
	return view
}

// chaosVerdict is what verify found.
type chaosVerdict struct {
	records, acked, fromBucket int   // consumed, acknowledged among them, acknowledged below the leader's local log start
	unacked                    int   // consumed but never acknowledged (allowed, once each)
	remoteFetches, remoteBytes int64 // the brokers' remote fetch counters during the read
	segments, overlaps         int   // finished segments in the bucket, and how many overlap an earlier one
	bucketRecords              int   // records read from the bucket's .log objects
	ends                       map[int32]int64
}

// verify is the independent check, after settle:
//
//   - a fresh consumer reads every partition from offset 0 to its end;
//     offsets run without a gap, every record is one the campaign
//     produced, unchanged, none twice, each producer's in order within a
//     partition, and every acknowledged record is at its acknowledged
//     offset. Offsets below the leader's local log start come from the
//     bucket (the brokers' remote fetch counters show it);
//   - with minio-go: every object a finished manifest names exists with
//     the manifest's size, the finished segments cover [0, end] of each
//     partition, and each .log object, parsed batch by batch (CRC32C
//     checked), holds at each offset what the consumer read there.
func (c *chaosCluster) verify(load *chaosLoad, view bucketView) chaosVerdict {
	t := c.t
	t.Helper()
	var v chaosVerdict
	load.mu.Lock()
	defer load.mu.Unlock()
	v.acked = load.count
	for i, f := range load.failed {
		if i == 5 {
			t.Errorf("... %d failed records in all", len(load.failed))
			break
		}
		t.Errorf("record failed (the producers retry without limit, so a correct broker fails none): %s", f)
	}
	for i, cl := range load.clashes {
		if i == 10 {
			t.Errorf("... %d clashes in all", len(load.clashes))
			break
		}
		t.Errorf("acknowledgements clash: %s", cl)
	}

	errs := 0
	errorf := func(format string, args ...any) {
		t.Helper()
		errs++
		if errs <= 30 {
			t.Errorf(format, args...)
		}
	}
	localStart, err := c.leaderOffsets(-4)
	if err != nil {
		t.Fatalf("leaders' local log starts: %v", err)
	}
	start, end := offsets(t, c.seeds[0], chaosTopic, c.admin...)
	v.ends = end
	for p := range int32(chaosPartitions) {
		if start[p] != 0 {
			errorf("partition %d: earliest offset %d, want 0 (the remote log start: nothing was deleted)", p, start[p])
		}
		if localStart[p] <= 0 {
			errorf("partition %d: the leader's local log starts at %d: local retention removed nothing, so nothing was read from the bucket", p, localStart[p])
		}
		for o := range load.acked[p] {
			if o >= end[p] {
				errorf("partition %d: offset %d was acknowledged but the end offset is %d", p, o, end[p])
			}
		}
	}
	fetches0 := c.metricSum("kafka_server_brokertopicmetrics_remotefetchrequests_total")
	bytes0 := c.metricSum("kafka_server_brokertopicmetrics_remotefetchbytes_total")

	// (a) a fresh consumer from offset 0.
	parts := map[int32]kgo.Offset{}
	for p := range int32(chaosPartitions) {
		parts[p] = kgo.NewOffset().At(0)
	}
	cons := newClient(t, c.seeds[0], append([]kgo.Opt{
		kgo.SeedBrokers(c.seeds...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{chaosTopic: parts}),
		kgo.FetchMaxWait(200 * time.Millisecond), kgo.FetchMaxBytes(16 << 20),
	}, c.load...)...)
	consumed := map[int32]map[int64]prodSeq{}
	where := map[prodSeq]string{}
	lastSeq := map[[2]int32]int32{}
	next := map[int32]int64{}
	for p := range int32(chaosPartitions) {
		consumed[p] = map[int64]prodSeq{}
	}
	done := func() bool {
		for p, e := range end {
			if next[p] < e {
				return false
			}
		}
		return true
	}
	cctx, cancel := context.WithTimeout(c.ctx, 5*time.Minute)
	defer cancel()
	var lastErr error
	for !done() {
		fs := cons.PollFetches(cctx)
		if cctx.Err() != nil {
			t.Fatalf("consume: timed out at offsets %v of %v (last error %v)", next, end, lastErr)
		}
		fs.EachError(func(_ string, p int32, err error) { lastErr = fmt.Errorf("partition %d: %w", p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= end[r.Partition] {
				return
			}
			if r.Offset != next[r.Partition] {
				errorf("partition %d: offset %d follows %d (gap or repeat)", r.Partition, r.Offset, next[r.Partition]-1)
			}
			next[r.Partition] = r.Offset + 1
			v.records++
			ps, err := parseChaos(r.Key, r.Value, r.Headers)
			if err != nil {
				errorf("partition %d offset %d: %v", r.Partition, r.Offset, err)
				return
			}
			consumed[r.Partition][r.Offset] = ps
			here := fmt.Sprintf("partition %d offset %d", r.Partition, r.Offset)
			if prev, dup := where[ps]; dup {
				errorf("record %s stored twice: %s and %s (idempotence broken)", ps, prev, here)
			}
			where[ps] = here
			k := [2]int32{ps.prod, r.Partition}
			if last, ok := lastSeq[k]; ok && ps.seq <= last {
				errorf("%s: producer %d's record %d stored after its record %d (reordered)", here, ps.prod, ps.seq, last)
			}
			lastSeq[k] = ps.seq
			a, ok := load.acked[r.Partition][r.Offset]
			switch {
			case !ok:
				v.unacked++
			case a != ps:
				errorf("%s: record %s, but %s was acknowledged there", here, ps, a)
			case r.Offset < localStart[r.Partition]:
				v.fromBucket++
			}
		})
	}
	for p, m := range load.acked {
		for o, ps := range m {
			if _, ok := consumed[p][o]; !ok && o < end[p] {
				errorf("acknowledged record %s (partition %d offset %d) is missing", ps, p, o)
			}
		}
	}
	v.remoteFetches = int64(c.metricSum("kafka_server_brokertopicmetrics_remotefetchrequests_total") - fetches0)
	v.remoteBytes = int64(c.metricSum("kafka_server_brokertopicmetrics_remotefetchbytes_total") - bytes0)
	if v.fromBucket == 0 || v.remoteFetches == 0 {
		errorf("nothing acknowledged was read from the bucket (%d records below the local log starts %v, %d remote fetches)", v.fromBucket, localStart, v.remoteFetches)
	}

	// (b) the bucket itself.
	fin := view.finishedByPartition()
	for p := range int32(chaosPartitions) {
		segs := fin[p]
		e, overlaps, problem := coverage(segs)
		if problem != "" {
			errorf("partition %d in the bucket: %s", p, problem)
		}
		if e+1 < localStart[p] {
			errorf("partition %d: the bucket ends at %d but the leader's local log starts at %d: offsets in neither", p, e, localStart[p])
		}
		v.overlaps += overlaps
		v.segments += len(segs)
		for _, m := range segs {
			n, err := c.checkSegment(&m, consumed[p])
			v.bucketRecords += n
			if err != nil {
				errorf("partition %d: segment [%d, %d] (id %s, broker %d, epoch %d): %v", p, m.StartOffset, m.EndOffset, m.SegmentID, m.BrokerID, m.UploadEpoch, err)
			}
		}
	}
	if errs > 30 {
		t.Errorf("... %d problems in all", errs)
	}
	return v
}

// checkSegment checks a finished segment against the bucket with
// minio-go: each object its manifest names exists (StatObject) with the
// size it says, packed objects lie within the .indexes object, and the
// .log object holds whole batches with good CRCs from the segment's start
// offset to its end offset, whose records are those the consumer read at
// those offsets. It returns the records it read.
func (c *chaosCluster) checkSegment(m *index.SegmentMetadata, consumed map[int64]prodSeq) (int, error) {
	ctx, cancel := context.WithTimeout(c.ctx, 60*time.Second)
	defer cancel()
	sizes := map[index.ObjectKind]int64{}
	for _, o := range m.Objects {
		if o.Packed {
			continue
		}
		key := tier.ObjectKey(m, o.Kind)
		st, err := c.scan.mc.StatObject(ctx, c.bucket, chaosPrefix+"/"+key, minio.StatObjectOptions{})
		if err != nil {
			return 0, fmt.Errorf("a finished manifest names %s: %v", key, err)
		}
		if st.Size != o.Size {
			return 0, fmt.Errorf("%s holds %d bytes, its manifest says %d", key, st.Size, o.Size)
		}
		sizes[o.Kind] = st.Size
	}
	for _, o := range m.Objects {
		if o.Packed && o.Offset+o.Size > sizes[index.ObjectIndexes] {
			return 0, fmt.Errorf("%s packed at [%d, +%d) of an .indexes object of %d bytes", o.Kind.Suffix(), o.Offset, o.Size, sizes[index.ObjectIndexes])
		}
	}
	b, err := c.scan.get(ctx, tier.ObjectKey(m, index.ObjectLog))
	if err != nil {
		return 0, err
	}
	n := 0
	next := m.StartOffset
	for len(b) > 0 {
		if len(b) < 61 {
			return n, fmt.Errorf("%d bytes at offset %d: not a batch", len(b), next)
		}
		size := 12 + int(int32(binary.BigEndian.Uint32(b[8:12])))
		if size < 61 || size > len(b) {
			return n, fmt.Errorf("batch at offset %d claims %d bytes, %d left", next, size, len(b))
		}
		raw := b[:size]
		b = b[size:]
		var rb kmsg.RecordBatch
		if err := rb.ReadFrom(raw); err != nil {
			return n, fmt.Errorf("batch at offset %d: %v", next, err)
		}
		if crc := crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)); crc != uint32(rb.CRC) {
			return n, fmt.Errorf("batch at offset %d: CRC %08x, computed %08x", rb.FirstOffset, uint32(rb.CRC), crc)
		}
		if rb.FirstOffset != next {
			return n, fmt.Errorf("batch at offset %d follows offset %d", rb.FirstOffset, next-1)
		}
		if rb.Attributes&7 != 0 {
			return n, fmt.Errorf("batch at offset %d: compressed (codec %d), but the producers compress nothing", rb.FirstOffset, rb.Attributes&7)
		}
		recs := rb.Records
		for i := range rb.NumRecords {
			l, k := binary.Varint(recs)
			if k <= 0 || int64(len(recs)-k) < l {
				return n, fmt.Errorf("batch at offset %d: record %d truncated", rb.FirstOffset, i)
			}
			var r kmsg.Record
			if err := r.ReadFrom(recs[:k+int(l)]); err != nil {
				return n, fmt.Errorf("batch at offset %d: record %d: %v", rb.FirstOffset, i, err)
			}
			recs = recs[k+int(l):]
			off := rb.FirstOffset + int64(r.OffsetDelta)
			var hs []kgo.RecordHeader
			for _, h := range r.Headers {
				hs = append(hs, kgo.RecordHeader{Key: h.Key, Value: h.Value})
			}
			ps, err := parseChaos(r.Key, r.Value, hs)
			if err != nil {
				return n, fmt.Errorf("offset %d: %v", off, err)
			}
			if got, ok := consumed[off]; !ok || got != ps {
				return n, fmt.Errorf("offset %d holds %s, the consumer read %v there", off, ps, got)
			}
			n++
		}
		next = rb.FirstOffset + int64(rb.LastOffsetDelta) + 1
	}
	if next != m.EndOffset+1 {
		return n, fmt.Errorf(".log object ends at offset %d, its manifest says %d", next-1, m.EndOffset)
	}
	return n, nil
}
