package broker

// The partition leader's check of a transactional write (KIP-890 part 1,
// Kafka's AddPartitionsToTxnManager), with transactions on.
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
// only verifies (VerifyOnly true).
//
// The coordinator's answers, as Kafka's ReplicaManager maps them:
// PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH; TRANSACTION_ABORTABLE
// stays for Produce v11+ and becomes INVALID_TXN_STATE before;
// CONCURRENT_TRANSACTIONS and the coordinator's own failures (not
// reachable, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS,
// COORDINATOR_NOT_AVAILABLE) become NOT_ENOUGH_REPLICAS, which every
// client retries without refreshing its metadata.
//
// Deviation: Kafka batches the verifications of concurrent Produce
// requests per coordinator broker and guards the append against a marker
// written between the verification and the append (VerificationGuard);
// Strata sends one request per Produce and has no guard. With
// transaction version 2 the marker bumps the epoch, so such a write is
// refused by the partition's producer state (INVALID_PRODUCER_EPOCH).

import (
	"context"
	"encoding/binary"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/txn"
)

// txnVerifyTimeout bounds a verification round trip (Kafka:
// request.timeout.ms of the AddPartitionsToTxnManager's channel).
const txnVerifyTimeout = 15 * time.Second

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

// txnWrite is one partition of a Produce that needs verifying.
type txnWrite struct {
	tp    txn.TopicPartition
	pid   int64
	epoch int16
}

// verifyTxnWrites asks the coordinator of transactionalID about writes
// (all of one producer id and epoch, as a Produce's batches are) and
// returns the Produce error code of each refused one, with its message.
func (s *Server) verifyTxnWrites(produceVersion int16, transactionalID string, writes []txnWrite) map[txn.TopicPartition]verifyRefusal {
	if len(writes) == 0 {
		return nil
	}
	add := produceVersion >= 12 && s.transactionVersion() >= 2
	byProducer := map[[2]int64][]txn.TopicPartition{}
	for _, w := range writes {
		k := [2]int64{w.pid, int64(w.epoch)}
		byProducer[k] = append(byProducer[k], w.tp)
	}
	out := map[txn.TopicPartition]verifyRefusal{}
	for k, tps := range byProducer {
		codes, err := s.askTxnCoordinator(transactionalID, k[0], int16(k[1]), tps, !add)
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
			}
		}
	}
	return out
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
// returns each partition's code.
func (s *Server) askTxnCoordinator(transactionalID string, pid int64, epoch int16, tps []txn.TopicPartition, verifyOnly bool) (map[txn.TopicPartition]int16, error) {
	tr := kmsg.NewAddPartitionsToTxnRequestTransaction()
	tr.TransactionalID, tr.ProducerID, tr.ProducerEpoch, tr.VerifyOnly = transactionalID, pid, epoch, verifyOnly
	idx := map[string]int{}
	for _, tp := range tps {
		i, ok := idx[tp.Topic]
		if !ok {
			t := kmsg.NewAddPartitionsToTxnRequestTransactionTopic()
			t.Topic = tp.Topic
			tr.Topics = append(tr.Topics, t)
			i = len(tr.Topics) - 1
			idx[tp.Topic] = i
		}
		tr.Topics[i].Partitions = append(tr.Topics[i].Partitions, tp.Partition)
	}
	md := s.ctrl.Metadata()
	t := md.Topics[txnStateTopic]
	if t == nil || len(t.Partitions) == 0 {
		return nil, kerr.CoordinatorNotAvailable
	}
	leader := t.Partitions[txn.PartitionFor(transactionalID, int32(len(t.Partitions)))].Leader
	var results []kmsg.AddPartitionsToTxnResponseTransaction
	if leader == s.cfg.ID {
		results = s.addPartitionsBatched(5, []kmsg.AddPartitionsToTxnRequestTransaction{tr})
	} else {
		b, ok := md.Broker(leader)
		if !ok {
			return nil, kerr.CoordinatorNotAvailable
		}
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.Version = 5
		req.Transactions = append(req.Transactions, tr)
		resp, err := s.interBrokerRoundTrip(s.brokerAddr(b), verifyClientPrefix+strconv.Itoa(int(s.cfg.ID)), req)
		if err != nil {
			return nil, err
		}
		r := resp.(*kmsg.AddPartitionsToTxnResponse)
		if r.ErrorCode != 0 {
			return nil, kerr.ErrorForCode(r.ErrorCode)
		}
		results = r.Transactions
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

// interBrokerRoundTrip sends req to the broker at addr on the
// inter-broker listener and reads its answer.
func (s *Server) interBrokerRoundTrip(addr, clientID string, req kmsg.Request) (kmsg.Response, error) {
	ctx, cancel := context.WithTimeout(s.ctx, txnVerifyTimeout)
	defer cancel()
	conn, err := s.dialBroker(ctx, "tcp", addr) // listeners.go
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()
	return roundTrip(conn, clientID, req) // forward.go
}
