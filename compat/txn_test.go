package compat

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The transactions check, the same for every client that has
// transactions (see featureDocs). On a two-partition topic T, with
// transactional.id T, a client:
//
//  1. commits a transaction of c-0..c-9 (record i to partition i%2);
//  2. aborts one of a-0..a-9, after they reached the broker;
//  3. consumes the txnInputs records of T-in in group T-g (read_committed)
//     and, in one transaction, writes t-<record> for each to T and commits
//     the group's offset (sendOffsetsToTransaction, TxnOffsetCommit);
//  4. begins a transaction of z-0 and z-1; a second producer with the same
//     transactional.id starts (fencing the first, whose open transaction
//     the coordinator aborts) and commits f-0 and f-1; the first's commit
//     must then fail as fenced;
//  5. reads T from the start with read_committed and must find exactly
//     the c-, t- and f- records, and none of the a- or z- ones.
//
// The harness makes T and T-in (with the input records) beforehand and,
// after a pass, checks with franz-go that the aborted records are in the
// log (read_uncommitted) and that T-g's committed offset is txnInputs.

// txnInputs is how many records the consume-transform-produce step reads.
const txnInputs = 10

// txnTopic is the topic of client's transactions check; its input topic
// is txnTopic+"-in" and its group txnTopic+"-g". "" for a client without
// transactions.
func txnTopic(client string) string {
	switch client {
	case "java":
		return "j-txn"
	case "franz-go":
		return "f-txn"
	case "sarama":
		return "s-txn"
	case "kafkajs":
		return "js-txn"
	case "confluent-kafka-python", "confluent-kafka-pypi":
		return client + "-txn"
	}
	return ""
}

// txnSeries are the values i of a step's records, "<prefix>-<i>".
func txnSeries(prefix string, n int) []string {
	vs := make([]string, n)
	for i := range vs {
		vs[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return vs
}

// txnInput are the records of the input topic.
func txnInput() []string { return txnSeries("in", txnInputs) }

// txnCommitted are the values a read_committed reader must find.
func txnCommitted() []string {
	vs := txnSeries("c", 10)
	for _, in := range txnInput() {
		vs = append(vs, "t-"+in)
	}
	return append(vs, txnSeries("f", 2)...)
}

// txnAborted are the values it must not find.
func txnAborted() []string { return append(txnSeries("a", 10), txnSeries("z", 2)...) }

// checkTxnValues compares what a read_committed reader found with
// txnCommitted.
func checkTxnValues(got []string) error {
	for _, v := range got {
		if slices.Contains(txnAborted(), v) {
			return fmt.Errorf("read_committed reader read %q, a record of an aborted transaction", v)
		}
	}
	want := txnCommitted()
	g, w := slices.Clone(got), slices.Clone(want)
	slices.Sort(g)
	slices.Sort(w)
	if !slices.Equal(g, w) {
		return fmt.Errorf("read_committed reader read %d records %q, want the %d committed %q", len(got), g, len(w), w)
	}
	return nil
}

// prepareTxn makes the topics of every client's transactions check and
// writes the input records.
func prepareTxn(t *testing.T, seeds []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, c := range clients {
		topic := txnTopic(c.Key)
		if _, na := c.NA["transactions"]; na || c.Tool || topic == "" {
			continue
		}
		if err := createTopic(ctx, seeds, topic, 2); err != nil {
			t.Fatal(err)
		}
		if err := createTopic(ctx, seeds, topic+"-in", 1); err != nil {
			t.Fatal(err)
		}
		if err := produceFranz(ctx, seeds, topic+"-in", 1, txnInput()); err != nil {
			t.Fatalf("write %s-in: %v", topic, err)
		}
	}
}

// verifyTxn checks, after client's check passed, what the client cannot
// see for itself: the aborted records are in the log (so that the
// read_committed reader had something to skip), and the group's offset
// is what the transaction committed.
func verifyTxn(t *testing.T, e *env) {
	t.Helper()
	for _, c := range clients {
		k := cell{c.Key, "transactions"}
		if o, ok := e.rec.m.Outcomes[k]; !ok || o.Status != Pass {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := verifyTxnLog(ctx, []string{e.addr}, txnTopic(c.Key))
		cancel()
		if err != nil {
			e.rec.record(c.Key, "transactions", Fail, "the client's check passed, but: "+err.Error())
			t.Logf("%s transactions: FAIL: %v", c.Key, err)
		}
	}
}

func verifyTxnLog(ctx context.Context, seeds []string, topic string) error {
	all := append(txnCommitted(), txnAborted()...)
	got, err := franzReadTxn(ctx, seeds, topic, len(all), kgo.ReadUncommitted())
	if err != nil {
		return fmt.Errorf("read_uncommitted read of %s: %w", topic, err)
	}
	for _, v := range txnAborted() {
		if !slices.Contains(got, v) {
			return fmt.Errorf("a read_uncommitted reader does not find the aborted record %q in %s: the aborted transaction never reached the broker", v, topic)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...))
	if err != nil {
		return err
	}
	defer cl.Close()
	os, err := kadm.NewClient(cl).FetchOffsets(kadm.RequireStable(ctx), topic+"-g")
	if err == nil {
		err = os.Error()
	}
	if err != nil {
		return fmt.Errorf("fetch the offsets of %s-g: %w", topic, err)
	}
	if o, ok := os.Lookup(topic+"-in", 0); !ok || o.At != txnInputs {
		return fmt.Errorf("group %s-g committed %+v on %s-in, want offset %d", topic, o, topic, txnInputs)
	}
	return nil
}

// franzReadTxn reads n records of topic's two partitions from the start.
func franzReadTxn(ctx context.Context, seeds []string, topic string, n int, iso kgo.IsolationLevel) ([]string, error) {
	start := map[int32]kgo.Offset{0: kgo.NewOffset().AtStart(), 1: kgo.NewOffset().AtStart()}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.FetchIsolationLevel(iso),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: start}), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var got []string
	for len(got) < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return got, fmt.Errorf("read %d of %d records %q: %w", len(got), n, got, ctx.Err())
		}
		if err := fs.Err0(); err != nil {
			return got, err
		}
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got, nil
}

// fenced says whether err is the refusal a fenced producer gets:
// PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH, its name for the requests'
// versions before it.
func fenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch)
}

// franzTxn is franz-go's transactions check, its consume-transform-produce
// step with a GroupTransactSession.
func franzTxn(ctx context.Context, seeds []string) error {
	topic := txnTopic("franz-go")
	producer := func() (*kgo.Client, error) {
		return kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.TransactionalID(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	records := func(vs []string) []*kgo.Record {
		var rs []*kgo.Record
		for i, v := range vs {
			rs = append(rs, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: []byte(v)})
		}
		return rs
	}
	begin := func(cl *kgo.Client, vs []string) error {
		if err := cl.BeginTransaction(); err != nil {
			return err
		}
		return cl.ProduceSync(ctx, records(vs)...).FirstErr()
	}
	p1, err := producer()
	if err != nil {
		return err
	}
	defer p1.Close()
	if err := begin(p1, txnSeries("c", 10)); err != nil {
		return fmt.Errorf("first transaction: %w", err)
	}
	if err := p1.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if err := begin(p1, txnSeries("a", 10)); err != nil {
		return fmt.Errorf("second transaction: %w", err)
	}
	if err := p1.EndTransaction(ctx, kgo.TryAbort); err != nil {
		return fmt.Errorf("abort: %w", err)
	}

	// Consume-transform-produce: a session of its own transactional.id
	// (it is a producer and a group member at once).
	sess, err := kgo.NewGroupTransactSession(kgo.SeedBrokers(seeds...), kgo.TransactionalID(topic+"-ctp"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ConsumerGroup(topic+"-g"), kgo.ConsumeTopics(topic+"-in"),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return err
	}
	defer sess.Close()
	if err := sess.Begin(); err != nil {
		return err
	}
	var in []string
	for len(in) < txnInputs {
		fs := sess.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("consume %s-in: read %d of %d: %w", topic, len(in), txnInputs, ctx.Err())
		}
		if err := fs.Err0(); err != nil {
			return fmt.Errorf("consume %s-in: %w", topic, err)
		}
		fs.EachRecord(func(r *kgo.Record) { in = append(in, "t-"+string(r.Value)) })
	}
	if err := sess.ProduceSync(ctx, records(in)...).FirstErr(); err != nil {
		return fmt.Errorf("consume-transform-produce: produce: %w", err)
	}
	if committed, err := sess.End(ctx, kgo.TryCommit); err != nil || !committed {
		return fmt.Errorf("consume-transform-produce: commit: committed %v, %v", committed, err)
	}

	// Zombie fencing: p2's InitProducerID (at its first record) fences p1.
	if err := begin(p1, txnSeries("z", 2)); err != nil {
		return fmt.Errorf("zombie's transaction: %w", err)
	}
	p2, err := producer()
	if err != nil {
		return err
	}
	defer p2.Close()
	if err := begin(p2, txnSeries("f", 2)); err != nil {
		return fmt.Errorf("second producer's transaction: %w", err)
	}
	if err := p1.EndTransaction(ctx, kgo.TryCommit); !fenced(err) {
		return fmt.Errorf("the fenced producer's commit: %v, want PRODUCER_FENCED", err)
	}
	if err := p2.EndTransaction(ctx, kgo.TryCommit); err != nil {
		return fmt.Errorf("second producer's commit: %w", err)
	}

	got, err := franzReadTxn(ctx, seeds, topic, len(txnCommitted()), kgo.ReadCommitted())
	if err != nil {
		return err
	}
	return checkTxnValues(got)
}

// saramaTxn is sarama's transactions check; its consume-transform-produce
// step is in a consumer group, with the group's generation and member id
// (AddOffsetsToTxnWithGroupMetadata).
func saramaTxn(ctx context.Context, seeds []string) error {
	topic := txnTopic("sarama")
	cfg := saramaConfig()
	cfg.Producer.Idempotent = true
	cfg.Net.MaxOpenRequests = 1
	cfg.Producer.Transaction.ID = topic
	cfg.Consumer.IsolationLevel = sarama.ReadCommitted
	cfg.Consumer.Offsets.AutoCommit.Enable = false
	messages := func(vs []string) []*sarama.ProducerMessage {
		var ms []*sarama.ProducerMessage
		for i, v := range vs {
			ms = append(ms, &sarama.ProducerMessage{Topic: topic, Partition: int32(i % 2), Value: sarama.StringEncoder(v)})
		}
		return ms
	}
	p1, err := sarama.NewSyncProducer(seeds, cfg) // InitProducerId
	if err != nil {
		return fmt.Errorf("transactional producer: %w", err)
	}
	defer p1.Close()
	txn := func(p sarama.SyncProducer, vs []string) error {
		if err := p.BeginTxn(); err != nil {
			return err
		}
		return p.SendMessages(messages(vs))
	}
	if err := txn(p1, txnSeries("c", 10)); err != nil {
		return fmt.Errorf("first transaction: %w", err)
	}
	if err := p1.CommitTxn(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	if err := txn(p1, txnSeries("a", 10)); err != nil {
		return fmt.Errorf("second transaction: %w", err)
	}
	if err := p1.AbortTxn(); err != nil {
		return fmt.Errorf("abort: %w", err)
	}

	// Consume-transform-produce in group T-g.
	g := topic + "-g"
	cg, err := sarama.NewConsumerGroup(seeds, g, cfg)
	if err != nil {
		return err
	}
	h := &saramaTxnGroup{p: p1, topic: topic, group: g, messages: messages, done: make(chan error, 1)}
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() {
		var err error
		for cctx.Err() == nil && err == nil {
			err = cg.Consume(cctx, []string{topic + "-in"}, h)
		}
		errc <- err
	}()
	var ctpErr error
	select {
	case ctpErr = <-h.done:
	case err := <-errc:
		ctpErr = fmt.Errorf("consume: %w", err)
	case <-ctx.Done():
		ctpErr = fmt.Errorf("consume-transform-produce: %w", ctx.Err())
	}
	cancel()
	cg.Close()
	if ctpErr != nil {
		return ctpErr
	}

	// Zombie fencing: p2's InitProducerId fences p1.
	if err := txn(p1, txnSeries("z", 2)); err != nil {
		return fmt.Errorf("zombie's transaction: %w", err)
	}
	p2, err := sarama.NewSyncProducer(seeds, cfg)
	if err != nil {
		return fmt.Errorf("second producer: %w", err)
	}
	defer p2.Close()
	if err := txn(p2, txnSeries("f", 2)); err != nil {
		return fmt.Errorf("second producer's transaction: %w", err)
	}
	if err := p1.CommitTxn(); !errors.Is(err, sarama.ErrProducerFenced) && !errors.Is(err, sarama.ErrInvalidProducerEpoch) {
		return fmt.Errorf("the fenced producer's commit: %v, want PRODUCER_FENCED", err)
	}
	if err := p2.CommitTxn(); err != nil {
		return fmt.Errorf("second producer's commit: %w", err)
	}

	got, err := saramaReadWith(ctx, seeds, cfg, topic, 2, len(txnCommitted()))
	if err != nil {
		return err
	}
	return checkTxnValues(got)
}

// saramaTxnGroup reads txnInputs records, then writes their transforms
// and commits the group's offsets in one transaction.
type saramaTxnGroup struct {
	p        sarama.SyncProducer
	topic    string
	group    string
	messages func([]string) []*sarama.ProducerMessage
	done     chan error
	once     sync.Once
	mu       sync.Mutex
	in       []string
}

func (h *saramaTxnGroup) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *saramaTxnGroup) Cleanup(sarama.ConsumerGroupSession) error { return nil }
func (h *saramaTxnGroup) ConsumeClaim(s sarama.ConsumerGroupSession, c sarama.ConsumerGroupClaim) error {
	for m := range c.Messages() {
		h.mu.Lock()
		h.in = append(h.in, "t-"+string(m.Value))
		full := len(h.in) == txnInputs
		out := slices.Clone(h.in)
		h.mu.Unlock()
		if !full {
			continue
		}
		err := func() error {
			if err := h.p.BeginTxn(); err != nil {
				return err
			}
			if err := h.p.SendMessages(h.messages(out)); err != nil {
				return err
			}
			offsets := map[string][]*sarama.PartitionOffsetMetadata{
				c.Topic(): {{Partition: c.Partition(), Offset: m.Offset + 1}},
			}
			gm := &sarama.ConsumerGroupMetadata{GroupID: h.group, GenerationID: s.GenerationID(), MemberID: s.MemberID()}
			if err := h.p.AddOffsetsToTxnWithGroupMetadata(offsets, gm); err != nil {
				return err
			}
			return h.p.CommitTxn()
		}()
		if err != nil {
			err = fmt.Errorf("consume-transform-produce: %w", err)
		}
		h.once.Do(func() { h.done <- err })
	}
	return nil
}
