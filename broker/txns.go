package broker

// Wiring of the transaction coordinator (package txn) into the broker: the
// __transaction_state topic, which of its partitions this broker
// coordinates (the ones it leads, handed over with their leader epoch),
// and the log adapter, the group coordinator's (groups.go) with a replay
// of its own.
//
// The markers of ended transactions are written by the marker sender
// (txn_markers.go) through WriteTxnMarkers (27_write_txn_markers.go).
//
// The coordinator aborts timed-out transactions and expires idle
// transactional ids itself, every
// transaction.abort.timed.out.transaction.cleanup.interval.ms and
// transaction.remove.expired.transaction.cleanup.interval.ms.

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/twmb/franz-go/pkg/kmsg"

	"strata/broker/group"
	"strata/broker/txn"
	"strata/controller"
)

// txnStateTopic is Kafka's internal topic of transaction states.
const txnStateTopic = "__transaction_state"

// txnHost owns the transaction coordinator and the partitions it was
// given.
type txnHost struct {
	s     *Server
	coord *txn.Coordinator

	// writeMarkers receives the markers of every ended transaction
	// (txn.Config.SendMarkers): the marker sender's send; tests may
	// stand in for it.
	writeMarkers atomic.Pointer[func(txn.Markers)]
	markers      *markerSender
	// verifier batches this broker's verifications of transactional
	// writes per coordinator broker (txn_verify.go).
	verifier *verifyBatcher
	// peers are the connections of the verifier and the marker sender
	// to the other brokers (peer_client.go).
	peers *peerClients
	// metrics are the transaction metrics the request path updates
	// (txn_metrics.go).
	metrics txnMetrics

	mu  sync.Mutex
	led map[int32]*txnStateLog
}

func newTxnHost(s *Server) *txnHost {
	h := &txnHost{s: s, led: map[int32]*txnStateLog{}}
	h.markers = newMarkerSender(h)
	h.verifier = newVerifyBatcher(s)
	h.peers = newPeerClients(s)
	h.metrics = newTxnMetrics()
	send := h.markers.send
	h.writeMarkers.Store(&send)
	cfg := txn.ConfigFromBroker(s.cfg)
	cfg.Logger = s.log.With("component", "transaction-coordinator")
	cfg.NextProducerID = s.nextProducerID // 22_init_producer_id.go
	cfg.OffsetsPartitionFor = s.offsetsPartitionFor
	cfg.SendMarkers = func(mk txn.Markers) { (*h.writeMarkers.Load())(mk) }
	cfg.RefuseNewTransactions = s.draining.Load // drain.go
	h.coord = txn.New(cfg)
	h.registerTxnMetrics()
	return h
}

func (h *txnHost) close() {
	if h != nil {
		h.coord.Close()
		h.markers.close() // its writers end with the broker's context
		h.peers.close()
	}
}

// offsetsPartitionFor is the __consumer_offsets partition of a group
// (AddOffsetsToTxn), as FindCoordinator computes it.
func (s *Server) offsetsPartitionFor(groupID string) int32 {
	n := s.cfg.OffsetsTopicNumPartitions
	if t := s.ctrl.Metadata().Topics[offsetsTopic]; t != nil {
		n = int32(len(t.Partitions))
	}
	return group.PartitionFor(groupID, n)
}

// syncTxns hands the coordinator the __transaction_state partitions this
// broker leads, with their leader epochs, and takes back the others, as
// syncGroups does for the group coordinator. It runs after every
// reconcile.
func (s *Server) syncTxns(*controller.Metadata) {
	h := s.txns
	if h == nil {
		return
	}
	md := s.ctrl.Metadata()
	h.peers.prune(md) // brokers gone: their connections close
	h.mu.Lock()
	defer h.mu.Unlock()
	type wanted struct {
		p    *partition
		term leaderTerm
	}
	want := map[int32]wanted{}
	if t := md.Topics[txnStateTopic]; t != nil {
		h.coord.SetNumPartitions(int32(len(t.Partitions)))
		for _, pm := range t.Partitions {
			if pm.Leader != s.cfg.ID {
				continue
			}
			p := s.partition(txnStateTopic, pm.Index)
			if p == nil || p.TopicID() != t.ID {
				continue
			}
			// Only once this broker leads locally in the metadata's
			// leader epoch (see syncGroups).
			if term, ok := localLeaderTerm(p); ok && term.epoch == pm.LeaderEpoch {
				want[pm.Index] = wanted{p, term}
			}
		}
	}
	for idx, l := range h.led {
		if w, ok := want[idx]; !ok || w.p != l.p || w.term != l.term {
			h.coord.Resign(idx)
			delete(h.led, idx)
		}
	}
	for idx, w := range want {
		if h.led[idx] == nil {
			l := &txnStateLog{&offsetsLog{s: s, p: w.p, term: w.term}}
			h.led[idx] = l
			// The leader epoch is the coordinator epoch of the markers.
			h.coord.Elect(idx, w.term.epoch, l)
		}
	}
}

// ensureTxnStateTopic creates __transaction_state if it does not exist:
// compacted, uncompressed, transaction.state.log.num.partitions
// partitions, transaction.state.log.replication.factor capped at the live
// brokers, and transaction.state.log.min.isr capped at that factor.
func (s *Server) ensureTxnStateTopic() (*controller.Topic, error) {
	md := s.ctrl.Metadata()
	if t := md.Topics[txnStateTopic]; t != nil {
		return t, nil
	}
	rf, minISR := s.cfg.TransactionStateReplicationFactor(len(md.Brokers))
	_, err := s.createTopic(s.ctx, controller.CreateTopicRequest{
		Name:              txnStateTopic,
		NumPartitions:     s.cfg.TransactionStateLogNumPartitions,
		ReplicationFactor: rf,
		Configs: map[string]string{
			"cleanup.policy":                 "compact",
			"compression.type":               "uncompressed",
			"min.insync.replicas":            strconv.Itoa(int(minISR)),
			"segment.bytes":                  strconv.Itoa(int(s.cfg.TransactionStateLogSegmentBytes)),
			"unclean.leader.election.enable": "false",
		},
	})
	if err != nil && !errors.Is(err, controller.ErrTopicExists) {
		return nil, fmt.Errorf("create %s: %w", txnStateTopic, err)
	}
	md = s.ctrl.Metadata()
	if err := s.reconcile(md); err != nil {
		s.log.Error("open transaction state partitions", "err", err)
	}
	t := md.Topics[txnStateTopic]
	if t == nil {
		return nil, fmt.Errorf("%s not in metadata after creation", txnStateTopic)
	}
	s.log.Info("created internal topic", "topic", txnStateTopic, "partitions", len(t.Partitions))
	return t, nil
}

// findTxnCoordinator fills c for a transactional id; it returns an error
// message when there is no coordinator to name.
func (s *Server) findTxnCoordinator(cc *clientConn, c *kmsg.FindCoordinatorResponseCoordinator) string {
	return s.findCoordinatorOf(cc, c, s.ensureTxnStateTopic, txn.PartitionFor)
}

// txnStateLog is the coordinator's view of one __transaction_state
// partition: the group coordinator's adapter (appends as an acks=-1
// produce, durability bound to the leader term it was loaded for), with
// a replay of its own that seeds an empty partition from the bucket
// (txn_snapshot.go).
type txnStateLog struct{ *offsetsLog }

// Replay reads the partition from its start to the log end offset it has
// when the load starts, once the high watermark has reached that offset
// (see offsetsLog.Replay: a new leader holds acknowledged records beyond
// its own high watermark).
func (l txnStateLog) Replay(fn func([]byte) error) error {
	end := l.p.Log().LogEndOffset()
	if err := l.waitHW(end); err != nil {
		return err
	}
	if err := l.s.seedTxnState(l, end); err != nil {
		return err
	}
	if e := l.p.Log().LogEndOffset(); e != end {
		end = e
		if err := l.waitHW(end); err != nil {
			return err
		}
	}
	off := l.p.Log().LogStartOffset()
	for off < end {
		fs, err := l.p.Log().Read(off, end, 1<<20, true)
		if err != nil {
			return fmt.Errorf("read %s-%d at %d: %w", txnStateTopic, l.p.Index(), off, err)
		}
		if fs.Len == 0 {
			return nil
		}
		buf := make([]byte, fs.Len)
		if _, err := fs.File.ReadAt(buf, fs.Pos); err != nil {
			return fmt.Errorf("read %s-%d at %d: %w", txnStateTopic, l.p.Index(), off, err)
		}
		if err := fn(buf); err != nil {
			return fmt.Errorf("replay %s-%d at %d: %w", txnStateTopic, l.p.Index(), off, err)
		}
		off = fs.LastOffset + 1
	}
	return nil
}
