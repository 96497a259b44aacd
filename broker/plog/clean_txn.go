package plog

// Transactions in the log cleaner, after Kafka's CleanedTransactionMetadata
// and the cleaner's batch retention rules:
//
//   - The aborted transactions overlapping the cleaned range come from the
//     .txnindex files (AbortedTransactions). Walking the batches in offset
//     order, a transaction becomes "aborted and being read" once a batch
//     reaches its first offset; a transactional data batch of its
//     producer is then aborted, and its records are dropped (the offset
//     map ignores them too, so an aborted record never shadows an older
//     committed one). Other transactional batches are committed (the
//     cleaner works below the last stable offset, so no transaction there
//     is still open) and compacted like any other.
//   - An ABORT marker whose transaction had a batch in this pass (kept,
//     emptied or dropped) is kept, and its .txnindex entry goes to the
//     cleaned segment; a COMMIT marker whose transaction had a batch in
//     this pass is kept. A marker whose transaction has no batch left can
//     go: the first pass that finds it so gives it a delete horizon (now +
//     delete.retention.ms, KIP-534, as for tombstones), a pass after the
//     horizon removes it.
//   - A batch holding a producer's last data offset, or, for a producer
//     whose last write is a marker, that marker (its epoch fences zombies),
//     stays as a header-only batch even when its records go, and so does
//     the last batch before the first uncleanable offset.
//
// The state is kept across the groups of one pass, so a transaction whose
// data and marker land in different cleaned segments is judged whole.

import (
	"cmp"
	"slices"
)

// abortedRun is an aborted transaction the pass has reached.
type abortedRun struct {
	txn  AbortedTxn
	seen bool // a batch of it was read in this pass
}

// cleanTxns is the cleaner's view of transactions during one walk of the
// log (the offset map's, or the rewrite's). A nil *cleanTxns knows no
// transaction: nothing is aborted and every marker stays.
type cleanTxns struct {
	pending   []AbortedTxn // not reached yet, by first offset
	aborted   map[int64]*abortedRun
	committed map[int64]bool
	// kept collects the .txnindex entries of the ABORT markers kept in
	// the current cleaned segment.
	kept []AbortedTxn
}

func newCleanTxns(aborted []AbortedTxn) *cleanTxns {
	p := slices.Clone(aborted)
	slices.SortStableFunc(p, func(a, b AbortedTxn) int { return cmp.Compare(a.FirstOffset, b.FirstOffset) })
	return &cleanTxns{pending: p, aborted: map[int64]*abortedRun{}, committed: map[int64]bool{}}
}

// reach moves the aborted transactions starting at or before offset to
// the ones being read (Kafka's consumeAbortedTxnsUpTo).
func (t *cleanTxns) reach(offset int64) {
	for len(t.pending) > 0 && t.pending[0].FirstOffset <= offset {
		a := t.pending[0]
		t.pending = t.pending[1:]
		if _, ok := t.aborted[a.ProducerID]; !ok {
			t.aborted[a.ProducerID] = &abortedRun{txn: a}
		}
	}
}

// onData notes a data batch and reports whether it belongs to an aborted
// transaction (its records may all go).
func (t *cleanTxns) onData(h *batchHeader) bool {
	if t == nil {
		return false
	}
	t.reach(h.lastOffset())
	if !h.isTransactional() {
		return false
	}
	if a, ok := t.aborted[h.ProducerID]; ok {
		a.seen = true
		return true
	}
	t.committed[h.ProducerID] = true
	return false
}

// onControl notes a control batch b (header h) and reports whether it may
// go once its delete horizon passes: a marker whose transaction has no
// batch in this pass, or a control batch already emptied. A control
// record that is not a transaction marker is kept.
func (t *cleanTxns) onControl(h *batchHeader, b []byte) bool {
	if t == nil {
		return false
	}
	t.reach(h.lastOffset())
	if h.RecordCount == 0 {
		return true
	}
	m, err := DecodeControlBatch(b)
	if err != nil {
		return false
	}
	switch m.Type {
	case ControlAbort:
		a, ok := t.aborted[h.ProducerID]
		delete(t.aborted, h.ProducerID)
		if ok && a.seen {
			t.kept = append(t.kept, a.txn)
			return false
		}
		return true
	case ControlCommit:
		seen := t.committed[h.ProducerID]
		delete(t.committed, h.ProducerID)
		return !seen
	}
	return false
}

// takeKept returns the .txnindex entries collected since the last call.
func (t *cleanTxns) takeKept() []AbortedTxn {
	if t == nil {
		return nil
	}
	k := t.kept
	t.kept = nil
	return k
}

// lastRecord is what the cleaner keeps of an active producer (Kafka's
// LastRecord): the last offset of its last data batch (-1: its batches
// are gone, its last write was a marker) and its epoch.
type lastRecord struct {
	dataOffset int64
	epoch      int16
}

// producerLastRecords returns the last record of each producer the state
// knows (Kafka's lastRecordsOfActiveProducers).
func (l *Log) producerLastRecords() map[int64]lastRecord {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[int64]lastRecord, len(l.producers.producers))
	for id, e := range l.producers.producers {
		r := lastRecord{dataOffset: -1, epoch: e.epoch}
		if n := len(e.batches); n > 0 {
			r.dataOffset = e.batches[n-1].LastOffset
		}
		out[id] = r
	}
	return out
}

// lastOfProducer tells whether batch h holds its producer's last record:
// its last data batch, or when that is gone, a marker of its epoch.
func (c *cleaner) lastOfProducer(h *batchHeader) bool {
	if h.ProducerID < 0 {
		return false
	}
	r, ok := c.lastRecords[h.ProducerID]
	if !ok {
		return false
	}
	if r.dataOffset >= 0 {
		return h.lastOffset() == r.dataOffset
	}
	return h.isControl() && h.ProducerEpoch == r.epoch
}
