package txn

// AddPartitionsToTxn (both forms) and AddOffsetsToTxn (Kafka's
// handleAddPartitionsToTransaction and handleVerifyPartitionsInTransaction).

// OffsetsTopic is the topic whose partition AddOffsetsToTxn adds.
const OffsetsTopic = "__consumer_offsets"

// AddPartitions adds partitions to the transaction of a transactional
// id, starting one if none is open (the write that Ongoing persists). It
// answers at once when they are all in the open transaction already.
// clientTV is the transaction version the partitions are added under (2
// when a partition leader adds them for a KIP-890 client).
func (c *Coordinator) AddPartitions(transactionalID string, producerID int64, producerEpoch int16, parts []TopicPartition, clientTV int16) int16 {
	if transactionalID == "" {
		return codeInvalidRequest
	}
	s, code := c.lockShard(transactionalID)
	if code != codeNone {
		return code
	}
	defer s.mu.Unlock()
	m := s.txns[transactionalID]
	switch {
	case m != nil && m.nextProducerID != noProducerID && m.nextProducerID == producerID &&
		(m.state == PrepareCommit || m.state == PrepareAbort):
		// The producer already moved to the producer id its last end
		// handed out (exhausted epochs, transaction version 2); the end
		// is still completing.
		return codeConcurrentTransactions
	case m == nil || m.producerID != producerID:
		return codeInvalidProducerIDMapping
	case m.producerEpoch != producerEpoch:
		return codeProducerFenced
	case m.hasPending, m.state == PrepareCommit, m.state == PrepareAbort:
		return codeConcurrentTransactions
	case m.state == Ongoing && containsAll(m.partitions, parts):
		return codeNone
	case m.state != Ongoing && c.cfg.RefuseNewTransactions != nil && c.cfg.RefuseNewTransactions():
		return codeConcurrentTransactions
	}
	t, err := m.prepareAddPartitions(parts, c.nowMs(), clientTV)
	if err != nil {
		return s.prepareErrCode(err)
	}
	return s.persist(m, t)
}

// AddOffsets serves AddOffsetsToTxn: the __consumer_offsets partition of
// the group joins the transaction (under transaction version 0, as
// Kafka's AddOffsetsToTxn does).
func (c *Coordinator) AddOffsets(transactionalID string, producerID int64, producerEpoch int16, groupID string) int16 {
	if groupID == "" {
		return codeInvalidRequest
	}
	tp := TopicPartition{OffsetsTopic, c.cfg.OffsetsPartitionFor(groupID)}
	return c.AddPartitions(transactionalID, producerID, producerEpoch, []TopicPartition{tp}, 0)
}

// VerifyPartitions serves AddPartitionsToTxn v4+ with VerifyOnly (KIP-890
// part 1): for each partition NONE if it is in the producer's open
// transaction, TRANSACTION_ABORTABLE if not; one code for all when the
// producer is not the id's current one (INVALID_PRODUCER_ID_MAPPING,
// PRODUCER_FENCED) or its transaction is ending (CONCURRENT_TRANSACTIONS).
func (c *Coordinator) VerifyPartitions(transactionalID string, producerID int64, producerEpoch int16, parts []TopicPartition) map[TopicPartition]int16 {
	all := func(code int16) map[TopicPartition]int16 {
		out := make(map[TopicPartition]int16, len(parts))
		for _, p := range parts {
			out[p] = code
		}
		return out
	}
	if transactionalID == "" {
		return all(codeInvalidRequest)
	}
	s, code := c.lockShard(transactionalID)
	if code != codeNone {
		return all(code)
	}
	defer s.mu.Unlock()
	m := s.txns[transactionalID]
	switch {
	case m == nil || m.producerID != producerID:
		return all(codeInvalidProducerIDMapping)
	case m.producerEpoch != producerEpoch:
		return all(codeProducerFenced)
	case m.state == PrepareCommit || m.state == PrepareAbort:
		return all(codeConcurrentTransactions)
	}
	out := make(map[TopicPartition]int16, len(parts))
	for _, p := range parts {
		if _, ok := m.partitions[p]; ok {
			out[p] = codeNone
		} else {
			out[p] = codeTransactionAbortable
		}
	}
	return out
}

func containsAll(set map[TopicPartition]struct{}, parts []TopicPartition) bool {
	for _, p := range parts {
		if _, ok := set[p]; !ok {
			return false
		}
	}
	return true
}
