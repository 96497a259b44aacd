package txn

// The metadata of one transactional id and its transitions, as Kafka's
// TransactionMetadata: a transition is prepared (checked, and the target
// state marked pending so that no other starts), written to the log, and
// completed once durable, or dropped if the write failed. Pure: no I/O,
// no clock; the shard's lock guards it.

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TopicPartition names a partition of a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

const (
	noProducerID int64 = -1
	noEpoch      int16 = -1
)

// epochExhausted: no epoch may be handed to a client past MaxInt16-1, so
// that the coordinator can always bump once more to fence.
func epochExhausted(e int16) bool { return e >= math.MaxInt16-1 }

// epochBumps: transaction version 2 (KIP-890 part 2) bumps the epoch on
// every commit and abort.
func epochBumps(tv int16) bool { return tv >= 2 }

// txnState is what a transition sets: every field of the metadata but the
// id and the pending state.
type txnState struct {
	producerID, prevProducerID, nextProducerID int64
	producerEpoch, lastProducerEpoch           int16
	nextProducerEpoch                          int16 // KIP-939, kept as read
	timeoutMs                                  int32
	state                                      State
	partitions                                 map[TopicPartition]struct{}
	startMs, lastUpdateMs                      int64
	clientTV                                   int16
}

func (t txnState) clone() txnState {
	t.partitions = maps.Clone(t.partitions)
	if t.partitions == nil {
		t.partitions = map[TopicPartition]struct{}{}
	}
	return t
}

// meta is the metadata of one transactional id.
type meta struct {
	id string
	txnState
	pending    State
	hasPending bool
	// failedFence: a fence's epoch bump was taken in memory but its write
	// failed; the next fence does not bump again (the bumped epoch was
	// never handed out).
	failedFence bool
}

func newMeta(id string, producerID int64, timeoutMs int32, now int64) *meta {
	return &meta{id: id, txnState: txnState{
		producerID: producerID, prevProducerID: noProducerID, nextProducerID: noProducerID,
		producerEpoch: noEpoch, lastProducerEpoch: noEpoch, nextProducerEpoch: noEpoch,
		timeoutMs: timeoutMs, state: Empty, partitions: map[TopicPartition]struct{}{},
		startMs: -1, lastUpdateMs: now,
	}}
}

var errPendingTransition = errors.New("a state transition is already pending")

// prepare checks a transition to t and marks it pending.
func (m *meta) prepare(t txnState) (txnState, error) {
	switch {
	case m.hasPending:
		return txnState{}, fmt.Errorf("transactional id %q: to %v: %w (%v)", m.id, t.state, errPendingTransition, m.pending)
	case t.producerID < 0:
		return txnState{}, fmt.Errorf("transactional id %q: illegal producer id %d", m.id, t.producerID)
	case t.state != Dead && t.producerEpoch < 0:
		return txnState{}, fmt.Errorf("transactional id %q: illegal producer epoch %d", m.id, t.producerEpoch)
	case !canTransition(m.state, t.state):
		return txnState{}, fmt.Errorf("transactional id %q: no transition from %v to %v", m.id, m.state, t.state)
	}
	t.prevProducerID = m.producerID
	m.pending, m.hasPending = t.state, true
	return t, nil
}

// prepareFenceEpoch starts fencing an ongoing transaction: the epoch is
// bumped (not again after a fence whose write failed, and never past
// MaxInt16), and the transaction is then aborted at that epoch.
func (m *meta) prepareFenceEpoch() (txnState, error) {
	t := m.clone()
	t.state = PrepareEpochFence
	if !m.failedFence && m.producerEpoch != math.MaxInt16 {
		t.producerEpoch = m.producerEpoch + 1
	}
	return m.prepare(t)
}

// prepareIncrementEpoch is InitProducerId on an id with no transaction
// open: bump the epoch, or, with the epoch the producer expects (KIP-360),
// bump it if it is current, answer the current one again if it is the
// one before (a retry), and fence it otherwise.
func (m *meta) prepareIncrementEpoch(timeoutMs int32, expected *int16, now int64) (txnState, error) {
	if epochExhausted(m.producerEpoch) {
		return txnState{}, fmt.Errorf("transactional id %q: producer %d has no epoch left", m.id, m.producerID)
	}
	t := m.clone()
	t.state = Empty
	switch {
	case expected == nil:
		t.producerEpoch, t.lastProducerEpoch = m.producerEpoch+1, noEpoch
	case m.producerEpoch == noEpoch || *expected == m.producerEpoch:
		t.producerEpoch, t.lastProducerEpoch = m.producerEpoch+1, m.producerEpoch
	case *expected == m.lastProducerEpoch:
		// A retry of an InitProducerId that succeeded.
	default:
		return txnState{}, kerr.ProducerFenced
	}
	t.timeoutMs = timeoutMs
	t.partitions = map[TopicPartition]struct{}{}
	t.startMs, t.lastUpdateMs = -1, now
	return m.prepare(t)
}

// prepareRotation gives the id a new producer id at epoch 0 (its epochs
// are exhausted).
func (m *meta) prepareRotation(newProducerID int64, timeoutMs int32, now int64, recordLastEpoch bool) (txnState, error) {
	if m.state.pendingTxn() {
		return txnState{}, fmt.Errorf("transactional id %q: cannot rotate the producer id of an open transaction", m.id)
	}
	t := m.clone()
	t.state = Empty
	t.producerID, t.producerEpoch, t.lastProducerEpoch = newProducerID, 0, noEpoch
	if recordLastEpoch {
		t.lastProducerEpoch = m.producerEpoch
	}
	t.timeoutMs = timeoutMs
	t.partitions = map[TopicPartition]struct{}{}
	t.startMs, t.lastUpdateMs = -1, now
	return m.prepare(t)
}

// prepareAddPartitions adds partitions (the transaction starts now if none
// was open).
func (m *meta) prepareAddPartitions(parts []TopicPartition, now int64, clientTV int16) (txnState, error) {
	t := m.clone()
	t.state = Ongoing
	if m.state == Empty || m.state == CompleteCommit || m.state == CompleteAbort {
		t.startMs = now
	}
	for _, p := range parts {
		t.partitions[p] = struct{}{}
	}
	t.lastUpdateMs, t.clientTV = now, clientTV
	return m.prepare(t)
}

// prepareEnd moves to PrepareCommit or PrepareAbort. With transaction
// version 2 the epoch is bumped (not past MaxInt16 on an abort: a broken
// producer can still be aborted), and nextProducerID is the id the
// producer moves to when this bump exhausts its epochs.
func (m *meta) prepareEnd(to State, clientTV int16, nextProducerID int64, now int64, noPartitionAdded bool) (txnState, error) {
	t := m.clone()
	t.state = to
	if epochBumps(clientTV) {
		if !(m.producerEpoch == math.MaxInt16 && to == PrepareAbort) {
			t.producerEpoch = m.producerEpoch + 1
		}
		t.lastProducerEpoch = m.producerEpoch
	}
	if noPartitionAdded {
		t.startMs = now
	}
	t.nextProducerID, t.lastUpdateMs, t.clientTV = nextProducerID, now, clientTV
	return m.prepare(t)
}

// prepareComplete moves PrepareCommit/PrepareAbort to CompleteCommit/
// CompleteAbort once every marker is written; with transaction version 2
// and a next producer id the producer moves to it at epoch 0.
func (m *meta) prepareComplete(now int64) (txnState, error) {
	m.failedFence = false
	t := m.clone()
	t.state = CompleteAbort
	if m.state == PrepareCommit {
		t.state = CompleteCommit
	}
	if epochBumps(m.clientTV) && m.nextProducerID != noProducerID {
		t.producerID, t.producerEpoch = m.nextProducerID, 0
	}
	t.nextProducerID = noProducerID
	t.partitions = map[TopicPartition]struct{}{}
	t.lastUpdateMs = now
	return m.prepare(t)
}

// prepareDead starts expiring the id.
func (m *meta) prepareDead() (txnState, error) {
	t := m.clone()
	t.state = Dead
	t.partitions = map[TopicPartition]struct{}{}
	return m.prepare(t)
}

// abandon drops the pending transition (its write failed).
func (m *meta) abandon() { m.hasPending = false }

// complete applies a prepared transition once its record is durable,
// after Kafka's checks: anything else is a bug, reported, not applied.
func (m *meta) complete(t txnState) error {
	if !m.hasPending || m.pending != t.state {
		return fmt.Errorf("transactional id %q: completing %v, pending %v (%v)", m.id, t.state, m.pending, m.hasPending)
	}
	ok := true
	switch t.state {
	case Empty:
		ok = (m.producerEpoch == t.producerEpoch || m.validEpochBump(t)) && len(t.partitions) == 0 && t.startMs == -1
	case Ongoing:
		ok = m.validEpoch(t) && t.timeoutMs == m.timeoutMs && subset(m.partitions, t.partitions)
	case PrepareCommit, PrepareAbort:
		emptyAbort := t.state == PrepareAbort && epochBumps(t.clientTV) &&
			(m.state == Empty || m.state == CompleteCommit || m.state == CompleteAbort)
		ok = m.validEpoch(t) && maps.Equal(m.partitions, t.partitions) && t.timeoutMs == m.timeoutMs &&
			(m.startMs == t.startMs || emptyAbort)
	case CompleteCommit, CompleteAbort:
		ok = m.validEpoch(t) && t.timeoutMs == m.timeoutMs && t.startMs != -1
	default: // PrepareEpochFence and Dead are never completed
		ok = false
	}
	if !ok {
		m.hasPending = false
		return fmt.Errorf("transactional id %q: unexpected transition from %v to %v", m.id, m.state, t.state)
	}
	m.txnState = t
	m.hasPending = false
	return nil
}

// validEpoch is Kafka's check of a transition's producer id and epoch.
func (m *meta) validEpoch(t txnState) bool {
	if epochBumps(t.clientTV) {
		if (t.state == CompleteCommit || t.state == CompleteAbort) && t.producerEpoch == 0 {
			return t.lastProducerEpoch == m.lastProducerEpoch && t.prevProducerID == m.producerID
		}
		if t.state == PrepareCommit || t.state == PrepareAbort {
			return t.lastProducerEpoch == m.producerEpoch && t.producerID == m.producerID
		}
	}
	return t.producerEpoch == m.producerEpoch && t.producerID == m.producerID
}

func (m *meta) validEpochBump(t txnState) bool {
	return t.producerEpoch == m.producerEpoch+1 || (t.producerEpoch == 0 && t.producerID != m.producerID)
}

func subset(a, b map[TopicPartition]struct{}) bool {
	for p := range a {
		if _, ok := b[p]; !ok {
			return false
		}
	}
	return true
}

// sortedPartitions lists a partition set by topic, then partition.
func sortedPartitions(set map[TopicPartition]struct{}) []TopicPartition {
	out := slices.Collect(maps.Keys(set))
	slices.SortFunc(out, func(a, b TopicPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// value is the record of a transition, at the value version of the
// transaction.version level tv (0 for level 0, else 1), as Kafka writes
// it: no partitions (null) when Empty, the tagged fields only in v1.
func (t txnState) value(tv int16) Value {
	ver := int16(0)
	if tv >= 1 {
		ver = 1
	}
	v := NewValue(ver)
	v.ProducerID, v.ProducerEpoch, v.TimeoutMs, v.Status = t.producerID, t.producerEpoch, t.timeoutMs, t.state
	v.LastUpdateMs, v.StartMs = t.lastUpdateMs, t.startMs
	if ver >= 1 {
		v.PreviousProducerID, v.NextProducerID, v.NextProducerEpoch = t.prevProducerID, t.nextProducerID, t.nextProducerEpoch
		v.ClientTransactionVersion = t.clientTV
	}
	if t.state != Empty {
		v.Partitions = []TopicPartitions{}
		for _, p := range sortedPartitions(t.partitions) {
			if n := len(v.Partitions); n > 0 && v.Partitions[n-1].Topic == p.Topic {
				v.Partitions[n-1].Partitions = append(v.Partitions[n-1].Partitions, p.Partition)
			} else {
				v.Partitions = append(v.Partitions, TopicPartitions{Topic: p.Topic, Partitions: []int32{p.Partition}})
			}
		}
	}
	return v
}

// stateFromValue is the metadata a loaded value describes (Kafka's
// loader: the last epoch is not persisted, partitions count only when
// the state is not Empty).
func stateFromValue(v Value) txnState {
	t := txnState{
		producerID: v.ProducerID, prevProducerID: v.PreviousProducerID, nextProducerID: v.NextProducerID,
		producerEpoch: v.ProducerEpoch, lastProducerEpoch: noEpoch, nextProducerEpoch: v.NextProducerEpoch,
		timeoutMs: v.TimeoutMs, state: v.Status, partitions: map[TopicPartition]struct{}{},
		startMs: v.StartMs, lastUpdateMs: v.LastUpdateMs, clientTV: v.ClientTransactionVersion,
	}
	if v.Status != Empty {
		for _, tp := range v.Partitions {
			for _, p := range tp.Partitions {
				t.partitions[TopicPartition{tp.Topic, p}] = struct{}{}
			}
		}
	}
	return t
}
