package e2e

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"strata/internal/testenv"
)

// ackedRecord is a record the broker acknowledged, as produced.
type ackedRecord struct {
	key, value []byte
	headers    []kgo.RecordHeader
}

// ledger records what the producers of the crash test got acknowledged.
type ledger struct {
	mu       sync.Mutex
	acked    map[int32]map[int64]ackedRecord // partition → offset → record
	maxAcked map[int32]int64
	count    int
	produced int
	failed   []string
	clashes  []string // two records acknowledged at one offset
}

func newLedger() *ledger {
	return &ledger{acked: map[int32]map[int64]ackedRecord{}, maxAcked: map[int32]int64{}}
}

func (l *ledger) ack(r *kgo.Record, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.failed = append(l.failed, fmt.Sprintf("%s: %v", r.Key, err))
		return
	}
	m := l.acked[r.Partition]
	if m == nil {
		m = map[int64]ackedRecord{}
		l.acked[r.Partition] = m
	}
	if prev, ok := m[r.Offset]; ok {
		l.clashes = append(l.clashes, fmt.Sprintf("partition %d offset %d acknowledged for %s and %s", r.Partition, r.Offset, prev.key, r.Key))
	}
	m[r.Offset] = ackedRecord{key: r.Key, value: r.Value, headers: r.Headers}
	if mo, ok := l.maxAcked[r.Partition]; !ok || r.Offset > mo {
		l.maxAcked[r.Partition] = r.Offset
	}
	l.count++
}

func (l *ledger) acks() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.count
}

func (l *ledger) snapshotMax() map[int32]int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := map[int32]int64{}
	for p, o := range l.maxAcked {
		m[p] = o
	}
	return m
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCrashUnderLoad kill -9s a broker twice while idempotent producers
// with acks=-1 write to a 3-partition topic with small segments, restarts
// it on the same data directory and port each time, and then checks with a
// fresh consumer that every acknowledged record is at its acknowledged
// offset with the same key, value and headers, that offsets have no gaps,
// that no record was written twice, and that each producer's records are
// in the order it sent them.
func TestCrashUnderLoad(t *testing.T) {
	b := testenv.StartBroker(t, testenv.BrokerOptions{Sets: []string{"log.segment.bytes=262144"}})
	const topic, partitions, producers = "crash", 3, 3
	createTopic(t, b.Addr(), topic, partitions, nil)

	led := newLedger()
	stop := make(chan struct{})
	// prodCtx is cancelled only when the test ends early, to unblock a
	// Produce waiting for buffer space while the broker is down.
	prodCtx, cancelProd := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var clients []*kgo.Client
	for prod := range producers {
		cl := newClient(t, b.Addr(),
			kgo.RequiredAcks(kgo.AllISRAcks()), // idempotent by default
			kgo.MaxBufferedRecords(1000),
			kgo.ProducerLinger(time.Millisecond),
		)
		clients = append(clients, cl)
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(prod), 99))
			for seq := 0; ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				r := &kgo.Record{
					Topic: topic,
					Key:   fmt.Appendf(nil, "p%d-%d", prod, seq),
					Value: append(fmt.Appendf(nil, "p%d-s%d|", prod, seq), randBytes(rng, 100+rng.IntN(200))...),
					Headers: []kgo.RecordHeader{
						{Key: "producer", Value: []byte(strconv.Itoa(prod))},
						{Key: "seq", Value: []byte(strconv.Itoa(seq))},
					},
				}
				led.mu.Lock()
				led.produced++
				led.mu.Unlock()
				cl.Produce(prodCtx, r, led.ack)
			}
		}()
	}
	stopProducers := func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	}
	defer func() {
		cancelProd()
		stopProducers()
	}()

	// crash kills the broker once n more records have been acknowledged,
	// restarts it, and checks that nothing acknowledged before the kill
	// is beyond the recovered log end.
	crash := func(round, n int) {
		t.Helper()
		target := led.acks() + n
		waitFor(t, 60*time.Second, fmt.Sprintf("%d acknowledged records before crash %d", target, round), func() bool { return led.acks() >= target })
		b.Kill9()
		before := led.snapshotMax()
		t.Logf("crash %d: killed the broker after %d acks; highest acked offsets %v", round, led.acks(), before)
		b.Restart()
		_, end := offsets(t, b.Addr(), topic)
		for p, o := range before {
			if end[p] < o+1 {
				t.Errorf("crash %d: partition %d recovered to end offset %d, but offset %d was acknowledged", round, p, end[p], o)
			}
		}
	}
	crash(1, 3000)
	crash(2, 3000)
	target := led.acks() + 2000
	waitFor(t, 60*time.Second, "producers to continue after the last restart", func() bool { return led.acks() >= target })
	stopProducers()
	for i, cl := range clients {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		if err := cl.Flush(ctx); err != nil {
			t.Errorf("producer %d: flush: %v", i, err)
		}
		cancel()
	}

	led.mu.Lock()
	defer led.mu.Unlock()
	t.Logf("produced %d records, %d acknowledged, %d failed", led.produced, led.count, len(led.failed))
	for i, f := range led.failed {
		if i == 5 {
			t.Errorf("... %d failed records in all", len(led.failed))
			break
		}
		t.Errorf("record failed (the producers retry without limit, so a correct broker fails none): %s", f)
	}
	for i, c := range led.clashes {
		if i == 10 {
			t.Errorf("... %d offsets acknowledged twice in all", len(led.clashes))
			break
		}
		t.Errorf("offset acknowledged twice: %s", c)
	}

	start, end := offsets(t, b.Addr(), topic)
	for p := range int32(partitions) {
		if start[p] != 0 {
			t.Errorf("partition %d: log start offset %d, want 0 (nothing was deleted)", p, start[p])
		}
		if mo, ok := led.maxAcked[p]; ok && end[p] < mo+1 {
			t.Errorf("partition %d: end offset %d, but offset %d was acknowledged", p, end[p], mo)
		}
	}
	recs := consumeAll(t, b.Addr(), topic, end)
	verifyCrashLog(t, led, recs, start, end)

	segs := 0
	for p := range partitions {
		m, _ := filepath.Glob(filepath.Join(b.DataDir(), fmt.Sprintf("%s-%d", topic, p), "*.log"))
		segs = max(segs, len(m))
	}
	if segs < 2 {
		t.Errorf("no partition rolled a segment with log.segment.bytes=262144 (most segments in one partition: %d); the test meant to cover recovery across segments", segs)
	}
	b.Stop()
}

// verifyCrashLog checks the consumed log against the ledger.
func verifyCrashLog(t *testing.T, led *ledger, recs []*kgo.Record, start, end map[int32]int64) {
	type po struct {
		p int32
		o int64
	}
	errs := 0
	errorf := func(format string, args ...any) {
		t.Helper()
		errs++
		if errs <= 20 {
			t.Errorf(format, args...)
		}
	}
	next := map[int32]int64{}
	for p, s := range start {
		next[p] = s
	}
	got := map[po]*kgo.Record{}
	where := map[string]po{}      // value → position, to find duplicates
	lastSeq := map[[2]int32]int{} // (producer, partition) → last seq seen
	unacked := 0
	for _, r := range recs {
		if r.Offset != next[r.Partition] {
			errorf("partition %d: offset %d follows %d (gap or repeat)", r.Partition, r.Offset, next[r.Partition]-1)
		}
		next[r.Partition] = r.Offset + 1
		got[po{r.Partition, r.Offset}] = r

		head, _, _ := bytes.Cut(r.Value, []byte("|"))
		var prod, seq int
		if _, err := fmt.Sscanf(string(head), "p%d-s%d", &prod, &seq); err != nil || string(r.Key) != fmt.Sprintf("p%d-%d", prod, seq) {
			errorf("partition %d offset %d: record not written by this test (key %q value %q)", r.Partition, r.Offset, r.Key, trunc(r.Value))
			continue
		}
		if prev, dup := where[string(r.Value)]; dup {
			errorf("record %s stored twice: partition %d offsets %d and %d (idempotence broken)", r.Key, r.Partition, prev.o, r.Offset)
		}
		where[string(r.Value)] = po{r.Partition, r.Offset}
		k := [2]int32{int32(prod), r.Partition}
		if last, ok := lastSeq[k]; ok && seq <= last {
			errorf("partition %d offset %d: producer %d seq %d stored after its seq %d (reordered)", r.Partition, r.Offset, prod, seq, last)
		}
		lastSeq[k] = seq
		if _, ok := led.acked[r.Partition][r.Offset]; !ok {
			unacked++
		}
	}
	for p, e := range end {
		if next[p] != e {
			errorf("partition %d: read up to offset %d, end offset is %d", p, next[p], e)
		}
	}
	missing := 0
	for p, m := range led.acked {
		for o, a := range m {
			r := got[po{p, o}]
			if r == nil {
				missing++
				errorf("acknowledged record %s (partition %d offset %d) is missing", a.key, p, o)
				continue
			}
			w := &kgo.Record{Key: a.key, Value: a.value, Headers: a.headers, Timestamp: r.Timestamp}
			if d := recordDiff(w, r); d != "" {
				errorf("acknowledged record %s (partition %d offset %d): %s", a.key, p, o, d)
			}
		}
	}
	if errs > 20 {
		t.Errorf("... %d problems in all (%d acknowledged records missing)", errs, missing)
	}
	t.Logf("consumed %d records; %d of them written but not acknowledged (allowed, each once)", len(recs), unacked)
}
