package txn

// InitProducerId with a transactional id (Kafka's
// TransactionCoordinator.handleInitProducerId).

import (
	"errors"

	"github.com/twmb/franz-go/pkg/kerr"
)

// InitResult is InitProducerId's answer: a producer id and epoch, or an
// error code (with -1, -1).
type InitResult struct {
	ProducerID    int64
	ProducerEpoch int16
	Err           int16
}

func initErr(code int16) InitResult { return InitResult{noProducerID, noEpoch, code} }

// InitProducerID serves InitProducerId for a transactional id. producerID
// and producerEpoch are the request's (-1, -1 for a new producer; a
// producer recovering from an error sends its current ones, KIP-360).
//
//   - A new transactional id gets a new producer id at epoch 0.
//   - Otherwise the epoch is bumped, which fences older producers of the
//     id; once the epoch is exhausted (32766) the id gets a new producer
//     id at epoch 0.
//   - An open transaction is first aborted at a bumped epoch: the answer
//     is CONCURRENT_TRANSACTIONS, and the client's retry gets the epoch
//     after it.
//   - With an expected producer id and epoch, a producer that is not the
//     current one (nor the previous one retrying after an exhausted
//     epoch) is PRODUCER_FENCED; the same epoch again after a success is
//     answered as before.
func (c *Coordinator) InitProducerID(transactionalID string, timeoutMs int32, producerID int64, producerEpoch int16) InitResult {
	var expected *producerIDEpoch
	switch {
	case producerID == noProducerID && producerEpoch == noEpoch:
	case producerID >= 0 && producerEpoch >= 0:
		expected = &producerIDEpoch{producerID, producerEpoch}
	default:
		return initErr(codeInvalidRequest)
	}
	if transactionalID == "" {
		return initErr(codeInvalidRequest)
	}
	if !c.validTimeout(timeoutMs) {
		return initErr(codeInvalidTimeout)
	}
	s, code := c.lockShard(transactionalID)
	if code != codeNone {
		return initErr(code)
	}
	res, due := s.initLocked(transactionalID, timeoutMs, expected)
	s.mu.Unlock()
	c.sendMarkers(due...)
	return res
}

type producerIDEpoch struct {
	id    int64
	epoch int16
}

func (s *shard) initLocked(id string, timeoutMs int32, expected *producerIDEpoch) (InitResult, []Markers) {
	c := s.c
	m := s.txns[id]
	if m == nil {
		pid, err := c.cfg.NextProducerID()
		if err != nil {
			c.log.Error("allocate producer id", "transactional_id", id, "err", err)
			return initErr(codeNotAvailable), nil
		}
		m = newMeta(id, pid, timeoutMs, c.nowMs())
		s.txns[id] = m
	}
	t, code := s.prepareInit(m, timeoutMs, expected)
	if code != codeNone {
		return initErr(code), nil
	}
	if t.state == PrepareEpochFence {
		res := s.endLocked(m, t.producerID, t.producerEpoch, false, false, c.cfg.TransactionVersion)
		if m.hasPending && m.pending == PrepareEpochFence {
			m.abandon()
		}
		if res.Err != codeNone {
			return initErr(res.Err), nil
		}
		var due []Markers
		if res.Markers != nil {
			due = append(due, *res.Markers)
		}
		return initErr(codeConcurrentTransactions), due
	}
	if code := s.persist(m, t); code != codeNone {
		return initErr(code), nil
	}
	c.log.Info("initialized transactional id", "transactional_id", id, "producer_id", t.producerID,
		"producer_epoch", t.producerEpoch, "partition", s.part)
	return InitResult{t.producerID, t.producerEpoch, codeNone}, nil
}

// prepareInit is Kafka's prepareInitProducerIdTransit.
func (s *shard) prepareInit(m *meta, timeoutMs int32, expected *producerIDEpoch) (txnState, int16) {
	if m.hasPending {
		return txnState{}, codeConcurrentTransactions
	}
	if expected != nil && m.producerEpoch != noEpoch && expected.id != m.producerID &&
		!(expected.id == m.prevProducerID && epochExhausted(expected.epoch)) {
		return txnState{}, codeProducerFenced
	}
	var t txnState
	var err error
	switch m.state {
	case PrepareAbort, PrepareCommit:
		return txnState{}, codeConcurrentTransactions
	case CompleteAbort, CompleteCommit, Empty:
		if epochExhausted(m.producerEpoch) && (expected == nil || expected.epoch == m.producerEpoch) {
			pid, aerr := s.c.cfg.NextProducerID()
			if aerr != nil {
				s.c.log.Error("allocate producer id", "transactional_id", m.id, "err", aerr)
				return txnState{}, codeNotAvailable
			}
			t, err = m.prepareRotation(pid, timeoutMs, s.c.nowMs(), expected != nil)
		} else {
			var exp *int16
			if expected != nil {
				exp = &expected.epoch
			}
			t, err = m.prepareIncrementEpoch(timeoutMs, exp, s.c.nowMs())
		}
	case Ongoing:
		// Abort the open transaction at a bumped epoch, never handed out;
		// the client retries and gets the next one.
		t, err = m.prepareFenceEpoch()
	default:
		err = errors.New("transactional id " + m.id + " in state " + m.state.String())
	}
	if err != nil {
		return txnState{}, s.prepareErrCode(err)
	}
	return t, codeNone
}

// prepareErrCode is the answer to a transition refused: a Kafka error
// as itself, anything else (a broken invariant) logged and answered
// UNKNOWN_SERVER_ERROR.
func (s *shard) prepareErrCode(err error) int16 {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Code
	}
	s.c.log.Error("transaction state transition refused", "partition", s.part, "err", err)
	return codeUnknownServerError
}
