package config

import (
	"fmt"
	"strings"
)

// brokerTable lists the broker configs Strata understands, with Kafka's
// names, types and defaults (Kafka 4.x where they differ from 3.x, except
// for the deviations in doc.go). Configs that are broker synonyms of topic
// configs are dynamic cluster-wide, as in Kafka.
var brokerTable = newTable(append([]*Def{
	// Identity and network.
	{Name: "broker.id", Type: Int, Default: str("0"), Check: atLeast(0),
		Doc: "The broker id of this server."},
	{Name: "node.id", Type: Int, Default: nil, Check: atLeast(0),
		Doc: "Synonym of broker.id (KRaft's name), used when broker.id is not set."},
	{Name: "broker.rack", Type: String, Default: nil,
		Doc: "Rack of the broker, used in rack-aware replica assignment."},
	{Name: "listeners", Type: String, Default: str("PLAINTEXT://:9092"), Check: listenerList,
		Doc: "Comma-separated listener URIs NAME://HOST:PORT to accept connections on; an empty host binds all interfaces."},
	{Name: "advertised.listeners", Type: String, Default: nil, Check: listenerList,
		Doc: "Listeners published to clients in Metadata responses, if different from listeners."},
	{Name: "listener.security.protocol.map", Type: String, Default: str(DefaultProtocolMap), Check: protocolMap,
		Doc: "Map between listener names and security protocols, NAME:PROTOCOL[,…]; the protocols are PLAINTEXT, SSL, SASL_PLAINTEXT and SASL_SSL."},
	{Name: "inter.broker.listener.name", Type: String, Default: nil,
		Doc: "Name of the listener brokers use to talk to each other (replica fetchers, forwarding); cannot be set with security.inter.broker.protocol. Unset: the listener named after security.inter.broker.protocol (Strata: or the only listener)."},
	{Name: "security.inter.broker.protocol", Type: String, Default: str("PLAINTEXT"), Check: oneOf("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
		Doc: "Security protocol brokers use to talk to each other: the listener of that name."},
	{Name: "control.plane.listener.name", Type: String, Default: nil,
		Doc: "Name of the listener the controller uses to reach brokers (LeaderAndIsr, UpdateMetadata, StopReplica); unset: the inter-broker listener."},
	{Name: "socket.request.max.bytes", Type: Int, Default: str("104857600"), Check: atLeast(1),
		Doc: "The maximum number of bytes in a socket request."},
	{Name: "socket.sendfile.enable", Type: Boolean, Default: str("false"),
		Doc: "Strata: how fetch responses send records from local segments. true: sendfile(2), so the bytes never enter the broker. false: pread(2) into pooled 1 MiB buffers (32 MiB in all; sendfile when they run out) and one writev(2) per response, which costs fewer system calls; on the benchmark machine it served 1.5x as much and cost consumers less CPU. Read at startup."},
	{Name: "queued.max.requests", Type: Int, Default: str("500"), Check: atLeast(1),
		Doc: "The number of queued requests allowed before network threads stop reading."},
	{Name: "connections.max.idle.ms", Type: Long, Default: str("600000"),
		Doc: "Idle connections are closed after this many milliseconds. Strata also closes a connection whose request takes longer than this to arrive, or whose response makes no progress for this long (a client that does not read)."},
	{Name: "queued.max.request.bytes", Type: Long, Default: str("536870912"),
		Doc: "The number of queued bytes allowed before no more requests are read; <= 0 means no bound. Strata: the default is 512 MiB, not Kafka's -1 (unbounded), and a request is counted as its bytes arrive and, before it is decoded, with the memory decoding may take (for requests other than Produce, 160 times their size); a request whose count exceeds this bound is refused by closing the connection."},
	{Name: "max.connections", Type: Int, Default: str(maxInt), Check: atLeast(0), Dynamic: ClusterWide,
		Doc: "The maximum number of connections allowed in the broker at any time, in addition to max.connections.per.ip. Strata closes a new connection over the limit at once (Kafka stops accepting until one closes), and counts connections of other brokers too, on every listener."},
	{Name: "max.connections.per.ip", Type: Int, Default: str(maxInt), Check: atLeast(0), Dynamic: ClusterWide,
		Doc: "The maximum number of connections allowed from each IP address; 0 only with max.connections.per.ip.overrides. New connections from the address are closed at once when the limit is reached."},
	{Name: "max.connections.per.ip.overrides", Type: String, Default: str(""), Check: connectionOverrides, Dynamic: ClusterWide,
		Doc: `A comma-separated list of per-IP or host name overrides of max.connections.per.ip, for example "hostName:100,127.0.0.1:200".`},
	{Name: "num.io.threads", Type: Int, Default: str("8"), Check: atLeast(1), Dynamic: ClusterWide,
		Doc: "The number of threads processing requests. Accepted, informational."},
	{Name: "num.network.threads", Type: Int, Default: str("3"), Check: atLeast(1), Dynamic: ClusterWide,
		Doc: "The number of threads handling the network. Accepted, informational."},
	{Name: "password.encoder.secret", Type: Password, Default: nil,
		Doc: "The secret used to encode dynamically configured passwords. Accepted, not used."},

	// ZooKeeper.
	{Name: "zookeeper.connect", Type: String, Default: nil,
		Doc: "ZooKeeper connection string host:port[,host:port…][/chroot]; unset runs the embedded single-node controller."},
	{Name: "zookeeper.session.timeout.ms", Type: Int, Default: str("18000"), Check: atLeast(1),
		Doc: "ZooKeeper session timeout."},
	{Name: "zookeeper.connection.timeout.ms", Type: Int, Default: nil, Check: atLeast(1),
		Doc: "The maximum time to wait to establish a ZooKeeper connection; unset uses zookeeper.session.timeout.ms."},
	{Name: "zookeeper.set.acl", Type: Boolean, Default: str("false"),
		Doc: "Create znodes with Kafka's secure ACLs (the brokers' identity ALL, everyone else READ; /config/users and /config/brokers the brokers' identity only) and secure existing znodes at start; needs zookeeper.digest.user and zookeeper.digest.password."},
	{Name: "zookeeper.digest.user", Type: String, Default: nil,
		Doc: "Strata: the user name the brokers' ZooKeeper sessions authenticate as, in ZooKeeper's digest scheme (zkCli's addauth digest user:password); every broker of a cluster uses the same credentials. Read at startup."},
	{Name: "zookeeper.digest.password", Type: Password, Default: nil,
		Doc: "Strata: the password of zookeeper.digest.user. Read at startup."},

	// Authorization (broker/acl).
	{Name: "authorizer.class.name", Type: String, Default: str(""),
		Check: oneOf("", "kafka.security.authorizer.AclAuthorizer", "org.apache.kafka.metadata.authorizer.StandardAuthorizer"),
		Doc:   "The authorizer: kafka.security.authorizer.AclAuthorizer (or org.apache.kafka.metadata.authorizer.StandardAuthorizer, the same in Strata) checks every request against the ACLs; empty: no authorizer, every request is allowed. Read at startup."},
	{Name: "super.users", Type: String, Default: nil, Check: superUsers,
		Doc: "Principals that may do anything when an authorizer is set, separated by ';' (User:admin;User:broker). Read at startup."},
	{Name: "allow.everyone.if.no.acl.found", Type: Boolean, Default: str("false"),
		Doc: "With an authorizer: whether a resource that no ACL names is open to everyone (false: only super users may use it). Read at startup."},

	// Topics.
	{Name: "num.partitions", Type: Int, Default: str("1"), Check: atLeast(1),
		Doc: "The default number of partitions of a new topic."},
	{Name: "default.replication.factor", Type: Int, Default: str("1"), Check: atLeast(1),
		Doc: "The default replication factor of a new topic."},
	{Name: "min.insync.replicas", Type: Int, Default: str("1"), Check: atLeast(1), Dynamic: ClusterWide,
		Doc: "With acks=all, the minimum number of in-sync replicas that must acknowledge a write."},
	{Name: "auto.create.topics.enable", Type: Boolean, Default: str("true"),
		Doc: "Enable auto creation of topics on the server."},
	{Name: "delete.topic.enable", Type: Boolean, Default: str("true"),
		Doc: "Enable topic deletion."},
	{Name: "unclean.leader.election.enable", Type: Boolean, Default: str("false"), Dynamic: ClusterWide,
		Doc: "Whether replicas not in the ISR may be elected leader as a last resort, at the risk of data loss."},
	{Name: "auto.leader.rebalance.enable", Type: Boolean, Default: str("true"),
		Doc: "Whether the controller moves leadership back to preferred replicas."},
	{Name: "leader.imbalance.check.interval.seconds", Type: Long, Default: str("300"), Check: atLeast(1),
		Doc: "How often the controller checks whether partition leadership is imbalanced."},
	{Name: "leader.imbalance.per.broker.percentage", Type: Int, Default: str("10"), Check: between(0, 100),
		Doc: "The share of a broker's preferred partitions it may not lead before the controller rebalances leadership."},
	{Name: "controlled.shutdown.enable", Type: Boolean, Default: str("true"),
		Doc: "Whether a broker asks the controller to move its partition leadership away before it shuts down."},
	{Name: "controlled.shutdown.max.retries", Type: Int, Default: str("3"), Check: atLeast(0),
		Doc: "How many more times a broker asks for controlled shutdown when partitions remain or the request fails."},
	{Name: "controlled.shutdown.retry.backoff.ms", Type: Long, Default: str("5000"), Check: atLeast(0),
		Doc: "How long a broker waits before asking for controlled shutdown again."},
	{Name: "replica.lag.time.max.ms", Type: Long, Default: str("30000"), Check: atLeast(1),
		Doc: "A follower that has not caught up to the leader's log end within this time is removed from the ISR."},
	{Name: "replica.high.watermark.checkpoint.interval.ms", Type: Long, Default: str("5000"), Check: atLeast(1),
		Doc: "How often each partition's high watermark is saved to replication-offset-checkpoint in the log directory."},
	{Name: "replica.selector.class", Type: String, Default: nil, Check: oneOf(ReplicaSelectorClasses...),
		Doc: "The replica selector that lets consumers fetch from followers (KIP-392): unset or LeaderSelector serves from the leader only; RackAwareReplicaSelector sends consumers to an in-sync replica in their rack."},
	{Name: "message.max.bytes", Type: Int, Default: str("1048588"), Check: atLeast(0), Dynamic: ClusterWide,
		Doc: "The largest record batch size allowed, after compression (topic: max.message.bytes)."},
	{Name: "fetch.max.bytes", Type: Int, Default: str("57671680"), Check: atLeast(1024),
		Doc: "The maximum number of bytes returned for a fetch request."},
	{Name: "compression.type", Type: String, Default: str("producer"), Check: oneOf(compressionTypes...), Dynamic: ClusterWide,
		Doc: "The final compression type for topics: uncompressed, zstd, lz4, snappy, gzip, or producer."},
	{Name: "compression.gzip.level", Type: Int, Default: str("-1"), Check: gzipLevel, Dynamic: ClusterWide,
		Doc: "The compression level to use if compression.type is set to gzip."},
	{Name: "compression.lz4.level", Type: Int, Default: str("9"), Check: between(1, 17), Dynamic: ClusterWide,
		Doc: "The compression level to use if compression.type is set to lz4."},
	{Name: "compression.zstd.level", Type: Int, Default: str("3"), Check: between(-131072, 22), Dynamic: ClusterWide,
		Doc: "The compression level to use if compression.type is set to zstd."},

	// The log.
	{Name: "log.dir", Type: List, Default: str("./strata-data"), Check: nonEmptyList,
		Doc: "The directory where log data is stored (used if log.dirs is not set)."},
	{Name: "log.dirs", Type: List, Default: nil, Check: nonEmptyList,
		Doc: "The directory where log data is stored; Strata supports exactly one."},
	{Name: "log.segment.bytes", Type: Int, Default: str("1073741824"), Check: atLeast(14), Dynamic: ClusterWide,
		Doc: "The maximum size of a single log segment file."},
	{Name: "log.roll.ms", Type: Long, Default: nil, Check: atLeast(1), Dynamic: ClusterWide,
		Doc: "The maximum time before a new log segment is rolled, in milliseconds; unset uses log.roll.hours."},
	{Name: "log.roll.hours", Type: Int, Default: str("168"), Check: atLeast(1),
		Doc: "The maximum time before a new log segment is rolled, in hours; secondary to log.roll.ms."},
	{Name: "log.roll.jitter.ms", Type: Long, Default: nil, Check: atLeast(0), Dynamic: ClusterWide,
		Doc: "The maximum jitter subtracted from the roll time, in milliseconds; unset uses log.roll.jitter.hours."},
	{Name: "log.roll.jitter.hours", Type: Int, Default: str("0"), Check: atLeast(0),
		Doc: "The maximum jitter subtracted from the roll time, in hours; secondary to log.roll.jitter.ms."},
	{Name: "log.retention.ms", Type: Long, Default: nil, Dynamic: ClusterWide,
		Doc: "The time to keep a log segment before deleting it, in milliseconds; unset uses log.retention.minutes; -1 means no time limit."},
	{Name: "log.retention.minutes", Type: Int, Default: nil,
		Doc: "The time to keep a log segment before deleting it, in minutes; secondary to log.retention.ms; unset uses log.retention.hours."},
	{Name: "log.retention.hours", Type: Int, Default: str("168"),
		Doc: "The time to keep a log segment before deleting it, in hours; tertiary to log.retention.ms."},
	{Name: "log.retention.bytes", Type: Long, Default: str("-1"), Dynamic: ClusterWide,
		Doc: "The maximum size of a partition's log before old segments are deleted; -1 means no size limit."},
	{Name: "log.retention.check.interval.ms", Type: Long, Default: str("300000"), Check: atLeast(1),
		Doc: "How often, in milliseconds, logs are checked for segments to delete."},
	{Name: "log.cleanup.policy", Type: List, Default: str("delete"), Check: listOf("compact", "delete"), Dynamic: ClusterWide,
		Doc: `The default cleanup policy for segments beyond the retention window: "delete", "compact", or both.`},
	{Name: "log.cleaner.delete.retention.ms", Type: Long, Default: str("86400000"), Check: atLeast(0), Dynamic: ClusterWide,
		Doc: "The time to retain delete tombstone markers for log compacted topics."},
	{Name: "log.cleaner.min.compaction.lag.ms", Type: Long, Default: str("0"), Check: atLeast(0), Dynamic: ClusterWide,
		Doc: "The minimum time a message remains uncompacted in the log."},
	{Name: "log.cleaner.max.compaction.lag.ms", Type: Long, Default: str(maxLong), Check: atLeast(1), Dynamic: ClusterWide,
		Doc: "The maximum time a message remains ineligible for compaction."},
	{Name: "log.cleaner.backoff.ms", Type: Long, Default: str("15000"), Check: atLeast(0), Dynamic: ClusterWide,
		Doc: "The amount of time to sleep when there are no logs to clean."},
	{Name: "log.cleaner.min.cleanable.ratio", Type: Double, Default: str("0.5"), Check: between(0, 1), Dynamic: ClusterWide,
		Doc: "The minimum ratio of dirty log to total log for a log to be eligible for cleaning."},
	{Name: "log.flush.interval.messages", Type: Long, Default: str(maxLong), Check: atLeast(1), Dynamic: ClusterWide,
		Doc: "The number of messages accumulated on a partition before they are fsynced."},
	{Name: "log.flush.interval.ms", Type: Long, Default: nil, Dynamic: ClusterWide,
		Doc: "The maximum time in ms a message stays unflushed; unset uses log.flush.scheduler.interval.ms."},
	{Name: "log.flush.scheduler.interval.ms", Type: Long, Default: str(maxLong),
		Doc: "How often, in milliseconds, logs are checked for a needed flush."},
	{Name: "log.index.interval.bytes", Type: Int, Default: str("4096"), Check: atLeast(0), Dynamic: ClusterWide,
		Doc: "The interval in bytes with which an entry is added to the offset index."},
	{Name: "log.index.size.max.bytes", Type: Int, Default: str("10485760"), Check: atLeast(4), Dynamic: ClusterWide,
		Doc: "The maximum size in bytes of the offset index."},
	{Name: "log.segment.delete.delay.ms", Type: Long, Default: str("60000"), Check: atLeast(0), Dynamic: ClusterWide,
		Doc: "The time to wait before deleting a file from the filesystem."},
	{Name: "log.preallocate", Type: Boolean, Default: str("false"), Dynamic: ClusterWide,
		Doc: "Whether to preallocate the file when creating a new segment. Accepted, not used."},
	{Name: "log.message.timestamp.type", Type: String, Default: str("CreateTime"), Check: oneOf("CreateTime", "LogAppendTime"), Dynamic: ClusterWide,
		Doc: "Whether the timestamp in the message is the create time or the log append time: CreateTime or LogAppendTime."},
	{Name: "log.message.timestamp.before.max.ms", Type: Long, Default: str(maxLong), Check: atLeast(0), Dynamic: ClusterWide,
		Doc: "How far a CreateTime timestamp may be behind the broker's clock, in milliseconds."},
	{Name: "log.message.timestamp.after.max.ms", Type: Long, Default: str("3600000"), Check: atLeast(0), Dynamic: ClusterWide,
		Doc: "How far a CreateTime timestamp may be ahead of the broker's clock, in milliseconds."},
	{Name: "log.message.downconversion.enable", Type: Boolean, Default: str("true"), Dynamic: ClusterWide,
		Doc: "Whether down-conversion of message formats is enabled for consume requests. Accepted, not used."},

	// Tiered storage.
	{Name: "remote.log.storage.system.enable", Type: Boolean, Default: str("false"),
		Doc: "Whether tiered storage is enabled on the broker (topics opt in with remote.storage.enable)."},
	{Name: "leader.replication.throttled.rate", Type: Long, Default: str(maxLong), Check: atLeast(0), Dynamic: ClusterWide,
		Doc: "The bytes per second a leader sends to out-of-sync replicas of the partitions in leader.replication.throttled.replicas."},
	{Name: "follower.replication.throttled.rate", Type: Long, Default: str(maxLong), Check: atLeast(0), Dynamic: ClusterWide,
		Doc: "The bytes per second an out-of-sync follower fetches of the partitions in follower.replication.throttled.replicas."},
	{Name: "remote.log.manager.segment.idle.roll.ms", Type: Long, Default: str("600000"), Check: atLeast(-1),
		Doc: "How long the active segment of a tiered partition may go without appends before its leader rolls it, so that it is uploaded; -1: never."},
	{Name: "strata.drain.requested.ms", Type: Long, Default: str("-1"), Check: atLeast(-1), Dynamic: ClusterWide,
		Doc: "Set by strata admin cluster drain to when it asked: brokers started before then refuse writes and upload every tiered partition's active segment; -1: no drain."},
	{Name: "follower.fetch.last.tiered.offset.enable", Type: Boolean, Default: str("true"),
		Doc: "Whether a replica with an empty log of a tiered partition (a new or moved replica) starts at the leader's last tiered offset, copying only what is not yet in remote storage (KIP-1023; Kafka's default is false)."},
	{Name: "log.local.retention.ms", Type: Long, Default: str("-2"), Check: atLeast(-2), Dynamic: ClusterWide,
		Doc: "The time to keep local log segments of tiered topics; -2 uses log.retention.ms."},
	{Name: "log.local.retention.bytes", Type: Long, Default: str("-2"), Check: atLeast(-2), Dynamic: ClusterWide,
		Doc: "The maximum local size of a tiered partition; -2 uses log.retention.bytes."},
	{Name: "remote.log.manager.task.interval.ms", Type: Long, Default: str("30000"), Check: atLeast(1),
		Doc: "How often the remote log manager copies and expires segments, in milliseconds."},
	{Name: "remote.log.manager.copier.thread.pool.size", Type: Int, Default: str("10"), Check: atLeast(1),
		Doc: "How many partitions the remote log manager copies (and expires) at once."},
	{Name: "remote.log.manager.copy.max.bytes.per.second", Type: Long, Default: str(maxLong), Check: atLeast(1), Dynamic: ClusterWide,
		Doc: "The maximum bytes per second copied to remote storage."},
	{Name: "remote.log.index.file.cache.total.size.bytes", Type: Long, Default: str("1073741824"), Check: atLeast(1),
		Doc: "The total size of the remote segments' .index and .timeindex objects the remote reader keeps in memory (parsed), in bytes. Read at startup."},
	{Name: "remote.log.reader.cache.size.bytes", Type: Long, Default: str("67108864"), Check: atLeast(0),
		Doc: "Strata: the total size of the remote segments' .log chunks (4 MiB each) the remote reader keeps in memory, in bytes; 0 caches none (concurrent reads of a chunk still share one GET). Read at startup."},
	{Name: "remote.log.reader.readahead.chunks", Type: Int, Default: str("2"), Check: between(0, 64),
		Doc: "Strata: how many 4 MiB chunks of a remote segment the remote reader fetches ahead of a sequential consumer; 0 disables read-ahead. Read at startup."},
	{Name: "remote.log.storage.lifecycle.rules.enable", Type: Boolean, Default: str("false"),
		Doc: "Whether the controller keeps one bucket lifecycle rule per tiered topic (expiring its objects retention.ms plus remote.log.storage.lifecycle.margin.ms after upload, in whole days) and one aborting incomplete multipart uploads after a day. S3 tiers only."},
	{Name: "remote.log.storage.lifecycle.margin.ms", Type: Long, Default: str("86400000"), Check: atLeast(0),
		Doc: "How long after a topic's retention.ms its bucket lifecycle rule expires objects, in milliseconds (rounded up with retention.ms to whole days)."},
	{Name: "remote.log.reconciliation.interval.ms", Type: Long, Default: str("3600000"), Check: reconcileInterval,
		Doc: "How often the broker deletes orphaned objects from the tier (unfinished uploads nobody will finish, objects of deleted topics), in milliseconds; -1 disables."},
	{Name: "remote.log.reconciliation.grace.ms", Type: Long, Default: str("3600000"), Check: atLeast(0),
		Doc: "How old an orphaned object must be before reconciliation deletes it, in milliseconds; at least 10 remote.log.manager.task.interval.ms are used. An upload in progress heartbeats its manifest, so this need only exceed a few heartbeats (an eighth of it each) and the clocks' skew, not the longest upload."},

	// Groups, offsets, transactions and producers.
	{Name: "offsets.topic.num.partitions", Type: Int, Default: str("50"), Check: atLeast(1),
		Doc: "The number of partitions of the offset commit topic."},
	{Name: "offsets.topic.replication.factor", Type: Short, Default: str("3"), Check: atLeast(1),
		Doc: "The replication factor of the offset commit topic (capped at the number of brokers)."},
	{Name: "offsets.retention.minutes", Type: Int, Default: str("10080"), Check: atLeast(1),
		Doc: "Committed offsets of an empty group are kept this many minutes."},
	{Name: "offsets.retention.check.interval.ms", Type: Long, Default: str("600000"), Check: atLeast(1),
		Doc: "How often the group coordinator looks for expired offsets, in milliseconds."},
	{Name: "offset.metadata.max.bytes", Type: Int, Default: str("4096"), Check: atLeast(0),
		Doc: "The maximum size of the metadata string of an offset commit."},
	{Name: "group.consumer.session.timeout.ms", Type: Int, Default: str("45000"), Check: atLeast(1),
		Doc: "The timeout to detect client failures when using the consumer group protocol (KIP-848)."},
	{Name: "group.consumer.heartbeat.interval.ms", Type: Int, Default: str("5000"), Check: atLeast(1),
		Doc: "The heartbeat interval given to the members of a consumer group (KIP-848)."},
	{Name: "group.consumer.max.size", Type: Int, Default: str(maxInt), Check: atLeast(1),
		Doc: "The maximum number of consumers that a single consumer group (KIP-848) can accommodate."},
	{Name: "group.consumer.assignors", Type: List, Default: str("uniform,range"), Check: listOf("uniform", "range"),
		Doc: "The server-side assignors, as a list of names; the first is the default."},
	{Name: "group.max.size", Type: Int, Default: str(maxInt), Check: atLeast(1),
		Doc: "The maximum number of consumers in a single consumer group."},
	{Name: "group.min.session.timeout.ms", Type: Int, Default: str("6000"),
		Doc: "The minimum session timeout allowed for registered consumers."},
	{Name: "group.max.session.timeout.ms", Type: Int, Default: str("1800000"),
		Doc: "The maximum session timeout allowed for registered consumers."},
	{Name: "group.initial.rebalance.delay.ms", Type: Int, Default: str("3000"),
		Doc: "The time the coordinator waits for more consumers to join a new group before the first rebalance."},
	{Name: "transactional.id.expiration.ms", Type: Int, Default: str("604800000"), Check: atLeast(1),
		Doc: "The time a transactional id is kept without transaction status updates."},
	{Name: "transaction.max.timeout.ms", Type: Int, Default: str("900000"), Check: atLeast(1),
		Doc: "The maximum transaction timeout a producer may ask for."},
	{Name: "transaction.state.log.num.partitions", Type: Int, Default: str("50"), Check: atLeast(1),
		Doc: "The number of partitions of the transaction state topic (__transaction_state)."},
	{Name: "transaction.state.log.replication.factor", Type: Short, Default: str("3"), Check: atLeast(1),
		Doc: "The replication factor of the transaction state topic (capped at the number of brokers)."},
	{Name: "transaction.state.log.min.isr", Type: Int, Default: str("2"), Check: atLeast(1),
		Doc: "The min.insync.replicas of the transaction state topic (capped at its replication factor)."},
	{Name: "transaction.state.log.segment.bytes", Type: Int, Default: str("104857600"), Check: atLeast(14),
		Doc: "The segment size of the transaction state topic."},
	{Name: "transaction.abort.timed.out.transaction.cleanup.interval.ms", Type: Int, Default: str("10000"), Check: atLeast(1),
		Doc: "How often the transaction coordinator aborts transactions open longer than their timeout, in milliseconds."},
	{Name: "transaction.remove.expired.transaction.cleanup.interval.ms", Type: Int, Default: str("3600000"), Check: atLeast(1),
		Doc: "How often the transaction coordinator forgets transactional ids idle for transactional.id.expiration.ms, in milliseconds."},
	{Name: "transaction.version", Type: Short, Default: str("2"), Check: between(0, 2),
		Doc: "The finalized level of the transaction.version feature (Kafka's kafka-storage format --feature transaction.version=N): 2 enables KIP-890 part 2 (epoch bump at every transaction end, no AddPartitionsToTxn from clients). Must be the same on every broker."},
	{Name: "producer.id.expiration.ms", Type: Int, Default: str("86400000"), Check: atLeast(1), Dynamic: ClusterWide,
		Doc: "The time a producer id's state is kept after its last write."},
}, append(sslDefs, saslDefs...)...))

// Replica selectors (replica.selector.class) Strata implements, by Kafka's
// class names.
const (
	LeaderSelector           = "org.apache.kafka.common.replica.LeaderSelector"
	RackAwareReplicaSelector = "org.apache.kafka.common.replica.RackAwareReplicaSelector"
)

// ReplicaSelectorClasses are the accepted values of replica.selector.class.
var ReplicaSelectorClasses = []string{"", LeaderSelector, RackAwareReplicaSelector}

// ignoredKeys are Kafka broker keys Strata accepts in server.properties and
// --set and ignores: a stock Kafka server.properties loads unchanged.
var ignoredKeys = map[string]bool{
	"socket.send.buffer.bytes":                         true,
	"socket.receive.buffer.bytes":                      true,
	"num.recovery.threads.per.data.dir":                true,
	"num.replica.fetchers":                             true,
	"background.threads":                               true,
	"share.coordinator.state.topic.replication.factor": true,
	"share.coordinator.state.topic.min.isr":            true,
	"controller.listener.names":                        true,
	"controller.quorum.voters":                         true,
	"controller.quorum.bootstrap.servers":              true,
	"process.roles":                                    true,
	"metadata.log.dir":                                 true,
	"log.cleaner.enable":                               true,
	"log.cleaner.threads":                              true,
	"log.flush.offset.checkpoint.interval.ms":          true,
	"log.flush.start.offset.checkpoint.interval.ms":    true,
	"confluent.support.metrics.enable":                 true,
	"inter.broker.protocol.version":                    true,
	"log.message.format.version":                       true,
	"replica.fetch.max.bytes":                          true,
	"replica.socket.timeout.ms":                        true,
	"replica.fetch.wait.max.ms":                        true,
	"max.incremental.fetch.session.cache.slots":        true,
	"remote.log.metadata.manager.listener.name":        true,
	"remote.log.storage.manager.class.name":            true,
	"remote.log.metadata.manager.class.name":           true,
	"offsets.topic.segment.bytes":                      true,
	"offsets.commit.timeout.ms":                        true,
	"group.coordinator.rebalance.protocols":            true,
	"unstable.api.versions.enable":                     true,
	"unstable.feature.versions.enable":                 true,
	"auto.include.jmx.reporter":                        true,
	"metric.reporters":                                 true,
	"kafka.metrics.reporters":                          true,
}

// refusedReason returns why a key Kafka knows is refused by Strata, or "".
func refusedReason(key string) string {
	switch {
	case strings.HasPrefix(key, "listener.name.") && strings.Contains(key, ".sasl."):
		return "of the per-listener SASL settings, Strata takes sasl.enabled.mechanisms and <mechanism>.sasl.jaas.config for PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512"
	case strings.HasPrefix(key, "listener.name."):
		return "of the per-listener settings, Strata takes listener.name.<listener>.ssl.*, sasl.enabled.mechanisms, <mechanism>.sasl.jaas.config and connections.max.reauth.ms only"
	case strings.HasPrefix(key, "ssl."):
		return "not supported (Strata takes PEM keystores and truststores; see docs/security.md)"
	case strings.HasPrefix(key, "sasl."):
		return "not supported (Strata serves SASL PLAIN and SCRAM; see docs/security.md)"
	case strings.HasPrefix(key, "delegation.token."), key == "authorizer.class.name", key == "super.users":
		return "authentication and authorization are not supported"
	}
	return ""
}

// reconcileInterval accepts -1 (disabled) or a positive interval.
func reconcileInterval(v any) error {
	if n := v.(int64); n != -1 && n < 1 {
		return fmt.Errorf("must be -1 (disabled) or >= 1, got %d", n)
	}
	return nil
}

// connectionOverrides validates max.connections.per.ip.overrides.
func connectionOverrides(v any) error {
	_, err := ParseConnectionOverrides(v.(string))
	return err
}

// listenerList validates NAME://HOST:PORT[,…].
func listenerList(v any) error {
	_, err := ParseListeners(v.(string))
	return err
}

// superUsers validates super.users: principals TYPE:name separated by ';'.
func superUsers(v any) error {
	for _, p := range strings.Split(v.(string), ";") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if typ, name, ok := strings.Cut(p, ":"); !ok || typ == "" || name == "" {
			return fmt.Errorf("%q is not a principal (User:name)", p)
		}
	}
	return nil
}
