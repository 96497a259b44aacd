package txn

// Proactive abort of transactions past their timeout, and expiry of idle
// transactional ids (Kafka's abortTimedOutTransactions and
// removeExpiredTransactionalIds).

import (
	"math"
	"time"
)

// AbortTimedOut aborts, in every loaded partition, each open transaction
// that started more than its transaction.timeout.ms ago and has no
// transition in flight: its producer is fenced (epoch bump) and the abort
// persisted; its markers go to Config.SendMarkers. It returns how many
// were aborted. The background task runs it every
// transaction.abort.timed.out.transaction.cleanup.interval.ms.
func (c *Coordinator) AbortTimedOut() int {
	n := 0
	for _, s := range c.allShards() {
		n += s.abortTimedOut()
	}
	return n
}

func (s *shard) abortTimedOut() int {
	c := s.c
	s.mu.Lock()
	if !s.loaded || s.gone {
		s.mu.Unlock()
		return 0
	}
	var ids []string
	now := c.nowMs()
	for id, m := range s.txns {
		if timedOut(m, now) {
			ids = append(ids, id)
		}
	}
	n := 0
	var due []Markers
	for _, id := range ids {
		// persist releases the lock: check again.
		m := s.txns[id]
		if s.gone || m == nil || !timedOut(m, c.nowMs()) {
			continue
		}
		t, err := m.prepareFenceEpoch()
		if err != nil {
			s.prepareErrCode(err)
			continue
		}
		res := s.endLocked(m, t.producerID, t.producerEpoch, false, false, c.cfg.TransactionVersion)
		if m.hasPending && m.pending == PrepareEpochFence {
			m.abandon()
		}
		if res.Err != codeNone {
			c.log.Warn("abort of timed-out transaction failed", "transactional_id", id, "code", res.Err)
			continue
		}
		c.log.Info("aborted timed-out transaction", "transactional_id", id, "producer_id", t.producerID, "timeout_ms", m.timeoutMs)
		n++
		if res.Markers != nil {
			due = append(due, *res.Markers)
		}
	}
	s.mu.Unlock()
	c.sendMarkers(due...)
	return n
}

// timedOut: an open transaction past its timeout, with nothing in flight
// (a timeout of MaxInt32 never expires: KIP-939's two-phase commits).
func timedOut(m *meta, now int64) bool {
	return m.state == Ongoing && !m.hasPending && m.timeoutMs != math.MaxInt32 &&
		m.startMs+int64(m.timeoutMs) < now
}

// ExpireTransactionalIDs forgets, in every loaded partition, each
// transactional id with no transaction open whose last update is
// transactional.id.expiration.ms old: a tombstone is written for each
// (one batch per partition) and the ids are dropped once it is durable.
// It returns how many were expired. The background task runs it every
// transaction.remove.expired.transaction.cleanup.interval.ms.
func (c *Coordinator) ExpireTransactionalIDs() int {
	n := 0
	for _, s := range c.allShards() {
		n += s.expireIDs()
	}
	return n
}

func (s *shard) expireIDs() int {
	c := s.c
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.loaded || s.gone {
		return 0
	}
	limit := c.nowMs() - c.cfg.TransactionalIDExpirationMs
	var dead []*meta
	var recs []Record
	for id, m := range s.txns {
		if !m.state.expirationAllowed() || m.hasPending || m.lastUpdateMs > limit {
			continue
		}
		if _, err := m.prepareDead(); err != nil {
			s.prepareErrCode(err)
			continue
		}
		dead = append(dead, m)
		recs = append(recs, Record{Key: EncodeKey(id)})
	}
	if len(dead) == 0 {
		return 0
	}
	abandon := func() {
		for _, m := range dead {
			if s.txns[m.id] == m {
				m.abandon()
			}
		}
	}
	end, err := s.log.Append(encodeBatch(recs, time.UnixMilli(c.nowMs())))
	if err != nil {
		abandon()
		c.log.Warn("write expired transactional ids", "partition", s.part, "err", err)
		return 0
	}
	s.mu.Unlock()
	err = s.log.WaitDurable(end)
	s.mu.Lock()
	if s.gone {
		return 0
	}
	if err != nil {
		abandon()
		c.log.Warn("expired transactional ids not durable", "partition", s.part, "err", err)
		return 0
	}
	n := 0
	for _, m := range dead {
		if s.txns[m.id] == m && m.hasPending && m.pending == Dead {
			delete(s.txns, m.id)
			n++
		}
	}
	if n > 0 {
		c.log.Info("expired transactional ids", "partition", s.part, "count", n)
	}
	return n
}
