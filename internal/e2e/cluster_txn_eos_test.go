package e2e

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/testenv"
)

// TestClusterTxnConsumeTransformProduce: exactly-once processing on three
// broker processes on a real ZooKeeper while brokers die. An idempotent
// acks=-1 producer writes records with unique ids to an input topic; two
// franz-go GroupTransactSession workers (one group, a transactional id
// each) read them, write each one transformed to an output topic and
// commit their input offsets in the same transaction. Every topic,
// __consumer_offsets and __transaction_state have replication factor 3 and
// min.insync.replicas 2. Meanwhile brokers are killed with -9 one at a
// time and restarted, the ISRs recovering before the next: the broker
// leading a worker's __transaction_state partition (its transaction
// coordinator) just as the worker ends a transaction, the group
// coordinator, the leader of an output partition (whose open
// transactions and markers the new leader takes over) and of an input
// partition. The workers carry on
// as an application does: a failed transaction is aborted and the input
// polled again, and a session that fails for good (fenced, or stuck) is
// replaced by a new one with the same transactional id.
//
// At the end, an independent read_committed consumer must find every input
// id in the output exactly once. A read_uncommitted reader that keeps the
// control records works out on its own which records are committed (each
// producer's records up to its next COMMIT marker) and which aborted: the
// read_committed consumer must return exactly the committed ones.
//
// STRATA_CHAOS=1 runs a longer campaign: more records and kill rounds,
// and brokers frozen with SIGSTOP past their ZooKeeper session.
func TestClusterTxnConsumeTransformProduce(t *testing.T) {
	long := chaosLong()
	minRecords, rate, rounds := 3000, 250, 3
	if long {
		minRecords, rate, rounds = chaosEnvInt(t, "STRATA_CHAOS_TXN_RECORDS", 30000), 400, chaosEnvInt(t, "STRATA_CHAOS_TXN_ROUNDS", 18)
	}
	seed := chaosSeed(t)
	rng := rand.New(rand.NewPCG(seed, 26))
	began := time.Now()
	logf := func(format string, args ...any) {
		t.Helper()
		t.Logf("[%5.1fs] %s", time.Since(began).Seconds(), fmt.Sprintf(format, args...))
	}
	logf("seed %d (STRATA_CHAOS_SEED), %d kill rounds, at least %d records", seed, rounds, minRecords)

	const sessionMs = 2000
	zk := testenv.StartZooKeeper(t)
	sets := []string{
		"min.insync.replicas=2", "unclean.leader.election.enable=false",
		"replica.lag.time.max.ms=3000", fmt.Sprintf("zookeeper.session.timeout.ms=%d", sessionMs),
		"offsets.topic.replication.factor=3", "offsets.topic.num.partitions=3",
		"transaction.state.log.replication.factor=3", "transaction.state.log.min.isr=2",
		"transaction.state.log.num.partitions=3",
		"transaction.abort.timed.out.transaction.cleanup.interval.ms=1000",
		"group.initial.rebalance.delay.ms=200", "group.min.session.timeout.ms=500",
		"auto.leader.rebalance.enable=false",
	}
	bs, seeds := startZKBrokers(t, zk.Addr()+"/txn", sets)
	if dir := os.Getenv("STRATA_CHAOS_LOGS"); dir != "" {
		t.Cleanup(func() {
			for id, b := range bs {
				if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-broker-%d.log", t.Name(), id)), []byte(b.Logs()), 0o644); err != nil {
					t.Logf("keep broker %d log: %v", id, err)
				}
			}
		})
	}
	const in, out, partitions, group = "txn-in", "txn-out", 4, "txn-eos"
	txnIDs := []string{"txn-eos-w1", "txn-eos-w2"}
	timeout := 3 * time.Minute
	if long {
		timeout = 20 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	admCl := newClient(t, seeds[0], kgo.SeedBrokers(seeds...))
	adm := kadm.NewClient(admCl)
	two := "2"
	for _, topic := range []string{in, out} {
		r, err := adm.CreateTopic(ctx, partitions, 3, map[string]*string{"min.insync.replicas": &two}, topic)
		if err == nil {
			err = r.Err
		}
		if err != nil {
			t.Fatalf("create topic %s: %v", topic, err)
		}
	}
	// The first FindCoordinator of each kind creates its internal topic.
	coordinators := func() (txn map[string]int32, grp int32, err error) {
		fctx, fcancel := context.WithTimeout(ctx, 3*time.Second)
		defer fcancel()
		txn = map[string]int32{}
		for id, r := range adm.FindTxnCoordinators(fctx, txnIDs...) {
			if r.Err != nil {
				return nil, -1, fmt.Errorf("transaction coordinator of %s: %w", id, r.Err)
			}
			txn[id] = r.NodeID
		}
		g := adm.FindGroupCoordinators(fctx, group)[group]
		if g.Err != nil {
			return nil, -1, fmt.Errorf("group coordinator: %w", g.Err)
		}
		return txn, g.NodeID, nil
	}
	waitState(t, 30*time.Second, "the coordinators", func() (string, bool) {
		_, _, err := coordinators()
		if err != nil {
			return err.Error(), false
		}
		return "", true
	})
	topics := map[string]int{in: partitions, out: partitions, offsetsTopicName: 3, txnStateTopic: 3}
	clusterState := func() (string, kadm.Metadata, bool) {
		md, err := allMetadata(ctx, seeds)
		if err != nil {
			return err.Error(), md, false
		}
		var sb strings.Builder
		ok := len(md.Brokers) == 3
		fmt.Fprintf(&sb, "%d brokers; ", len(md.Brokers))
		for name, n := range topics {
			ps := md.Topics[name].Partitions.Sorted()
			if len(ps) != n {
				ok = false
				fmt.Fprintf(&sb, "%s: %d partitions; ", name, len(ps))
				continue
			}
			for _, p := range ps {
				if p.Err != nil || p.Leader <= 0 || len(p.ISR) != 3 {
					ok = false
					fmt.Fprintf(&sb, "%s-%d leader %d isr %v %v; ", name, p.Partition, p.Leader, p.ISR, p.Err)
				}
			}
		}
		return sb.String(), md, ok
	}
	waitISR := func(when string) kadm.Metadata {
		t.Helper()
		var md kadm.Metadata
		waitState(t, 90*time.Second, "full ISRs "+when, func() (string, bool) {
			s, m, ok := clusterState()
			md = m
			return s, ok
		})
		return md
	}
	md := waitISR("after creation")
	// The test's own view of which broker coordinates what: the leader of
	// the key's partition (Kafka's hash), which FindCoordinator must name.
	txnCoord := func(md kadm.Metadata, id string) int32 {
		return md.Topics[txnStateTopic].Partitions[groupPartition(id, 3)].Leader
	}
	groupCoord := func(md kadm.Metadata) int32 {
		return md.Topics[offsetsTopicName].Partitions[groupPartition(group, 3)].Leader
	}
	if txn, g, err := coordinators(); err != nil || g != groupCoord(md) || txn[txnIDs[0]] != txnCoord(md, txnIDs[0]) || txn[txnIDs[1]] != txnCoord(md, txnIDs[1]) {
		t.Fatalf("FindCoordinator names transaction coordinators %v and group coordinator %d (%v); the leaders of their partitions are %d, %d and %d",
			txn, g, err, txnCoord(md, txnIDs[0]), txnCoord(md, txnIDs[1]), groupCoord(md))
	}

	// The input: ids id-0, id-1, ... at rate records a second until the
	// faults are over and at least minRecords are written.
	led := newLedger()
	prod := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.DefaultProduceTopic(in), kgo.ProducerLinger(5*time.Millisecond), kgo.RecordRetries(1<<30))
	faultsDone := make(chan struct{})
	var prodWG sync.WaitGroup
	prodWG.Add(1)
	var produced int
	go func() {
		defer prodWG.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		per := max(rate/50, 1)
		for produced < minRecords || !isClosed(faultsDone) {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			for range per {
				id := fmt.Sprintf("id-%d", produced)
				led.mu.Lock()
				led.produced++
				led.mu.Unlock()
				prod.Produce(ctx, &kgo.Record{Key: []byte(id), Value: []byte(id)}, led.ack)
				produced++
			}
		}
	}()

	stats := &txnStats{}
	var workers []*txnWorker
	for i, id := range txnIDs {
		workers = append(workers, startTxnWorker(t, seeds, fmt.Sprintf("w%d", i+1), id, group, in, out, stats, logf))
	}
	defer func() {
		for _, w := range workers {
			w.stop()
		}
	}()
	progress := func(n int, what string) {
		t.Helper()
		target := stats.committedRecords() + n
		waitState(t, 90*time.Second, what, func() (string, bool) {
			c := stats.committedRecords()
			return fmt.Sprintf("%d of %d records committed; %s", c, target, stats.summary()), c >= target
		})
	}
	progress(200, "the workers to commit transactions before the faults")

	// The faults, one broker at a time; each round picks its victim from
	// a fresh view: a transaction coordinator, the group coordinator,
	// then the leader of an input partition or any broker.
	kills, freezes := 0, 0
	var victims []string
	for round := 1; round <= rounds; round++ {
		md := waitISR(fmt.Sprintf("before round %d", round))
		var victim int32
		var why string
		// midEnd: the kill waits for a worker to start ending a
		// transaction (flush, TxnOffsetCommit, EndTxn), so that it lands
		// between the coordinator's prepare and its markers at times.
		var midEnd *txnWorker
		switch round % 6 {
		case 1, 4:
			w := (round / 3) % 2
			victim, why = txnCoord(md, txnIDs[w]), "transaction coordinator of "+txnIDs[w]+" as it ends a transaction"
			midEnd = workers[w]
		case 2:
			victim, why = groupCoord(md), "group coordinator"
		case 3:
			p := int32(rng.IntN(partitions))
			victim, why = md.Topics[out].Partitions[p].Leader, fmt.Sprintf("leader of %s-%d", out, p)
		case 5:
			p := int32(rng.IntN(partitions))
			victim, why = md.Topics[in].Partitions[p].Leader, fmt.Sprintf("leader of %s-%d", in, p)
		default:
			victim, why = int32(1+rng.IntN(3)), "any broker"
		}
		if victim <= 0 {
			t.Fatalf("round %d: no broker is the %s", round, why)
		}
		freeze := long && round%4 == 0 // a transaction coordinator mid-End, the group coordinator, any broker
		b := bs[victim]
		if midEnd != nil {
			midEnd.armed.Store(true)
			select {
			case <-midEnd.ending:
			case <-time.After(30 * time.Second):
				t.Fatalf("round %d: the worker ended no transaction for 30s; %s", round, stats.summary())
			}
			time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
		}
		if freeze {
			freezes++
			logf("round %d: SIGSTOP broker %d (%s) past its ZooKeeper session; %s", round, victim, why, stats.summary())
			if err := b.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
		} else {
			kills++
			logf("round %d: kill -9 broker %d (%s); %s", round, victim, why, stats.summary())
			b.Kill9()
		}
		victims = append(victims, fmt.Sprintf("%d:%s", victim, why))
		waitState(t, 60*time.Second, fmt.Sprintf("leadership to move off broker %d", victim), func() (string, bool) {
			md, err := allMetadata(ctx, slices.DeleteFunc(slices.Clone(seeds), func(s string) bool { return s == b.Addr() }))
			if err != nil {
				return err.Error(), false
			}
			for name := range topics {
				for _, p := range md.Topics[name].Partitions {
					if p.Leader == victim || p.Leader <= 0 {
						return fmt.Sprintf("%s-%d led by %d", name, p.Partition, p.Leader), false
					}
				}
			}
			return "", true
		})
		if freeze {
			time.Sleep(time.Duration(sessionMs+rng.IntN(2000)) * time.Millisecond)
			if err := b.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
		} else {
			time.Sleep(time.Duration(rng.IntN(1500)) * time.Millisecond)
			b.Restart()
		}
		waitISR(fmt.Sprintf("after round %d", round))
		progress(100, fmt.Sprintf("the workers to commit after round %d", round))
	}
	close(faultsDone)
	prodWG.Wait()
	fctx, fcancel := context.WithTimeout(ctx, 60*time.Second)
	if err := prod.Flush(fctx); err != nil {
		t.Fatalf("flush the input: %v", err)
	}
	fcancel()
	led.mu.Lock()
	for i, f := range led.failed {
		if i == 5 {
			break
		}
		t.Errorf("input record failed: %s", f)
	}
	if led.count != produced {
		t.Errorf("%d input records acknowledged of %d", led.count, produced)
	}
	nIn := produced
	led.mu.Unlock()
	_, inEnd := offsets(t, seeds[0], in)
	logf("faults over (%d kills, %d freezes); %d input records written; %s", kills, freezes, produced, stats.summary())
	waitState(t, 120*time.Second, fmt.Sprintf("the group to commit the input's end offsets %v", inEnd), func() (string, bool) {
		gctx, gcancel := context.WithTimeout(ctx, 5*time.Second)
		defer gcancel()
		r, err := adm.FetchOffsets(gctx, group)
		if err == nil {
			err = r.Error()
		}
		if err != nil {
			return err.Error(), false
		}
		got := map[int32]int64{}
		r.Each(func(o kadm.OffsetResponse) {
			if o.Topic == in {
				got[o.Partition] = o.At
			}
		})
		for p, e := range inEnd {
			if got[p] != e {
				return fmt.Sprintf("committed %v; %s", got, stats.summary()), false
			}
		}
		return "", true
	})
	for _, w := range workers {
		w.stop()
	}
	// No transaction stays open: the last stable offsets reach the ends.
	var outEnd map[int32]int64
	waitState(t, 60*time.Second, "no open transaction on the output (LSO = high watermark)", func() (string, bool) {
		lctx, lcancel := context.WithTimeout(ctx, 5*time.Second)
		defer lcancel()
		hw, err := adm.ListEndOffsets(lctx, out)
		if err == nil {
			err = hw.Error()
		}
		if err != nil {
			return err.Error(), false
		}
		lso, err := adm.ListCommittedOffsets(lctx, out)
		if err == nil {
			err = lso.Error()
		}
		if err != nil {
			return err.Error(), false
		}
		outEnd = map[int32]int64{}
		var sb strings.Builder
		ok := true
		hw.Each(func(o kadm.ListedOffset) {
			outEnd[o.Partition] = o.Offset
			if l, _ := lso.Lookup(out, o.Partition); l.Offset != o.Offset {
				ok = false
				fmt.Fprintf(&sb, "p%d LSO %d HW %d; ", o.Partition, l.Offset, o.Offset)
			}
		})
		return sb.String(), ok
	})

	// What the log says, read raw: every record and control record.
	raw := readRaw(t, ctx, seeds, out, outEnd)
	committed, aborted, open := resolveTxns(raw)
	for _, r := range open {
		t.Errorf("record %s (partition %d offset %d, producer %d) is in a transaction with no marker after the last stable offset reached the end", r.Key, r.Partition, r.Offset, r.ProducerID)
		break
	}
	nonTxn := 0
	for _, r := range raw {
		if !r.Attrs.IsControl() && !r.Attrs.IsTransactional() {
			nonTxn++
		}
	}
	if nonTxn > 0 {
		t.Errorf("%d records of the output were written outside a transaction", nonTxn)
	}

	// The independent read_committed consumer.
	rc := readCommitted(t, ctx, seeds, out, len(committed))
	want := map[[2]int64]bool{}
	for _, r := range committed {
		want[[2]int64{int64(r.Partition), r.Offset}] = true
	}
	errs := 0
	errorf := func(format string, args ...any) {
		t.Helper()
		errs++
		if errs <= 20 {
			t.Errorf(format, args...)
		}
	}
	ids := map[string]string{}
	for _, r := range rc {
		where := fmt.Sprintf("partition %d offset %d", r.Partition, r.Offset)
		if !want[[2]int64{int64(r.Partition), r.Offset}] {
			errorf("read_committed returned %s (%s), which the markers say is not committed", r.Key, where)
		}
		delete(want, [2]int64{int64(r.Partition), r.Offset})
		id := string(r.Key)
		if string(r.Value) != "processed:"+id {
			errorf("%s: value %q for key %q, want %q", where, r.Value, id, "processed:"+id)
		}
		if prev, dup := ids[id]; dup {
			errorf("input %s is in the committed output twice: %s and %s", id, prev, where)
		}
		ids[id] = where
	}
	for pk := range want {
		errorf("read_committed skipped partition %d offset %d, which a COMMIT marker covers", pk[0], pk[1])
	}
	for i := range nIn {
		if _, ok := ids[fmt.Sprintf("id-%d", i)]; !ok {
			errorf("input id-%d is missing from the committed output", i)
		}
	}
	if len(ids) != nIn {
		errorf("the committed output holds %d distinct ids, the input %d", len(ids), nIn)
	}
	if errs > 20 {
		t.Errorf("... %d problems in all", errs)
	}
	logf("%d input records; output: %d committed, %d aborted (read_uncommitted); %d kill -9, %d SIGSTOP (victims %v); %s",
		nIn, len(committed), len(aborted), kills, freezes, victims, stats.summary())
	if stats.commits() == 0 || len(committed) == 0 {
		t.Errorf("no transaction committed")
	}
}

// allMetadata asks for every topic's metadata with a fresh client.
func allMetadata(ctx context.Context, seeds []string) (kadm.Metadata, error) {
	c, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return kadm.Metadata{}, err
	}
	defer c.Close()
	mctx, mcancel := context.WithTimeout(ctx, 3*time.Second)
	defer mcancel()
	return kadm.NewClient(c).Metadata(mctx)
}

// txnStateTopic is Kafka's internal topic of transaction states.
const txnStateTopic = "__transaction_state"

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// txnStats counts what the workers' transactions did.
type txnStats struct {
	mu           sync.Mutex
	ncommits     int
	records      int // records in committed transactions
	aborts       int
	endErrors    map[string]int
	recreated    int
	produceFails int
}

func (s *txnStats) committedRecords() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.records
}

func (s *txnStats) commits() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ncommits
}

func (s *txnStats) summary() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []string
	for e, n := range s.endErrors {
		errs = append(errs, fmt.Sprintf("%s ×%d", e, n))
	}
	sort.Strings(errs)
	return fmt.Sprintf("workers: %d commits (%d records), %d aborts, %d failed produces, %d new sessions, End errors [%s]",
		s.ncommits, s.records, s.aborts, s.produceFails, s.recreated, strings.Join(errs, "; "))
}

// txnWorker is a consume-transform-produce loop on a GroupTransactSession.
type txnWorker struct {
	cancel context.CancelFunc
	done   chan struct{}
	// armed: the next End is announced on ending before it starts.
	armed  atomic.Bool
	ending chan struct{}
	// sess is the current session, closed by stop if the loop does not
	// end (Begin waits for a producer id without a context).
	sess atomic.Pointer[kgo.GroupTransactSession]
}

// startTxnWorker runs the loop an application runs: poll, begin, produce
// each record transformed, End (commit; abort when a produce failed). A
// session whose transactional state is broken for good (fenced, a
// failing Begin, End failing again and again, or no commit for long
// while input waits) is closed and a new one made with the same
// transactional id, which fences the old one.
func startTxnWorker(t *testing.T, seeds []string, name, txnID, group, in, out string, stats *txnStats, logf func(string, ...any)) *txnWorker {
	t.Helper()
	newSession := func() *kgo.GroupTransactSession {
		s, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(seeds...), kgo.ClientID(name),
			kgo.TransactionalID(txnID), kgo.TransactionTimeout(10*time.Second),
			kgo.ConsumerGroup(group), kgo.ConsumeTopics(in),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
			kgo.DefaultProduceTopic(out), kgo.ProducerLinger(0),
			kgo.SessionTimeout(6*time.Second), kgo.HeartbeatInterval(300*time.Millisecond),
			kgo.RebalanceTimeout(10*time.Second), kgo.FetchMaxWait(500*time.Millisecond),
			// A produce just after End meets the ending transaction (the
			// partition leader's check answers NOT_ENOUGH_REPLICAS, as
			// Kafka's does); kgo retries after a metadata refresh, which
			// it spaces by this (5s by default).
			kgo.MetadataMinAge(250*time.Millisecond),
			kgo.RetryBackoffFn(func(int) time.Duration { return 100 * time.Millisecond }),
			kgoLogger(t, name))
		if err != nil {
			t.Errorf("worker %s: new session: %v", name, err)
			return nil
		}
		return s
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &txnWorker{cancel: cancel, done: make(chan struct{}), ending: make(chan struct{}, 1)}
	sess := newSession()
	w.sess.Store(sess)
	if sess == nil {
		close(w.done)
		return w
	}
	go func() {
		defer close(w.done)
		defer func() { closeSession(sess) }()
		failures := 0
		lastCommit := time.Now()
		renew := func(why string) {
			logf("worker %s: new session (%s)", name, why)
			closeSession(sess)
			stats.mu.Lock()
			stats.recreated++
			stats.mu.Unlock()
			for sess = newSession(); sess == nil && ctx.Err() == nil; sess = newSession() {
				time.Sleep(time.Second)
			}
			w.sess.Store(sess)
			failures, lastCommit = 0, time.Now()
		}
		for ctx.Err() == nil {
			pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
			fs := sess.PollRecords(pctx, 300)
			pcancel()
			recs := fs.Records()
			if len(recs) == 0 {
				if failures > 0 && time.Since(lastCommit) > 30*time.Second {
					renew("no commit for 30s")
				}
				continue
			}
			if err := sess.Begin(); err != nil {
				renew("begin: " + err.Error())
				continue
			}
			var mu sync.Mutex
			var produceErr error
			for _, r := range recs {
				sess.Produce(ctx, &kgo.Record{Key: r.Key, Value: append([]byte("processed:"), r.Value...)}, func(_ *kgo.Record, err error) {
					if err != nil {
						mu.Lock()
						if produceErr == nil {
							produceErr = err
						}
						mu.Unlock()
					}
				})
			}
			ectx, ecancel := context.WithTimeout(ctx, 30*time.Second)
			flushErr := sess.Client().Flush(ectx)
			mu.Lock()
			try := kgo.TransactionEndTry(produceErr == nil && flushErr == nil)
			perr := produceErr
			mu.Unlock()
			if w.armed.CompareAndSwap(true, false) {
				w.ending <- struct{}{}
			}
			committed, err := sess.End(ectx, try)
			ecancel()
			stats.mu.Lock()
			if perr != nil {
				stats.produceFails++
			}
			switch {
			case committed:
				stats.ncommits++
				stats.records += len(recs)
			default:
				stats.aborts++
			}
			if err != nil {
				if stats.endErrors == nil {
					stats.endErrors = map[string]int{}
				}
				stats.endErrors[endErrName(err)]++
			}
			stats.mu.Unlock()
			if ctx.Err() != nil {
				return
			}
			switch {
			case committed:
				failures, lastCommit = 0, time.Now()
			case err != nil && fatalTxnErr(err):
				renew("end: " + err.Error())
			case err != nil:
				failures++
				if failures >= 5 {
					renew(fmt.Sprintf("%d failed ends in a row, last: %v", failures, err))
				}
			}
		}
	}()
	return w
}

func (w *txnWorker) stop() {
	w.cancel()
	select {
	case <-w.done:
	case <-time.After(20 * time.Second):
		closeSession(w.sess.Load())
		<-w.done
	}
}

// closeSession closes a session, giving up waiting after 15s (a client
// closing while brokers die may wait on requests that never finish).
func closeSession(s *kgo.GroupTransactSession) {
	if s == nil {
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Close()
	}()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
	}
}

// fatalTxnErr: errors after which a transactional producer cannot go on.
func fatalTxnErr(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.InvalidTxnState) || errors.Is(err, kerr.TransactionalIDAuthorizationFailed) ||
		errors.Is(err, kerr.UnknownProducerID) || errors.Is(err, kerr.InvalidProducerIDMapping)
}

func endErrName(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "timeout"
	}
	s := err.Error()
	if len(s) > 60 {
		s = s[:60]
	}
	return s
}

// readRaw reads every record of topic up to end, read_uncommitted,
// control records included.
func readRaw(t *testing.T, ctx context.Context, seeds []string, topic string, end map[int32]int64) []*kgo.Record {
	t.Helper()
	parts := map[int32]kgo.Offset{}
	for p := range end {
		parts[p] = kgo.NewOffset().AtStart()
	}
	cl := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()), kgo.KeepControlRecords(), kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	next := map[int32]int64{}
	var recs []*kgo.Record
	for {
		done := true
		for p, e := range end {
			done = done && next[p] >= e
		}
		if done {
			break
		}
		fs := cl.PollFetches(cctx)
		if cctx.Err() != nil {
			t.Fatalf("read %s: timed out at %v of %v", topic, next, end)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < end[r.Partition] {
				if r.Offset != next[r.Partition] && !r.Attrs.IsControl() {
					// Offsets run without gaps, but kgo may hide a
					// control record; only data records are checked.
					t.Logf("read %s: partition %d offset %d after %d", topic, r.Partition, r.Offset, next[r.Partition]-1)
				}
				recs = append(recs, r)
				next[r.Partition] = r.Offset + 1
			}
		})
	}
	return recs
}

// resolveTxns works out from the markers which transactional records are
// committed and which aborted: a producer's records belong to the
// transaction its next marker in the partition ends.
func resolveTxns(recs []*kgo.Record) (committed, aborted, open []*kgo.Record) {
	sort.SliceStable(recs, func(i, j int) bool {
		if recs[i].Partition != recs[j].Partition {
			return recs[i].Partition < recs[j].Partition
		}
		return recs[i].Offset < recs[j].Offset
	})
	type pk struct {
		p   int32
		pid int64
	}
	pending := map[pk][]*kgo.Record{}
	for _, r := range recs {
		k := pk{r.Partition, r.ProducerID}
		switch {
		case r.Attrs.IsControl():
			// The control record's key: version int16, type int16
			// (0 abort, 1 commit).
			if len(r.Key) >= 4 && binary.BigEndian.Uint16(r.Key[2:4]) == 1 {
				committed = append(committed, pending[k]...)
			} else {
				aborted = append(aborted, pending[k]...)
			}
			delete(pending, k)
		case r.Attrs.IsTransactional():
			pending[k] = append(pending[k], r)
		}
	}
	for _, rs := range pending {
		open = append(open, rs...)
	}
	return committed, aborted, open
}

// readCommitted reads topic from the start with read_committed until it
// has n records and nothing more comes for a second.
func readCommitted(t *testing.T, ctx context.Context, seeds []string, topic string, n int) []*kgo.Record {
	t.Helper()
	cl := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var recs []*kgo.Record
	quiet := time.Time{}
	for {
		if len(recs) >= n {
			if quiet.IsZero() {
				quiet = time.Now()
			} else if time.Since(quiet) > time.Second {
				return recs
			}
		}
		pctx, pcancel := context.WithTimeout(cctx, 500*time.Millisecond)
		fs := cl.PollFetches(pctx)
		pcancel()
		if cctx.Err() != nil {
			t.Errorf("read_committed %s: %d records after 60s, want %d", topic, len(recs), n)
			return recs
		}
		fs.EachRecord(func(r *kgo.Record) { recs = append(recs, r) })
	}
}

// kgoLogger: with STRATA_CHAOS_LOGS set, a worker's client logs at debug
// level to <worker>.kgo.log in that directory (appended to across its
// sessions); otherwise it does not log.
func kgoLogger(t *testing.T, name string) kgo.Opt {
	dir := os.Getenv("STRATA_CHAOS_LOGS")
	if dir == "" {
		return kgo.WithLogger(nil)
	}
	f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("%s-%s.kgo.log", t.Name(), name)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Errorf("kgo log: %v", err)
		return kgo.WithLogger(nil)
	}
	t.Cleanup(func() { f.Close() })
	return kgo.WithLogger(kgo.BasicLogger(f, kgo.LogLevelDebug, nil))
}
