package plog

// Producer state for idempotent producers (owner: producer-state work; the
// log calls only the functions declared here). Kafka keeps, per producer id,
// the epoch and the metadata of the last five appended batches, so that a
// retried batch is answered with its original offsets and a gap is refused.
//
// The rules follow Kafka's ProducerAppendInfo / ProducerStateEntry:
//
//   - A producer the state does not know (never seen, expired, or all of its
//     batches deleted) is accepted with any sequence number. Kafka does the
//     same since KIP-360: without state the broker cannot tell a gap from
//     data that retention or DeleteRecords removed.
//   - An epoch lower than the current one is INVALID_PRODUCER_EPOCH.
//   - A higher epoch must start at sequence 0, else
//     OUT_OF_ORDER_SEQUENCE_NUMBER.
//   - With the current epoch, a batch whose (first, last) sequence equals one
//     of the cached batches is a duplicate; otherwise its first sequence must
//     follow the last one (after math.MaxInt32 comes 0).
//
// Snapshot files (WriteSnapshot, LoadSnapshot, DeleteSnapshotsBefore) are
// in producerstate_snapshot.go.

import (
	"errors"
	"fmt"
	"math"

	"github.com/twmb/franz-go/pkg/kerr"
)

// BatchMeta is what producer state needs of one appended batch.
type BatchMeta struct {
	ProducerID    int64
	ProducerEpoch int16
	FirstSeq      int32
	LastSeq       int32
	FirstOffset   int64
	LastOffset    int64
	MaxTimestamp  int64
	// Transactional is the batch's transactional attribute bit: the first
	// transactional batch of a producer opens its transaction in the
	// partition (producerstate_txn.go).
	Transactional bool
}

// producerBatchesKept is how many batches per producer are remembered for
// duplicate detection (Kafka's NUM_BATCHES_TO_RETAIN; the producer's
// max.in.flight.requests.per.connection may not exceed it).
const producerBatchesKept = 5

// producerEntry is the state of one producer id.
type producerEntry struct {
	epoch int16
	// batches of the current epoch, oldest first, at most
	// producerBatchesKept. Empty only for an entry loaded from a snapshot
	// that had no batch (Kafka writes lastOffset -1 then).
	batches []BatchMeta
	// lastTimestamp is the max timestamp of the last batch (drives
	// producer.id.expiration.ms).
	lastTimestamp int64
	// coordEpoch is the coordinator epoch of the producer's last
	// transaction marker (-1: none); txnFirst is the first offset of its
	// open transaction (-1: none). See producerstate_txn.go.
	coordEpoch int32
	txnFirst   int64
}

func (e *producerEntry) lastSeq() int32 {
	if len(e.batches) == 0 {
		return -1 // RecordBatch.NO_SEQUENCE
	}
	return e.batches[len(e.batches)-1].LastSeq
}

// ProducerState tracks idempotent producers of one partition. Not safe for
// concurrent use; the log's mutex guards it.
type ProducerState struct {
	producers map[int64]*producerEntry
	txns      txnState
}

// NewProducerState returns empty state.
func NewProducerState() *ProducerState {
	return &ProducerState{producers: make(map[int64]*producerEntry)}
}

// newProducerEntry is the entry of a producer first seen with epoch.
func newProducerEntry(epoch int16) *producerEntry {
	return &producerEntry{epoch: epoch, coordEpoch: -1, txnFirst: -1}
}

// errNotImplemented was the stubs' error; kept for code that still refers to it.
var errNotImplemented = errors.New("not implemented")

var _ = errNotImplemented

// producerEpochNone is RecordBatch.NO_PRODUCER_EPOCH.
const producerEpochNone = -1

// Check tells how an incoming leader batch (ProducerID >= 0; offsets not yet
// assigned) relates to the state, without changing it: (nil, nil) = append;
// (dup, nil) = duplicate of an already appended batch dup (answer with its
// offsets); error wrapping kerr.OutOfOrderSequenceNumber or
// kerr.InvalidProducerEpoch otherwise.
//
// Check sees only batches already passed to Update: when one request holds
// several batches of the same producer, Update each before checking the next.
func (p *ProducerState) Check(b BatchMeta) (dup *BatchMeta, err error) {
	if b.ProducerID < 0 {
		return nil, nil
	}
	e := p.producers[b.ProducerID]
	if e == nil || e.epoch == producerEpochNone {
		return nil, checkTxnState(e, b) // unknown producer: any sequence (see the file comment)
	}
	if b.ProducerEpoch < e.epoch {
		return nil, fmt.Errorf("producer %d epoch %d is older than the current epoch %d: %w",
			b.ProducerID, b.ProducerEpoch, e.epoch, kerr.InvalidProducerEpoch)
	}
	if b.ProducerEpoch != e.epoch {
		if b.FirstSeq != 0 {
			return nil, fmt.Errorf("producer %d new epoch %d starts at sequence %d, not 0 (current epoch %d): %w",
				b.ProducerID, b.ProducerEpoch, b.FirstSeq, e.epoch, kerr.OutOfOrderSequenceNumber)
		}
		return nil, checkTxnState(e, b)
	}
	for i := range e.batches {
		c := e.batches[i]
		if c.FirstSeq == b.FirstSeq && c.LastSeq == b.LastSeq {
			return &c, nil
		}
	}
	if last := e.lastSeq(); !producerSeqFollows(last, b.FirstSeq) {
		return nil, fmt.Errorf("producer %d epoch %d sequence %d does not follow last sequence %d: %w",
			b.ProducerID, b.ProducerEpoch, b.FirstSeq, last, kerr.OutOfOrderSequenceNumber)
	}
	return nil, checkTxnState(e, b)
}

// producerSeqFollows reports whether next directly follows last, with the int32
// wraparound producers use (after math.MaxInt32 comes 0).
func producerSeqFollows(last, next int32) bool {
	return int64(next) == int64(last)+1 || (next == 0 && last == math.MaxInt32)
}

// Update records an appended batch (leader append, replicated append, or
// recovery replay). Batches with ProducerID < 0 are ignored.
func (p *ProducerState) Update(b BatchMeta) {
	if b.ProducerID < 0 {
		return
	}
	if p.producers == nil {
		p.producers = make(map[int64]*producerEntry)
	}
	e := p.producers[b.ProducerID]
	if e == nil {
		e = newProducerEntry(b.ProducerEpoch)
		p.producers[b.ProducerID] = e
	}
	if e.epoch != b.ProducerEpoch {
		// A new epoch starts a new sequence space: the old batches can no
		// longer be duplicates (Kafka's maybeUpdateProducerEpoch).
		e.epoch = b.ProducerEpoch
		e.batches = e.batches[:0]
	}
	if len(e.batches) == producerBatchesKept {
		copy(e.batches, e.batches[1:])
		e.batches = e.batches[:producerBatchesKept-1]
	}
	e.batches = append(e.batches, b)
	e.lastTimestamp = b.MaxTimestamp
	if b.Transactional && e.txnFirst < 0 {
		// The producer's first write of a transaction here opens it
		// (Kafka's ProducerAppendInfo.appendDataBatch).
		e.txnFirst = b.FirstOffset
		p.txns.begin(b.ProducerID, b.FirstOffset)
	}
}

// Producer returns a producer's current epoch and last sequence.
func (p *ProducerState) Producer(id int64) (epoch int16, lastSeq int32, ok bool) {
	e := p.producers[id]
	if e == nil {
		return 0, 0, false
	}
	return e.epoch, e.lastSeq(), true
}

// Len is the number of producers tracked.
func (p *ProducerState) Len() int { return len(p.producers) }

// ExpireProducers drops producers whose last batch timestamp is older than
// nowMs - maxAgeMs (producer.id.expiration.ms). Like Kafka, a producer is
// expired when nowMs - lastTimestamp >= maxAgeMs and it has no open
// transaction: a producer in a transaction is never dropped, or its
// transaction would be forgotten (the last stable offset would pass it and
// its abort would leave no trace in the .txnindex).
func (p *ProducerState) ExpireProducers(nowMs, maxAgeMs int64) {
	for id, e := range p.producers {
		if e.txnFirst < 0 && nowMs-e.lastTimestamp >= maxAgeMs {
			delete(p.producers, id)
		}
	}
}

// truncateHead forgets batches wholly below logStartOffset and producers
// left without any (Kafka's ProducerStateManager.onLogStartOffsetIncremented
// / isProducerRetained): once a producer's data is gone it is unknown again
// and accepted with any sequence. The log calls it after the log start
// offset moves (retention, DeleteRecords) and after LoadSnapshot. A
// producer with an open transaction is kept (its batches may be gone, its
// transaction is not over); completed transactions whose marker is below
// the log start are forgotten.
func (p *ProducerState) truncateHead(logStartOffset int64) {
	p.txns.dropCompletedBefore(logStartOffset)
	for id, e := range p.producers {
		n := 0
		for _, b := range e.batches {
			if b.LastOffset >= logStartOffset {
				e.batches[n] = b
				n++
			}
		}
		e.batches = e.batches[:n]
		if n == 0 && e.txnFirst < 0 {
			delete(p.producers, id)
		}
	}
}
