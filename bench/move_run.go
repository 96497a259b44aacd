package bench

// The move benchmark (issue 16): a partition moved to a fresh broker,
// tiered (only the local tail is copied) beside untiered (the whole
// history, as Kafka copies it), for several history sizes in one run.
//
// The harness starts ZooKeeper, MinIO with a bucket, and brokers 1..RF
// on --tier s3 (min.insync.replicas=1, remote.log.manager.task.interval.ms
// 200, log.retention.check.interval.ms 200). For each size, ascending:
//
//  1. Fill: a tiered topic (remote.storage.enable, local.retention.bytes
//     TailBytes, segment.bytes SegmentBytes, file.delete.delay.ms 0) and
//     an untiered one, each of one partition on brokers 1..RF, get the
//     size in records of RecordSize random bytes (no compression, acks=1,
//     batches of 1 MiB or a quarter segment).
//  2. Ready: the tiered partition's leader has uploaded every sealed
//     segment (ListOffsets -5, the last tiered offset, reaches its active
//     segment) and local retention has cut its disk to the tail; both
//     ISRs are full.
//  3. Move: a fresh broker (an empty data directory, a new id) is
//     started; AlterPartitionReassignments replaces the partition's last
//     follower with it; the time runs from the request until
//     ListPartitionReassignments lists nothing for the partition and the
//     metadata shows the target replicas with the new broker in the ISR.
//     The new broker's replicationbytesin_total says what it copied from
//     brokers. Tiered first, then untiered on another fresh broker; the
//     untiered topic is then deleted and its new broker stopped, so that
//     the disk holds one untiered history at a time.
//
// Then: the brokers that took the smallest and the largest tiered move are
// restarted StartupRestarts times each, in turn (SIGTERM, same data
// directory and ports), timed from process start to the ready line; the
// largest tiered partition's new broker is made its leader (replicas
// reordered, preferred election) and a Fetch at offset 0 is sent to it at
// once and again until a response holds a record; a raw Fetch pass then
// reads up to ColdReadGB of its history from the bucket. MinIO's request
// counters (/minio/metrics/v3/api/requests, one per HTTP request, read
// with the bearer token `mc admin prometheus generate` would make) are
// read around the uploads, each move and the cold read.
//
// Last, on a cluster of its own (the move cluster stopped, its disks
// gone), the restore from zero: restore_run.go.

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	moveBucket     = "strata-bench-move"
	moveChroot     = "/strata-bench"
	movePoll       = 10 * time.Millisecond
	moveNewBrokers = 100 // ids of the fresh brokers start here
	// Broker metrics of the move.
	metricReplBytesIn = "kafka_server_brokertopicmetrics_replicationbytesin_total"
	metricFetchBytes  = "kafka_server_brokertopicmetrics_remotefetchbytes_total"
	metricFetchReqs   = "kafka_server_brokertopicmetrics_remotefetchrequests_total"
)

// moveBroker is one broker of the move cluster.
type moveBroker struct {
	id      int32
	st      *strataTarget
	metrics string // HOST:PORT of /metrics
	startMs float64
}

type moveRun struct {
	cfg     Config
	mw      MoveWorkload
	res     *Result
	mr      *MoveResult
	zk      *benchZK
	m       *benchMinIO
	brokers map[int32]*moveBroker
	nextID  int32
	seeds   []string
	cl      *kgo.Client
	adm     *kadm.Client
	began   time.Time
	// chroot and tierURL are the brokers' ZooKeeper chroot and tier: the
	// move cluster's, then the restore cluster's (restore_run.go).
	chroot, tierURL string
	pmu             sync.Mutex // progress lines come from several goroutines
}

func (r *moveRun) progress(format string, args ...any) {
	if r.cfg.Progress != nil {
		r.pmu.Lock()
		defer r.pmu.Unlock()
		fmt.Fprintf(r.cfg.Progress, "[%s %s %6.1fs] %s\n", TargetMove, r.cfg.Name, time.Since(r.began).Seconds(), fmt.Sprintf(format, args...))
	}
}

// runMove runs the move benchmark and fills res.
func runMove(ctx context.Context, cfg Config, res *Result) (err error) {
	mw := *cfg.Move
	r := &moveRun{cfg: cfg, mw: mw, res: res, began: time.Now(), brokers: map[int32]*moveBroker{}, nextID: moveNewBrokers,
		chroot: moveChroot, tierURL: "s3://" + moveBucket + "/strata",
		mr: &MoveResult{TailBytes: mw.TailBytes, SegmentBytes: mw.SegmentBytes}}
	res.Move = r.mr
	res.ReplicationFactor = cfg.ReplicationFactor
	plan := planMove(mw.SizesGB, cfg.RecordSize)
	need := restoreDiskNeed(mw.Restore, int(cfg.ReplicationFactor))
	if !mw.RestoreOnly {
		need = max(need, moveDiskNeed(plan, int(cfg.ReplicationFactor), mw.TailBytes, mw.SegmentBytes))
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(os.TempDir(), &st); err == nil {
		free := int64(st.Bavail) * st.Bsize
		r.progress("disk: %.1f GB free in %s, the run needs up to %.1f GB", float64(free)/1e9, os.TempDir(), float64(need)/1e9)
		if free < need {
			return fmt.Errorf("move: %.1f GB free in %s, sizes %v GB need up to %.1f GB: run smaller sizes (a workload file with \"move\": {\"sizes_gb\": [...]})",
				float64(free)/1e9, os.TempDir(), mw.SizesGB, float64(need)/1e9)
		}
	}
	r.progress("starting ZooKeeper and MinIO")
	if r.zk, err = startZooKeeper(ctx); err != nil {
		return err
	}
	defer r.zk.close()
	if r.m, err = startMinIO(ctx, moveBucket); err != nil {
		return err
	}
	defer r.m.close()
	defer r.stopAll()
	if mw.RestoreOnly {
		r.mr.NotMeasured = append(r.mr.NotMeasured, "the moves, the first record from a new leader, start-up and the bucket requests (a restore-only run)")
		return r.measureRestore(ctx)
	}
	var seeds []string
	for id := int32(1); id <= int32(cfg.ReplicationFactor); id++ {
		b, err := r.startBroker(ctx, id)
		if err != nil {
			return err
		}
		seeds = append(seeds, b.st.addr)
	}
	r.seeds = seeds
	if r.cl, err = kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(50*time.Millisecond)); err != nil {
		return err
	}
	defer r.cl.Close()
	r.adm = kadm.NewClient(r.cl)
	if err := r.waitBrokers(ctx, nil); err != nil {
		return err
	}
	for _, p := range plan {
		if err := r.size(ctx, p); err != nil {
			return err
		}
	}
	if err := r.startup(ctx); err != nil {
		return err
	}
	if err := r.coldProbe(ctx); err != nil {
		return err
	}
	// The move cluster goes (its disks with it) before the restore
	// cluster starts.
	r.stopAll()
	clear(r.brokers)
	return r.measureRestore(ctx)
}

// stopAll stops every broker at once and removes its data directory.
func (r *moveRun) stopAll() { r.stopEach((*strataTarget).Close) }

// stopEach stops every broker at once with stop. With the others going
// too, a controlled shutdown may find no broker to hand its leaderships
// to and be killed after stopTimeout: that is noted, not an error of the
// run.
func (r *moveRun) stopEach(stop func(*strataTarget) error) {
	var wg sync.WaitGroup
	for _, b := range r.brokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := stop(b.st); err != nil {
				r.progress("stop broker %d: %v", b.id, err)
			}
		}()
	}
	wg.Wait()
}

// startBroker starts broker id on a fresh data directory and ports.
func (r *moveRun) startBroker(ctx context.Context, id int32) (*moveBroker, error) {
	bin, err := strataBin(r.cfg)
	if err != nil {
		return nil, err
	}
	// A port found free may be taken by another process before the
	// broker binds it (other tests run beside the bench): such a start is
	// tried again on other ports.
	for attempt := 1; ; attempt++ {
		b, err := r.startBrokerOnce(ctx, bin, id)
		if err != nil && attempt < 3 && strings.Contains(err.Error(), "address already in use") {
			r.progress("broker %d: a port was taken before it bound it; trying other ports", id)
			continue
		}
		return b, err
	}
}

func (r *moveRun) startBrokerOnce(ctx context.Context, bin string, id int32) (*moveBroker, error) {
	listen, err := freeLoopbackPort()
	if err != nil {
		return nil, err
	}
	metrics, err := freeLoopbackPort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "strata-bench-move-")
	if err != nil {
		return nil, err
	}
	args := slices.Concat([]string{"serve", "--broker-id", strconv.Itoa(int(id)), "--listen", listen, "--data-dir", dir, "--metrics", metrics,
		"--zookeeper", r.zk.addr + r.chroot,
		"--tier", r.tierURL, "--s3-endpoint", r.m.endpoint(), "--s3-region", minioRegion,
		"--set", "remote.log.storage.system.enable=true",
		"--set", "min.insync.replicas=1",
		"--set", "remote.log.manager.task.interval.ms=200",
		"--set", "log.retention.check.interval.ms=200",
		// At the end every broker stops at once: a controlled shutdown
		// that finds no broker to hand its leaderships to gives up at
		// once instead of retrying.
		"--set", "controlled.shutdown.max.retries=0"}, r.cfg.StrataArgs)
	b := &moveBroker{id: id, metrics: metrics, st: &strataTarget{bin: bin, dataDir: dir, env: append(os.Environ(), r.m.env()...), args: args}}
	start := time.Now()
	if err := b.st.launch(ctx, r.cfg); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("broker %d: %w", id, err)
	}
	b.startMs = ms(time.Since(start))
	r.brokers[id] = b
	r.progress("broker %d ready at %s in %.0f ms", id, b.st.addr, b.startMs)
	return b, nil
}

// waitBrokers waits until the metadata lists every running broker (and
// extra).
func (r *moveRun) waitBrokers(ctx context.Context, extra []int32) error {
	want := slices.Clone(extra)
	for id := range r.brokers {
		want = append(want, id)
	}
	wctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	var seen []int32
	for {
		md, err := r.adm.BrokerMetadata(wctx)
		if err == nil {
			have := map[int32]bool{}
			seen = seen[:0]
			for _, b := range md.Brokers {
				have[b.NodeID] = true
				seen = append(seen, b.NodeID)
			}
			if !slices.ContainsFunc(want, func(id int32) bool { return !have[id] }) && md.Controller >= 0 {
				return nil
			}
		}
		if !sleepCtx(wctx, 50*time.Millisecond) {
			return fmt.Errorf("brokers %v not all in the metadata (it lists %v): %w", want, seen, errors.Join(err, wctx.Err()))
		}
	}
}

// size runs one history size: fill both topics, wait, move each.
func (r *moveRun) size(ctx context.Context, p movePlan) error {
	stamp := time.Now().UnixNano()
	rf := r.cfg.ReplicationFactor
	replicas := make([]int32, rf)
	for i := range replicas {
		replicas[i] = int32(i + 1)
	}
	seg := strconv.FormatInt(r.mw.SegmentBytes, 10)
	tiered := MoveCase{SizeGB: p.SizeGB, Tiered: true, Topic: fmt.Sprintf("strata-bench-move-%gGB-%d-tiered", p.SizeGB, stamp), Records: p.Records, HistoryBytes: p.Bytes}
	full := MoveCase{SizeGB: p.SizeGB, Topic: fmt.Sprintf("strata-bench-move-%gGB-%d-full", p.SizeGB, stamp), Records: p.Records, HistoryBytes: p.Bytes}
	r.res.Topics = append(r.res.Topics, tiered.Topic, full.Topic)
	if err := r.createTopic(ctx, tiered.Topic, replicas, map[string]string{
		"remote.storage.enable": "true", "local.retention.bytes": strconv.FormatInt(r.mw.TailBytes, 10),
		"segment.bytes": seg, "file.delete.delay.ms": "0",
	}); err != nil {
		return err
	}
	if err := r.createTopic(ctx, full.Topic, replicas, map[string]string{"segment.bytes": seg}); err != nil {
		return err
	}
	timeout := r.cfg.PhaseTimeout + time.Duration(p.Bytes/(5<<20))*time.Second // at least 5 MB/s
	upBefore, err := r.bucketCounts(ctx)
	if err != nil {
		return err
	}
	copyBefore := r.sumMetrics(ctx, metricCopyBytes, metricCopyRequests)
	for _, c := range []*MoveCase{&tiered, &full} {
		fctx, cancel := context.WithTimeout(ctx, timeout)
		start := time.Now()
		err := r.fill(fctx, c)
		cancel()
		if err != nil {
			return err
		}
		c.FillSeconds = time.Since(start).Seconds()
		r.res.Sent += c.Records
		r.res.Acked += c.Records
		r.res.TopicRecords += c.Records
	}
	for _, c := range []*MoveCase{&tiered, &full} {
		wctx, cancel := context.WithTimeout(ctx, timeout)
		start := time.Now()
		err := r.waitReady(wctx, c)
		cancel()
		if err != nil {
			return err
		}
		c.ReadySeconds = time.Since(start).Seconds()
	}
	upAfter, err := r.bucketCounts(ctx)
	if err != nil {
		return err
	}
	copyAfter := r.sumMetrics(ctx, metricCopyBytes, metricCopyRequests)
	r.mr.Upload = addBucket(r.mr.Upload, bucketDelta(upBefore, upAfter))
	r.mr.Upload.Bytes += copyAfter[0] - copyBefore[0]
	r.mr.Upload.BrokerRequests += copyAfter[1] - copyBefore[1]

	for _, c := range []*MoveCase{&tiered, &full} {
		mctx, cancel := context.WithTimeout(ctx, timeout)
		err := r.move(mctx, c)
		cancel()
		if err != nil {
			return err
		}
		r.mr.Cases = append(r.mr.Cases, *c)
	}
	// The untiered history goes, and its new broker with it: the disk
	// holds one at a time.
	if _, err := r.adm.DeleteTopics(ctx, full.Topic); err != nil {
		r.progress("delete %s: %v", full.Topic, err)
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		md, err := r.adm.Metadata(dctx, full.Topic)
		if err == nil {
			if td, ok := md.Topics[full.Topic]; !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
				break
			}
		}
		if !sleepCtx(dctx, 100*time.Millisecond) {
			r.progress("%s still listed after 30 s", full.Topic)
			break
		}
	}
	if b := r.brokers[full.To]; b != nil {
		if err := b.st.Close(); err != nil {
			r.progress("stop broker %d: %v", b.id, err)
		}
		delete(r.brokers, full.To)
	}
	return nil
}

func addBucket(a, b BucketRequests) BucketRequests {
	if a.ByAPI == nil {
		a.ByAPI = map[string]int64{}
	}
	for k, v := range b.ByAPI {
		a.ByAPI[k] += v
	}
	a.PutClass += b.PutClass
	a.GetClass += b.GetClass
	a.Free += b.Free
	a.Bytes += b.Bytes
	a.BrokerRequests += b.BrokerRequests
	return a
}

// createTopic creates a one-partition topic on replicas, with configs.
func (r *moveRun) createTopic(ctx context.Context, topic string, replicas []int32, configs map[string]string) error {
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	rt := kmsg.NewCreateTopicsRequestTopic()
	rt.Topic, rt.NumPartitions, rt.ReplicationFactor = topic, -1, -1
	ra := kmsg.NewCreateTopicsRequestTopicReplicaAssignment()
	ra.Partition, ra.Replicas = 0, replicas
	rt.ReplicaAssignment = append(rt.ReplicaAssignment, ra)
	for k, v := range configs {
		c := kmsg.NewCreateTopicsRequestTopicConfig()
		c.Name, c.Value = k, kadm.StringPtr(v)
		rt.Configs = append(rt.Configs, c)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, r.cl)
	if err == nil && len(resp.Topics) == 1 {
		err = kerr.ErrorForCode(resp.Topics[0].ErrorCode)
		if err != nil && resp.Topics[0].ErrorMessage != nil {
			err = fmt.Errorf("%w (%s)", err, *resp.Topics[0].ErrorMessage)
		}
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	_, err = pollUntilCtx(ctx, func() (bool, error) {
		_, reps, isr, _ := r.state(ctx, topic)
		return len(reps) == len(replicas) && len(isr) == len(replicas), nil
	})
	if err != nil {
		return fmt.Errorf("topic %s: replicas not in sync: %w", topic, err)
	}
	return nil
}

// state is partition 0's leader, replicas and ISR in a fresh metadata
// response; leader -1 when unknown.
//
// The request goes out as it is: kadm's Metadata answers from the
// client's cache while it is younger than MetadataMinAge, which would add
// up to that age to every time measured with this.
func (r *moveRun) state(ctx context.Context, topic string) (leader int32, replicas, isr []int32, err error) {
	req := kmsg.NewPtrMetadataRequest()
	rt := kmsg.NewMetadataRequestTopic()
	rt.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, r.cl)
	if err != nil {
		return -1, nil, nil, err
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			return -1, nil, nil, fmt.Errorf("metadata of %s: %w", topic, err)
		}
		for _, p := range t.Partitions {
			if p.Partition != 0 {
				continue
			}
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return -1, nil, nil, fmt.Errorf("metadata of %s/0: %w", topic, err)
			}
			return p.Leader, p.Replicas, p.ISR, nil
		}
	}
	return -1, nil, nil, fmt.Errorf("metadata of %s/0: not in the answer", topic)
}

// pollUntilCtx calls cond every movePoll until it is true or ctx ends.
func pollUntilCtx(ctx context.Context, cond func() (bool, error)) (time.Time, error) {
	return pollEvery(ctx, movePoll, cond)
}

// fill produces c.Records records of RecordSize random bytes to c.Topic
// (acks=1, no compression, batches of 1 MiB or a quarter segment).
func (r *moveRun) fill(ctx context.Context, c *MoveCase) error {
	size := r.cfg.RecordSize
	cl, err := kgo.NewClient(kgo.SeedBrokers(r.seeds...), kgo.DefaultProduceTopic(c.Topic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(), kgo.ProducerLinger(2*time.Millisecond),
		kgo.MetadataMinAge(100*time.Millisecond),
		// Batches of at most a quarter segment, so that segments roll
		// near segment.bytes.
		kgo.ProducerBatchMaxBytes(int32(min(1<<20, r.mw.SegmentBytes/4))), kgo.MaxBufferedBytes(64<<20), kgo.RecordRetries(20))
	if err != nil {
		return err
	}
	defer cl.Close()
	// Values are windows of a random buffer at varying offsets: no two
	// alike, and nothing a compressor could shrink.
	buf := make([]byte, 8<<20+size)
	rng := rand.NewChaCha8([32]byte{byte(c.Records), byte(size)})
	_, _ = rng.Read(buf)
	errc := make(chan error, 1)
	last := time.Now()
	start := last
	var acked int64
	mode := "untiered"
	if c.Tiered {
		mode = "tiered"
	}
	for i := range c.Records {
		off := int((i * 4099 * 8) % int64(8<<20))
		cl.Produce(ctx, &kgo.Record{Partition: 0, Value: buf[off : off+size]}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
		select {
		case err := <-errc:
			return fmt.Errorf("fill %s: %w", c.Topic, err)
		default:
		}
		if time.Since(last) >= 5*time.Second {
			last = time.Now()
			acked = i
			r.progress("fill %g GB %s: %.2f of %.2f GB, %.0f MB/s", c.SizeGB, mode, float64(acked*int64(size))/1e9, float64(c.HistoryBytes)/1e9,
				float64(acked*int64(size))/1e6/time.Since(start).Seconds())
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("fill %s: %w", c.Topic, err)
	}
	select {
	case err := <-errc:
		return fmt.Errorf("fill %s: %w", c.Topic, err)
	default:
	}
	r.progress("fill %g GB %s: %.2f GB in %.1f s", c.SizeGB, mode, float64(c.HistoryBytes)/1e9, time.Since(start).Seconds())
	return nil
}

// partDir is a broker's directory of topic's partition 0.
func (r *moveRun) partDir(id int32, topic string) string {
	b := r.brokers[id]
	if b == nil {
		return ""
	}
	return filepath.Join(b.st.dataDir, topic+"-0")
}

// localLog returns the bytes of the .log files in dir, the base offset
// of the last (active) one (-1 without one) and its bytes.
func localLog(dir string) (bytes, activeBase, activeBytes int64, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0, -1, 0, err
	}
	activeBase = -1
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok {
			continue
		}
		var size int64
		if info, err := e.Info(); err == nil {
			size = info.Size()
		}
		bytes += size
		if base, err := strconv.ParseInt(name, 10, 64); err == nil && base > activeBase {
			activeBase, activeBytes = base, size
		}
	}
	return bytes, activeBase, activeBytes, nil
}

// waitReady waits until c's replicas are all in sync and, for a tiered
// topic, its leader has uploaded every sealed segment and cut its local
// log to the tail.
func (r *moveRun) waitReady(ctx context.Context, c *MoveCase) error {
	last := time.Now()
	var note string
	_, err := pollUntilCtx(ctx, func() (bool, error) {
		leader, replicas, isr, err := r.state(ctx, c.Topic)
		if err != nil || leader < 0 {
			note = fmt.Sprintf("no leader (%v)", err)
			return false, nil
		}
		local, active, activeBytes, err := localLog(r.partDir(leader, c.Topic))
		if err != nil {
			return false, err
		}
		c.LocalBytes, c.ActiveBytes = local, activeBytes
		done := len(isr) == len(replicas)
		note = fmt.Sprintf("leader %d, isr %v of %v, leader's local log %.0f MB", leader, isr, replicas, float64(local)/1e6)
		if c.Tiered {
			tiered, err := r.ownOffset(ctx, leader, c.Topic, -5)
			if err != nil {
				note += fmt.Sprintf(", last tiered offset unknown (%v)", err)
				return false, nil
			}
			note += fmt.Sprintf(", last tiered offset %d of active segment base %d", tiered, active)
			done = done && tiered >= active-1 && local <= r.mw.TailBytes+2*r.mw.SegmentBytes
		}
		if !done && time.Since(last) >= 5*time.Second {
			last = time.Now()
			r.progress("waiting for %s: %s", c.Topic, note)
		}
		return done, nil
	})
	if err != nil {
		return fmt.Errorf("%s not ready to move: %s: %w", c.Topic, note, err)
	}
	r.progress("%s ready: %s", c.Topic, note)
	return nil
}

// ownOffset asks broker id, over a connection of its own, for partition
// 0's offset at timestamp ts from its own log (-5: the last tiered
// offset; -4: the local log start).
func (r *moveRun) ownOffset(ctx context.Context, id int32, topic string, ts int64) (int64, error) {
	b := r.brokers[id]
	if b == nil {
		return -1, fmt.Errorf("broker %d is not running", id)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.st.addr))
	if err != nil {
		return -1, err
	}
	defer cl.Close()
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version, req.ReplicaID = 9, -2
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = 0, -1, ts
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	kresp, err := cl.SeedBrokers()[0].Request(rctx, req)
	if err != nil {
		return -1, err
	}
	resp := kresp.(*kmsg.ListOffsetsResponse)
	if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		return -1, errors.New("list offsets: no partition in the response")
	}
	p := resp.Topics[0].Partitions[0]
	if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
		return -1, err
	}
	return p.Offset, nil
}

// reassigning reports whether topic's partition 0 is being reassigned.
func (r *moveRun) reassigning(ctx context.Context, topic string) (bool, error) {
	req := kmsg.NewPtrListPartitionReassignmentsRequest()
	req.TimeoutMillis = 5000
	rt := kmsg.NewListPartitionReassignmentsRequestTopic()
	rt.Topic, rt.Partitions = topic, []int32{0}
	req.Topics = append(req.Topics, rt)
	resp, err := req.RequestWith(ctx, r.cl)
	if err != nil {
		return false, err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
		return false, err
	}
	for _, t := range resp.Topics {
		if t.Topic == topic && len(t.Partitions) > 0 {
			return true, nil
		}
	}
	return false, nil
}

// reassign sends AlterPartitionReassignments for topic's partition 0,
// again while it fails for up to reassignRetry: a broker that has just
// registered may not be known to the controller yet (its ZooKeeper
// watch), and the other brokers' metadata does not list it until a
// partition changes (so the harness cannot wait for that).
func (r *moveRun) reassign(ctx context.Context, topic string, target []int32) (tries int, err error) {
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(topic, 0, target)
	start := time.Now()
	for {
		tries++
		res, err := r.adm.AlterPartitionAssignments(ctx, req)
		if err == nil {
			err = res.Error()
		}
		if err == nil {
			return tries, nil
		}
		if time.Since(start) > reassignRetry || !sleepCtx(ctx, movePoll) {
			return tries, fmt.Errorf("reassign %s to %v (%d tries): %w", topic, target, tries, err)
		}
	}
}

const reassignRetry = 10 * time.Second

// waitReassigned waits until the reassignment of topic to target is done
// and the replicas in must are in the ISR.
func (r *moveRun) waitReassigned(ctx context.Context, topic string, target, must []int32) (time.Time, error) {
	var note string
	last := time.Now()
	at, err := pollUntilCtx(ctx, func() (bool, error) {
		busy, err := r.reassigning(ctx, topic)
		leader, replicas, isr, merr := r.state(ctx, topic)
		note = fmt.Sprintf("in progress %v (%v), leader %d, replicas %v, isr %v (%v)", busy, err, leader, replicas, isr, merr)
		if time.Since(last) >= 5*time.Second {
			last = time.Now()
			r.progress("moving %s: %s", topic, note)
		}
		return err == nil && merr == nil && !busy && slices.Equal(replicas, target) &&
			!slices.ContainsFunc(must, func(id int32) bool { return !slices.Contains(isr, id) }), nil
	})
	if err != nil {
		return at, fmt.Errorf("reassignment of %s to %v: %s: %w", topic, target, note, err)
	}
	return at, nil
}

// move replaces the last follower of c's partition with a fresh broker.
func (r *moveRun) move(ctx context.Context, c *MoveCase) error {
	leader, replicas, _, err := r.state(ctx, c.Topic)
	if err != nil {
		return err
	}
	for i := len(replicas) - 1; i >= 0; i-- {
		if replicas[i] != leader {
			c.From = replicas[i]
			break
		}
	}
	c.To = r.nextID
	r.nextID++
	nb, err := r.startBroker(ctx, c.To)
	if err != nil {
		return err
	}
	target := slices.Clone(replicas)
	target[slices.Index(target, c.From)] = c.To
	bucketBefore, err := r.bucketCounts(ctx)
	if err != nil {
		return err
	}
	mode := "untiered (full copy)"
	if c.Tiered {
		mode = "tiered (tail only)"
	}
	r.progress("move %g GB %s: %s from broker %d to new broker %d (replicas %v -> %v)", c.SizeGB, mode, c.Topic, c.From, c.To, replicas, target)
	start := time.Now()
	tries, err := r.reassign(ctx, c.Topic, target)
	if err != nil {
		return err
	}
	answered := time.Since(start)
	if tries > 1 {
		r.progress("move: the controller took the reassignment at the %d-th try, %.0f ms after the first", tries, ms(answered))
	}
	at, err := r.waitReassigned(ctx, c.Topic, target, []int32{c.To})
	if err != nil {
		return err
	}
	c.Seconds = at.Sub(start).Seconds()
	c.AnsweredMs = ms(answered)
	if vals, err := scrapeBroker(ctx, nb.metrics); err == nil {
		c.ReplicationBytesIn = vals[metricReplBytesIn]
	}
	c.NewLocalBytes, _, _, _ = localLog(r.partDir(c.To, c.Topic))
	if after, err := r.bucketCounts(ctx); err == nil {
		c.BucketRequests = bucketDelta(bucketBefore, after).ByAPI
	}
	r.progress("move %g GB %s: %.2f s (the request answered after %.0f ms); the new broker fetched %.1f MB from brokers and holds %.1f MB",
		c.SizeGB, mode, c.Seconds, c.AnsweredMs, c.ReplicationBytesIn/1e6, float64(c.NewLocalBytes)/1e6)
	return nil
}

// scrapeBroker reads a broker's unlabelled metrics.
func scrapeBroker(ctx context.Context, addr string) (map[string]float64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("broker metrics: %w", err)
	}
	defer resp.Body.Close()
	return parseMetrics(io.LimitReader(resp.Body, 16<<20))
}

// sumMetrics sums each named metric over the running brokers.
func (r *moveRun) sumMetrics(ctx context.Context, names ...string) []float64 {
	out := make([]float64, len(names))
	for _, b := range r.brokers {
		vals, err := scrapeBroker(ctx, b.metrics)
		if err != nil {
			continue
		}
		for i, n := range names {
			out[i] += vals[n]
		}
	}
	return out
}

// startup restarts the brokers that took the smallest and the largest
// tiered move, in turn (the first of each pair alternating), timing
// process start to ready line.
func (r *moveRun) startup(ctx context.Context) error {
	small, ok1 := r.mr.Smallest()
	large, ok2 := r.mr.Largest()
	if !ok1 || !ok2 || small.SizeGB == large.SizeGB {
		r.progress("start-up: needs two sizes; skipped")
		return nil
	}
	for i := range r.mw.StartupRestarts {
		// The first of each pair alternates, so that neither size always
		// starts right after the other's broker rejoined the ISR.
		pair := []MoveCase{small, large}
		if i%2 == 1 {
			pair[0], pair[1] = large, small
		}
		for _, c := range pair {
			b := r.brokers[c.To]
			if err := b.st.stop(); err != nil {
				return fmt.Errorf("start-up: stop broker %d: %w", b.id, err)
			}
			start := time.Now()
			if err := b.st.launch(ctx, r.cfg); err != nil {
				return fmt.Errorf("start-up: broker %d: %w", b.id, err)
			}
			d := ms(time.Since(start))
			if c.SizeGB == small.SizeGB {
				r.mr.StartupSmallMs = append(r.mr.StartupSmallMs, d)
			} else {
				r.mr.StartupLargeMs = append(r.mr.StartupLargeMs, d)
			}
			r.progress("start-up %d of %d: broker %d (%g GB tiered, %.0f MB local) ready in %.0f ms", i+1, r.mw.StartupRestarts, b.id, c.SizeGB, float64(c.NewLocalBytes)/1e6, d)
			// Back in the ISR before the next restart.
			wctx, cancel := context.WithTimeout(ctx, r.cfg.PhaseTimeout)
			_, err := pollUntilCtx(wctx, func() (bool, error) {
				_, _, isr, _ := r.state(wctx, c.Topic)
				return slices.Contains(isr, b.id), nil
			})
			cancel()
			if err != nil {
				return fmt.Errorf("start-up: broker %d back in the ISR of %s: %w", b.id, c.Topic, err)
			}
		}
	}
	r.mr.StartupSmall, r.mr.StartupLarge = spreadOf(r.mr.StartupSmallMs), spreadOf(r.mr.StartupLargeMs)
	return nil
}

// coldProbe makes the largest tiered move's new broker the leader, times
// its first record at offset 0 and reads up to ColdReadGB from the bucket.
func (r *moveRun) coldProbe(ctx context.Context) error {
	c, ok := r.mr.Largest()
	if !ok {
		return errors.New("cold probe: no tiered move")
	}
	nb := r.brokers[c.To]
	pctx, cancel := context.WithTimeout(ctx, r.cfg.PhaseTimeout)
	defer cancel()
	leader, replicas, _, err := r.state(pctx, c.Topic)
	if err != nil {
		return err
	}
	target := append([]int32{c.To}, slices.DeleteFunc(slices.Clone(replicas), func(id int32) bool { return id == c.To })...)
	if _, err := r.reassign(pctx, c.Topic, target); err != nil {
		return err
	}
	if _, err := r.waitReassigned(pctx, c.Topic, target, target); err != nil {
		return err
	}
	before, err := r.bucketCounts(pctx)
	if err != nil {
		return err
	}
	own, err := scrapeBroker(pctx, nb.metrics)
	if err != nil {
		return err
	}
	conn, err := (&net.Dialer{}).DialContext(pctx, "tcp", nb.st.addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	stop := context.AfterFunc(pctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	rd := &rawReader{conn: conn, r: bufio.NewReaderSize(conn, 64<<10), fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID(rawClientID))}
	r.progress("first record: electing broker %d (leader now %d) for %s and fetching offset 0 from it", c.To, leader, c.Topic)
	start := time.Now()
	er, err := r.adm.ElectLeaders(pctx, kadm.ElectPreferredReplica, kadm.TopicsSet{c.Topic: {0: {}}})
	if err == nil {
		if pr, ok := er[c.Topic][0]; ok && pr.Err != nil && !errors.Is(pr.Err, kerr.ElectionNotNeeded) {
			err = fmt.Errorf("%w (%s)", pr.Err, pr.ErrMessage)
		}
	}
	if err != nil {
		return fmt.Errorf("elect broker %d for %s: %w", c.To, c.Topic, err)
	}
	part := &rawPart{tp: tp{c.Topic, 0}, end: 1}
	var codes []int16
	for {
		fs := time.Now()
		resp, err := rd.fetch([]*rawPart{part})
		if err != nil {
			return fmt.Errorf("first record: %w", err)
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return errors.New("first record: fetch response without the partition")
		}
		fp := resp.Topics[0].Partitions[0]
		if fp.ErrorCode == 0 {
			w, err := walkBatches(fp.RecordBatches, 0)
			if err != nil {
				return fmt.Errorf("first record: %w", err)
			}
			if w.records > 0 {
				r.mr.FirstRecordMs, r.mr.FirstFetchMs = ms(time.Since(start)), ms(time.Since(fs))
				break
			}
		} else if e := kerr.ErrorForCode(fp.ErrorCode); !kerr.IsRetriable(e) {
			return fmt.Errorf("first record: %w", e)
		}
		if len(codes) == 0 || codes[len(codes)-1] != fp.ErrorCode {
			codes = append(codes, fp.ErrorCode)
		}
		if time.Since(start) > time.Minute {
			return fmt.Errorf("first record: none within a minute (error codes %v)", codes)
		}
		time.Sleep(time.Millisecond)
	}
	r.progress("first record: %.1f ms after the ElectLeaders request (last Fetch %.1f ms; error codes before it %v)", r.mr.FirstRecordMs, r.mr.FirstFetchMs, codes)

	// Cold read: from offset 0, up to ColdReadGB or the local log start.
	localStart, err := r.ownOffset(pctx, c.To, c.Topic, -4)
	if err != nil {
		return fmt.Errorf("local log start: %w", err)
	}
	p, err := coldRead(rd, c.Topic, localStart, int64(r.mw.ColdReadGB*1e9))
	if err != nil {
		return fmt.Errorf("cold read: %w", err)
	}
	r.mr.ColdReadPass = p
	r.progress("cold read: %d records, %.1f MB in %.2f s: %.1f MB/s", p.Records, float64(p.Bytes)/1e6, p.Seconds, p.MBPerSec)
	after, err := r.bucketCounts(pctx)
	if err != nil {
		return err
	}
	own2, err := scrapeBroker(pctx, nb.metrics)
	if err != nil {
		return err
	}
	r.mr.ColdRead = bucketDelta(before, after)
	r.mr.ColdRead.Bytes = own2[metricFetchBytes] - own[metricFetchBytes]
	r.mr.ColdRead.BrokerRequests = own2[metricFetchReqs] - own[metricFetchReqs]
	return nil
}

// coldRead reads topic's partition 0 from offset 0 over rd, one Fetch at
// a time with its batches walked by their headers (as the raw read-back
// does), until the offset reaches end or limit bytes of batches came.
func coldRead(rd *rawReader, topic string, end, limit int64) (RawPass, error) {
	var p RawPass
	p.Connections = 1
	start := time.Now()
	part := &rawPart{tp: tp{topic, 0}}
	for part.next < end && p.Bytes < limit {
		part.end = end
		resp, err := rd.fetch([]*rawPart{part})
		if err != nil {
			return p, err
		}
		p.Requests++
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			return p, errors.New("fetch response without the partition")
		}
		fp := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(fp.ErrorCode); err != nil {
			return p, fmt.Errorf("offset %d: %w", part.next, err)
		}
		w, err := walkBatches(fp.RecordBatches, part.next)
		if err != nil {
			return p, err
		}
		if w.batches == 0 {
			return p, fmt.Errorf("offset %d: no whole batch in the response", part.next)
		}
		if p.Batches == 0 {
			p.FirstBatchMs = ms(time.Since(start))
		}
		p.Records += w.records
		p.Batches += w.batches
		p.Bytes += w.bytes
		part.next = w.next
	}
	p.Throughput = throughput(p.Records, p.Bytes, time.Since(start))
	return p, nil
}

// minioMetricsToken is the bearer token of MinIO's metrics endpoints:
// the JWT (HS512, issuer "prometheus", subject the access key, signed
// with the secret key) that `mc admin prometheus generate` makes.
func minioMetricsToken(accessKey, secret string, now time.Time) string {
	enc := base64.RawURLEncoding
	hdr, _ := json.Marshal(map[string]string{"alg": "HS512", "typ": "JWT"})
	claims, _ := json.Marshal(map[string]any{"exp": now.Add(24 * time.Hour).Unix(), "sub": accessKey, "iss": "prometheus"})
	signing := enc.EncodeToString(hdr) + "." + enc.EncodeToString(claims)
	mac := hmac.New(sha512.New, []byte(secret))
	mac.Write([]byte(signing))
	return signing + "." + enc.EncodeToString(mac.Sum(nil))
}

// minioRequestLine matches a MinIO v3 request counter:
// minio_api_requests_total{name="PutObject",server="…",type="s3"} 3
var minioRequestLine = regexp.MustCompile(`^minio_api_requests_total\{([^}]*)\} ([0-9.eE+-]+)$`)
var minioNameLabel = regexp.MustCompile(`(?:^|,)name="([^"]+)"`)

// parseMinIORequests reads the S3 request counts by API from MinIO's
// /minio/metrics/v3/api/requests page.
func parseMinIORequests(r io.Reader) (map[string]int64, error) {
	out := map[string]int64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		m := minioRequestLine.FindStringSubmatch(sc.Text())
		if m == nil || !strings.Contains(m[1], `type="s3"`) {
			continue
		}
		name := minioNameLabel.FindStringSubmatch(m[1])
		v, err := strconv.ParseFloat(m[2], 64)
		if name == nil || err != nil {
			continue
		}
		out[name[1]] += int64(v)
	}
	return out, sc.Err()
}

// bucketCounts reads MinIO's S3 request counters.
func (r *moveRun) bucketCounts(ctx context.Context) (map[string]int64, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, r.m.endpoint()+"/minio/metrics/v3/api/requests", nil)
	req.Header.Set("Authorization", "Bearer "+minioMetricsToken(r.m.accessKey, r.m.secret, time.Now()))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("minio metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("minio metrics: %s", resp.Status)
	}
	return parseMinIORequests(io.LimitReader(resp.Body, 16<<20))
}
