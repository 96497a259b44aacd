package plog

// Transactions in producer state (Kafka's ProducerStateManager ongoingTxns
// and unreplicatedTxns, ProducerAppendInfo.appendEndTxnMarker):
//
//   - A producer's first transactional batch opens its transaction at the
//     batch's first offset (Update); the transaction is ongoing until a
//     marker of the producer is appended (endTxn).
//   - A marker ends the transaction. A marker of a producer without an
//     open transaction (an empty transaction) changes only its epoch and
//     coordinator epoch: it completes nothing, as in Kafka.
//   - A completed transaction stays "unreplicated" until the high
//     watermark passes its marker: read_committed readers must not pass
//     its first offset before they can see its marker.
//   - The first unstable offset is the smallest first offset of the
//     ongoing and unreplicated transactions; the last stable offset (LSO)
//     is min(first unstable offset, high watermark).

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// completedTxn is a transaction whose marker was appended.
type completedTxn struct {
	producerID  int64
	firstOffset int64
	lastOffset  int64 // the marker's offset
	abort       bool
}

// txnState is the partition's open and unreplicated transactions. There
// are few at a time (one per producer in a transaction), so lists do.
type txnState struct {
	ongoing      map[int64]int64 // producer id -> first offset
	unreplicated []completedTxn  // by marker offset
}

func (t *txnState) begin(pid, first int64) {
	if t.ongoing == nil {
		t.ongoing = make(map[int64]int64)
	}
	t.ongoing[pid] = first
}

// firstOngoingExcept is the smallest first offset of an ongoing
// transaction of another producer than pid (-1: none).
func (t *txnState) firstOngoingExcept(pid int64) int64 {
	first := int64(-1)
	for id, off := range t.ongoing {
		if id != pid && (first < 0 || off < first) {
			first = off
		}
	}
	return first
}

// complete moves pid's transaction from ongoing to unreplicated.
func (t *txnState) complete(c completedTxn) {
	delete(t.ongoing, c.producerID)
	i, _ := slices.BinarySearchFunc(t.unreplicated, c.lastOffset, func(x completedTxn, off int64) int {
		switch {
		case x.lastOffset < off:
			return -1
		case x.lastOffset > off:
			return 1
		}
		return 0
	})
	t.unreplicated = slices.Insert(t.unreplicated, i, c)
}

// dropCompletedBefore forgets completed transactions whose marker is
// below offset (the high watermark passed it, or the log start did).
func (t *txnState) dropCompletedBefore(offset int64) {
	n := 0
	for n < len(t.unreplicated) && t.unreplicated[n].lastOffset < offset {
		n++
	}
	if n > 0 {
		t.unreplicated = slices.Delete(t.unreplicated, 0, n)
	}
}

// firstUnstable is the first offset of the oldest ongoing or unreplicated
// transaction, -1 when there is none.
func (t *txnState) firstUnstable() int64 {
	first := t.firstOngoingExcept(-1)
	for _, c := range t.unreplicated {
		if first < 0 || c.firstOffset < first {
			first = c.firstOffset
		}
	}
	return first
}

// rebuildTxns derives the ongoing transactions from the entries (after a
// snapshot load); unreplicated ones are not in snapshots (as in Kafka).
func (p *ProducerState) rebuildTxns() {
	p.txns = txnState{}
	for id, e := range p.producers {
		if e.txnFirst >= 0 {
			p.txns.begin(id, e.txnFirst)
		}
	}
}

// setProducers replaces the entries (a snapshot load).
func (p *ProducerState) setProducers(m map[int64]*producerEntry) {
	p.producers = m
	p.rebuildTxns()
}

// checkTxnState refuses a non-transactional batch of a producer in a
// transaction, as Kafka's appendDataBatch (INVALID_TXN_STATE).
func checkTxnState(e *producerEntry, b BatchMeta) error {
	if e != nil && e.txnFirst >= 0 && !b.Transactional {
		return fmt.Errorf("producer %d wrote a non-transactional batch in its transaction open since offset %d: %w",
			b.ProducerID, e.txnFirst, kerr.InvalidTxnState)
	}
	return nil
}

// checkMarker validates a transaction marker from the coordinator against
// the state, without changing it (Kafka's ProducerAppendInfo for origin
// COORDINATOR): an epoch older than the producer's is
// INVALID_PRODUCER_EPOCH (Kafka replaced PRODUCER_FENCED by it in 2.7),
// and with transaction version 2 (KIP-890: the coordinator bumps the
// epoch on every end, KIP-1228 tells the partition) an epoch not newer
// than the producer's is too while the producer has a transaction open,
// so a late marker cannot end the next transaction. A marker of the
// current epoch with no transaction open is a retry of one already
// written (the coordinator's new leader completing a prepared
// transaction, or a resend after a lost answer) and is written again
// (Kafka's KAFKA-19999); refusing it would leave the transaction
// prepared for ever. A coordinator epoch older than the one of the
// producer's last marker is TRANSACTION_COORDINATOR_FENCED. Replicated
// markers are not checked.
func (p *ProducerState) checkMarker(pid int64, epoch int16, m EndTxnMarker, transactionVersion int16) error {
	e := p.producers[pid]
	if e == nil {
		return nil
	}
	if epoch < e.epoch || transactionVersion >= 2 && epoch == e.epoch && e.txnFirst >= 0 {
		return fmt.Errorf("transaction marker (transaction version %d) of producer %d has epoch %d, not newer than the current epoch %d: %w",
			transactionVersion, pid, epoch, e.epoch, kerr.InvalidProducerEpoch)
	}
	if e.coordEpoch > m.CoordinatorEpoch {
		return fmt.Errorf("transaction marker of producer %d has coordinator epoch %d, older than %d: %w",
			pid, m.CoordinatorEpoch, e.coordEpoch, kerr.TransactionCoordinatorFenced)
	}
	return nil
}

// endTxn applies a marker appended at offset with timestamp ts: the
// producer's epoch and coordinator epoch become the marker's and its
// transaction, if any, completes. It returns the completed transaction
// (nil for a marker of an empty transaction) and, for it, the last stable
// offset Kafka stores in the .txnindex: the first offset of the oldest
// other ongoing transaction, else the marker's offset + 1.
func (p *ProducerState) endTxn(pid int64, epoch int16, m EndTxnMarker, offset, ts int64) (*completedTxn, int64) {
	if p.producers == nil {
		p.producers = make(map[int64]*producerEntry)
	}
	e := p.producers[pid]
	if e == nil {
		e = newProducerEntry(epoch)
		p.producers[pid] = e
	}
	if e.epoch != epoch {
		e.epoch = epoch
		e.batches = e.batches[:0]
	}
	e.coordEpoch = m.CoordinatorEpoch
	e.lastTimestamp = ts
	if e.txnFirst < 0 {
		return nil, -1
	}
	c := completedTxn{producerID: pid, firstOffset: e.txnFirst, lastOffset: offset, abort: m.Type == ControlAbort}
	e.txnFirst = -1
	lso := p.txns.firstOngoingExcept(pid)
	if lso < 0 {
		lso = offset + 1
	}
	p.txns.complete(c)
	return &c, lso
}

// endEmptiedTxn applies a marker the cleaner emptied (a header-only
// control batch at offset): the producer's epoch becomes the batch's and
// an open transaction ends, as a COMMIT would end it (no records of it
// are left to filter); the coordinator epoch stays.
func (p *ProducerState) endEmptiedTxn(pid int64, epoch int16, offset, ts int64) {
	coord := int32(-1)
	if e := p.producers[pid]; e != nil {
		coord = e.coordEpoch
	}
	p.endTxn(pid, epoch, EndTxnMarker{Type: ControlCommit, CoordinatorEpoch: coord}, offset, ts)
}

// OpenTxn returns the first offset of the producer's open transaction.
func (p *ProducerState) OpenTxn(pid int64) (firstOffset int64, ok bool) {
	e := p.producers[pid]
	if e == nil || e.txnFirst < 0 {
		return -1, false
	}
	return e.txnFirst, true
}

// lastStableOffset is min(first unstable offset, hw), after forgetting
// the completed transactions whose marker is below hw (Kafka's
// onHighWatermarkUpdated).
func (p *ProducerState) lastStableOffset(hw int64) int64 {
	p.txns.dropCompletedBefore(hw)
	if f := p.txns.firstUnstable(); f >= 0 && f < hw {
		return f
	}
	return hw
}

// ProducerInfo is one producer of a partition as DescribeProducers
// reports it (KIP-664).
type ProducerInfo struct {
	ProducerID            int64
	ProducerEpoch         int16
	LastSequence          int32 // -1: none
	LastTimestamp         int64
	CoordinatorEpoch      int32 // -1: none
	CurrentTxnStartOffset int64 // -1: no open transaction
}

// List returns every producer, by id.
func (p *ProducerState) List() []ProducerInfo {
	out := make([]ProducerInfo, 0, len(p.producers))
	for id, e := range p.producers {
		out = append(out, ProducerInfo{
			ProducerID:            id,
			ProducerEpoch:         e.epoch,
			LastSequence:          e.lastSeq(),
			LastTimestamp:         e.lastTimestamp,
			CoordinatorEpoch:      e.coordEpoch,
			CurrentTxnStartOffset: e.txnFirst,
		})
	}
	slices.SortFunc(out, func(a, b ProducerInfo) int { return cmp.Compare(a.ProducerID, b.ProducerID) })
	return out
}
