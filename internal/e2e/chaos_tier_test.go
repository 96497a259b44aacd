package e2e

// Reliability campaigns of tiered storage (issue 15, "Campaigns" 1 and 2).
// `make test` runs short versions; `make chaos` (STRATA_CHAOS=1) the long
// ones. STRATA_CHAOS_ROUNDS, STRATA_CHAOS_OUTAGE_SECONDS and
// STRATA_CHAOS_SEED change the number of fault rounds, the length of the bucket
// outage and the random choices (the seed is logged, to replay a run);
// STRATA_CHAOS_LOGS=DIR keeps the brokers' logs there.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"strata/index"
	"strata/internal/testenv"
)

// chaosStats counts what a campaign did.
type chaosStats struct {
	kills, shutdowns, elections, moved int
	// faults that struck a broker while one of its uploads was in the
	// bucket in COPY_SEGMENT_STARTED with its .log object not yet there
	killsMid, shutdownsMid, electionsMid int
	// SIGSTOPs past the ZooKeeper session and cuts of a broker's link to
	// ZooKeeper (not to the bucket): the broker wakes, or reconnects, as
	// a zombie that may still be uploading.
	freezes, cuts, freezesMid, cutsMid int
}

// warmUp waits until every partition has finished segments in the bucket
// and its leader's local retention has removed some.
func (c *chaosCluster) warmUp(d time.Duration) {
	c.t.Helper()
	waitState(c.t, d, "uploads and local retention under way", func() (string, bool) {
		view, err := c.scan.list(c.ctx)
		if err != nil {
			return err.Error(), false
		}
		local, err := c.leaderOffsets(-4)
		if err != nil {
			return err.Error(), false
		}
		fin := view.finishedByPartition()
		var sb strings.Builder
		ok := true
		for p := range int32(chaosPartitions) {
			fmt.Fprintf(&sb, "p%d: %d finished segments, local start %d; ", p, len(fin[p]), local[p])
			ok = ok && len(fin[p]) >= 2 && local[p] > 0
		}
		return sb.String(), ok
	})
}

// midUpload waits up to d for an upload under way: a manifest in
// COPY_SEGMENT_STARTED, set within the last two seconds, whose .log
// object is not in the bucket yet, by a broker that accept approves given
// the partitions' leaders and preferred leaders (one at random when there
// are several). It returns the upload's manifest, or false when none came.
func (c *chaosCluster) midUpload(rng *rand.Rand, d time.Duration, accept func(m *index.SegmentMetadata, leader, preferred map[int32]int32) bool) (index.SegmentMetadata, bool) {
	deadline := time.Now().Add(d)
	var leader, preferred map[int32]int32
	var asked time.Time
	for time.Now().Before(deadline) {
		if time.Since(asked) > time.Second {
			if l, p, err := c.leaders(); err == nil {
				leader, preferred, asked = l, p, time.Now()
			}
		}
		view, err := c.scan.tail(c.ctx)
		if err == nil && leader != nil {
			now := time.Now().UnixMilli()
			var cands []index.SegmentMetadata
			for _, m := range view.unfinished() {
				if m.State != index.CopySegmentStarted || now-m.EventTimestamp > 2000 || view.logUploaded(&m) {
					continue
				}
				if b := c.bs[m.BrokerID]; b != nil && b.Running() && accept(&m, leader, preferred) {
					cands = append(cands, m)
				}
			}
			if len(cands) > 0 {
				return cands[rng.IntN(len(cands))], true
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return index.SegmentMetadata{}, false
}

// TestChaosTierKillsAndMoves: three brokers on ZooKeeper, RF=3,
// min.insync.replicas=2, no unclean election, tiering to MinIO with
// uploads throttled to 128 KiB/s, 256 KiB segments and 512 KiB of local
// retention, three idempotent acks=-1 producers running throughout. Round
// after round a broker that is uploading a segment (seen in the bucket:
// its COPY_SEGMENT_STARTED manifest is there, its .log not yet) is, in
// turn, killed with -9, stopped with SIGTERM (controlled shutdown),
// frozen with SIGSTOP past its ZooKeeper session (6 s) or cut from
// ZooKeeper but not from the bucket, and then restarted, woken with
// SIGCONT or reconnected: the frozen and the cut broker come back as
// zombies whose uploads may still be under way, which the new leader's
// cleanup must win against (issue 22). Then ElectLeaders moves leadership back to the
// preferred replicas, timed again while the current leader of a moved
// partition is uploading. Afterwards the tier must settle (no unfinished
// upload left, no stuck upload, no orphaned object) and an independent
// verifier reads everything back: a fresh consumer from offset 0 (the
// offsets below the local log starts come from the bucket) and minio-go
// reading the bucket's .log objects directly. Nothing acknowledged may be
// missing, changed or stored twice, and a finished manifest must never
// name a missing object. 3 kills in `make test`, 20 in `make chaos`.
func TestChaosTierKillsAndMoves(t *testing.T) {
	long := chaosLong()
	rounds := chaosEnvInt(t, "STRATA_CHAOS_ROUNDS", map[bool]int{false: 4, true: 24}[long])
	seed := chaosSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0xc4a05))
	m := testenv.SharedMinIO(t)
	bucket := m.NewBucket(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(5+rounds*2)*time.Minute)
	defer cancel()
	// Uploads at 128 KiB/s for about 65 KB/s of records per partition:
	// a leader is uploading about half the time, each segment for a
	// second or two. A broker leading two partitions uploads four
	// segments at once, 8 s each: half the grace is 15 s.
	c := startChaosCluster(t, ctx, m, bucket, chaosTier{copyRate: 128 << 10, graceMs: 30000}, nil)
	c.logf("cluster up; seed %d (STRATA_CHAOS_SEED to replay), %d rounds", seed, rounds)
	load := startChaosLoad(t, c.seeds, 3, 1)
	c.warmUp(90 * time.Second)
	c.logf("warm: %d records acknowledged", load.acks())

	st := c.faultRounds(load, rng, rounds, allChaosFaults)
	c.conclude(load, st)
}

// TestChaosTierBucketOutage: the cluster of TestChaosTierKillsAndMoves
// (uploads at 256 KiB/s) on a MinIO of its own, which goes down under load
// (12 s in `make test`, a minute in `make chaos`; longer on a slow machine,
// until every leader's local log has grown past local.retention.bytes and
// a segment, at most three times that) just as a leader is
// uploading a segment: stopped with SIGTERM or killed with -9, as the seed
// chooses. Meanwhile produce goes on (acks=-1 records keep being
// acknowledged at the rate of before, none fails), the leaders' local
// retention waits (their local log start never passes their latest tiered
// offset + 1, which does not move, and their local logs grow past
// local.retention.bytes), and the interrupted uploader is shut down
// (controlled shutdown) and restarted, so that another broker leads its
// partition when the bucket returns and the interrupted upload must be
// settled by its owner or the new leader. When MinIO is back the uploads
// resume and catch up, local retention shrinks the local logs again,
// ElectLeaders gives the partition back, the tier settles, and the
// verifier of TestChaosTierKillsAndMoves finds every acknowledged record.
func TestChaosTierBucketOutage(t *testing.T) {
	long := chaosLong()
	outage := time.Duration(chaosEnvInt(t, "STRATA_CHAOS_OUTAGE_SECONDS", map[bool]int{false: 12, true: 60}[long])) * time.Second
	seed := chaosSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0x0a7a6e))
	m := testenv.StartMinIO(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute+3*outage)
	defer cancel()
	// Two partitions' uploads on one broker, four segments at once at
	// 256 KiB/s: 4 s each; half the grace is 10 s.
	c := startChaosCluster(t, ctx, m, m.Bucket(), chaosTier{copyRate: 256 << 10, graceMs: 20000}, nil)
	c.logf("cluster up; seed %d (STRATA_CHAOS_SEED to replay), bucket outage of %v", seed, outage)
	load := startChaosLoad(t, c.seeds, 3, 1)
	c.warmUp(90 * time.Second)
	// The acknowledgement rate before the outage.
	a0, t0 := load.acks(), time.Now()
	time.Sleep(2 * time.Second)
	rate := float64(load.acks()-a0) / time.Since(t0).Seconds()

	up, hit := c.midUpload(rng, 15*time.Second, func(m *index.SegmentMetadata, leader, _ map[int32]int32) bool {
		return leader[m.Partition.Partition] == m.BrokerID
	})
	acks0 := load.acks()
	kill := rng.IntN(2) == 0
	if kill {
		m.Kill9(t)
	} else {
		m.Stop(t)
	}
	down := time.Now()
	what := "no upload under way"
	if hit {
		what = fmt.Sprintf("broker %d mid-upload of p%d [%d, %d]", up.BrokerID, up.Partition.Partition, up.StartOffset, up.EndOffset)
	}
	c.logf("MinIO %s (%s); %d acknowledged, %.0f records/s before", map[bool]string{false: "stopped (SIGTERM)", true: "killed (-9)"}[kill], what, acks0, rate)
	var tieredRef map[int32]int64
	moved := false
	samples := 0
	// The outage lasts its length, and on a slow machine until every
	// leader's local log has grown past local.retention.bytes and a
	// segment (which retention would delete, had the bucket the records).
	grown := func() bool {
		leader, _, err := c.leaders()
		if err != nil {
			return false
		}
		for p := range int32(chaosPartitions) {
			if partitionLogBytes(c.bs[leader[p]].DataDir(), p) <= chaosLocalBytes+chaosSegBytes {
				return false
			}
		}
		return true
	}
	for time.Since(down) < outage || !moved || (!grown() && time.Since(down) < 3*outage) {
		time.Sleep(time.Second)
		tiered, err := c.leaderOffsets(-5)
		if err != nil {
			c.logf("outage: %v", err)
			continue
		}
		local, err := c.leaderOffsets(-4)
		if err != nil {
			c.logf("outage: %v", err)
			continue
		}
		samples++
		if tieredRef == nil {
			tieredRef = tiered // an upload may have finished as the bucket went
			c.logf("outage: the leaders' latest tiered offsets %v, local log starts %v", tiered, local)
		}
		for p := range int32(chaosPartitions) {
			// Nothing is uploaded with the bucket down. A new leader may
			// answer a lower latest tiered offset (its index had not yet
			// learned the last upload before the bucket went); the check
			// below keeps its local log from leaving a gap.
			if tiered[p] > tieredRef[p] {
				t.Errorf("outage: partition %d: latest tiered offset moved up from %d to %d with the bucket down", p, tieredRef[p], tiered[p])
			}
			if local[p] > tiered[p]+1 {
				t.Errorf("outage: partition %d: the leader's local log starts at %d, past its latest tiered offset %d: local retention deleted what the bucket does not hold", p, local[p], tiered[p])
			}
		}
		if !moved && time.Since(down) > outage/3 {
			// Leadership moves with the bucket down: the interrupted
			// uploader (else the leader of p0) shuts down, comes back
			// and follows until the bucket is back.
			leader, _, err := c.leaders()
			if err != nil {
				continue
			}
			victim := leader[0]
			if hit {
				victim = up.BrokerID
			}
			c.logf("outage: controlled shutdown of broker %d", victim)
			stopped := time.Now()
			c.bs[victim].Stop()
			c.logf("outage: broker %d stopped in %.1fs; restarting", victim, time.Since(stopped).Seconds())
			c.bs[victim].Restart()
			c.waitFullISR(90*time.Second, fmt.Sprintf("after broker %d restarted with the bucket down", victim), false)
			c.logf("outage: broker %d back in every ISR", victim)
			moved = true
		}
	}
	during := load.acks() - acks0
	local, err := c.leaderOffsets(-4)
	if err != nil {
		t.Fatal(err)
	}
	leader, _, err := c.leaders()
	if err != nil {
		t.Fatal(err)
	}
	var sizes []string
	for p := range int32(chaosPartitions) {
		n := partitionLogBytes(c.bs[leader[p]].DataDir(), p)
		sizes = append(sizes, fmt.Sprintf("p%d %d KiB", p, n>>10))
		if n <= chaosLocalBytes+chaosSegBytes {
			t.Errorf("partition %d: the leader holds %d bytes locally after %v without the bucket, want more than local.retention.bytes %d + a segment: did local retention not wait?", p, n, outage, chaosLocalBytes)
		}
	}
	elapsed := time.Since(down)
	c.logf("outage of %.1fs: %d records acknowledged meanwhile (%.0f/s), %d samples; leaders %v, their local log starts %v, local logs %s",
		elapsed.Seconds(), during, float64(during)/elapsed.Seconds(), samples, leader, local, strings.Join(sizes, ", "))
	if float64(during) < rate*elapsed.Seconds()/4 {
		t.Errorf("produce stalled with the bucket down: %d records acknowledged in %v, %.0f/s before", during, elapsed, rate)
	}
	if samples == 0 {
		t.Errorf("no ListOffsets sample of the leaders during the outage")
	}

	m.Start(t)
	back := time.Now()
	c.logf("MinIO started again")
	waitState(t, 3*time.Minute, "uploads to resume and local retention to catch up", func() (string, bool) {
		view, err := c.scan.list(ctx)
		if err != nil {
			return err.Error(), false
		}
		leader, _, err := c.leaders()
		if err != nil {
			return err.Error(), false
		}
		var sb strings.Builder
		ok := true
		for p, segs := range view.finishedByPartition() {
			end, _, _ := coverage(segs)
			n := partitionLogBytes(c.bs[leader[p]].DataDir(), p)
			fmt.Fprintf(&sb, "p%d: bucket end %d (latest tiered in the outage %d), leader holds %d KiB; ", p, end, tieredRef[p], n>>10)
			ok = ok && end > tieredRef[p] && n <= chaosLocalBytes+2*chaosSegBytes
		}
		if lag := c.metricSum("kafka_server_brokertopicmetrics_remotecopylagsegments"); lag != 0 {
			fmt.Fprintf(&sb, "copy lag %v segments", lag)
			ok = false
		}
		return sb.String(), ok
	})
	c.logf("uploads caught up and local logs shrank %.1fs after MinIO returned", time.Since(back).Seconds())
	n := c.electPreferred()
	c.logf("ElectLeaders moved %d partitions", n)
	load.waitAcks(t, 1000, 60*time.Second, "after the outage")
	view := c.settle(load, 90*time.Second)
	v := c.verify(load, view)
	logs := c.brokerLogCounts(chaosLogPatterns...)
	c.logf("records: %d acknowledged of %d produced, %d consumed (%d never acknowledged), %d acknowledged ones read below the leaders' local log starts; %d remote fetches, %.1f MB from the bucket",
		v.acked, load.produced, v.records, v.unacked, v.fromBucket, v.remoteFetches, float64(v.remoteBytes)/1e6)
	c.logf("bucket: %d finished segments (%d overlapping an earlier one), %d records read from their .log objects; end offsets %v",
		v.segments, v.overlaps, v.bucketRecords, v.ends)
	c.logf("broker logs: %v", logs)
}

// chaosFault is a kind of fault round.
type chaosFault int

const (
	faultKill   chaosFault = iota // kill -9, then a restart
	faultStop                     // SIGTERM (controlled shutdown), then a restart
	faultFreeze                   // SIGSTOP past the ZooKeeper session, then SIGCONT
	faultCut                      // the link to ZooKeeper cut (not to the bucket), then healed
)

// allChaosFaults are the rounds of TestChaosTierKillsAndMoves, in turn.
var allChaosFaults = []chaosFault{faultKill, faultStop, faultFreeze, faultCut}

// faultRounds runs rounds of faults under load, the kinds of faults in
// turn: each strikes a broker (mostly one that is uploading a segment),
// waits for leadership to move off it, brings it back and waits for it
// in every ISR, and then moves leadership back to the preferred replicas
// with ElectLeaders, timed while a leader that loses a partition uploads
// it if the campaign can catch one.
func (c *chaosCluster) faultRounds(load *chaosLoad, rng *rand.Rand, rounds int, faults []chaosFault) chaosStats {
	c.t.Helper()
	var st chaosStats
	for round := 0; round < rounds; round++ {
		time.Sleep(time.Duration(500+rng.IntN(1500)) * time.Millisecond)
		kind := faults[round%len(faults)]
		// The victim: mostly a leader that is uploading, else (or one
		// round in five) any broker: a follower, the controller.
		var up index.SegmentMetadata
		hit := false
		what := "at random"
		if rng.IntN(5) > 0 {
			up, hit = c.midUpload(rng, 5*time.Second, func(m *index.SegmentMetadata, leader, _ map[int32]int32) bool {
				return leader[m.Partition.Partition] == m.BrokerID
			})
			what = "no upload under way"
		}
		victim := int32(1 + rng.IntN(3))
		if hit {
			victim = up.BrokerID
			what = fmt.Sprintf("mid-upload of p%d [%d, %d]", up.Partition.Partition, up.StartOffset, up.EndOffset)
		}
		b := c.bs[victim]
		mid := func(n *int) {
			if hit {
				*n++
			}
		}
		switch kind {
		case faultStop:
			st.shutdowns++
			mid(&st.shutdownsMid)
			c.logf("round %d: controlled shutdown (SIGTERM) of broker %d, %s; %d acknowledged", round, victim, what, load.acks())
			b.Stop()
		case faultFreeze:
			st.freezes++
			mid(&st.freezesMid)
			c.logf("round %d: SIGSTOP broker %d past its ZooKeeper session, %s; %d acknowledged", round, victim, what, load.acks())
			if err := b.Signal(syscall.SIGSTOP); err != nil {
				c.t.Fatal(err)
			}
		case faultCut:
			st.cuts++
			mid(&st.cutsMid)
			c.logf("round %d: cut broker %d from ZooKeeper (not from the bucket), %s; %d acknowledged", round, victim, what, load.acks())
			c.zk[victim].Cut()
		default:
			st.kills++
			mid(&st.killsMid)
			c.logf("round %d: kill -9 broker %d, %s; %d acknowledged", round, victim, what, load.acks())
			b.Kill9()
		}
		waitState(c.t, 60*time.Second, fmt.Sprintf("leadership to move off broker %d", victim), func() (string, bool) {
			leader, _, err := c.leaders()
			if err != nil {
				return err.Error(), false
			}
			for _, l := range leader {
				if l == victim || l <= 0 {
					return fmt.Sprintf("leaders %v", leader), false
				}
			}
			return "", true
		})
		time.Sleep(time.Duration(rng.IntN(2000)) * time.Millisecond)
		switch kind {
		case faultFreeze:
			// It wakes believing it leads, its uploads under way.
			if err := b.Signal(syscall.SIGCONT); err != nil {
				c.t.Fatal(err)
			}
		case faultCut:
			c.zk[victim].Heal()
		default:
			b.Restart()
		}
		c.waitFullISR(90*time.Second, fmt.Sprintf("after broker %d restarted", victim), false)
		c.logf("round %d: broker %d back in every ISR", round, victim)

		// Leadership back to the preferred replicas, while the leader
		// that loses a partition uploads it if we can catch that.
		up, hit = c.midUpload(rng, 5*time.Second, func(m *index.SegmentMetadata, leader, preferred map[int32]int32) bool {
			p := m.Partition.Partition
			return leader[p] == m.BrokerID && leader[p] != preferred[p]
		})
		what = "no upload under way"
		if hit {
			st.electionsMid++
			what = fmt.Sprintf("broker %d mid-upload of p%d [%d, %d]", up.BrokerID, up.Partition.Partition, up.StartOffset, up.EndOffset)
		}
		n := c.electPreferred()
		st.elections++
		st.moved += n
		c.logf("round %d: ElectLeaders moved %d partitions (%s)", round, n, what)
	}
	return st
}

// conclude waits for more acknowledgements after the last fault, lets the
// tier settle, verifies every acknowledged record (verify) and logs what
// the campaign did and found.
func (c *chaosCluster) conclude(load *chaosLoad, st chaosStats) (chaosVerdict, map[string]int) {
	c.t.Helper()
	load.waitAcks(c.t, 1000, 60*time.Second, "after the last fault")
	view := c.settle(load, 90*time.Second)
	v := c.verify(load, view)
	logs := c.brokerLogCounts(chaosLogPatterns...)
	c.logf("faults: %d kill -9 (%d mid-upload), %d controlled shutdowns (%d mid-upload), %d SIGSTOPs past the session (%d mid-upload), %d cuts from ZooKeeper (%d mid-upload), %d ElectLeaders (%d with the losing leader mid-upload) moving %d partitions",
		st.kills, st.killsMid, st.shutdowns, st.shutdownsMid, st.freezes, st.freezesMid, st.cuts, st.cutsMid, st.elections, st.electionsMid, st.moved)
	c.logf("records: %d acknowledged of %d produced, %d consumed (%d never acknowledged), %d acknowledged ones read below the leaders' local log starts; %d remote fetches, %.1f MB from the bucket",
		v.acked, load.produced, v.records, v.unacked, v.fromBucket, v.remoteFetches, float64(v.remoteBytes)/1e6)
	c.logf("bucket: %d finished segments (%d overlapping an earlier one), %d records read from their .log objects; end offsets %v",
		v.segments, v.overlaps, v.bucketRecords, v.ends)
	c.logf("broker logs: %v", logs)
	return v, logs
}
