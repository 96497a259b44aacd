package txn

// What DescribeTransactions and ListTransactions show, and a read-only
// copy of a transactional id's metadata.

import (
	"slices"
	"sort"
)

// Metadata is a copy of one transactional id's state.
type Metadata struct {
	TransactionalID          string
	ProducerID               int64
	PreviousProducerID       int64
	NextProducerID           int64
	ProducerEpoch            int16
	LastProducerEpoch        int16
	TimeoutMs                int32
	State                    State
	Partitions               []TopicPartition // sorted
	StartMs                  int64
	LastUpdateMs             int64
	ClientTransactionVersion int16
	Pending                  bool // a transition is being written
}

func (m *meta) copy() Metadata {
	return Metadata{
		TransactionalID: m.id, ProducerID: m.producerID, PreviousProducerID: m.prevProducerID,
		NextProducerID: m.nextProducerID, ProducerEpoch: m.producerEpoch, LastProducerEpoch: m.lastProducerEpoch,
		TimeoutMs: m.timeoutMs, State: m.state, Partitions: sortedPartitions(m.partitions),
		StartMs: m.startMs, LastUpdateMs: m.lastUpdateMs, ClientTransactionVersion: m.clientTV, Pending: m.hasPending,
	}
}

// Describe is DescribeTransactions for one id: its metadata, or
// TRANSACTIONAL_ID_NOT_FOUND, NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS.
func (c *Coordinator) Describe(transactionalID string) (Metadata, int16) {
	if transactionalID == "" {
		return Metadata{}, codeInvalidRequest
	}
	s, code := c.lockShard(transactionalID)
	if code != codeNone {
		return Metadata{}, code
	}
	defer s.mu.Unlock()
	m := s.txns[transactionalID]
	if m == nil || m.state == Dead {
		return Metadata{}, codeTransactionalIDNotFound
	}
	return m.copy(), codeNone
}

// ListFilter narrows List: empty lists match everything; DurationMs >= 0
// keeps only transactions that started more than that long ago (KIP-994;
// -1 keeps all).
type ListFilter struct {
	ProducerIDs []int64
	States      []State
	DurationMs  int64
}

// List is ListTransactions over the loaded partitions, sorted by id, and
// whether some partition is still loading (Kafka answers
// COORDINATOR_LOAD_IN_PROGRESS then).
func (c *Coordinator) List(f ListFilter) (out []Metadata, loading bool) {
	now := c.nowMs()
	for _, s := range c.allShards() {
		s.mu.Lock()
		if s.gone {
			s.mu.Unlock()
			continue
		}
		if !s.loaded {
			loading = true
		}
		for _, m := range s.txns {
			switch {
			case m.state == Dead:
			case len(f.ProducerIDs) > 0 && !slices.Contains(f.ProducerIDs, m.producerID):
			case len(f.States) > 0 && !slices.Contains(f.States, m.state):
			case f.DurationMs >= 0 && now-m.startMs <= f.DurationMs:
			default:
				out = append(out, m.copy())
			}
		}
		s.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].TransactionalID < out[j].TransactionalID })
	return out, loading
}
