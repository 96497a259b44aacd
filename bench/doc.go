// Package bench is Strata's benchmark harness: a library driven by
// `strata bench` and usable from a testing.B.
//
// A [Workload] describes what to do, in the spirit of the OpenMessaging
// Benchmark: topics, partitions, replication factor, record size and key
// distribution (none, random, round-robin, zipf), producers and their
// target rate (or as fast as possible), acks, compression, linger,
// consumers, warm-up and duration, an optional backlog and read-back, and
// faults. Workloads come from [Presets] (throughput, latency, catch-up,
// groups, replication, failover, tier, tls, txn and others), from JSON
// files ([ParseWorkload]; examples in bench/workloads) or from flags. A [Config] adds where to run
// it: Strata started as a separate process by the harness, Apache Kafka
// started by the harness (kafka: one node; kafka-cluster: three; see
// below), franz-go's in-process kfake cluster (or kfake-process: the same
// in a helper process of its own, `strata bench --serve-kfake -`, read as a
// broker process is; not a default target), a local cluster of three
// Strata brokers on ZooKeeper started by deploy/local/cluster.sh (the
// script `make cluster` and the end-to-end tests use;
// min.insync.replicas=2, the brokers' default
// zookeeper.session.timeout.ms, an s3:// tier on the script's MinIO), one
// Strata broker with --tier s3 on a MinIO the harness starts (strata-s3,
// for the tier workload only), or any Kafka-protocol cluster at HOST:PORT
// ([DefaultTargets] picks per workload when none are given: Strata, Kafka
// and kfake; for replicated workloads the Strata cluster, kafka-cluster
// and one Strata broker). Topics get the workload's replication factor,
// except on the one-broker targets (strata, kafka, kfake), where it is 1:
// the replication presets compare RF=3 on the clusters with RF=1 on one
// broker in the same run. [Run] runs the workload against each target in
// turn and returns a [Report]; [RunSuite] runs several workloads and
// evaluates goals over them; [Suite.Write] writes report.json, report.md,
// benchstat lines (bench.txt) and PNG plots into a directory.
//
// Each target run goes through these phases:
//
//  1. Setup: the topics are created and each producer client sends one
//     record synchronously (connection, metadata, producer id).
//  2. Backlog (when Backlog > 0): that many records are produced as fast as
//     the clients take them before any consumer starts.
//  3. Run: consumers start from offset 0 (each with a fixed share of the
//     partitions through kgo.ConsumePartitions, or, with consume_mode
//     "group", as members of one Kafka consumer group per topic), then the
//     producers run for Warmup+Duration (or until Records measured
//     records). With a Rate the producers are open loop: the k-th record of
//     a producer has an intended send time start+k/rate and its latencies
//     count from that time however late it was actually sent, so a stalled
//     broker shows up in the latency instead of slowing the load (no
//     coordinated omission). Without a Rate, latency counts from the
//     Produce call. Every record carries its intended send time in the
//     header "strata-bench-t"; the consumer takes end-to-end latency as
//     receipt minus that time. Only records whose intended send time falls
//     after the warm-up count in the figures.
//  4. Drain: the consumers read up to the partitions' end offsets. With a
//     backlog, the catch-up time is from the consumers' start until they
//     had read every partition up to where the backlog ended.
//  5. Read-back (when ReadBack): fresh franz-go consumers
//     (readBackClients of them, sharing the partitions) read every
//     partition again from offset 0, readBackPasses times with new
//     clients each time, in a client process of their own (`strata bench
//     --read-back-client`, readback_proc.go: in the bench process their
//     garbage collector depended on what else the heap held, kfake's
//     records above all); on a disk broker this is served from the page
//     cache. This is what an application gets, and on a small machine it
//     measures the client as much as the broker: franz-go decodes every
//     record (varints, allocations, garbage collection) on the CPUs the
//     broker uses too. The figure is the fastest pass, the first pass
//     beside it: a first pass also pays for the client's heap growing
//     (tens of thousands of page faults, each dear in a paravirtualised
//     guest).
//  6. Raw read-back (when RawReadBack): the same reads, rawReadPasses
//     times, without a client library: readBackClients TCP connections
//     per partition leader each send Fetch v11 requests (kmsg-encoded, no
//     session, fetch.max.bytes and max.partition.fetch.bytes at the Java
//     consumer's defaults, one request in flight per connection) for a
//     share of the leader's partitions, and walk the record batches of
//     each response by their headers: the CRC32C of every batch is
//     checked, records are counted from recordsCount, and the next fetch
//     offset is the batch's baseOffset+lastOffsetDelta+1; no record is
//     decoded. Every pass must count every record. The figure is the
//     fastest pass (other work on the machine only ever slows a pass);
//     the median pass is reported beside it. Its MB/s are record-batch
//     bytes, not record values. Issue 2's page-cache goal compares these
//     records/s between targets; the franz-go read-back is reported too.
//  7. Floors (after a Strata broker's raw read-back): a floor server
//     (floor.go, `strata bench --serve-floor`) in a process of its own
//     copies the broker's batches and answers Fetch v11 with one writev
//     per response and no other work; the raw read-back is run again
//     against it, with the metadata still asked of the broker. Twice:
//     with the batches in memory, whose records/s bound what any broker
//     process could serve on the machine in that run, and with them in
//     files read with pread(2) into reused buffers, which bound a broker
//     serving from the page cache that way. The report gives both ratios
//     to kfake (the most the page-cache goal's ratio could be) and
//     Strata's share of the page-cache floor.
//
// What bounds the read-back on a 2-core machine (profiles of the broker's
// /debug/pprof and of the bench process during each phase): the franz-go
// read-back spends the bench process's CPU on record decoding (kgo's
// record reader, varints, CRC32C, garbage collection) while the broker
// uses 0.15 to 0.3 of a core, so it compares clients more than brokers.
// In the raw read-back the reader costs little besides the kernel's
// receive copy and CRC32C, and the broker's kernel time bounds the rest:
// on the paravirtualised test machine every system call and every page
// spliced by sendfile(2) costs a hypercall, so Strata's default (pread(2)
// into pooled buffers, one writev(2) per response) serves about 1.5x what
// sendfile does (socket.sendfile.enable=true), and the reader's receive
// costs less too (see RESULTS.md); kfake serves from memory inside the
// bench process. With
// the broker, the reader and the machine's other work sharing two CPUs,
// the raw figures vary by 2x from pass to pass when the machine is busy,
// hence the fastest of several passes and the median beside it.
//
// With Faults (cluster target only), a driver waits out the warm-up, then
// for each fault picks the broker leading the most partitions of the
// run's topics, notes whether it is the controller, and sends it SIGKILL
// (kill) or SIGTERM (shutdown: Kafka's controlled shutdown moves its
// leadership away first), waiting for the process to exit. Producers run
// open loop with round-robin keys, so every partition keeps getting its
// share of records, and the harness logs the time of every
// acknowledgement by partition. Once metadata shows every partition the
// broker led with another leader and each has acknowledged a record since,
// the fault's window is the longest time between consecutive
// acknowledgements on one of those partitions, counted from one second
// before the signal (the same over every partition is reported beside
// it). The broker is then started again with its original command line
// (its PID file updated, so that cluster.sh down stops it), the harness
// waits for every ISR to be full, asks for preferred-leader elections
// (ElectLeaders) until every partition is led by its first replica, and
// goes on with the next fault. zookeeper.session.timeout.ms is read from
// a broker (DescribeConfigs) and reported beside the windows. The
// producers stop once the faults are done; records retry for up to two
// minutes, so a fault shows as latency, never as a failed record.
//
// In group mode the harness records, per member, the time from creating
// its client (joining) to its first record. With Rebalances, a driver
// waits (DescribeGroups) until the groups are Stable, then repeatedly has
// one more member join each group while records flow, and measures the
// longest time no record reached any member, the longest gap on one
// partition, and the time until the groups were Stable again and every
// partition had delivered a record since; the extra member then leaves and
// the groups settle. The producers stop once the rebalances are done.
//
// The run checks that every acknowledged record is in the topics and was
// consumed exactly once (duplicates, possible in group mode, are counted).
// Latencies go into HDR histograms (1 µs to 60 s, 3 significant digits).
// A timeline samples produce and consume rates and the consumer lag
// (records acknowledged but not yet consumed) every SampleInterval. For a
// Strata process the harness samples /proc/<pid>/status (VmRSS, VmHWM),
// /proc/<pid>/stat (CPU seconds, split by phase) and /proc/<pid>/io (bytes
// written to disk).
//
// # Apache Kafka
//
// The kafka targets run the Apache Kafka of bench/kafka/pom.xml
// ([KafkaVersion]; its kafka.version is the one place the version is
// written, and this package embeds the file). deploy/install-deps.sh kafka
// copies org.apache.kafka:kafka_2.13 and its runtime dependencies with
// Maven, once, into $STRATA_KAFKA or
// ${XDG_CACHE_HOME:-~/.cache}/strata/kafka-VERSION/libs; the harness runs
// that script itself when the jars are missing (Maven's output is the
// progress). For each target run the harness writes a server.properties
// per node in a fresh temporary directory: process.roles=broker,controller
// (KRaft, one JVM per node), controller.quorum.voters over every node,
// PLAINTEXT and CONTROLLER listeners on free loopback ports, log.dirs in
// the directory, and otherwise Kafka's defaults (no fsync per write),
// except that one node gives its internal topics one replica and three
// nodes take min.insync.replicas=2 as the Strata cluster does. It formats
// every node's storage for one random cluster id (kafka.tools.StorageTool
// format, as kafka-storage.sh), starts `java -cp 'libs/*' kafka.Kafka
// server.properties` with kafka-server-start.sh's 1 GiB heap and
// kafka-run-class.sh's JVM options, and waits until the metadata lists
// every node as a broker and names a controller (10 to 20 s on a busy
// 2-CPU machine; the progress line counts it). The JVM's output goes to
// Config.BrokerLog, each line prefixed with its node. For one node the
// monitor reads the JVM's /proc/<pid> as it reads a Strata broker's, so
// that CPU seconds per phase and peak RSS compare. The nodes get SIGTERM
// together when the target run ends (SIGKILL after 20 s) and the
// directory is removed.
//
// Kafka has no column on the tier workload: it tiers only through a
// RemoteStorageManager plugin and ships none for S3. The failover workload
// runs on the Strata cluster only: its fault driver stops and restarts the
// brokers of deploy/local/cluster.sh.
//
// # The tier workload
//
// A workload with Tier set (the tier preset) replaces the phases above on
// the strata-s3 target. The harness starts MinIO (the binary
// deploy/install-deps.sh minio installs) on a free loopback port with a
// fresh data directory and a bucket, and one Strata broker with --tier
// s3://BUCKET/strata on it, its credentials in the standard AWS variables,
// remote.log.manager.task.interval.ms=50 and
// log.retention.check.interval.ms=100. Then:
//
//  1. Three topics with segment.bytes from the workload: a tiered one
//     (remote.storage.enable=true, local.retention.ms=1, copying disabled
//     with remote.log.copy.disable=true), an untiered one, and a tiered
//     latency topic of LatencyPartitions partitions with 1 MiB segments.
//     The latency topic gets 2.5 MiB per partition and is uploaded first.
//     Records records of RecordSize bytes go, spread evenly over the
//     partitions, to the tiered and the untiered topic (the same values,
//     no compression, batches of at most a quarter segment). Each topic's
//     active segments are then sealed: segment.ms=1 and one small record
//     per partition roll them, so that all but those records can be
//     uploaded.
//  2. Upload: remote.log.copy.disable is turned off on the tiered topic
//     and /metrics is polled every 25 ms until
//     kafka_server_brokertopicmetrics_remotecopyrequests_total has counted
//     every sealed segment (listed in the broker's data directory, which
//     the harness owns) and remotecopylagsegments is 0. Upload MB/s are
//     remotecopybytes_total (segments with their indexes) over that time.
//     Raw PUT: as many objects of the same sizes PUT through tier.S3Store
//     with the broker's default settings, one stream per partition (the
//     broker copies up to remote.log.manager.copier.thread.pool.size
//     partitions at once, each segment's objects in parallel), then GET
//     back whole, as many at a time (raw GET).
//  3. Once local retention has removed every uploaded local segment, the
//     broker is restarted (SIGTERM, same data directory), so that nothing
//     read from the bucket is cached in memory; the cold data has never
//     been read, so no cache can hold it.
//  4. Cold first-record latency: over one connection, for each latency
//     partition, the time from sending a Fetch (v11, max.partition.fetch
//     .bytes 1 MiB) at offset 0 to the first response holding a record
//     (empty responses are fetched again); the same on the untiered
//     topic's partitions for comparison. p50 and max are reported.
//  5. Cold read: one raw Fetch pass (as the raw read-back above, one pass)
//     from offset 0 over the tiered topic, then one over the untiered
//     topic (the local read, from the page cache); every record must be
//     counted. Their records/s give the cold/local ratio.
//
// Issue 6's goals: upload ≥ 0.7x raw PUT, cold read ≥ 0.7x local read,
// and a cold first record within 50 ms on every probed partition.
//
// # Transactions
//
// With TxnRecords set (the txn, txn-100 and txn-latency presets) each
// producer client is transactional (txn.go): its records go in
// transactions of TxnRecords records, BeginTransaction, the records,
// Flush, EndTransaction with commit, and a record counts as acknowledged
// once its transaction has committed, so that produce throughput counts
// committed records and produce latency runs to the commit's answer. The
// consumers read with isolation.level=read_committed: their end-to-end
// latency includes the commit and the markers that make the records
// visible. The run checks that the end offsets hold every committed
// record plus one commit marker per partition of each transaction, and
// that the consumers read every committed record once. The
// txn-idempotent preset is the same load with the idempotent producer (and
// read_committed consumers): the goal on transactional throughput against
// it compares two workloads of one suite, run for run
// (Goal.DenominatorWorkload). Both peers, Strata and one Apache Kafka
// node, get the same client settings (acks=all, franz-go's defaults
// otherwise); the Kafka node keeps its transaction log at one replica
// (transaction.state.log.replication.factor=1, min.isr=1).
//
// Goals ([Goal.Evaluate]): a goal comparing two targets takes the median
// of their ratio over the runs of its workload (--count) and reports the
// runs' range beside it. A median that misses the goal while at least one
// run met it is INCONCLUSIVE: the goal lies within the run-to-run noise
// the suite measured. With one run the noise is unknown and a miss is a
// FAIL, noted so. A goal on one target is a bound every run must hold,
// judged on the worst run, unless it compares two figures of the same run
// (Goal.RatioInRun): that one is judged as a ratio.
package bench
