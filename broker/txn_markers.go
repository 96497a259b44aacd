package broker

// The transaction coordinator's marker sender (Kafka's
// TransactionMarkerChannelManager): once a transaction is prepared
// (PrepareCommit or PrepareAbort), its COMMIT or ABORT marker goes to
// every partition of the transaction, then the coordinator completes it
// (txn.Coordinator.CompleteTxn).
//
// The coordinator hands the markers over on its requester's goroutine
// (txn.Config.SendMarkers must not block): each transaction's markers are
// written by a goroutine of their own, which
//
//   - groups the partitions left by their current leader (this broker's
//     metadata) and sends each leader one WriteTxnMarkers
//     (27_write_txn_markers.go) on the inter-broker listener, on the
//     connections kept to that broker (peer_client.go); the partitions
//     this broker leads are written in place, without a connection;
//   - drops the partitions whose topic no longer exists (Kafka does the
//     same: a deleted topic has nothing to mark);
//   - retries, with a backoff from retryBackoffMin to retryBackoffMax, the
//     partitions without a leader, those answered with a retriable error
//     (NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
//     NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT, KAFKA_STORAGE_ERROR, ...) and
//     those of a leader it could not reach, each time with the leaders of
//     the metadata of the moment;
//   - counts a partition answered UNSUPPORTED_FOR_MESSAGE_FORMAT as done
//     (Kafka: such a log has no markers);
//   - gives the transaction up, as Kafka's
//     TransactionMarkerRequestCompletionHandler, when a partition answers
//     INVALID_PRODUCER_EPOCH or TRANSACTION_COORDINATOR_FENCED, or when
//     this broker no longer coordinates the transactional id in the
//     coordinator epoch of the markers: a newer coordinator (its load
//     hands the prepared transactions to its own sender) takes over;
//   - once every partition has its marker, calls CompleteTxn, retried
//     while it fails with a retriable error (the write of CompleteCommit
//     or CompleteAbort to __transaction_state).
//
// A transaction whose markers are being written is not started twice
// (the coordinator hands a partition's prepared transactions over again
// when it loads it). The goroutines end with the broker.

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/txn"
)

// The marker sender's retry backoff (Kafka: retry.backoff.ms, 100 ms).
const (
	markerRetryBackoffMin = 50 * time.Millisecond
	markerRetryBackoffMax = time.Second
)

// markerClientPrefix starts the client id of the sender's requests.
const markerClientPrefix = "strata-txn-markers-"

// markerKey identifies the markers of one ended transaction.
type markerKey struct {
	id               string
	producerID       int64
	producerEpoch    int16
	coordinatorEpoch int32
}

// markerSender writes the markers of ended transactions.
type markerSender struct {
	h  *txnHost
	wg sync.WaitGroup

	mu       sync.Mutex
	inflight map[markerKey]bool
	closed   bool

	// beforeSend, when set (tests), is called before each WriteTxnMarkers
	// to another broker, with that broker's id.
	beforeSend atomic.Pointer[func(to int32)]

	// unknownDestination counts the markers (transaction, partition)
	// waiting for their partition to have a leader; logAppendRetry the
	// transactions whose completion is to be written again
	// (txn_metrics.go).
	unknownDestination atomic.Int64
	logAppendRetry     atomic.Int64
}

func newMarkerSender(h *txnHost) *markerSender {
	return &markerSender{h: h, inflight: map[markerKey]bool{}}
}

// send starts writing mk's markers unless they are being written; it
// does not block.
func (ms *markerSender) send(mk txn.Markers) {
	k := markerKey{mk.TransactionalID, mk.ProducerID, mk.ProducerEpoch, mk.CoordinatorEpoch}
	ms.mu.Lock()
	if ms.closed || ms.inflight[k] {
		ms.mu.Unlock()
		return
	}
	ms.inflight[k] = true
	ms.wg.Add(1)
	ms.mu.Unlock()
	go func() {
		defer ms.wg.Done()
		defer func() {
			ms.mu.Lock()
			delete(ms.inflight, k)
			ms.mu.Unlock()
		}()
		ms.write(mk)
	}()
}

// close waits for the writers, which end with the broker's context.
func (ms *markerSender) close() {
	ms.mu.Lock()
	ms.closed = true
	ms.mu.Unlock()
	ms.wg.Wait()
}

// owns reports whether this broker still coordinates mk's transactional
// id in the coordinator epoch of the markers.
func (ms *markerSender) owns(mk txn.Markers) bool {
	h := ms.h
	idx := h.coord.PartitionFor(mk.TransactionalID)
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.led[idx]
	return l != nil && l.term.epoch == mk.CoordinatorEpoch
}

// markerOutcome is what a partition's answer means to the sender.
type markerOutcome int

const (
	markerDone markerOutcome = iota
	markerRetry
	markerGiveUp
)

func markerOutcomeOf(code int16) markerOutcome {
	switch code {
	case 0, kerr.UnsupportedForMessageFormat.Code:
		return markerDone
	case kerr.InvalidProducerEpoch.Code, kerr.TransactionCoordinatorFenced.Code:
		return markerGiveUp
	}
	// NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
	// NOT_ENOUGH_REPLICAS(_AFTER_APPEND), REQUEST_TIMED_OUT,
	// KAFKA_STORAGE_ERROR are Kafka's retriable answers; anything else is
	// retried too rather than leaving the transaction prepared for good
	// (and logged).
	return markerRetry
}

// write writes mk's markers, then completes the transaction.
func (ms *markerSender) write(mk txn.Markers) {
	s := ms.h.s
	log := s.log.With("transactional.id", mk.TransactionalID, "producer.id", mk.ProducerID,
		"producer.epoch", mk.ProducerEpoch, "commit", mk.Commit)
	pending := map[txn.TopicPartition]bool{}
	for _, tp := range mk.Partitions {
		pending[tp] = true
	}
	backoff := markerRetryBackoffMin
	wait := func() bool {
		t := time.NewTimer(backoff)
		defer t.Stop()
		backoff = min(2*backoff, markerRetryBackoffMax)
		select {
		case <-t.C:
			return true
		case <-s.ctx.Done():
			return false
		}
	}
	// noLeader is how many of pending wait for a leader, as counted in
	// ms.unknownDestination.
	noLeader := int64(0)
	setNoLeader := func(n int64) {
		ms.unknownDestination.Add(n - noLeader)
		noLeader = n
	}
	defer setNoLeader(0)
	for attempt := 1; len(pending) > 0; attempt++ {
		if s.ctx.Err() != nil {
			return
		}
		if !ms.owns(mk) {
			log.Info("transaction markers not all written: this broker no longer coordinates the transactional id in this epoch",
				"coordinator.epoch", mk.CoordinatorEpoch)
			return
		}
		md := s.ctrl.Metadata()
		byLeader := map[int32][]txn.TopicPartition{}
		unknown := int64(0)
		for tp := range pending {
			t := md.Topics[tp.Topic]
			if t == nil || tp.Partition < 0 || int(tp.Partition) >= len(t.Partitions) {
				log.Info("transaction marker dropped: the partition no longer exists", "topic", tp.Topic, "partition", tp.Partition)
				delete(pending, tp)
				continue
			}
			if l := t.Partitions[tp.Partition].Leader; l >= 0 {
				byLeader[l] = append(byLeader[l], tp)
			} else {
				unknown++
			}
		}
		setNoLeader(unknown)
		giveUp := false
		for leader, tps := range byLeader {
			codes, err := ms.writeAt(leader, mk, tps)
			if err != nil {
				if attempt%20 == 0 {
					log.Warn("transaction markers: broker unreachable, retrying", "broker", leader, "err", err)
				}
				continue
			}
			for tp, code := range codes {
				if !pending[tp] {
					continue
				}
				switch markerOutcomeOf(code) {
				case markerDone:
					delete(pending, tp)
				case markerGiveUp:
					giveUp = true
					log.Warn("transaction markers given up: the partition refused the producer or coordinator epoch",
						"topic", tp.Topic, "partition", tp.Partition, "err", kerr.ErrorForCode(code))
				default:
					if attempt%20 == 0 || !isRetriableMarkerCode(code) {
						log.Warn("transaction marker not written, retrying", "topic", tp.Topic, "partition", tp.Partition,
							"broker", leader, "err", kerr.ErrorForCode(code))
					}
				}
			}
		}
		if giveUp {
			return
		}
		if len(pending) > 0 && !wait() {
			return
		}
	}
	setNoLeader(0)
	backoff = markerRetryBackoffMin
	retrying := false
	defer func() {
		if retrying {
			ms.logAppendRetry.Add(-1)
		}
	}()
	for {
		code := ms.h.coord.CompleteTxn(mk)
		switch code {
		case 0:
			return
		case kerr.NotCoordinator.Code, kerr.InvalidProducerIDMapping.Code, kerr.ProducerFenced.Code,
			kerr.InvalidTxnState.Code, kerr.CoordinatorNotAvailable.Code:
			// Completed or taken over meanwhile, or the coordinator closed.
			log.Info("transaction not completed after its markers", "err", kerr.ErrorForCode(code))
			return
		}
		log.Debug("complete transaction, retrying", "err", kerr.ErrorForCode(code))
		if !retrying {
			retrying = true
			ms.logAppendRetry.Add(1)
		}
		if !wait() {
			return
		}
	}
}

// isRetriableMarkerCode reports Kafka's retriable answers to
// WriteTxnMarkers.
func isRetriableMarkerCode(code int16) bool {
	switch code {
	case kerr.NotLeaderForPartition.Code, kerr.UnknownTopicOrPartition.Code, kerr.NotEnoughReplicas.Code,
		kerr.NotEnoughReplicasAfterAppend.Code, kerr.RequestTimedOut.Code, kerr.KafkaStorageError.Code:
		return true
	}
	return false
}

// writeAt writes mk's markers in partitions tps at broker leader: in
// place when it is this broker, else with a WriteTxnMarkers on the
// inter-broker listener. It returns each partition's answer, or an error
// when the broker could not be asked.
func (ms *markerSender) writeAt(leader int32, mk txn.Markers, tps []txn.TopicPartition) (map[txn.TopicPartition]int16, error) {
	s := ms.h.s
	req := markersRequest(mk, tps)
	var resp *kmsg.WriteTxnMarkersResponse
	if leader == s.cfg.ID {
		resp = s.writeTxnMarkers(req)
	} else {
		b, ok := s.ctrl.Metadata().Broker(leader)
		if !ok {
			return nil, kerr.BrokerNotAvailable
		}
		if f := ms.beforeSend.Load(); f != nil {
			(*f)(leader)
		}
		ctx, cancel := context.WithTimeout(s.ctx, markerAppendTimeout+5*time.Second)
		defer cancel()
		// On the connections kept to that broker (peer_client.go).
		kresp, err := ms.h.peers.roundTrip(ctx, leader, s.brokerAddr(b), markerClientPrefix+strconv.Itoa(int(s.cfg.ID)), req)
		if err != nil {
			return nil, err
		}
		resp = kresp.(*kmsg.WriteTxnMarkersResponse)
	}
	out := make(map[txn.TopicPartition]int16, len(tps))
	for _, rm := range resp.Markers {
		if rm.ProducerID != mk.ProducerID {
			continue
		}
		for _, rt := range rm.Topics {
			for _, rp := range rt.Partitions {
				out[txn.TopicPartition{Topic: rt.Topic, Partition: rp.Partition}] = rp.ErrorCode
			}
		}
	}
	for _, tp := range tps {
		if _, ok := out[tp]; !ok {
			out[tp] = kerr.UnknownServerError.Code // not answered: retried
		}
	}
	return out, nil
}

// markersRequest is the WriteTxnMarkers of mk for partitions tps: v1, or
// v2 (KIP-1228's transaction version) for a transaction of version 2.
func markersRequest(mk txn.Markers, tps []txn.TopicPartition) *kmsg.WriteTxnMarkersRequest {
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	req.Version = 1
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Committed, m.CoordinatorEpoch = mk.ProducerID, mk.ProducerEpoch, mk.Commit, mk.CoordinatorEpoch
	if mk.TransactionVersion >= 2 {
		req.Version = 2
		m.TransactionVersion = int8(mk.TransactionVersion)
	}
	for _, tt := range partitionsByTopic(tps) {
		t := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
		t.Topic, t.Partitions = tt.topic, tt.partitions
		m.Topics = append(m.Topics, t)
	}
	req.Markers = append(req.Markers, m)
	return req
}

// topicPartitions are the partitions of one topic.
type topicPartitions struct {
	topic      string
	partitions []int32
}

// partitionsByTopic groups tps by topic, in the order the topics first
// come, as the requests between brokers carry them.
func partitionsByTopic(tps []txn.TopicPartition) []topicPartitions {
	var out []topicPartitions
	idx := map[string]int{}
	for _, tp := range tps {
		i, ok := idx[tp.Topic]
		if !ok {
			i = len(out)
			idx[tp.Topic] = i
			out = append(out, topicPartitions{topic: tp.Topic})
		}
		out[i].partitions = append(out[i].partitions, tp.Partition)
	}
	return out
}
