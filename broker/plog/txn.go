package plog

// The partition side of transactions: appending transaction markers
// (control batches), the last stable offset and the aborted transactions
// a read_committed fetch needs. Producer state keeps the transactions
// (producerstate_txn.go); each segment keeps the aborted ones whose marker
// it holds (txnindex.go).

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"

	"strata/internal/vfs"
)

// maxControlBatch bounds the bytes read of a control batch found in a
// segment (Kafka's markers take about 80 bytes).
const maxControlBatch = 4096

// AppendControl appends a transaction marker for producerID as the
// partition leader (WriteTxnMarkers; transactionVersion is its KIP-1228
// field, 0 before v2): it validates the marker against the producer state
// (an epoch older than the producer's, or with transaction version 2 not
// newer, is INVALID_PRODUCER_EPOCH; a coordinator epoch older than the
// last marker's TRANSACTION_COORDINATOR_FENCED), writes one control batch
// stamped with
// leaderEpoch, ends the producer's transaction and, for an ABORT of a
// non-empty transaction, adds its entry to the segment's .txnindex. A
// marker for a producer without an open transaction here is written too
// (Kafka does the same) and completes nothing.
func (l *Log) AppendControl(producerID int64, producerEpoch int16, m EndTxnMarker, leaderEpoch int32, transactionVersion int16) (AppendInfo, error) {
	if producerID < 0 {
		return AppendInfo{}, fmt.Errorf("%w: transaction marker without a producer id (%d)", kerr.InvalidRecord, producerID)
	}
	if producerEpoch < 0 {
		return AppendInfo{}, fmt.Errorf("%w: transaction marker of producer %d with epoch %d", kerr.InvalidProducerEpoch, producerID, producerEpoch)
	}
	if m.Type != ControlAbort && m.Type != ControlCommit {
		return AppendInfo{}, fmt.Errorf("%w: transaction marker type %s", kerr.InvalidRecord, m.Type)
	}
	cfg := l.cfg.Load()
	nowMs := l.nowMs()
	records := ControlBatch(producerID, producerEpoch, m, nowMs)

	l.mu.Lock()
	if err := l.writableLocked(); err != nil {
		l.mu.Unlock()
		return AppendInfo{}, err
	}
	if err := l.producers.checkMarker(producerID, producerEpoch, m, transactionVersion); err != nil {
		l.mu.Unlock()
		return AppendInfo{}, err
	}
	if err := l.maybeRollLocked(cfg, int64(len(records)), 1, 1, nowMs, nowMs, l.leo()); err != nil {
		l.mu.Unlock()
		return AppendInfo{}, err
	}
	off := l.leo()
	stampBatch(records, off, leaderEpoch, cfg.TimestampType, nowMs)
	if leaderEpoch >= 0 {
		if latest, ok := l.epochs.Latest(); !ok || leaderEpoch > latest.Epoch {
			if err := l.assignEpochLocked(leaderEpoch, off); err != nil {
				l.mu.Unlock()
				return AppendInfo{}, err
			}
		}
	}
	if err := l.writeLocked(cfg, records); err != nil {
		l.mu.Unlock()
		return AppendInfo{}, err
	}
	info := AppendInfo{FirstOffset: off, LastOffset: off, LogAppendTime: -1, LogStartOffset: l.logStart, NumRecords: 1}
	if cfg.TimestampType == LogAppendTime {
		info.LogAppendTime = nowMs
	}
	flush := l.needFlushLocked(cfg, nowMs)
	l.mu.Unlock()
	if flush {
		if err := l.Flush(); err != nil {
			return info, err
		}
	}
	return info, nil
}

// applyControlLocked applies a control batch b (header h) just written to
// segment s, or replayed from it: a transaction marker ends its
// producer's transaction. Other control records, and markers that do not
// decode, change nothing (a leader validated its own; a replica's are
// its leader's). A control batch without records is a marker the cleaner
// emptied, kept for its producer's epoch (clean_txn.go): it sets the
// epoch and ends a transaction that a producer snapshot still holds open,
// without a .txnindex entry (none of its records are left).
func (l *Log) applyControlLocked(s *segment, h *batchHeader, b []byte) {
	if h.ProducerID < 0 {
		return
	}
	if h.RecordCount == 0 {
		delete(l.txnGuards, h.ProducerID)
		l.producers.endEmptiedTxn(h.ProducerID, h.ProducerEpoch, h.BaseOffset, h.MaxTimestamp)
		l.noteTxnsLocked()
		return
	}
	m, err := DecodeControlBatch(b)
	if err != nil {
		l.logger.Warn("ignoring control batch", "dir", l.dir, "offset", h.BaseOffset, "err", err)
		return
	}
	delete(l.txnGuards, h.ProducerID) // a verification begun before the marker no longer holds
	c, lso := l.producers.endTxn(h.ProducerID, h.ProducerEpoch, m, h.BaseOffset, h.MaxTimestamp)
	if c != nil && c.abort {
		s.txn.add(AbortedTxn{ProducerID: c.producerID, FirstOffset: c.firstOffset, LastOffset: c.lastOffset, LastStableOffset: lso})
		l.abortedTxns.Store(true)
	}
	l.noteTxnsLocked()
}

// noteTxnsLocked updates unreplicatedTxns and unstableTxns after the
// transactions changed. Whatever adds a transaction calls it before
// releasing the log's lock (the append of a transactional batch, a
// marker, a reload of producer state), so that an unlocked read of 0
// means the high watermark read before it is a stable offset.
func (l *Log) noteTxnsLocked() {
	t := &l.producers.txns
	l.unreplicatedTxns.Store(int32(len(t.unreplicated)))
	l.unstableTxns.Store(int32(len(t.ongoing) + len(t.unreplicated)))
}

// OnHighWatermark tells the log that the high watermark reached hw:
// ended transactions whose marker is below it stop holding the last
// stable offset back (Kafka's onHighWatermarkUpdated). Without such
// transactions it takes no lock (one atomic load), so the partition calls
// it on every high watermark advance.
func (l *Log) OnHighWatermark(hw int64) {
	if l.unreplicatedTxns.Load() == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.producers.txns.dropCompletedBefore(hw)
	l.noteTxnsLocked()
}

// readControlBatch reads the control batch with header h at pos of f.
func readControlBatch(f vfs.File, pos int64, h *batchHeader) ([]byte, error) {
	if h.size() > maxControlBatch {
		return nil, fmt.Errorf("%w: control batch of %d bytes at %d", errBadControl, h.size(), pos)
	}
	b := make([]byte, h.size())
	if _, err := f.ReadAt(b, pos); err != nil {
		return nil, fmt.Errorf("read control batch at %d: %w", pos, err)
	}
	return b, nil
}

// FirstUnstableOffset is the first offset of the oldest transaction that
// is open, or completed with its marker not yet below the high watermark
// (Kafka's firstUnstableOffset); -1 when there is none.
func (l *Log) FirstUnstableOffset() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.producers.txns.firstUnstable()
}

// LastStableOffset returns the last stable offset given the partition's
// high watermark hw: min(first unstable offset, hw). read_committed
// fetches read below it. Calling it also tells the log that hw was
// reached (Kafka's onHighWatermarkUpdated): completed transactions whose
// marker is below hw no longer hold the LSO back (as OnHighWatermark).
//
// Without open or unreplicated transactions it takes no lock (one atomic
// load): the LSO is hw.
func (l *Log) LastStableOffset(hw int64) int64 {
	if l.unstableTxns.Load() == 0 {
		return hw
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	lso := l.producers.lastStableOffset(hw)
	l.noteTxnsLocked()
	return lso
}

// AbortedTransactions returns the aborted transactions overlapping
// [fetchOffset, upperBound): those whose marker is at or after
// fetchOffset and whose first offset is below upperBound, from the
// .txnindex of the segment holding fetchOffset and the following ones
// until an entry's last stable offset reaches upperBound (Kafka's
// Log.collectAbortedTransactions). A read_committed fetch returning
// batches from fetchOffset up to upperBound sends them to the consumer,
// which drops the records of those transactions. A log that never held
// an aborted transaction answers none without taking its lock.
func (l *Log) AbortedTransactions(fetchOffset, upperBound int64) []AbortedTxn {
	if !l.abortedTxns.Load() {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []AbortedTxn
	if fetchOffset >= upperBound {
		return nil
	}
	for _, s := range l.segs[l.segmentFor(fetchOffset):] {
		var done bool
		if out, done = s.txn.collect(fetchOffset, upperBound, out); done {
			break
		}
	}
	return out
}

// OpenTransaction returns the first offset of the producer's open
// transaction in this partition (DescribeProducers' currentTxnStartOffset).
func (l *Log) OpenTransaction(producerID int64) (firstOffset int64, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.producers.OpenTxn(producerID)
}

// Producers lists the partition's producers (DescribeProducers).
func (l *Log) Producers() []ProducerInfo {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.producers.List()
}

// ProducerCount is the number of producer ids in the partition's
// producer state (Kafka's ProducerIdCount).
func (l *Log) ProducerCount() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.producers.Len()
}

// ExpireProducers applies producer.id.expiration.ms: producers whose last
// write is at least maxAgeMs old are forgotten, except those with an open
// transaction.
func (l *Log) ExpireProducers(maxAgeMs int64) {
	nowMs := l.nowMs()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.producers.ExpireProducers(nowMs, maxAgeMs)
}

// HasOngoingTransaction reports whether the producer has an open
// transaction in this partition at this epoch (Kafka's
// UnifiedLog.hasOngoingTransaction: a transactional write that finds none
// is verified with the transaction coordinator first, KIP-890).
func (l *Log) HasOngoingTransaction(producerID int64, producerEpoch int16) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.producers.producers[producerID]
	return e != nil && e.txnFirst >= 0 && e.epoch == producerEpoch
}

// StartTxnVerification returns the verification guard of a producer
// whose transactional write the leader is about to verify with the
// transaction coordinator (Kafka's VerificationGuard, KIP-890): the one
// being verified already, else a new one. A transaction marker of the
// producer drops it, so a write verified before a marker is refused
// after it (AppendVerified).
func (l *Log) StartTxnVerification(producerID int64) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if g, ok := l.txnGuards[producerID]; ok {
		return g
	}
	if l.txnGuards == nil {
		l.txnGuards = map[int64]uint64{}
	}
	l.guardSeq++
	l.txnGuards[producerID] = l.guardSeq
	return l.guardSeq
}

// AppendVerified is Append for a transactional batch of producerID at
// producerEpoch: unless the producer has an open transaction in the
// partition at that epoch, guard must be its current verification guard
// (0: none was taken), else the append is refused with INVALID_TXN_STATE,
// as Kafka's "Record was not part of an ongoing transaction".
func (l *Log) AppendVerified(records []byte, leaderEpoch int32, producerID int64, producerEpoch int16, guard uint64) (AppendInfo, error) {
	return l.append(records, leaderEpoch, func() error {
		e := l.producers.producers[producerID]
		if e != nil && e.txnFirst >= 0 && e.epoch == producerEpoch {
			return nil
		}
		if g, ok := l.txnGuards[producerID]; ok && guard != 0 && g == guard {
			return nil
		}
		return fmt.Errorf("producer %d: record was not part of an ongoing transaction: %w", producerID, kerr.InvalidTxnState)
	})
}
