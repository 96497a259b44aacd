package txn

// EndTxn and the completion of a transaction once its markers are
// written (Kafka's TransactionCoordinator.endTransaction, for transaction
// versions 0-1 and 2).

import (
	"errors"
	"math"
)

// Markers are the transaction markers one ended transaction needs: a
// COMMIT or ABORT control batch at ProducerID/ProducerEpoch in each of its
// partitions (WriteTxnMarkers), then CompleteTxn.
type Markers struct {
	TransactionalID  string
	ProducerID       int64
	ProducerEpoch    int16
	CoordinatorEpoch int32
	Commit           bool
	// TransactionVersion is the client's transaction version
	// (WriteTxnMarkers v2, KIP-1228).
	TransactionVersion int16
	Partitions         []TopicPartition
}

// EndResult is EndTxn's answer. With transaction version 2 ProducerID and
// ProducerEpoch are the ones the producer uses next (EndTxn v5); -1
// otherwise. Markers, when not nil, are the markers to write (also handed
// to Config.SendMarkers).
type EndResult struct {
	Err           int16
	ProducerID    int64
	ProducerEpoch int16
	Markers       *Markers
}

func endErr(code int16) EndResult {
	return EndResult{Err: code, ProducerID: noProducerID, ProducerEpoch: noEpoch}
}

// EndTxn serves EndTxn: it persists PrepareCommit or PrepareAbort and
// returns the markers to write. clientTV is the client's transaction
// version (2 from EndTxn v5): with 2 the epoch is bumped on every end,
// an abort is accepted with no transaction open, and retries are told
// apart by the epoch.
func (c *Coordinator) EndTxn(transactionalID string, producerID int64, producerEpoch int16, commit bool, clientTV int16) EndResult {
	if transactionalID == "" {
		return endErr(codeInvalidRequest)
	}
	s, code := c.lockShard(transactionalID)
	if code != codeNone {
		return endErr(code)
	}
	m := s.txns[transactionalID]
	res := endErr(codeInvalidProducerIDMapping)
	if m != nil {
		res = s.endLocked(m, producerID, producerEpoch, commit, true, clientTV)
	}
	s.mu.Unlock()
	if res.Markers != nil {
		c.sendMarkers(*res.Markers)
	}
	return res
}

// endLocked ends m's transaction; fromClient is false for the aborts the
// coordinator starts (fencing, timeouts), which come with the fenced
// epoch. Called and returns with s.mu held (persist releases it while
// waiting).
func (s *shard) endLocked(m *meta, pid int64, epoch int16, commit, fromClient bool, tv int16) EndResult {
	if !epochBumps(tv) {
		return s.endV1(m, pid, epoch, commit, fromClient)
	}
	isFence := m.hasPending && m.pending == PrepareEpochFence
	// A retry of an end whose epoch bump exhausted the epochs: the id has
	// moved to a new producer id at epoch 0.
	retryOnOverflow := !isFence && m.prevProducerID == pid && epoch == math.MaxInt16-1 && m.producerEpoch == 0
	// A retry of an end whose bump is persisted.
	retryOnBump := !isFence && int32(m.producerEpoch) == int32(epoch)+1
	isRetry := retryOnBump || retryOnOverflow
	var validEpoch bool
	switch {
	case isFence:
		validEpoch = (!fromClient || epoch == m.producerEpoch) && epoch >= m.producerEpoch
	case m.state == PrepareCommit || m.state == PrepareAbort:
		validEpoch = retryOnBump
	case m.state == CompleteCommit || m.state == CompleteAbort:
		validEpoch = isRetry || epoch == m.producerEpoch
	default:
		validEpoch = epoch == m.producerEpoch
	}
	switch {
	case m.producerID != pid && !retryOnOverflow:
		return endErr(codeInvalidProducerIDMapping)
	case !validEpoch:
		return endErr(codeProducerFenced)
	case m.hasPending && !isFence:
		return endErr(codeConcurrentTransactions)
	}
	current := EndResult{ProducerID: m.producerID, ProducerEpoch: m.producerEpoch}
	switch m.state {
	case Ongoing:
		to := PrepareAbort
		if commit {
			to = PrepareCommit
		}
		return s.prepareAndPersistEnd(m, to, epoch, isFence, tv, false)
	case CompleteCommit:
		switch {
		case commit && isRetry:
			return current
		case !commit && !isRetry:
			return s.prepareAndPersistEnd(m, PrepareAbort, epoch, false, tv, true)
		}
		return endErr(codeInvalidTxnState)
	case CompleteAbort:
		switch {
		case !commit && isRetry:
			return current
		case !commit:
			return s.prepareAndPersistEnd(m, PrepareAbort, epoch, false, tv, true)
		}
		return endErr(codeInvalidTxnState)
	case PrepareCommit:
		if commit {
			return endErr(codeConcurrentTransactions)
		}
		return endErr(codeInvalidTxnState)
	case PrepareAbort:
		if !commit {
			return endErr(codeConcurrentTransactions)
		}
		return endErr(codeInvalidTxnState)
	case Empty:
		if !commit {
			return s.prepareAndPersistEnd(m, PrepareAbort, epoch, false, tv, true)
		}
		return endErr(codeInvalidTxnState)
	}
	return endErr(s.prepareErrCode(errors.New("transactional id " + m.id + " in state " + m.state.String())))
}

// endV1 is EndTxn for transaction versions 0 and 1: no epoch bump, and a
// retry is recognized by the state alone.
func (s *shard) endV1(m *meta, pid int64, epoch int16, commit, fromClient bool) EndResult {
	switch {
	case m.producerID != pid:
		return endErr(codeInvalidProducerIDMapping)
	case (fromClient && epoch != m.producerEpoch) || epoch < m.producerEpoch:
		return endErr(codeProducerFenced)
	case m.hasPending && m.pending != PrepareEpochFence:
		return endErr(codeConcurrentTransactions)
	}
	isFence := m.hasPending && m.pending == PrepareEpochFence
	done := endErr(codeNone)
	switch m.state {
	case Ongoing:
		to := PrepareAbort
		if commit {
			to = PrepareCommit
		}
		return s.prepareAndPersistEnd(m, to, epoch, isFence && !commit, 0, false)
	case CompleteCommit:
		if commit {
			return done
		}
	case CompleteAbort:
		if !commit {
			return done
		}
	case PrepareCommit:
		if commit {
			return endErr(codeConcurrentTransactions)
		}
	case PrepareAbort:
		if !commit {
			return endErr(codeConcurrentTransactions)
		}
	case Empty:
	default:
		return endErr(s.prepareErrCode(errors.New("transactional id " + m.id + " in state " + m.state.String())))
	}
	return endErr(codeInvalidTxnState)
}

// prepareAndPersistEnd persists PrepareCommit/PrepareAbort. A fence first
// takes the fenced epoch in memory (it stays even if the write fails, so
// the fenced producer stays fenced; the next fence does not bump again).
func (s *shard) prepareAndPersistEnd(m *meta, to State, epoch int16, isFence bool, tv int16, noPartitionAdded bool) EndResult {
	next := noProducerID
	if !isFence && epochBumps(tv) && epochExhausted(m.producerEpoch) {
		pid, err := s.c.cfg.NextProducerID()
		if err != nil {
			s.c.log.Error("allocate producer id", "transactional_id", m.id, "err", err)
			return endErr(codeNotAvailable)
		}
		next = pid
	}
	if isFence {
		m.abandon()
		m.producerEpoch, m.lastProducerEpoch = epoch, noEpoch
	}
	t, err := m.prepareEnd(to, tv, next, s.c.nowMs(), noPartitionAdded)
	if err != nil {
		return endErr(s.prepareErrCode(err))
	}
	if code := s.persist(m, t); code != codeNone {
		if isFence && code != codeNotCoordinator {
			m.failedFence = true
		}
		return endErr(code)
	}
	res := EndResult{ProducerID: noProducerID, ProducerEpoch: noEpoch}
	if epochBumps(tv) {
		// What the producer uses next: the bumped epoch, or the next
		// producer id at epoch 0 when the bump exhausted the epochs.
		res.ProducerID, res.ProducerEpoch = m.producerID, m.producerEpoch
		if m.nextProducerID != noProducerID {
			res.ProducerID, res.ProducerEpoch = m.nextProducerID, 0
		}
	}
	mk := s.markersOf(m)
	res.Markers = &mk
	return res
}

// CompleteTxn records that every marker of an ended transaction is
// written: the transaction moves to CompleteCommit or CompleteAbort (with
// transaction version 2, to its next producer id if its epochs ran out).
// A failed write leaves it prepared: the caller retries, and a new leader
// of the partition sends the markers again.
func (c *Coordinator) CompleteTxn(mk Markers) int16 {
	s, code := c.lockShard(mk.TransactionalID)
	if code != codeNone {
		return code
	}
	defer s.mu.Unlock()
	m := s.txns[mk.TransactionalID]
	want := PrepareAbort
	if mk.Commit {
		want = PrepareCommit
	}
	switch {
	case s.epoch != mk.CoordinatorEpoch:
		return codeNotCoordinator
	case m == nil || m.producerID != mk.ProducerID:
		return codeInvalidProducerIDMapping
	case m.producerEpoch != mk.ProducerEpoch:
		return codeProducerFenced
	case m.hasPending:
		return codeConcurrentTransactions
	case m.state != want:
		return codeInvalidTxnState
	}
	t, err := m.prepareComplete(c.nowMs())
	if err != nil {
		return s.prepareErrCode(err)
	}
	return s.persist(m, t)
}

// PendingMarkers lists the markers of the transactions of a partition
// that are prepared and not completed (to retry those whose CompleteTxn
// failed).
func (c *Coordinator) PendingMarkers(partition int32) []Markers {
	c.mu.RLock()
	s := c.shards[partition]
	c.mu.RUnlock()
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.loaded || s.gone {
		return nil
	}
	var out []Markers
	for _, m := range s.txns {
		if !m.hasPending && (m.state == PrepareCommit || m.state == PrepareAbort) {
			out = append(out, s.markersOf(m))
		}
	}
	return out
}
