package broker

// The partition leader's check of a transactional write (KIP-890 part 1,
// Kafka's AddPartitionsToTxnManager).
//
// Before a transactional batch is appended to a partition where its
// producer has no open transaction at that epoch
// (plog.Log.HasOngoingTransaction), the leader asks the transactional
// id's coordinator whether the partition is in the producer's open
// transaction: one AddPartitionsToTxn v5 per Produce request (its
// partitions all belong to one transactional id, hence one coordinator),
// on the inter-broker listener, or in place when this broker is the
// coordinator. So a write arriving after its transaction ended (a late
// retry, a zombie) cannot start a transaction of its own in the
// partition, which would hold the last stable offset until it timed out.
//
// With transaction version 2 (transaction.version finalized at 2 and a
// Produce v12+, which only KIP-890 part 2 clients send) the client sends
// no AddPartitionsToTxn: the leader's request adds the partition
// (VerifyOnly false), as Kafka's ADD_PARTITION operation. Otherwise it
// only verifies (VerifyOnly true). The first write of a transaction
// often comes while the markers of the producer's previous one are being
// written (EndTxn answers before): the coordinator answers
// CONCURRENT_TRANSACTIONS, and the leader asks again after 20 ms, for
// up to 100 ms, before it answers the producer (as Kafka 4.0 does),
// which would otherwise retry after its own backoff or metadata refresh
// (seconds for some clients).
//
// The coordinator's answers, as Kafka's ReplicaManager maps them:
// PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH; TRANSACTION_ABORTABLE
// stays for Produce v11+ and becomes INVALID_TXN_STATE before;
// CONCURRENT_TRANSACTIONS and the coordinator's own failures (not
// reachable, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// COORDINATOR_NOT_AVAILABLE) become NOT_ENOUGH_REPLICAS, which every
// client retries without refreshing its metadata. When the leader adds
// the partitions (transaction version 2), CONCURRENT_TRANSACTIONS is
// first asked again, every 20 ms for up to 100 ms, as Kafka does: it is
// what the first write of a transaction gets while the markers of the
// producer's previous one are being written, which happens at nearly
// every commit of a busy producer (Kafka Streams commits every 100 ms
// with exactly_once_v2), and the client's retry backoff would stall each
// of them.
//
// As Kafka's manager, the verifications bound for one coordinator broker
// are batched: while a request to it is in flight, the transactions of
// the Produce requests that arrive are queued, and go together in the
// next request (a transactional id queued twice waits for the one after).
//
// The requests go on connections kept per coordinator broker
// (peer_client.go), as Kafka's manager keeps its inter-broker channel.
// A Produce waits for its verification at most its timeout (Produce's
// TimeoutMillis, and never more than txnVerifyTimeout): past it the
// partitions are answered NOT_ENOUGH_REPLICAS, which the producer
// retries, rather than holding the Produce (and the connection behind
// it) while the coordinator is slow or unreachable.
//
// As Kafka's VerificationGuard, the leader takes a guard of the producer
// in the partition before asking (plog.Log.StartTxnVerification); a
// marker of the producer written meanwhile drops it, and the append of a
// transactional batch whose transaction is not open needs the guard
// (plog.Log.AppendVerified), else INVALID_TXN_STATE: a write verified
// just before its transaction ended is not appended after the marker.
// Not when the leader adds the partition (transaction version 2): a
// verification that began before the marker of the previous transaction
// and was answered after it added the partition to the next one, and a
// write of the ended transaction is fenced by the epoch its end bumped.

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/txn"
)

// txnVerifyTimeout bounds a verification round trip (Kafka:
// request.timeout.ms of the AddPartitionsToTxnManager's channel), and a
// Produce's wait for it when its own timeout is longer or not set.
const txnVerifyTimeout = 15 * time.Second

// With transaction version 2, a leader adding partitions to a
// transaction asks again while the coordinator answers
// CONCURRENT_TRANSACTIONS, for up to addPartitionsRetryMax (Kafka's
// add.partitions.to.txn.retry.backoff.max.ms default, KAFKA-18654).
// Kafka waits add.partitions.to.txn.retry.backoff.ms (20 ms) before each
// ask; the markers that end the previous transaction take a millisecond
// or two here, so the first wait is addPartitionsRetryFirst and each
// next one doubles, up to addPartitionsRetryBackoff: a producer's next
// transaction does not lose 20 ms at every commit.
const (
	addPartitionsRetryFirst   = time.Millisecond
	addPartitionsRetryBackoff = 20 * time.Millisecond
	addPartitionsRetryMax     = 100 * time.Millisecond
)

// verifyDeadline is when a Produce with timeoutMillis stops waiting for
// its verification.
func verifyDeadline(now time.Time, timeoutMillis int32) time.Time {
	d := txnVerifyTimeout
	if t := time.Duration(timeoutMillis) * time.Millisecond; t > 0 && t < d {
		d = t
	}
	return now.Add(d)
}

// errVerifyTimeout is a verification not answered by the Produce's
// deadline.
var errVerifyTimeout = errors.New("the transaction coordinator did not answer within the produce request's timeout")

// verifyClientPrefix starts the client id of the leader's requests.
const verifyClientPrefix = "strata-txn-verify-"

// transactionalBatch reads the producer id and epoch of a v2 record
// batch whose transactional attribute is set.
func transactionalBatch(records []byte) (pid int64, epoch int16, ok bool) {
	const (
		attrOff  = 21
		pidOff   = 43
		epochOff = 51
		minLen   = 61
		txnBit   = 0x10
	)
	if len(records) < minLen || records[16] != 2 {
		return 0, 0, false
	}
	if binary.BigEndian.Uint16(records[attrOff:])&txnBit == 0 {
		return 0, 0, false
	}
	return int64(binary.BigEndian.Uint64(records[pidOff:])), int16(binary.BigEndian.Uint16(records[epochOff:])), true
}

// txnAppend is a transactional batch's producer and the verification
// guard taken for it (0: none, its transaction was open).
type txnAppend struct {
	pid   int64
	epoch int16
	guard uint64
}

// leaderAddsPartitions reports whether a transactional Produce at this
// version has its partitions added to the transaction by the leader's
// request (transaction version 2) rather than only verified.
func (s *Server) leaderAddsPartitions(produceVersion int16) bool {
	return produceVersion >= 12 && s.transactionVersion() >= 2
}

// txnWrite is one partition of a Produce that needs verifying.
type txnWrite struct {
	tp    txn.TopicPartition
	pid   int64
	epoch int16
}

// verifyTxnWrites asks the coordinator of transactionalID about writes
// (all of one producer id and epoch, as a Produce's batches are) and
// returns the Produce error code of each refused one, with its message;
// it waits for the answers until deadline.
func (s *Server) verifyTxnWrites(produceVersion int16, transactionalID string, writes []txnWrite, deadline time.Time) map[txn.TopicPartition]verifyRefusal {
	if len(writes) == 0 {
		return nil
	}
	add := s.leaderAddsPartitions(produceVersion)
	byProducer := map[[2]int64][]txn.TopicPartition{}
	for _, w := range writes {
		k := [2]int64{w.pid, int64(w.epoch)}
		byProducer[k] = append(byProducer[k], w.tp)
	}
	out := map[txn.TopicPartition]verifyRefusal{}
	for k, tps := range byProducer {
		start := time.Now()
		codes, err := s.askTxnCoordinator(transactionalID, k[0], int16(k[1]), tps, !add, deadline)
		// Adding the partitions to the next transaction while the
		// markers of the previous one are being written is
		// CONCURRENT_TRANSACTIONS for a moment: asked again here
		// rather than by the producer (Kafka's server-side retry).
		wait := addPartitionsRetryFirst
		for ; add && err == nil && anyCode(codes, kerr.ConcurrentTransactions.Code) &&
			time.Since(start)+wait <= addPartitionsRetryMax &&
			time.Now().Add(wait).Before(deadline); wait = min(2*wait, addPartitionsRetryBackoff) {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-s.ctx.Done():
			}
			t.Stop()
			codes, err = s.askTxnCoordinator(transactionalID, k[0], int16(k[1]), tps, !add, deadline)
		}
		s.txns.metrics.verificationTime.Observe(float64(time.Since(start)) / float64(time.Millisecond))
		for _, tp := range tps {
			code := kerr.NetworkException.Code
			if err == nil {
				var ok bool
				if code, ok = codes[tp]; !ok {
					code = kerr.UnknownServerError.Code
				}
			}
			if r, refused := produceVerifyRefusal(produceVersion, code, err); refused {
				out[tp] = r
				s.txns.metrics.verificationFailures.Inc()
			}
		}
	}
	return out
}

// anyCode reports whether a partition of codes is code.
func anyCode(codes map[txn.TopicPartition]int16, code int16) bool {
	for _, c := range codes {
		if c == code {
			return true
		}
	}
	return false
}

// verifyRefusal is a Produce partition's answer after a failed
// verification.
type verifyRefusal struct {
	code int16
	msg  string
}

// produceVerifyRefusal maps the coordinator's answer to the Produce's
// (see the file comment); refused is false for NONE.
func produceVerifyRefusal(produceVersion, code int16, err error) (verifyRefusal, bool) {
	switch code {
	case 0:
		return verifyRefusal{}, false
	case kerr.ProducerFenced.Code:
		return verifyRefusal{kerr.InvalidProducerEpoch.Code, "the producer was fenced by a newer epoch of its transactional id"}, true
	case kerr.TransactionAbortable.Code:
		if produceVersion >= 11 {
			return verifyRefusal{code, "the partition is not in the producer's open transaction"}, true
		}
		return verifyRefusal{kerr.InvalidTxnState.Code, "Partition was not added to the transaction"}, true
	case kerr.InvalidTxnState.Code:
		return verifyRefusal{code, "Partition was not added to the transaction"}, true
	case kerr.ConcurrentTransactions.Code, kerr.NetworkException.Code, kerr.CoordinatorLoadInProgress.Code,
		kerr.CoordinatorNotAvailable.Code, kerr.NotCoordinator.Code:
		under := kerr.ErrorForCode(code).Error()
		if err != nil {
			under = err.Error()
		}
		return verifyRefusal{kerr.NotEnoughReplicas.Code,
			"Unable to verify the partition has been added to the transaction. Underlying error: " + under}, true
	}
	return verifyRefusal{code, ""}, true
}

// askTxnCoordinator sends one AddPartitionsToTxn v5 transaction to the
// coordinator of transactionalID (in place when it is this broker) and
// returns each partition's code, or an error when it has no answer by
// deadline.
func (s *Server) askTxnCoordinator(transactionalID string, pid int64, epoch int16, tps []txn.TopicPartition, verifyOnly bool, deadline time.Time) (map[txn.TopicPartition]int16, error) {
	tr := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, tr.VerifyOnly = transactionalID, pid, epoch, verifyOnly
	for _, tt := range partitionsByTopic(tps) { // txn_markers.go
		t := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
		t.Topic, t.Partitions = tt.topic, tt.partitions
		tr.Topics = append(tr.Topics, t)
	}
	md := s.ctrl.Metadata()
	t := md.Topics[txnStateTopic]
	if t == nil || len(t.Partitions) == 0 {
		return nil, kerr.CoordinatorNotAvailable
	}
	leader := t.Partitions[txn.PartitionFor(transactionalID, int32(len(t.Partitions)))].Leader
	var results []kmsg.AddPartitionsToTxnResponseTransaction
	if leader == s.cfg.ID {
		// In place, where adding the partitions writes
		// __transaction_state: waited for until deadline too.
		done := make(chan []kmsg.AddPartitionsToTxnResponseTransaction, 1)
		go func() { done <- s.addPartitionsBatched(5, []kmsg.AddPartitionsToTxnRequestTransaction{tr}) }()
		t := time.NewTimer(time.Until(deadline))
		defer t.Stop()
		select {
		case results = <-done:
		case <-t.C:
			return nil, errVerifyTimeout
		}
	} else {
		b, ok := md.Broker(leader)
		if !ok {
			return nil, kerr.CoordinatorNotAvailable
		}
		rt, err := s.txns.verifier.ask(b.ID, s.brokerAddr(b), tr, deadline)
		if err != nil {
			return nil, err
		}
		results = []kmsg.AddPartitionsToTxnResponseTransaction{rt}
	}
	out := make(map[txn.TopicPartition]int16, len(tps))
	for _, rt := range results {
		if rt.TransactionalID != transactionalID {
			continue
		}
		for _, t := range rt.Topics {
			for _, p := range t.Partitions {
				out[txn.TopicPartition{Topic: t.Topic, Partition: p.Partition}] = p.ErrorCode
			}
		}
	}
	return out, nil
}

// verifyBatcher sends the verifications of this broker's partition
// leaders to the coordinator brokers, one request in flight per broker.
type verifyBatcher struct {
	s     *Server
	mu    sync.Mutex
	nodes map[int32]*verifyNode

	// beforeSend, when set (tests), is called before each request with
	// the coordinator broker and the number of transactions in it.
	beforeSend atomic.Pointer[func(to int32, n int)]
}

// verifyNode is the queue of one coordinator broker.
type verifyNode struct {
	inflight bool
	queue    []*verifyCall
}

// verifyCall is one transaction waiting for its answer.
type verifyCall struct {
	addr string
	tr   kmsg.AddPartitionsToTxnRequestTransaction
	done chan verifyAnswer // buffered: the sender never blocks
}

type verifyAnswer struct {
	rt  kmsg.AddPartitionsToTxnResponseTransaction
	err error
}

func newVerifyBatcher(s *Server) *verifyBatcher {
	return &verifyBatcher{s: s, nodes: map[int32]*verifyNode{}}
}

// ask queues tr for broker id at addr and waits for its answer until
// deadline; a call still queued then is dropped from the queue.
func (vb *verifyBatcher) ask(id int32, addr string, tr kmsg.AddPartitionsToTxnRequestTransaction, deadline time.Time) (kmsg.AddPartitionsToTxnResponseTransaction, error) {
	c := &verifyCall{addr: addr, tr: tr, done: make(chan verifyAnswer, 1)}
	vb.mu.Lock()
	n := vb.nodes[id]
	if n == nil {
		n = &verifyNode{}
		vb.nodes[id] = n
	}
	n.queue = append(n.queue, c)
	if !n.inflight {
		n.inflight = true
		go vb.run(id, n)
	}
	vb.mu.Unlock()
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case a := <-c.done:
		return a.rt, a.err
	case <-t.C:
		vb.mu.Lock()
		n.queue = slices.DeleteFunc(n.queue, func(q *verifyCall) bool { return q == c })
		vb.mu.Unlock()
		return kmsg.AddPartitionsToTxnResponseTransaction{}, errVerifyTimeout
	case <-vb.s.ctx.Done():
		return kmsg.AddPartitionsToTxnResponseTransaction{}, vb.s.ctx.Err()
	}
}

// run sends node n's queue, a batch at a time, until it is empty.
func (vb *verifyBatcher) run(id int32, n *verifyNode) {
	for {
		vb.mu.Lock()
		if len(n.queue) == 0 {
			n.inflight = false
			vb.mu.Unlock()
			return
		}
		// One transaction per transactional id in a request; the others
		// wait for the next.
		var batch, rest []*verifyCall
		seen := map[string]bool{}
		for _, c := range n.queue {
			if seen[c.tr.TransactionalID] {
				rest = append(rest, c)
				continue
			}
			seen[c.tr.TransactionalID] = true
			batch = append(batch, c)
		}
		n.queue = rest
		vb.mu.Unlock()
		if f := vb.beforeSend.Load(); f != nil {
			(*f)(id, len(batch))
		}
		vb.send(id, batch)
	}
}

// send sends one batch and answers its calls.
func (vb *verifyBatcher) send(id int32, batch []*verifyCall) {
	s := vb.s
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.Version = 5
	for _, c := range batch {
		req.Transactions = append(req.Transactions, c.tr)
	}
	// The newest address known: the last call's.
	ctx, cancel := context.WithTimeout(s.ctx, txnVerifyTimeout)
	resp, err := s.txns.peers.roundTrip(ctx, id, batch[len(batch)-1].addr, verifyClientPrefix+strconv.Itoa(int(s.cfg.ID)), req)
	cancel()
	var r *kmsg.AddPartitionsToTxnResponse
	if err == nil {
		r = resp.(*kmsg.AddPartitionsToTxnResponse)
		if r.ErrorCode != 0 {
			err = kerr.ErrorForCode(r.ErrorCode)
		}
	}
	if err != nil {
		s.log.Debug("transaction verification", "broker", id, "err", err)
	}
	for _, c := range batch {
		a := verifyAnswer{err: err}
		if err == nil {
			a.err = kerr.UnknownServerError
			for _, rt := range r.Transactions {
				if rt.TransactionalID == c.tr.TransactionalID {
					a.rt, a.err = rt, nil
				}
			}
		}
		c.done <- a
	}
}

// queued is the number of transactions waiting for broker id (tests).
func (vb *verifyBatcher) queued(id int32) int {
	vb.mu.Lock()
	defer vb.mu.Unlock()
	if n := vb.nodes[id]; n != nil {
		return len(n.queue)
	}
	return 0
}
