// Package txn is the transaction coordinator: the state of every
// transactional id (Kafka's TransactionMetadata), its persistence in the
// internal topic __transaction_state, and the decisions of
// InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
// DescribeTransactions and ListTransactions, of transaction timeouts and
// of transactional id expiry. It does not write transaction markers: it
// says which to write (Markers) and is told when they are written
// (CompleteTxn). It imports nothing of the broker but its configuration;
// the broker hands it the log of each partition it leads, a producer id
// allocator and a marker writer.
//
// # Ownership and locking
//
// The coordinator of a transactional id is the leader of partition
// abs(javaHashCode(transactionalId)) % transaction.state.log.num.partitions
// (PartitionFor, with Java's String.hashCode and Kafka's Utils.abs). The
// broker hands the Coordinator each partition it leads with its leader
// epoch (Elect; the epoch is the coordinator epoch of the markers) and
// takes it back when it stops leading it (Resign). Each owned partition
// is a shard: its transactional ids and its log, guarded by one mutex.
// Lock order: Coordinator.mu, then shard.mu, then the partition log's own
// lock (inside Log.Append) or the producer id allocator's.
//
// Ids of a partition not owned answer NOT_COORDINATOR; of a partition
// still loading, COORDINATOR_LOAD_IN_PROGRESS; after Close,
// COORDINATOR_NOT_AVAILABLE.
//
// # State machine (Kafka's TransactionState)
//
//	Empty --AddPartitions/AddOffsets--> Ongoing --EndTxn(commit)--> PrepareCommit --markers--> CompleteCommit
//	                                    Ongoing --EndTxn(abort), timeout, fence--> PrepareAbort --markers--> CompleteAbort
//	Empty, CompleteCommit, CompleteAbort --InitProducerId--> Empty;  --AddPartitions--> Ongoing
//	Empty, CompleteCommit, CompleteAbort --EndTxn(abort), transaction version 2--> PrepareAbort
//	Ongoing --InitProducerId or timeout--> PrepareEpochFence (in memory) --> PrepareAbort
//	Empty, CompleteCommit, CompleteAbort --transactional.id.expiration.ms--> Dead (tombstone, forgotten)
//
// A transition is prepared (checked against Kafka's table of valid
// previous states, and marked pending: any other request for the id
// meanwhile answers CONCURRENT_TRANSACTIONS), written as one record, and
// applied once the record is durable; if the write fails the transition
// is dropped and the state stays as it was.
//
// The rules, as Kafka's:
//
//   - InitProducerId: a new id gets a producer id from the broker's
//     allocator (the one idempotent producers use) at epoch 0; a known one
//     gets its epoch bumped, which fences older producers (their requests
//     answer PRODUCER_FENCED, or INVALID_PRODUCER_EPOCH on the data
//     path). At epoch 32766 the epochs are exhausted: the id moves to a
//     new producer id at epoch 0. An open transaction is aborted first
//     (at a bumped epoch never handed out) and the call answered
//     CONCURRENT_TRANSACTIONS. A request carrying the producer id and
//     epoch it has (KIP-360) is fenced unless it is the current producer,
//     or the previous one retrying across an exhausted epoch; the same
//     epoch again after a success is answered with the current one.
//     transaction.timeout.ms must be within 1..transaction.max.timeout.ms
//     (INVALID_TRANSACTION_TIMEOUT).
//   - AddPartitions and AddOffsets (the group's __consumer_offsets
//     partition) check the producer id (INVALID_PRODUCER_ID_MAPPING) and
//     epoch (PRODUCER_FENCED); a transaction that is ending answers
//     CONCURRENT_TRANSACTIONS. The transaction starts (its timeout runs)
//     at the first partition. VerifyPartitions is KIP-890 part 1's check
//     that a partition is in the producer's open transaction.
//   - EndTxn persists PrepareCommit or PrepareAbort and hands out the
//     markers. With transaction version 2 (KIP-890 part 2, EndTxn v5) the
//     epoch is bumped on every end and returned to the producer (a new
//     producer id at epoch 0 when that exhausts the epochs), an abort
//     with no transaction open is accepted, and a retry is recognized by
//     its epoch being one behind. Before version 2, a retry is recognized
//     by the state (CompleteCommit answers a commit NONE).
//   - Transactions open longer than their timeout are aborted by the
//     coordinator (AbortTimedOut), fencing their producer; ids with no
//     open transaction and no update for transactional.id.expiration.ms
//     are expired (ExpireTransactionalIDs).
//
// # Records in __transaction_state
//
// Kafka's schemas (TransactionLogKey, TransactionLogValue), written
// uncompressed, one v2 record batch per write, no producer id:
//
//	key   int16 version = 0, transactional_id string (int16 length)
//	value int16 version (0, or 1 from transaction.version 1: flexible)
//	      producer_id int64, producer_epoch int16, transaction_timeout_ms int32,
//	      transaction_status int8 (0 Empty .. 7 PrepareEpochFence),
//	      transaction_partitions nullable array of {topic string, partition_ids []int32}
//	          (null when Empty), transaction_last_update_timestamp_ms int64,
//	      transaction_start_timestamp_ms int64 (-1: no transaction)
//	      v1 tagged fields, written only when not their default:
//	          0 previous_producer_id int64 (-1), 1 next_producer_id int64 (-1),
//	          2 client_transaction_version int16 (0), 3 next_producer_epoch int16 (-1, KIP-939)
//
// In v0 strings are int16-length and arrays int32-length (-1 null); in v1
// they are compact (unsigned varint length+1, 0 null) and every struct
// ends with a tagged-field section. A record per key overwrites the last;
// a tombstone (null value) deletes the id. Unknown tagged fields are
// skipped; value versions above 1 are not read (as Kafka, which promises
// only tagged fields from now on, KIP-915).
//
// # Durability
//
// A transition is answered only once its record is durable on the terms
// of an acks=-1 produce (Log.WaitDurable); the record is appended under
// the shard lock, which is released for the wait. A coordinator that
// resigned meanwhile answers NOT_COORDINATOR and applies nothing.
//
// # Loading
//
// When a partition is elected it is replayed from its start (the last
// record per key wins, tombstones delete; the last epoch is not
// persisted, as in Kafka), aside from the live state and installed at
// once; meanwhile its ids answer COORDINATOR_LOAD_IN_PROGRESS. The
// markers of transactions found in PrepareCommit or PrepareAbort are
// handed to the marker writer again. Malformed records, and records in
// states never written (Dead, PrepareEpochFence), are skipped and
// counted in a log line; a read error leaves the partition loading.
//
// # Deviations
//
// An AddPartitions from a producer that already moved to the next
// producer id its last end handed out (transaction version 2, exhausted
// epochs) answers CONCURRENT_TRANSACTIONS until the end completes, where
// Kafka answers INVALID_PRODUCER_ID_MAPPING. KIP-939 (two-phase commit,
// keepPreparedTxn) is not built: next_producer_epoch is read and written
// back, never used.
package txn
