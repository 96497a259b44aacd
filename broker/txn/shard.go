package txn

// A shard is one __transaction_state partition this broker leads: the
// transactional ids that hash to it and the log they are persisted to.
// One mutex (mu) guards everything in it. Lock order: Coordinator.mu
// before shard.mu; nothing else is held with shard.mu except the
// partition log's own lock inside Log.Append (and the producer id
// allocator's, inside Config.NextProducerID).

import (
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

type shard struct {
	c     *Coordinator
	part  int32
	epoch int32 // leader epoch: the coordinator epoch of markers
	log   Log

	mu     sync.Mutex
	loaded bool
	gone   bool
	txns   map[string]*meta
}

func newShard(c *Coordinator, part, epoch int32, l Log) *shard {
	return &shard{c: c, part: part, epoch: epoch, log: l, txns: map[string]*meta{}}
}

func (s *shard) unload() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gone = true
	s.txns = map[string]*meta{}
}

// persist writes the prepared transition t of m and applies it once
// durable. Called with s.mu held; it
// releases the lock while it waits and holds it again when it returns.
// On failure the transition is dropped and the answer's code returned.
func (s *shard) persist(m *meta, t txnState) int16 {
	rec := Record{Key: EncodeKey(m.id), Value: EncodeValue(t.value(s.c.cfg.TransactionVersion))}
	end, err := s.log.Append(encodeBatch([]Record{rec}, s.c.cfg.Now()))
	if err != nil {
		m.abandon()
		s.c.log.Info("write to __transaction_state failed", "partition", s.part, "transactional_id", m.id, "to", t.state, "err", err)
		return writeErrCode(err)
	}
	s.mu.Unlock()
	err = s.log.WaitDurable(end)
	s.mu.Lock()
	if s.gone || s.txns[m.id] != m {
		// Resigned meanwhile: the next leader replays the log.
		return codeNotCoordinator
	}
	if err != nil {
		m.abandon()
		s.c.log.Info("write to __transaction_state not durable", "partition", s.part, "transactional_id", m.id, "to", t.state, "err", err)
		return writeErrCode(err)
	}
	if err := m.complete(t); err != nil {
		s.c.log.Error("transaction state transition", "partition", s.part, "err", err)
		return codeUnknownServerError
	}
	return codeNone
}

// load replays the partition and installs its transactional ids; the
// markers of transactions that were ending are then sent again.
func (s *shard) load() {
	start := time.Now()
	loaded := map[string]txnState{}
	bad := 0
	err := s.log.Replay(func(b []byte) error {
		return decodeBatches(b, func(r Record) error {
			if !applyRecord(loaded, r) {
				bad++
			}
			return nil
		})
	})
	s.mu.Lock()
	if s.gone {
		s.mu.Unlock()
		return
	}
	if errors.Is(err, kerr.NotLeaderForPartition) {
		s.mu.Unlock()
		s.c.log.Info("stopped loading __transaction_state partition", "partition", s.part, "err", err)
		return
	}
	if err != nil {
		// The partition stays unavailable (COORDINATOR_LOAD_IN_PROGRESS)
		// rather than serving a partial state.
		s.mu.Unlock()
		s.c.log.Error("load __transaction_state partition", "partition", s.part, "err", err)
		return
	}
	var due []Markers
	for id, t := range loaded {
		m := &meta{id: id, txnState: t}
		s.txns[id] = m
		if t.state == PrepareCommit || t.state == PrepareAbort {
			due = append(due, s.markersOf(m))
		}
	}
	s.loaded = true
	s.mu.Unlock()
	if bad > 0 {
		s.c.log.Warn("skipped malformed records in __transaction_state", "partition", s.part, "records", bad)
	}
	s.c.log.Debug("loaded __transaction_state partition", "partition", s.part, "transactional_ids", len(loaded),
		"took", time.Since(start).Round(time.Millisecond))
	s.c.sendMarkers(due...)
}

// applyRecord replays one record: the last value of a key wins, a
// tombstone deletes. Records of other key versions are not a
// transaction's and are ignored; it returns false for malformed ones
// (and for states never written: Dead, PrepareEpochFence).
func applyRecord(loaded map[string]txnState, r Record) bool {
	id, err := DecodeKey(r.Key)
	if errors.Is(err, ErrUnknownKeyVersion) {
		return true
	}
	if err != nil {
		return false
	}
	if r.Value == nil {
		delete(loaded, id)
		return true
	}
	v, err := DecodeValue(r.Value)
	if err != nil || v.Status == Dead || v.Status == PrepareEpochFence || v.ProducerID < 0 {
		return false
	}
	loaded[id] = stateFromValue(v)
	return true
}

// markersOf describes the markers of a transaction in PrepareCommit or
// PrepareAbort.
func (s *shard) markersOf(m *meta) Markers {
	return Markers{
		TransactionalID:    m.id,
		ProducerID:         m.producerID,
		ProducerEpoch:      m.producerEpoch,
		CoordinatorEpoch:   s.epoch,
		Commit:             m.state == PrepareCommit,
		TransactionVersion: m.clientTV,
		Partitions:         sortedPartitions(m.partitions),
	}
}
