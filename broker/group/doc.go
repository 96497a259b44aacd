// Package group is the group coordinator: consumer groups of the classic
// protocol (JoinGroup/SyncGroup/Heartbeat/LeaveGroup), their committed
// offsets, and their persistence in the internal topic __consumer_offsets.
// KIP-848 consumer groups (consumer_*.go, assign*.go) live in the same
// registry through the ModernGroup hooks (modern.go).
//
// # Ownership and locking
//
// The coordinator of a group is the leader of partition
// abs(javaHashCode(groupID)) % partitions of __consumer_offsets
// (PartitionFor). The broker hands the Coordinator each offsets partition
// it leads (Elect) and takes it back when it stops leading it (Resign).
// Each owned partition is a shard: its groups, their offsets and its log,
// all guarded by one mutex. Timers (time.AfterFunc) take the same mutex
// and check a sequence number so that a timer that lost a race does
// nothing. Lock order: Coordinator.mu, then shard.mu, then the partition
// log's own lock (inside Log.Append and SequenceLog.NextSequence).
//
// # Classic group state machine (Kafka's GroupCoordinator)
//
//	Empty --join--> PreparingRebalance --join phase ends--> CompletingRebalance
//	      --leader's SyncGroup persisted--> Stable --join/leave/expiry--> PreparingRebalance
//	PreparingRebalance --all members gone--> Empty;  Empty --DeleteGroups/expiry--> Dead
//
// The rules, as Kafka's:
//
//   - JoinGroup v4+ without a member id gets MEMBER_ID_REQUIRED and a new
//     id (KIP-394), which must come back within the session timeout.
//   - The join phase ends when every known member has rejoined, or after
//     the largest rebalance timeout; members that did not rejoin are
//     removed (static members stay). A new group first waits
//     group.initial.rebalance.delay.ms, again while members keep arriving,
//     within the rebalance timeout.
//   - The protocol is the one every member supports that most members
//     prefer. The leader receives every member's metadata.
//   - The leader's SyncGroup assignment is written (GroupMetadataValue)
//     before any member is answered; members that do not SyncGroup within
//     the rebalance timeout are removed and the group rebalances.
//   - A member whose session timeout passes without a heartbeat is
//     removed (members waiting in a rebalance are bounded by the rebalance
//     timeout instead; new members by five minutes).
//   - Static members (group.instance.id) that rejoin take over the old
//     member id; in a Stable group whose selected protocol would not
//     change, without a rebalance (the group is persisted with the new id
//     first; JoinGroup v9 tells a static leader to skip the assignment,
//     KIP-814). The old member id is fenced (FENCED_INSTANCE_ID).
//   - Offset commits are checked like Kafka's: generation -1 with no
//     member id only for groups without members; a stale generation is
//     ILLEGAL_GENERATION, an unknown member UNKNOWN_MEMBER_ID, a commit
//     during CompletingRebalance REBALANCE_IN_PROGRESS; metadata over
//     offset.metadata.max.bytes is OFFSET_METADATA_TOO_LARGE.
//
// # Records in __consumer_offsets
//
// Kafka's schemas, encoded with kmsg's generated types; every write is one
// uncompressed v2 record batch (batch.go) with no producer id, except a
// transactional offset commit's (below):
//
//	key OffsetCommitKey v1 {group, topic, partition}
//	    value OffsetCommitValue v3 {offset, leaderEpoch, metadata, commitTimestamp}
//	          or v1 {offset, metadata, commitTimestamp, expireTimestamp} when the
//	          commit carried a retention time (OffsetCommit v1-v4)
//	key GroupMetadataKey v2 {group}
//	    value GroupMetadataValue v3 {protocolType, generation, protocol, leader,
//	          currentStateTimestamp, members[{memberId, groupInstanceId, clientId,
//	          clientHost, rebalanceTimeout, sessionTimeout, subscription (metadata of the
//	          selected protocol), assignment}]}
//	key versions 3..8: KIP-848 consumer groups (consumer_records.go)
//
// Records of one key overwrite each other, so compaction keeps the last;
// a null value (tombstone) deletes: offsets deleted by OffsetDelete,
// DeleteGroups or retention, and the metadata of deleted or expired groups
// (groups that only ever stored offsets, generation 0, have none).
// Readers accept OffsetCommitValue v0-v4 and GroupMetadataValue v0-v4.
//
// # Transactional offset commits (txn_offsets.go)
//
// TxnOffsetCommit writes the same OffsetCommit records in one batch with
// the transactional attribute, the producer id and epoch of the
// transaction (base sequence: the producer's next one in the partition,
// see SequenceLog), so the partition log opens a transaction for that
// producer. The offsets stay pending per producer id, invisible to
// OffsetFetch (require_stable, v7+: UNSTABLE_OFFSET_COMMIT for their
// partitions), until the transaction's marker (a control batch) is
// written to the partition: the marker writer calls CompleteTxn, and the
// loader reads the control batch. COMMIT makes them the committed offsets,
// except for partitions whose committed offset comes from a record later
// in the partition; ABORT drops them. A transaction still open at a
// failover stays pending. KIP-447 member fencing: a commit that names a
// member or generation must match the group's (ILLEGAL_GENERATION,
// UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID); one without (v0-v2) needs none,
// and CompletingRebalance does not refuse it.
//
// # Durability
//
// A commit, a SyncGroup assignment, a static member's takeover, a group
// deletion and an OffsetDelete are answered only after their batch is
// durable on the terms of an acks=-1 produce (Log.WaitDurable: the high
// watermark, the minimum log end over the ISR; below min.insync.replicas
// the write is refused and answered COORDINATOR_NOT_AVAILABLE, as Kafka
// does). The batch
// is appended under the shard lock and applied to memory only if the
// append succeeded; the wait happens after the lock is released. Retention
// tombstones and the metadata of groups that became Empty are written
// without waiting: if lost, the next pass or rebalance writes them again.
//
// # Loading
//
// When a partition is elected it is replayed from its start to its log
// end at election (last record per key wins, tombstones delete) aside
// from the live state and installed at once. Transactional batches and
// markers are applied in log order (Kafka's loadGroupsAndOffsets); markers
// passed to CompleteTxn while the partition loads are applied after it. A new leader first waits for
// its high watermark to reach that log end: it holds the previous
// leader's records, acknowledged commits among them, beyond the high
// watermark it learnt as a follower. Until then its groups answer
// COORDINATOR_LOAD_IN_PROGRESS (Heartbeat answers NONE and SyncGroup
// REBALANCE_IN_PROGRESS, as Kafka does), and groups of partitions this
// broker does not own answer NOT_COORDINATOR. Loaded groups with members
// are Stable and their members must heartbeat within their session
// timeout. Malformed records are skipped and counted in a log line; a read
// error leaves the partition unloaded.
//
// # Offsets retention (KIP-211)
//
// Every offsets.retention.check.interval.ms, offsets expire
// offsets.retention.minutes after the group became Empty (after their
// commit if that time is unknown or for groups with no protocol); in a
// Stable consumer group, only offsets of topics it no longer subscribes to
// expire (after their commit). Offsets with an explicit expire timestamp
// expire then. An Empty group left without offsets is deleted.
//
// # Deviations
//
// Kafka appends a transactional offset commit as the coordinator, with
// base sequence 0 and no sequence check; here the partition log checks
// it as any producer's batch, so the coordinator writes the sequence the
// log expects. TxnOffsetCommit v5 (KIP-890's verification of the
// transaction before the write) and v6, OffsetCommit/OffsetFetch v10
// (topic ids) and FindCoordinator v6 (share groups) are not served.
// Protocol ties are broken by name rather than by Java's hash order.
package group
