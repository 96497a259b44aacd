package bench

// The restore from zero (issue 16), the last part of the move benchmark,
// on a cluster of its own: Brokers brokers on --tier s3 under a
// ZooKeeper chroot and a bucket prefix of their own (nothing of the move
// cluster is listed or restored).
//
//  1. Fill: Topics tiered topics with Partitions partitions in all
//     (remote.storage.enable, segment.bytes SegmentBytes,
//     local.retention.bytes TailBytes, RF the workload's) get GB of
//     records of RecordSize random bytes, spread evenly (acks=1).
//  2. Upload: every partition's leader has uploaded every sealed
//     segment (ListOffsets -5 reaches its active segment).
//  3. Drain: `strata admin cluster drain`, timed; it returns once every
//     partition's last tiered offset is its log end.
//  4. Zero: every broker stopped (SIGTERM, in parallel), its data
//     directory wiped.
//  5. Back, ZooKeeper kept: every broker started at once on its empty
//     directory (same id and ports); the time runs from that start until
//     every partition answers ListOffsets -1 at its leader without an
//     error and a Fetch at offset 0 of SamplePartitions of them, spread
//     over all, returns a record (polled every restorePoll).
//  6. Unless SkipZooKeeperLost: drained and stopped again, disks wiped,
//     and every broker started on a fresh chroot (a ZooKeeper that never
//     saw the cluster); once they are ready `strata admin restore` writes
//     the metadata back from the bucket's snapshot; timed as in 5 from
//     the brokers' start, and the restore's own figure recorded.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

const (
	restoreChroot     = "/strata-bench-restore"
	restoreLostChroot = "/strata-bench-restore-lost"
	restorePrefix     = "restore"
	restorePoll       = 50 * time.Millisecond
	// restoreWait bounds the wait for every partition to serve after a
	// restart: far past the goal, so that a slow restore still gets a
	// figure.
	restoreWait = 3 * time.Minute
)

// restoreDiskNeed estimates the restore's disk at most: the history in
// the bucket, and on the brokers rf copies of it (until the uploads and
// local retention catch up), with 10% and 1 GiB to spare.
func restoreDiskNeed(rw RestoreWorkload, rf int) int64 {
	b := int64(rw.GB * 1e9)
	need := b + int64(rf)*b
	return need + need/10 + 1<<30
}

// restoreRun is the restore cluster: its topics and their partitions.
type restoreRun struct {
	*moveRun
	rr     *RestoreResult
	parts  map[string]int32 // partitions by topic
	all    []tp             // every partition, topic by topic
	sample []tp
}

// measureRestore runs the restore from zero and fills MoveResult.Restore.
func (r *moveRun) measureRestore(ctx context.Context) error {
	rw := r.mw.Restore
	rf := int(r.cfg.ReplicationFactor)
	rr := &RestoreResult{Partitions: rw.Partitions, Brokers: rw.brokers(rf), Replication: rf, SegmentBytes: rw.SegmentBytes, TailBytes: rw.TailBytes}
	r.mr.Restore = rr
	x := &restoreRun{moveRun: r, rr: rr, parts: map[string]int32{}}
	if err := x.run(ctx); err != nil {
		if _, ok := rr.restart(true); !ok {
			r.mr.NotMeasured = append(r.mr.NotMeasured, fmt.Sprintf("restore from zero (%v)", err))
		}
		return fmt.Errorf("restore from zero: %w", err)
	}
	return nil
}

func (x *restoreRun) run(ctx context.Context) error {
	rw, rr := x.mw.Restore, x.rr
	x.chroot, x.tierURL = restoreChroot, "s3://"+moveBucket+"/"+restorePrefix
	x.progress("restore from zero: starting %d brokers (chroot %s, bucket prefix %s/)", rr.Brokers, restoreChroot, restorePrefix)
	var seeds []string
	for id := int32(1); id <= int32(rr.Brokers); id++ {
		b, err := x.startBroker(ctx, id)
		if err != nil {
			return err
		}
		seeds = append(seeds, b.st.addr)
	}
	x.seeds = seeds
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.MetadataMinAge(50*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	x.cl, x.adm = cl, kadm.NewClient(cl)
	if err := x.waitBrokers(ctx, nil); err != nil {
		return err
	}
	if err := x.create(ctx); err != nil {
		return err
	}
	perPart := restoreRecords(rw.GB, rw.Partitions, x.cfg.RecordSize)
	rr.Records = perPart * int64(len(x.all))
	rr.HistoryBytes = rr.Records * int64(x.cfg.RecordSize)
	timeout := x.cfg.PhaseTimeout + time.Duration(rr.HistoryBytes/(5<<20))*time.Second // at least 5 MB/s
	fctx, cancel := context.WithTimeout(ctx, timeout)
	start := time.Now()
	err = x.fill(fctx, perPart)
	cancel()
	if err != nil {
		return err
	}
	rr.FillSeconds = time.Since(start).Seconds()
	x.res.Sent += rr.Records
	x.res.Acked += rr.Records
	x.res.TopicRecords += rr.Records
	uctx, cancel := context.WithTimeout(ctx, timeout)
	start = time.Now()
	err = x.waitUploaded(uctx)
	cancel()
	if err != nil {
		return err
	}
	rr.UploadSeconds = time.Since(start).Seconds()

	if rr.DrainSeconds, rr.DrainOutput, err = x.drain(ctx); err != nil {
		return err
	}
	if rr.StopSeconds, err = x.zero(); err != nil {
		return err
	}
	kept, err := x.restart(ctx, true)
	rr.Restarts = append(rr.Restarts, kept)
	if err != nil {
		return err
	}
	if rw.SkipZooKeeperLost {
		return nil
	}
	if rr.SecondDrainSeconds, _, err = x.drain(ctx); err != nil {
		return fmt.Errorf("second drain: %w", err)
	}
	if _, err := x.zero(); err != nil {
		return err
	}
	x.chroot = restoreLostChroot
	for _, b := range x.brokers {
		if i := slices.Index(b.st.args, "--zookeeper"); i >= 0 {
			b.st.args[i+1] = x.zk.addr + restoreLostChroot
		}
	}
	lost, err := x.restart(ctx, false)
	rr.Restarts = append(rr.Restarts, lost)
	return err
}

// create creates the restore's topics and waits for their leaders and
// full ISRs.
func (x *restoreRun) create(ctx context.Context) error {
	rw := x.mw.Restore
	stamp := time.Now().UnixNano()
	req := kmsg.NewPtrCreateTopicsRequest()
	req.TimeoutMillis = 30000
	for i, n := range restoreLayout(rw.Partitions, rw.Topics) {
		name := fmt.Sprintf("strata-bench-restore-%d-%d", stamp, i)
		x.parts[name] = n
		x.rr.Topics = append(x.rr.Topics, name)
		for p := range n {
			x.all = append(x.all, tp{name, p})
		}
		rt := kmsg.NewCreateTopicsRequestTopic()
		rt.Topic, rt.NumPartitions, rt.ReplicationFactor = name, n, x.cfg.ReplicationFactor
		for k, v := range map[string]string{
			"remote.storage.enable": "true", "segment.bytes": strconv.FormatInt(rw.SegmentBytes, 10),
			"local.retention.bytes": strconv.FormatInt(rw.TailBytes, 10), "file.delete.delay.ms": "0",
		} {
			c := kmsg.NewCreateTopicsRequestTopicConfig()
			c.Name, c.Value = k, kadm.StringPtr(v)
			rt.Configs = append(rt.Configs, c)
		}
		req.Topics = append(req.Topics, rt)
	}
	x.res.Topics = append(x.res.Topics, x.rr.Topics...)
	x.sample = restoreSample(x.all, rw.SamplePartitions)
	resp, err := req.RequestWith(ctx, x.cl)
	if err != nil {
		return fmt.Errorf("create topics: %w", err)
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil {
			if t.ErrorMessage != nil {
				err = fmt.Errorf("%w (%s)", err, *t.ErrorMessage)
			}
			return fmt.Errorf("create topic %s: %w", t.Topic, err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, x.cfg.PhaseTimeout)
	defer cancel()
	var note string
	_, err = pollUntilCtx(wctx, func() (bool, error) {
		md, err := x.adm.Metadata(wctx, x.rr.Topics...)
		if err != nil {
			note = err.Error()
			return false, nil
		}
		ok := 0
		for _, t := range x.rr.Topics {
			for _, p := range md.Topics[t].Partitions {
				if p.Err == nil && p.Leader >= 0 && len(p.ISR) == int(x.cfg.ReplicationFactor) {
					ok++
				}
			}
		}
		note = fmt.Sprintf("%d of %d partitions with a leader and a full ISR", ok, len(x.all))
		return ok == len(x.all), nil
	})
	if err != nil {
		return fmt.Errorf("restore topics: %s: %w", note, err)
	}
	x.progress("restore from zero: %d topics, %d partitions created (RF %d)", len(x.rr.Topics), len(x.all), x.cfg.ReplicationFactor)
	return nil
}

// fill produces perPart records of RecordSize random bytes to every
// partition (acks=1, no compression), a batch's worth to each in turn.
func (x *restoreRun) fill(ctx context.Context, perPart int64) error {
	size := x.cfg.RecordSize
	batch := min(1<<20, x.mw.Restore.SegmentBytes/4)
	cl, err := kgo.NewClient(kgo.SeedBrokers(x.seeds...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchCompression(kgo.NoCompression()), kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite(),
		kgo.ProducerLinger(2*time.Millisecond), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.ProducerBatchMaxBytes(int32(batch)), kgo.MaxBufferedBytes(64<<20), kgo.RecordRetries(20))
	if err != nil {
		return err
	}
	defer cl.Close()
	buf := make([]byte, 8<<20+size)
	rng := rand.NewChaCha8([32]byte{byte(perPart), byte(size), 'r'})
	_, _ = rng.Read(buf)
	errc := make(chan error, 1)
	chunk := max(1, batch/int64(size)-1)
	total := perPart * int64(len(x.all))
	start, last := time.Now(), time.Now()
	var sent int64
	for from := int64(0); from < perPart; from += chunk {
		for _, p := range x.all {
			for range min(chunk, perPart-from) {
				off := int((sent * 4099 * 8) % int64(8<<20))
				sent++
				cl.Produce(ctx, &kgo.Record{Topic: p.topic, Partition: p.partition, Value: buf[off : off+size]}, func(_ *kgo.Record, err error) {
					if err != nil {
						select {
						case errc <- err:
						default:
						}
					}
				})
			}
			select {
			case err := <-errc:
				return fmt.Errorf("restore fill: %w", err)
			default:
			}
			if time.Since(last) >= 5*time.Second {
				last = time.Now()
				x.progress("restore fill: %.2f of %.2f GB, %.0f MB/s", float64(sent*int64(size))/1e9, float64(total*int64(size))/1e9,
					float64(sent*int64(size))/1e6/time.Since(start).Seconds())
			}
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return fmt.Errorf("restore fill: %w", err)
	}
	select {
	case err := <-errc:
		return fmt.Errorf("restore fill: %w", err)
	default:
	}
	x.progress("restore fill: %.2f GB in %d partitions in %.1f s", float64(total*int64(size))/1e9, len(x.all), time.Since(start).Seconds())
	return nil
}

// listOffsets asks every partition's leader for its offset at ts, in one
// request per leader; a partition missing from the answer failed with the
// error in errs (or an unknown leader).
func (x *restoreRun) listOffsets(ctx context.Context, cl *kgo.Client, ts int64) (map[tp]int64, map[tp]error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.Version = 9
	for _, t := range x.rr.Topics {
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = t
		for p := range x.parts[t] {
			rp := kmsg.NewListOffsetsRequestTopicPartition()
			rp.Partition, rp.CurrentLeaderEpoch, rp.Timestamp = p, -1, ts
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
	got, errs := map[tp]int64{}, map[tp]error{}
	for _, sh := range cl.RequestSharded(ctx, req) {
		if sh.Err != nil {
			if sr, ok := sh.Req.(*kmsg.ListOffsetsRequest); ok {
				for _, t := range sr.Topics {
					for _, p := range t.Partitions {
						errs[tp{t.Topic, p.Partition}] = sh.Err
					}
				}
			}
			continue
		}
		for _, t := range sh.Resp.(*kmsg.ListOffsetsResponse).Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					errs[tp{t.Topic, p.Partition}] = err
				} else {
					got[tp{t.Topic, p.Partition}] = p.Offset
				}
			}
		}
	}
	return got, errs
}

// waitUploaded waits until every partition's leader has uploaded every
// sealed segment: its last tiered offset reaches the active segment.
func (x *restoreRun) waitUploaded(ctx context.Context) error {
	last := time.Now()
	var note string
	_, err := pollUntilCtx(ctx, func() (bool, error) {
		md, err := x.adm.Metadata(ctx, x.rr.Topics...)
		if err != nil {
			note = err.Error()
			return false, nil
		}
		tiered, errs := x.listOffsets(ctx, x.cl, -5)
		done := 0
		for _, p := range x.all {
			pm := md.Topics[p.topic].Partitions[p.partition]
			b := x.brokers[pm.Leader]
			if b == nil || errs[p] != nil {
				continue
			}
			_, active, _, err := localLog(filepath.Join(b.st.dataDir, fmt.Sprintf("%s-%d", p.topic, p.partition)))
			if err == nil && tiered[p] >= active-1 {
				done++
			}
		}
		note = fmt.Sprintf("%d of %d partitions uploaded up to their active segment", done, len(x.all))
		if time.Since(last) >= 5*time.Second {
			last = time.Now()
			x.progress("restore upload: %s", note)
		}
		return done == len(x.all), nil
	})
	if err != nil {
		return fmt.Errorf("restore upload: %s: %w", note, err)
	}
	x.progress("restore upload: %s", note)
	return nil
}

// cli runs `strata admin --bootstrap SEEDS ARGS`, its stderr lines shown
// as progress, and returns its standard output.
func (x *restoreRun) cli(ctx context.Context, args ...string) (string, error) {
	label := args[0]
	if label == "cluster" && len(args) > 1 {
		label += " " + args[1]
	}
	args = append([]string{"admin", "--bootstrap", strings.Join(x.seeds, ",")}, args...)
	bin, err := strataBin(x.cfg)
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), x.m.env()...)
	var out bytes.Buffer
	cmd.Stdout = &out
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			x.progress("strata admin %s: %s", label, strings.TrimSpace(sc.Text()))
		}
	}()
	err = cmd.Run()
	pw.Close()
	wg.Wait()
	if err != nil {
		return out.String(), fmt.Errorf("strata admin %s: %w: %s", label, err, lastLines(out.String(), 5))
	}
	return out.String(), nil
}

// drain runs `strata admin cluster drain` and times it.
func (x *restoreRun) drain(ctx context.Context) (float64, string, error) {
	x.progress("restore: strata admin cluster drain")
	start := time.Now()
	out, err := x.cli(ctx, "cluster", "drain", "--timeout", "5m")
	s := time.Since(start).Seconds()
	if err != nil {
		return s, "", err
	}
	line := strings.TrimSpace(lastLines(out, 1))
	if d, ok := parseCLIDuration(drainLine, out); ok {
		x.progress("restore: drained in %.2f s (the drain's own count %v): %s", s, d, line)
	} else {
		x.progress("restore: drained in %.2f s: %s", s, line)
	}
	return s, line, nil
}

// zero stops every broker at once and wipes its data directory.
func (x *restoreRun) zero() (float64, error) {
	start := time.Now()
	x.stopEach((*strataTarget).stop)
	s := time.Since(start).Seconds()
	for _, b := range x.brokers {
		if err := os.RemoveAll(b.st.dataDir); err != nil {
			return s, err
		}
		if err := os.MkdirAll(b.st.dataDir, 0o755); err != nil {
			return s, err
		}
	}
	x.progress("restore: every broker stopped in %.1f s; data directories wiped", s)
	return s, nil
}

// restart starts every broker at once on its empty data directory and
// times every partition's return (with ZooKeeper lost, `strata admin
// restore` runs once the brokers are ready).
func (x *restoreRun) restart(ctx context.Context, kept bool) (RestoreRestart, error) {
	out := RestoreRestart{ZooKeeperKept: kept, Sampled: len(x.sample), ErrorsSeen: map[string]int{}}
	name := "ZooKeeper kept"
	if !kept {
		name = "ZooKeeper lost"
	}
	before, err := x.bucketCounts(ctx)
	if err != nil {
		return out, err
	}
	wctx, cancel := context.WithTimeout(ctx, restoreWait)
	defer cancel()
	x.progress("restore (%s): starting %d brokers on empty disks", name, len(x.brokers))
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var lerr error
	for _, b := range x.brokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := b.st.launch(wctx, x.cfg)
			mu.Lock()
			defer mu.Unlock()
			out.BrokersReadyMs = max(out.BrokersReadyMs, ms(time.Since(start)))
			if err != nil {
				lerr = errors.Join(lerr, fmt.Errorf("broker %d: %w", b.id, err))
			}
		}()
	}
	wg.Wait()
	if lerr != nil {
		return out, lerr
	}
	x.progress("restore (%s): brokers ready %.0f ms after the start", name, out.BrokersReadyMs)
	type cliResult struct {
		seconds, servesMs float64
		err               error
	}
	cliDone := make(chan cliResult, 1)
	if !kept {
		go func() {
			cs := time.Now()
			o, err := x.cli(wctx, "restore",
				"--zookeeper", x.zk.addr+restoreLostChroot, "--tier", x.tierURL, "--s3-endpoint", x.m.endpoint(), "--s3-region", minioRegion, "--timeout", "3m")
			res := cliResult{seconds: time.Since(cs).Seconds(), err: err}
			if d, ok := parseCLIDuration(servesLine, o); ok {
				res.servesMs = ms(d)
			} else if err == nil {
				res.err = fmt.Errorf("strata admin restore printed no \"every partition serves\" line: %s", lastLines(o, 5))
			}
			cliDone <- res
		}()
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(x.seeds...), kgo.MetadataMinAge(restorePoll))
	if err != nil {
		return out, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	conns := map[int32]*rawReader{}
	defer func() {
		for _, rd := range conns {
			rd.conn.Close()
		}
	}()
	fetched := map[tp]bool{}
	lastNote := time.Now()
	for {
		// A poll's requests get a second: a client that retries an
		// unknown topic (ZooKeeper lost, before the restore wrote it)
		// must not hold the loop much longer than that.
		pctx, pcancel := context.WithTimeout(wctx, time.Second)
		got, errs := x.listOffsets(pctx, cl, -1)
		if out.ListOffsetsMs == 0 && len(got) == len(x.all) {
			out.ListOffsetsMs = ms(time.Since(start))
			x.progress("restore (%s): every partition answers ListOffsets after %.0f ms", name, out.ListOffsetsMs)
		}
		for _, err := range errs {
			out.ErrorsSeen[errorName(err)]++
		}
		if len(fetched) < len(x.sample) {
			x.fetchSample(pctx, adm, conns, fetched, out.ErrorsSeen)
		}
		pcancel()
		if out.ListOffsetsMs > 0 && len(fetched) == len(x.sample) {
			out.ServesMs = ms(time.Since(start))
			break
		}
		if time.Since(lastNote) >= 2*time.Second {
			lastNote = time.Now()
			x.progress("restore (%s): %d of %d partitions answer ListOffsets, %d of %d sampled return offset 0", name, len(got), len(x.all), len(fetched), len(x.sample))
		}
		if !sleepCtx(wctx, restorePoll) {
			for _, b := range x.brokers {
				b.st.dumpGoroutines()
			}
			return out, fmt.Errorf("restore (%s): not every partition serves within %v: %d of %d answer ListOffsets, %d of %d sampled return offset 0 (errors seen %v)",
				name, restoreWait, len(got), len(x.all), len(fetched), len(x.sample), out.ErrorsSeen)
		}
	}
	out.LoadAvg = readLoadAvg()
	if after, err := x.bucketCounts(ctx); err == nil {
		out.BucketRequests = bucketDelta(before, after).ByAPI
	}
	x.progress("restore (%s): every partition serves %.2f s after the brokers' start (ListOffsets %.2f s; load average %s)",
		name, out.ServesMs/1000, out.ListOffsetsMs/1000, out.LoadAvg)
	if !kept {
		res := <-cliDone
		out.RestoreCLISeconds, out.RestoreCLIServesMs = res.seconds, res.servesMs
		if res.err != nil {
			return out, res.err
		}
		x.progress("restore (%s): strata admin restore says every partition serves %.2f s after it began (%.2f s in all)",
			name, out.RestoreCLIServesMs/1000, out.RestoreCLISeconds)
	}
	return out, nil
}

// fetchSample sends a Fetch at offset 0 to the leader of each sampled
// partition not yet fetched, marking those whose answer holds a record.
func (x *restoreRun) fetchSample(ctx context.Context, adm *kadm.Client, conns map[int32]*rawReader, fetched map[tp]bool, seen map[string]int) {
	var topics []string
	for _, p := range x.sample {
		if !fetched[p] && !slices.Contains(topics, p.topic) {
			topics = append(topics, p.topic)
		}
	}
	md, err := adm.Metadata(ctx, topics...)
	if err != nil {
		seen[errorName(err)]++
		return
	}
	for _, p := range x.sample {
		if fetched[p] {
			continue
		}
		pm, ok := md.Topics[p.topic].Partitions[p.partition]
		if !ok || pm.Err != nil || pm.Leader < 0 {
			seen["no leader in the metadata"]++
			continue
		}
		rd, err := x.rawConn(ctx, conns, pm.Leader)
		if err != nil {
			seen[errorName(err)]++
			continue
		}
		part := &rawPart{tp: p, end: 1}
		stop := context.AfterFunc(ctx, func() { _ = rd.conn.SetDeadline(time.Now()) })
		resp, err := rd.fetch([]*rawPart{part})
		stop()
		if err != nil {
			rd.conn.Close()
			delete(conns, pm.Leader)
			seen[errorName(err)]++
			continue
		}
		if len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
			seen["fetch response without the partition"]++
			continue
		}
		fp := resp.Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(fp.ErrorCode); err != nil {
			seen[errorName(err)]++
			continue
		}
		w, err := walkBatches(fp.RecordBatches, 0)
		switch {
		case err != nil:
			seen[errorName(err)]++
		case w.records > 0:
			fetched[p] = true
		default:
			seen[fmt.Sprintf("no record at offset 0 of %s-%d from broker %d (%d bytes; high watermark %d, log start %d)",
				p.topic, p.partition, pm.Leader, len(fp.RecordBatches), fp.HighWatermark, fp.LogStartOffset)]++
		}
	}
}

// rawConn returns a connection to broker id, dialled on first use.
func (x *restoreRun) rawConn(ctx context.Context, conns map[int32]*rawReader, id int32) (*rawReader, error) {
	if rd := conns[id]; rd != nil {
		return rd, nil
	}
	b := x.brokers[id]
	if b == nil {
		return nil, fmt.Errorf("broker %d is not one of the restore's", id)
	}
	conn, err := (&net.Dialer{Timeout: time.Second}).DialContext(ctx, "tcp", b.st.addr)
	if err != nil {
		return nil, err
	}
	rd := &rawReader{conn: conn, r: bufio.NewReaderSize(conn, 64<<10), fmt: kmsg.NewRequestFormatter(kmsg.FormatterClientID(rawClientID))}
	conns[id] = rd
	return rd, nil
}

// errorName is a Kafka error's name, or the error, cut short.
func errorName(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	s := err.Error()
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return s
}
