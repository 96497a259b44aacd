// Package tier is tiered storage's object store: the ObjectStore
// interface and its implementations, the --tier URL, the key layout of
// remote segments in the bucket, the refresh of a partition's remote
// segment index (package index) from the bucket alone,
// the uploader of sealed segments, the remote reads of fetches and of
// ListOffsets by timestamp (Reader), remote retention and deletion (ExpirePartition,
// DeletePartition, DeleteTopic), bucket lifecycle rules (LifecycleStore)
// and the reconciliation of orphaned objects (Reconciler).
//
// # Stores
//
//	--tier file:///abs/dir     FileStore: one file per object under dir (the embedded default)
//	--tier s3://bucket/prefix  S3Store: aws-sdk-go-v2, with --s3-endpoint URL and --s3-region R
//	(tests)                    MemStore: in memory, fails on demand (SetFault), counts calls
//
// Config holds the three flags; Config.Validate checks their form (one-line
// errors naming the flag) and Open builds the store. ParseURL parses the
// URL alone.
//
// The contract, checked by one conformance suite run against all three
// stores (conformance_test.go; S3 against a real MinIO):
//
//   - Put stores exactly size bytes from the reader; the object appears
//     whole or not at all. A reader that ends early fails with
//     ErrShortBody, one that fails with its error; either way the old
//     object, if any, is left as it was. Bytes past size are not read.
//   - Get reads a range: offset in [0, size] (beyond: ErrInvalidRange),
//     length < 0 to the end, a range past the end cut at the end, and an
//     offset at the end gives an empty body (S3 refuses such a range; the
//     S3 store answers it itself).
//   - Missing keys are ErrNotFound for Get and Head; Delete and
//     DeleteMany of missing keys succeed.
//   - List yields keys with the prefix in ascending byte order, across
//     as many S3 pages as it takes, and stops when the caller stops.
//   - Keys are '/'-separated, non-empty components not starting with '.'
//     (ValidateKey; ErrInvalidKey otherwise), at most MaxKeyLen bytes. In a
//     FileStore no key may also be a '/'-prefix of another ("a" beside
//     "a/b"); the layout below never does that.
//   - Concurrent Puts of one key leave one of the versions whole, and
//     readers meanwhile see a whole version.
//   - PutIf is a conditional write: with IfAbsent it lands only where no
//     object is (S3's If-None-Match: *), with IfMatch only over the
//     version of that ETag (If-Match; a missing object matches no tag);
//     otherwise ErrPreconditionFailed and nothing changes. Of writers
//     racing with one tag exactly one wins. GetTagged reads a whole small
//     object with the ETag of the version read, and every write of a key
//     (Put, PutIf, Delete) ends its old tag's match.
//
// FileStore writes each object to a temporary file in <dir>/.tmp, fsyncs
// it, renames it over the key's path and fsyncs the directory (new
// directories too), so that a crash leaves the old object or the new one.
// Temporary files of dead processes are removed at open; directories
// left empty by Delete are removed. Its PutIf checks the condition and
// renames under a lock (a mutex and a flock on <dir>/.tmp/cond.lock) that
// Delete takes too; an ETag is the file's inode, size and modification
// time.
//
// S3Store uses path-style addressing whenever an endpoint is given (MinIO
// and other S3-compatible servers), signs for the region (AWS_REGION or
// the profile's, default us-east-1) and takes credentials from the AWS
// SDK's default chain (config.LoadDefaultConfig: environment, shared
// config and credentials files with AWS_PROFILE, web identity, container
// and instance roles) unless S3Config.Credentials is set; tier.Open
// resolves them once so that a broker without any fails at start. With
// S3Config.SSE every PutObject and multipart upload asks for SSE-S3 or
// SSE-KMS (with SSEKMSKeyID); S3Config.CABundle replaces the system's
// roots for an https endpoint. No URL with user info is accepted, and no
// error quotes one. Objects up to PartSize (8 MiB)
// go in one PutObject from a buffer; larger ones through the SDK's
// transfer manager as a multipart upload of PartSize parts, Concurrency at
// a time, aborted if any part fails. Requests that fail with throttling,
// 5xx or connection errors are retried MaxAttempts times with jittered
// exponential backoff up to MaxBackoff, without the SDK's process-wide
// retry quota; each call (all its attempts) is bounded by Timeout plus
// the time its bytes take at MinThroughput. DeleteMany sends
// DeleteObjects of up to 1000 keys.
//
// # Key layout
//
// Keys are relative to the store's root (the s3:// prefix, or the
// directory). Every object of a remote segment sits under its topic id
// and partition, so that bucket lifecycle rules (and people) can target a
// topic by prefix, and a deleted topic's objects are one prefix:
//
//	<topic id>/                                  TopicPrefix
//	<topic id>/<partition>/                      PartitionPrefix
//	<topic id>/<partition>/<base>-<segment id>.log
//	                                       .indexes
//	                                       .manifest
//
// and, from brokers that wrote version 1 manifests only (each still read
// and deleted), the small objects on their own: .index, .timeindex,
// .leader-epoch-checkpoint, .snapshot, .txnindex.
//
// <topic id> and <segment id> are Kafka Uuids in Kafka's string form (22
// characters of unpadded URL-safe base64, as kafka-topics.sh shows topic
// ids); <partition> is decimal without padding; <base> is the segment's
// base offset as 20 zero-padded digits, as in the local file names, so a
// partition's keys list in offset order. The segment id is fresh for each
// upload attempt, so a retried or concurrent upload never overwrites
// another attempt's objects. The .log object is the local file byte for
// byte. The .indexes object packs the small objects one after another,
// at the offsets and sizes its manifest lists (Kafka's KIP-405 leaves the
// layout to the storage plugin; Aiven's plugin packs its indexes the same
// way): the .index and .timeindex files byte for byte (Kafka's formats,
// readable by kafka-dump-log.sh once cut out), the leader-epoch
// checkpoint cut to the segment's epochs, the producer snapshot at the
// segment's end (its producers and open transactions there), and the
// .txnindex (Kafka's format: the aborted transactions whose ABORT marker
// the segment holds). The .txnindex is always listed in the manifest,
// with size 0 when the segment has no aborted transaction (KIP-1058's
// txnIndexEmpty: reads skip the GET); a manifest that does not list it
// was written before transactions were served, by a broker that refused
// transactional producers, so its segment holds no aborted transaction
// either. A segment is then two PUTs and two manifests
// rather than six objects: on MinIO a PUT of a few KiB cost a tenth of
// the time of an 8 MiB one, so the small ones took about a third of the
// bucket's upload work. GetObject reads one small object, packed or not.
// The manifest (format in package index) lists which of
// these exist and their sizes and carries the segment's metadata; it is
// written last, after the objects it lists, so a manifest in
// COPY_SEGMENT_FINISHED means the segment is whole in the bucket.
// Deleting a segment rewrites its manifest in DELETE_SEGMENT_STARTED,
// deletes the other objects, then the manifest.
//
// # Uploads
//
// Uploader.CopyPartition is one pass of the partition leader's copy task
// (the broker runs one every remote.log.manager.task.interval.ms, on up
// to remote.log.manager.copier.thread.pool.size partitions at once, for
// topics with remote.storage.enable=true and
// remote.log.copy.disable=false). A pass first settles what earlier
// passes, or a process that died, left unfinished in the index: an entry
// in COPY_SEGMENT_STARTED whose manifest is in the bucket in
// COPY_SEGMENT_FINISHED is moved to COPY_SEGMENT_FINISHED (the crash came
// after the last write to the bucket); any other is deleted as below, as
// are entries left in DELETE_SEGMENT_STARTED. Then, oldest first, it
// copies every segment that is sealed, flushed (its index files final),
// wholly below the partition's last stable offset (the high watermark
// when no transaction is open, as Kafka's RemoteLogManager bounds its
// copies: no record of an undecided transaction reaches the bucket) and
// past the remote log end (the last offset of the COPY_SEGMENT_FINISHED
// segments):
//
//  1. index: AddSegment in COPY_SEGMENT_STARTED, with a fresh segment id;
//  2. the manifest in COPY_SEGMENT_STARTED (so that a rebuilt or
//     refreshed index knows the attempt and a later pass cleans it up: a
//     leader's refresh replaces its index with what the manifests say);
//  3. .log (the segment's whole batches) and .indexes (packing .index,
//     .timeindex, the leader-epoch checkpoint of the segment's epochs, the
//     first moved to its base offset, the producer snapshot at its end
//     offset + 1 when the log still has it, and the .txnindex), PUT
//     concurrently (step 4 waits for both);
//  4. the manifest in COPY_SEGMENT_FINISHED;
//  5. index: COPY_SEGMENT_FINISHED.
//
// Two segments of a partition are in flight at a time: steps 1 to 3 of
// the next one run while the previous one's objects finish, and steps 4
// and 5 are taken strictly in segment order, so the remote log end (which
// local retention trusts) never passes a segment that is not wholly
// uploaded. A failure leaves both in COPY_SEGMENT_STARTED for the next
// pass to clean up.
//
// Leadership fences uploads (Kafka's RemoteLogManager cancels a
// partition's copy task when its broker stops leading it). A pass runs
// under the partition's leader epoch (Leadership); the broker cancels its
// context as soon as it no longer leads at that epoch, which stops the
// uploads under way, and the pass checks its leadership again before each
// segment, before each heartbeat and before each FINISHED state.
//
// While its objects go up, an upload heartbeats: every Uploader.Heartbeat
// (an eighth of the settle grace, Uploader.SettleGrace:
// remote.log.reconciliation.grace.ms, at least ten task intervals) it
// rewrites its manifest, still COPY_SEGMENT_STARTED, with the current
// time as its event timestamp, for as long as its broker leads at the
// upload's epoch. An upload writes its FINISHED state only within half
// the settle grace of its latest heartbeat (its lease: the first
// manifest, then each heartbeat that landed before the lease ran out),
// so that a leader frozen for longer cannot finish an upload that its
// successor may have deleted, while a slow upload of a live leader (a
// backlog of many partitions behind one throttle) goes on for as long as
// it takes. Each segment records the epoch it was uploaded under
// (index.SegmentMetadata.UploadEpoch). A fenced upload is abandoned at
// once: its objects, manifest and entry are deleted by the broker that
// wrote them. The pass's cleanup step (above) deletes an unfinished
// upload only when it is this broker's own, when its broker is no longer
// registered (PeerAlive), or when the event timestamp of its manifest in
// the bucket (its latest heartbeat; not the index's, learned perhaps long
// before) is older than the settle grace; an upload of another live
// broker that may still finish is left to it, and while any is, the pass
// uploads nothing (its objects must be there should it finish; when it
// does, the pass adopts it). A grace after the newest manifest the new
// leader reads, the uploader's lease has been over for at least half the
// grace: the margin for clock skew between brokers. A broker deletes its
// own unfinished uploads in the partitions it no longer leads (SettleOwn,
// each pass). The lease and these checks decide when to write; what
// makes a write safe is the fence on the store (below): a FINISHED
// manifest never names an object that a cleanup deleted, however long its
// uploader was frozen between its checks and its write. When two leaders
// uploaded segments over the same offsets anyway (the new leader's
// refresh ran before the old one's upload showed), both are kept: every
// index resolves each offset to the same one (index.Prefer: the higher
// upload epoch, then the greater end offset), readers and retention use
// that one, and a new leader whose sealed segment starts at an uploaded
// base but ends later uploads it beside the shorter one.
//
// # Fencing on the store
//
// The bucket is shared by every broker, the dead and the frozen
// included, so a write that must not race another is a compare-and-swap
// on the store itself (PutIf), never a check followed by a write. A
// segment's manifest is the one object two brokers may both write:
//
//   - an upload writes its first STARTED manifest with If-None-Match: *
//     (the key is new: a fresh segment id) and each later one, its
//     heartbeats and its FINISHED state, with If-Match on the ETag of its
//     own previous write;
//   - whoever deletes a segment (a new leader's cleanup, SettleOwn,
//     remote retention, the reconciliation) first rewrites its manifest
//     in DELETE_SEGMENT_STARTED with If-Match on the version it read, or
//     with If-None-Match: * when there is none, and only then deletes its
//     objects; a cleanup that finds the upload FINISHED there adopts it
//     instead (markDeleting).
//
// So once a deleter has fenced a manifest, no write of the upload lands
// any more: its heartbeat and its FINISHED write fail with
// ErrPreconditionFailed, and the uploader abandons the upload (a failed
// heartbeat ends it at once). A retried request whose first attempt
// landed reads the manifest back (casManifest). The same conditional
// writes guard the cluster's snapshots (snapshot.go).
//
// What the store must give: conditional PutObject with If-None-Match: *
// and If-Match, atomic per key (AWS S3 since 2024, MinIO, and most
// S3-compatible stores). The broker checks at start
// (ProbeConditionalWrites). A store that ignores the conditions leaves
// only the lease above, a check followed by a write, which a broker
// frozen between the two for longer than half the settle grace defeats:
// the broker warns. One that refuses them (an error for the header)
// fails every upload, cleanup and snapshot write: the broker says so at
// ERROR. Conditional deletes are not needed.
//
// Reads that find an object of a finished segment missing all the same
// (something outside Strata deleted it) look again in the bucket
// (CheckMissing): when the manifest is still finished, the object gone
// and other segments cover all its offsets, the segment is marked missing
// in the index (index.MarkMissing; reported once, at WARN), reads
// resolve its offsets through the others, and the leader's next pass
// deletes it (RepairMissing). A segment that alone holds its records is
// left as it is: reads of them fail (KAFKA_STORAGE_ERROR, reported at
// most once a minute) and serve again should the object come back.
//
// Object bytes are read through Uploader.Throttle, which paces all
// uploads of the broker together to
// remote.log.manager.copy.max.bytes.per.second (with a second's burst).
// A failure stops the pass (the next one resumes); reads of the local
// files use their own handles, so retention or the cleaner renaming them
// meanwhile does not matter. A crash after step 1 leaves an entry that the
// next pass finishes or cleans up; should the index be lost as well, a
// refresh finds the attempt by its step-2 manifest. (Only a crash between
// steps 1 and 2 together with the loss of the index leaves objects no
// manifest names, for the reconciliation pass below.)
// Deleting a segment: index DELETE_SEGMENT_STARTED, the manifest rewritten
// in that state (fenced, below; an unfinished upload's manifest first,
// then the index), the other objects deleted, then the manifest, then
// index DELETE_SEGMENT_FINISHED.
//
// Local copies of a tiered partition are deleted by local.retention.ms
// and local.retention.bytes only once wholly uploaded (the segment's last
// offset at or below the remote log end; plog.EnforceTieredRetention), on
// the leader and on followers alike.
//
// # Replicas that do not upload
//
// Only a partition's leader writes its segments; the other replicas learn
// them from the bucket. RefreshPartition lists the partition's manifests
// and reads only those whose segment the index does not hold in
// COPY_SEGMENT_FINISHED (a finished manifest changes only on deletion,
// which first rewrites it in DELETE_SEGMENT_STARTED and ends with it
// gone), then rewrites the partition in the index if anything changed. A
// broker runs it every task interval for the tiered partitions it follows,
// and once per leader epoch for those it leads, before that epoch's first
// upload: a new leader thus continues after its predecessor's remote log
// end. FindSegment finds the finished segment holding an offset from the
// bucket alone; a follower rebuilding its log from the leader's local tail
// uses it (with the segment's .leader-epoch-checkpoint and .snapshot
// objects) when its own index does not know the segment yet.
//
// # Remote retention
//
// Uploader.ExpirePartition is one pass of the partition leader's
// expiration task (the broker runs it in the same pass as the copy, for
// topics with remote.storage.enable=true, copying or not), as Kafka's
// RemoteLogManager does it. It first finishes the deletions an earlier
// pass or a dead process left in DELETE_SEGMENT_STARTED. Then it walks the
// COPY_SEGMENT_FINISHED segments oldest first and deletes each that
//
//   - lies wholly below the partition's log start offset (its end offset
//     below it; DeleteRecords moves it, and it may lie below the local
//     log start: index.RaiseLogStartOffset), or
//   - has a max timestamp at or before now - retention.ms (the upload
//     time when its records have no timestamps), or
//   - can go while the partition's size stays at or above
//     retention.bytes: the size is the remote segments' .log bytes plus
//     the local segments not wholly uploaded (Kafka's
//     onlyLocalLogSegmentsSize), so a segment held both locally and
//     remotely counts once;
//
// and stops at the first segment none of these applies to, so the remote
// log stays contiguous and nothing a consumer may still read under the
// rules goes. Deleting is the sequence above (index
// DELETE_SEGMENT_STARTED, which makes the segment unreadable, manifest
// rewritten, objects, manifest, index DELETE_SEGMENT_FINISHED); the
// remote log start (ListOffsets earliest) moves to the next segment. A
// failing store stops the pass with the segment left in
// DELETE_SEGMENT_STARTED; the next pass finishes it first. A crash at any
// step is finished the same way, also by a broker that rebuilt its index
// from the bucket (the manifest says DELETE_SEGMENT_STARTED).
//
// DeletePartition deletes a partition's whole remote log (every segment
// the index knows, then anything of the layout left under the
// partition's prefix):
// remote.storage.enable turned off with remote.log.delete.on.disable=true.
// DeleteTopic deletes every object of the layout under a deleted topic's
// prefix (other objects first, manifests last; keys outside the layout
// stay, as they do in the reconciliation) and then all the topic's index entries
// (index.ForgetTopic). Both are idempotent and safe to run on several
// brokers at once; the broker persists its pending topic deletions in the
// index (index.MarkTopicDeleted) and retries them every pass until the
// bucket answers; a broker deletes a topic's objects only once the
// deletion is recorded in the bucket and the cluster snapshot no longer
// names the topic (DeletableTopic). Objects of a topic deleted while
// every broker that hosted it was down, or written by a straggling
// upload after the deletion, are left to the reconciliation of deleted
// topics.
//
// # Reads
//
// A Reader (the broker holds one) serves remote reads of
// COPY_SEGMENT_FINISHED segments. Reader.Read answers a fetch at an
// offset: it takes the position of the last .index entry at or below the
// offset (Kafka's offset index, 8-byte entries of relative offset and
// position; 0 without an index, and 0 without reading it for a read at
// the segment's start offset, where a sequential consumer enters every
// segment), reads the .log from there, skipping
// batches whose last offset is below the offset, and returns whole
// batches: the first always (KIP-74), the others while they fit in max
// bytes; nothing when the segment holds no batch at or past the offset.
// Batch headers are checked against the object's size only (the consumer
// checks CRCs); a header out of bounds, an index that does not parse or
// points past the log, or an object shorter than the manifest says is
// ErrCorruptSegment, a missing object ErrNotFound. The broker turns any
// failure into KAFKA_STORAGE_ERROR for that partition. ReadRemote is the
// same read without a cache.
//
// Cache. The .log objects are read in aligned chunks (ChunkSize, 4 MiB by
// default: chunk i is bytes [i*ChunkSize, (i+1)*ChunkSize), one ranged GET)
// kept in an LRU bounded by the sum of their sizes (CacheBytes); the
// .index and .timeindex objects are read whole (at most MaxIndexObject
// bytes each, exactly the size the manifest gives), checked and parsed
// once, and kept parsed in a second LRU (IndexCacheBytes). Keys are the
// segment id (fresh for every upload, so cached bytes never go stale), the
// object kind and the chunk. Concurrent lookups of one key share one GET,
// which runs on the Reader's own context (bounded by GetTimeout) so that
// a caller giving up fails no one else; errors are not cached.
// Reader.ReadPinned answers with slices of the chunks (one per chunk the
// answer spans) and pins those chunks until the caller releases them:
// the broker writes them to the client's connection with one writev and
// releases them once the response is written, so remote records are never
// copied in the broker. Reader.Read copies the answer instead. A chunk
// that has left the cache and is no longer pinned gives its buffer to the
// next chunk fetched (at most ReadAheadInFlight+4 spare buffers are
// kept), so a sequential reader's GETs land in memory already mapped;
// buffers of 2 MiB and more are advised for transparent huge pages
// before first use (Linux). Pinned chunks live beyond the cache bound
// until released: the bound is on the cache, not on reads under way.
//
// Read-ahead. After a read that starts where the previous read of the
// segment ended, or ends in the last quarter of a chunk, the Reader
// starts GETs of the next ReadAhead chunks of the segment (none past its
// end, none cached or already under way) in the background, at most
// ReadAheadInFlight at once (default 4 * ReadAhead), all cancelled by
// Close. The GETs are registered before the read returns, so a consumer
// that reads on finds the chunk cached or under way. When the read-ahead
// window reaches the segment's end and ReaderConfig.Next names the
// segment that follows (the broker looks it up in the index), the first
// ReadAhead chunks of that one are fetched too (Reader.Prefetch), so that
// a consumer from offset 0 waits for the first chunk of the partition and
// rarely for another.
//
// Aborted transactions. Reader.TxnIndex reads a segment's .txnindex
// (whole, checked as plog.DecodeTxnIndex checks a local one, every marker
// inside the segment) through the index cache; a segment whose manifest
// lists it with size 0, or not at all, has none and costs no GET.
// Reader.AbortedTransactions answers a read_committed fetch of [from,
// upper) of a partition whose log is remote below the local log start
// and local above it, as Kafka's RemoteLogManager.collectAbortedTransactions:
// the .txnindex of each remote segment from the one serving from, its
// markers below the local log start, then the local log's
// (plog.Log.AbortedTransactions), so that a transaction whose records are
// remote and whose marker is local, or in a later remote segment, is
// listed, and a marker held on both sides once. It stops at an entry
// whose last stable offset reaches upper (Kafka's rule) or at a segment
// reaching upper whose producer snapshot shows no transaction begun
// below upper open at its end (any later marker would belong to one).
//
// By timestamp. Reader.OffsetForTimestamp answers ListOffsets for a
// timestamp within one segment as Kafka's LogSegment.findOffsetByTimestamp:
// the .timeindex (12-byte entries: 8-byte timestamp, 4-byte relative
// offset) gives the offset of the last entry below the timestamp, the
// .index its position (or that of the start offset asked for, if
// higher); from there the batches are scanned to the first whose max
// timestamp reaches the timestamp and that ends at or after the start
// offset, and its records (decompressed when compressed) give the first
// record at or after the start offset with a timestamp at or after it,
// with that timestamp and the batch's leader epoch. The parsing and the
// record walk are package plog's, the same code that answers for local
// segments. The broker picks the segments by their max timestamp from
// the index (index.Index.SegmentForTimestamp).
//
// # Refreshing the index
//
// RefreshPartition lists one partition's *.manifest keys, reads those
// the index does not already hold finished, checks each against its key
// and makes the index's partition hold what they say: every manifest is
// a segment of its own, by segment id, however many start at one base
// offset or overlap (a retried upload, a new leader's longer segment at
// its predecessor's base, a frozen former leader's upload beside the new
// leader's); the index serves each offset from the readable segment
// index.Prefer picks, and a refresh keeps the index's marks of segments
// whose objects are missing (index.Index.MarkMissing). Undecodable
// manifests, or ones at another segment's key, are skipped: the
// reconciliation reports them and leaves their objects alone. A broker
// refreshes each tiered partition it hosts, never the
// whole bucket, so a new or wiped data directory costs one listing per
// partition (see broker/remotelog).
//
// # Lifecycle rules
//
// Stores that implement LifecycleStore (S3Store; FileStore and MemStore
// have no lifecycle rules) keep bucket lifecycle rules for the broker: a safety net that expires a tiered topic's
// objects when no broker is left to apply its retention. SyncLifecycle
// reads the bucket's configuration, replaces the rules this store owns and
// writes it back only if they changed (deleting the configuration when no
// rule is left):
//
//	strata-<topic id>                  Filter.Prefix <store prefix>/<topic id>/,
//	                                   Expiration.Days ceil((retention.ms + margin) / 1 day), at least 1;
//	                                   none when retention.ms < 0
//	strata-abort-multipart[-<fnv64a>]  Filter.Prefix <store prefix>/ (the hash of the
//	                                   prefix tells stores sharing a bucket apart),
//	                                   AbortIncompleteMultipartUpload after a day
//
// A rule is ours when its id starts with "strata-" and it filters on
// exactly the prefix above; every other rule (an operator's, or another
// Strata cluster's under another prefix) is written back as read, first
// and in its order, ours after it sorted by id. Only the fields
// aws-sdk-go-v2 models survive (server extensions such as MinIO's
// DelMarkerExpiration would not), and only one writer per bucket should
// run (read-modify-write without a condition); the broker lets only the
// controller sync. A bucket holds at most 1000 rules: topics beyond are
// left without one and reported (LifecycleResult.Skipped). A server that
// refuses the multipart rule (MinIO answers MalformedXML: it drops the
// element and then finds a rule without an action; it aborts stale
// uploads by itself) gets the topic rules alone, then and later
// (LifecycleResult.AbortUnsupported). S3 expires an object a number of
// days after its creation, that is after the upload: the rule never fires
// before retention would have, as long as the margin covers records
// timestamped ahead of the clock.
//
// The rules go through the S3Store's own aws-sdk-go-v2 client; the tests
// read them back with minio-go, an independent client, so that a mistake
// in the code under test is not hidden by the same library reading what
// it wrote.
//
// # Reconciliation
//
// A Reconciler deletes orphans: objects of no segment that anyone will
// finish or delete. In a cluster each broker's index knows only what it
// uploaded or rebuilt, so absence from an index is never enough. Orphans
// are:
//
//  1. ReconcilePartition, run by a partition's leader: the objects of a
//     segment stem ("<topic id>/<partition>/<base>-<segment id>") that the
//     leader's index does not know (an upload under way on this broker,
//     or an entry the uploader's cleanup will settle, is known), whose
//     manifest is missing or in COPY_SEGMENT_STARTED, once the stem's
//     newest object is older than Reconciler.Grace; and stems whose
//     manifest is in DELETE_SEGMENT_STARTED at any age (nothing brings
//     those back). A manifest in COPY_SEGMENT_FINISHED is live, whoever
//     uploaded it.
//  2. ReconcileDeletedTopics, run only by the controller, whose metadata
//     is the cluster's: every segment under a topic id the metadata does
//     not have and whose deletion is recorded in the bucket while the
//     cluster snapshot does not name it (deletions.go), once the newest
//     object under that topic id is older than the grace period, so that
//     metadata lagging behind a new topic deletes nothing; the metadata
//     is asked again before deleting. A topic id that is merely unknown
//     (another cluster's, a restore under way) keeps its objects.
//  3. Keys that do not parse in the layout (or have a suffix it does not
//     write) are never deleted, only counted (ReconcileStats.Unrecognized);
//     nor are segments whose manifest does not decode (perhaps a newer
//     format): ReconcileStats.Corrupt.
//
// A segment with a manifest is deleted as the uploader deletes: the
// manifest rewritten in DELETE_SEGMENT_STARTED, the other objects, then
// the manifest, so that a refresh never serves it; one without a manifest
// is deleted only if a HEAD still finds none. Ages are the store's
// modification times against the broker's clock; an upload under way
// rewrites its manifest every Uploader.Heartbeat, which keeps its stem
// young however long its objects take, so the grace period must exceed
// a few heartbeats plus clock skew. One call deletes at most
// Reconciler.MaxSegments segments (default 1000); the next goes on.
// Finding deleted topics lists the whole store.
//
// # Versioning
//
// The layout has no version of its own: a change that cannot coexist with
// it goes under a new top-level prefix that no topic id can equal (topic
// ids are 22 characters of base64url; for example "v2/"). The manifest
// format is versioned in its header (package index).
package tier
