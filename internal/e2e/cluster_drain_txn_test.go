package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"strata/broker/txn"
	"strata/internal/testenv"
	"strata/tier"
)

// syncBuffer is a bytes.Buffer a command writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// txnValue is a record value of the transactions scale test: its kind
// before the slash, padded so that segments roll.
func txnValue(kind string, i int) []byte {
	v := fmt.Appendf(nil, "%s-%03d/", kind, i)
	return append(v, bytes.Repeat([]byte{'x'}, 1000-len(v))...)
}

// readTxnTopic reads both partitions of topic from the start with the
// isolation level given until want records came back, and a second
// more brings nothing: the count of each kind.
func readTxnTopic(t *testing.T, ctx context.Context, seeds []string, topic string, level kgo.IsolationLevel, want int) map[string]int {
	t.Helper()
	cl := newClient(t, seeds[0], kgo.SeedBrokers(seeds...), kgo.FetchIsolationLevel(level),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(200*time.Millisecond))
	defer cl.Close()
	got := map[string]int{}
	n := 0
	quiet := time.Time{}
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		for _, e := range fs.Errors() {
			if !errors.Is(e.Err, context.DeadlineExceeded) {
				t.Logf("fetch %s-%d: %v (retried)", e.Topic, e.Partition, e.Err)
			}
		}
		fs.EachRecord(func(r *kgo.Record) {
			kind, _, _ := strings.Cut(string(r.Value), "-")
			got[kind]++
			n++
		})
		switch {
		case ctx.Err() != nil:
			t.Fatalf("read %s: %d records (%v), want %d: %v", topic, n, got, want, ctx.Err())
		case n < want:
			quiet = time.Time{}
		case fs.NumRecords() > 0 || quiet.IsZero():
			quiet = time.Now()
		case time.Since(quiet) > time.Second:
			return got
		}
	}
}

// TestClusterDrainTransactionsFromZero scales a tiered cluster with
// transactions to zero and back: a committed, an aborted and a committed
// transaction are in the log, and two are open when strata admin cluster
// drain starts. The drain waits for them and says so: one is committed
// by its producer while writes are refused (its markers are written all
// the same), the other is aborted by its coordinator at its
// transaction.timeout.ms. Every disk is then wiped (ZooKeeper kept) and
// the brokers start again: the partitions' logs come back from the
// bucket, the __transaction_state partitions load the bucket's
// transaction state, no transaction is left open, read_committed reads
// exactly the committed records from the bucket (read_uncommitted all of
// them), a producer with the same transactional.id gets the same
// producer id at a higher epoch and commits, and the old producer is
// fenced.
func TestClusterDrainTransactionsFromZero(t *testing.T) { drainTransactionsFromZero(t, false) }

// TestClusterRestoreTransactionsFromBucket is the same with ZooKeeper
// lost too: new brokers on a fresh ZooKeeper run a while (a person's
// pause: each says the bucket is another cluster's), then strata admin
// restore brings the cluster back; __transaction_state is created anew
// when the producer comes back and loads the bucket's state.
func TestClusterRestoreTransactionsFromBucket(t *testing.T) { drainTransactionsFromZero(t, true) }

func drainTransactionsFromZero(t *testing.T, loseZooKeeper bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c := startScaleCluster(t, "txn", "transaction.abort.timed.out.transaction.cleanup.interval.ms=500")
	const topic = "txn-zero"
	str := func(s string) *string { return &s }
	adm := c.admin()
	if r, err := adm.CreateTopic(ctx, 2, 2, map[string]*string{
		"remote.storage.enable": str("true"), "segment.bytes": str("16384"),
		"local.retention.bytes": str("65536"), "retention.ms": str("604800000"),
	}, topic); err != nil || r.Err != nil {
		t.Fatalf("create topic: %v %v", err, r.Err)
	}
	txnProducer := func(id string, timeout time.Duration) *kgo.Client {
		return newClient(t, c.seeds[0], kgo.SeedBrokers(c.seeds...), kgo.DefaultProduceTopic(topic),
			kgo.TransactionalID(id), kgo.TransactionTimeout(timeout), kgo.ProducerBatchCompression(kgo.NoCompression()),
			kgo.RecordDeliveryTimeout(20*time.Second), kgo.MetadataMinAge(100*time.Millisecond))
	}
	produce := func(cl *kgo.Client, kind string, n int) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatalf("begin %s: %v", kind, err)
		}
		var recs []*kgo.Record
		for i := range n {
			recs = append(recs, &kgo.Record{Key: fmt.Appendf(nil, "%d", i), Value: txnValue(kind, i)})
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", kind, err)
		}
	}
	end := func(cl *kgo.Client, kind string, commit kgo.TransactionEndTry) {
		t.Helper()
		if err := cl.EndTransaction(ctx, commit); err != nil {
			t.Fatalf("end %s: %v", kind, err)
		}
	}
	a := txnProducer("zero-txn", time.Minute)
	produce(a, "c1", 60)
	end(a, "c1", kgo.TryCommit)
	produce(a, "a2", 60)
	end(a, "a2", kgo.TryAbort)
	produce(a, "c3", 60)
	end(a, "c3", kgo.TryCommit)
	produce(a, "o4", 30) // open at the drain; committed during it
	b := txnProducer("zero-timeout", 10*time.Second)
	produce(b, "t5", 20) // open at the drain; aborted at its timeout

	// The drain, watched as it runs.
	bin := testenv.BuildStrata(t)
	var stdout, stderr syncBuffer
	cmd := exec.CommandContext(ctx, bin, "admin", "--bootstrap", strings.Join(c.seeds, ","), "cluster", "drain", "--timeout", "2m")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	drained := make(chan error, 1)
	go func() { drained <- cmd.Wait() }()
	waitFor(t, 30*time.Second, "the drain to wait for the two open transactions", func() bool {
		return strings.Contains(stderr.String(), "waiting for 2 open transactions")
	})
	// Writes are refused; the producer's commit still goes through.
	end(a, "o4", kgo.TryCommit)
	select {
	case err := <-drained:
		if err != nil {
			t.Fatalf("cluster drain: %v\n%s%s", err, stdout.String(), stderr.String())
		}
	case <-ctx.Done():
		t.Fatalf("cluster drain did not end\n%s%s", stdout.String(), stderr.String())
	}
	out := stdout.String()
	t.Logf("cluster drain:\n%s%s", stderr.String(), out)
	for _, want := range []string{"transactions: waited", "for 2 open transactions to end (zero-timeout, zero-txn)",
		"transaction state: the state of 2 transactional ids is in the bucket's snapshot", "the brokers may stop"} {
		if !strings.Contains(out, want) {
			t.Fatalf("cluster drain output lacks %q:\n%s", want, out)
		}
	}
	before, err := adm.DescribeTransactions(ctx, "zero-txn", "zero-timeout")
	if err != nil || before["zero-txn"].Err != nil || before["zero-timeout"].Err != nil {
		t.Fatalf("describe transactions: %v %+v", err, before)
	}
	if s := before["zero-txn"].State; s != "CompleteCommit" {
		t.Fatalf("zero-txn after the drain: %s, want CompleteCommit", s)
	}
	if s := before["zero-timeout"].State; s != "CompleteAbort" {
		t.Fatalf("zero-timeout after the drain: %s, want CompleteAbort (aborted at its timeout)", s)
	}
	var snap tier.TxnStateSnapshot
	c.getJSON(fmt.Sprintf("%stxn-state/%d.json", tier.SnapshotPrefix, txn.PartitionFor("zero-txn", 50)), &snap)
	found := false
	for _, tx := range snap.Transactions {
		if tx.TransactionalID == "zero-txn" {
			found = true
			if tx.ProducerID != before["zero-txn"].ProducerID || tx.ProducerEpoch != before["zero-txn"].ProducerEpoch || tx.State != "CompleteCommit" {
				t.Fatalf("the bucket's state of zero-txn: %+v, the coordinator's %+v", tx, before["zero-txn"])
			}
		}
	}
	if !found {
		t.Fatalf("the bucket's transaction state of partition %d lacks zero-txn: %+v", snap.Partition, snap)
	}

	// Scale to zero and back on empty disks, after a person's pause.
	c.stopAndWipe()
	time.Sleep(2 * time.Second)
	if loseZooKeeper {
		c.start("txn-after")
		waitFor(t, 30*time.Second, "every broker to warn of the other cluster's snapshot", func() bool {
			for _, br := range c.bs {
				if !strings.Contains(br.Logs(), "the bucket holds the metadata snapshot of another cluster") {
					return false
				}
			}
			return true
		})
		res := testenv.RunStrata(t, 3*time.Minute, append([]string{"admin", "--bootstrap", strings.Join(c.seeds, ","), "restore", "--zookeeper", c.zk.Addr() + "/txn-after"}, c.tier...)...)
		if res.ExitCode != 0 {
			t.Fatalf("restore: exit %d\n%s%s", res.ExitCode, res.Stdout, res.Stderr)
		}
		t.Logf("restore: %s", strings.TrimSpace(res.Stdout))
		if !strings.Contains(res.Stdout, "transaction state: the bucket holds the state of 2 transactional ids") {
			t.Fatalf("restore says nothing of the transaction state:\n%s", res.Stdout)
		}
	} else {
		for _, br := range c.bs {
			br.Restart()
		}
	}
	want := map[string]int{"c1": 60, "c3": 60, "o4": 30}
	got := readTxnTopic(t, ctx, c.seeds, topic, kgo.ReadCommitted(), 150)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read_committed after the restore: %v, want %v", got, want)
	}
	all := readTxnTopic(t, ctx, c.seeds, topic, kgo.ReadUncommitted(), 230)
	if fmt.Sprint(all) != fmt.Sprint(map[string]int{"a2": 60, "c1": 60, "c3": 60, "o4": 30, "t5": 20}) {
		t.Fatalf("read_uncommitted after the restore: %v", all)
	}
	adm = c.admin()
	if !loseZooKeeper {
		// A fresh ZooKeeper has no __transaction_state until a producer
		// comes back (below).
		c.waitLog(30*time.Second, "loaded transaction state into an empty __transaction_state partition from the bucket's snapshot")
	}
	open, err := adm.ListTransactions(ctx, nil, []string{"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})
	if err != nil || len(open) > 0 {
		t.Fatalf("open transactions after the restore: %v %v", open, err)
	}
	for _, br := range c.bs {
		if strings.Contains(br.Logs(), "with transactions open at its log start") {
			t.Fatalf("a partition was restored with an open transaction")
		}
	}

	// The same transactional.id carries on: its producer id, a higher
	// epoch; the producer from before the drain is fenced.
	n := txnProducer("zero-txn", time.Minute)
	produce(n, "n6", 10)
	end(n, "n6", kgo.TryCommit)
	c.waitLog(30*time.Second, "loaded transaction state into an empty __transaction_state partition from the bucket's snapshot")
	after, err := adm.DescribeTransactions(ctx, "zero-txn")
	if err != nil || after["zero-txn"].Err != nil {
		t.Fatalf("describe transactions: %v %+v", err, after)
	}
	if d, was := after["zero-txn"], before["zero-txn"]; d.ProducerID != was.ProducerID || d.ProducerEpoch <= was.ProducerEpoch {
		t.Fatalf("zero-txn after the restore: producer id %d epoch %d; before the drain %d epoch %d", d.ProducerID, d.ProducerEpoch, was.ProducerID, was.ProducerEpoch)
	}
	if !loseZooKeeper { // the old producer knows the brokers' addresses
		zctx, zcancel := context.WithTimeout(ctx, 30*time.Second)
		zerr := a.BeginTransaction()
		if zerr == nil {
			zerr = a.ProduceSync(zctx, &kgo.Record{Value: txnValue("z7", 0)}).FirstErr()
		}
		if zerr == nil {
			zerr = a.EndTransaction(zctx, kgo.TryCommit)
		}
		zcancel()
		if !errors.Is(zerr, kerr.InvalidProducerEpoch) && !errors.Is(zerr, kerr.ProducerFenced) {
			t.Fatalf("the producer from before the drain, after the same transactional.id was initialized again: %v, want it fenced", zerr)
		}
		t.Logf("the old producer: %v", zerr)
	}
	got = readTxnTopic(t, ctx, c.seeds, topic, kgo.ReadCommitted(), 160)
	want["n6"] = 10
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("read_committed after the new producer's commit: %v, want %v", got, want)
	}
}
