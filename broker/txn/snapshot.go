package txn

// The transaction state a broker keeps in the bucket (tier/txn_snapshot.go,
// written by the broker's metadata_snapshot.go): a loaded partition's
// state as records, and the records of the bucket taken into a partition
// loaded before the bucket was this cluster's.

import (
	"errors"
	"sort"
	"time"
)

// StateRecord is one transactional id's state as the record a load takes
// in, with the fields a snapshot shows.
type StateRecord struct {
	Record
	TransactionalID string
	State           State
	ProducerID      int64
	ProducerEpoch   int16
}

// PartitionRecords returns the state of every transactional id of a
// partition, sorted by id, as the records a compacted log would keep (the
// last value of each key); false when the partition is not owned and
// loaded. A transition being written is not in it yet.
func (c *Coordinator) PartitionRecords(partition int32) ([]StateRecord, bool) {
	c.mu.RLock()
	s := c.shards[partition]
	c.mu.RUnlock()
	if s == nil {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.loaded || s.gone {
		return nil, false
	}
	out := make([]StateRecord, 0, len(s.txns))
	for id, m := range s.txns {
		if m.state == Dead {
			continue
		}
		out = append(out, StateRecord{
			Record:          Record{Key: EncodeKey(id), Value: EncodeValue(m.txnState.value(s.c.cfg.TransactionVersion))},
			TransactionalID: id, State: m.state, ProducerID: m.producerID, ProducerEpoch: m.producerEpoch,
		})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TransactionalID < out[j].TransactionalID })
	return out, true
}

// CheckRecord decodes one transactional id's record and returns its id;
// an error when it is not a transaction's state.
func CheckRecord(r Record) (string, error) {
	id, err := DecodeKey(r.Key)
	if err != nil {
		return "", err
	}
	loaded := map[string]txnState{}
	if r.Value == nil || !applyRecord(loaded, r) {
		return "", errors.New("not a transaction state value")
	}
	return id, nil
}

// EncodeRecords is the record batch a partition's log takes recs in as.
func EncodeRecords(recs []Record) []byte { return encodeBatch(recs, time.Now()) }

// Merge takes into a loaded partition the records of transactional ids it
// does not know (the bucket's state of a partition loaded before the
// bucket was this cluster's): they are written to its log, as one batch,
// and installed once durable, with the partition's lock held meanwhile so
// that no transition of theirs comes between. The markers of prepared
// ones are sent. It returns how many it took in.
func (c *Coordinator) Merge(partition int32, recs []Record) (int, error) {
	c.mu.RLock()
	s := c.shards[partition]
	c.mu.RUnlock()
	if s == nil {
		return 0, errors.New("not the coordinator of this partition")
	}
	s.mu.Lock()
	if !s.loaded || s.gone {
		s.mu.Unlock()
		return 0, errors.New("the partition is not loaded")
	}
	loaded := map[string]txnState{}
	var take []Record
	for _, r := range recs {
		id, err := DecodeKey(r.Key)
		if err != nil || s.txns[id] != nil || PartitionFor(id, c.nparts) != partition {
			continue
		}
		if applyRecord(loaded, r) {
			take = append(take, r)
		}
	}
	if len(take) == 0 {
		s.mu.Unlock()
		return 0, nil
	}
	end, err := s.log.Append(encodeBatch(take, c.cfg.Now()))
	if err == nil {
		err = s.log.WaitDurable(end)
	}
	if err == nil && s.gone {
		err = errors.New("the partition was resigned")
	}
	if err != nil {
		s.mu.Unlock()
		return 0, err
	}
	var due []Markers
	for id, t := range loaded {
		m := &meta{id: id, txnState: t}
		s.txns[id] = m
		if t.state == PrepareCommit || t.state == PrepareAbort {
			due = append(due, s.markersOf(m))
		}
	}
	s.mu.Unlock()
	c.sendMarkers(due...)
	return len(loaded), nil
}
