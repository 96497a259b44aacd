// Package index is the Badger index of remote (tiered) segments: for each
// partition, by topic id, partition, base offset and segment id, Kafka's
// RemoteLogSegmentMetadata of every segment copied (or being copied) to the
// object store, with the lookups a broker needs: the segment serving an
// offset, the segment of a leader epoch holding an offset (Kafka's
// remoteLogSegmentMetadata(epoch, offset)), the highest offset of an
// epoch, the first segment whose max timestamp reaches a time, listings,
// and the remote log start and end. It also defines the manifest object
// that sits beside each remote segment in the bucket, from which any
// broker can refresh its index (tier.RefreshPartition).
//
// # Segment states
//
// A segment moves through Kafka's RemoteLogSegmentState, with Kafka's
// rules (ValidTransition): AddSegment records it in COPY_SEGMENT_STARTED;
// UpdateSegment moves it to COPY_SEGMENT_FINISHED (now readable), to
// DELETE_SEGMENT_STARTED (from either copy state: no longer readable) and
// to DELETE_SEGMENT_FINISHED, at which the index forgets it. Setting the
// current state again is allowed, so retries are idempotent; anything
// else is ErrInvalidTransition. As in Kafka's RemoteLogMetadataCache,
// lookups for reading (by offset, epoch, timestamp, log start/end) see
// COPY_SEGMENT_FINISHED segments only, and listings see every state, so
// that cleanups find abandoned uploads. Segment ids are fresh for every
// upload attempt, and, as in Kafka's remote log metadata, a segment is
// known by its id: any number of segments may start at one offset or
// overlap (ErrSegmentExists only refuses an id known with other metadata).
//
// # Overlapping segments
//
// Two segments hold the same offsets when a new leader uploads a segment
// that starts where an uploaded one of its predecessor starts but ends
// later (its log rolled elsewhere), or when a frozen former leader
// finishes its upload of a range beside the new leader's. Every segment
// is kept, and reads resolve each offset through the segments that hold
// it: of the COPY_SEGMENT_FINISHED segments not marked missing that hold
// it, the one Prefer picks serves it: the greatest upload epoch
// (SegmentMetadata.UploadEpoch, the leader epoch the upload ran under),
// then the greatest end offset, then the latest event time, then the
// greatest segment id. A segment that another beats where both hold
// offsets still serves the offsets only it holds. Offsets no readable
// segment holds are a gap: lookups there find nothing (ErrNotFound), as
// below the first segment and past the last. (Manifests of versions 1
// and 2 hold no upload epoch: their segments count as epoch 0, and the
// later upload wins between two of them.)
//
// SegmentForOffset (which the broker also asks, at a segment's end offset
// + 1, for the segment after it) answers the segment serving the offset.
// SegmentForEpochOffset answers, of the readable segments whose range of
// the epoch holds the offset, the one Prefer picks; HighestOffsetForEpoch
// the greatest offset of the epoch in a readable segment.
// SegmentForTimestamp walks the offsets from fromOffset on, in order, and
// answers the first segment serving one whose max timestamp reaches the
// time (a segment that serves no offset is never answered). LogStart is
// the least start offset of a readable segment, LogEnd the greatest end
// offset: the remote log end, which LATEST_TIERED and a leader restored
// from the bucket take. ContiguousEnd is the end of the unbroken run of
// readable offsets from a given offset on: the uploader copies from it
// (from its local log start), and local retention deletes only below it,
// so that a gap under LogEnd never lets a local segment go that nothing
// in the bucket holds.
//
// MarkMissing marks a segment whose objects turned out to be missing from
// the bucket (the broker marks one when a read of it finds them gone).
// Reads do not choose it, LogStart and LogEnd do not count it, and it
// stays listed, in its state, for retention to delete. The mark is kept
// until the segment is deleted (DELETE_SEGMENT_FINISHED, ForgetTopic, or
// a ReplacePartition that no longer holds it): a refresh from the bucket,
// which re-reads its manifest unchanged, does not make it readable again.
// A segment is marked only when other readable segments hold all its
// offsets (tier.CheckMissing), so a mark never opens a gap.
//
// Each partition's resolution (its readable segments by start offset, and
// the runs of offsets each serves) is computed from one scan of the
// partition and kept in memory until the partition is next written
// (memo.go), so that a lookup by offset is a binary search and one Badger
// get, whatever the number of segments.
//
// # Database layout
//
// One Badger database (under the broker's data directory), written with
// synced writes: a call that changed the index returns after the change
// is on disk. All integers big-endian, so keys sort by offset.
//
//	'm' 'v'                                      → uint16 layout version (2)
//	'm' 'r'                                      → empty: left by earlier versions (a rebuild mark), ignored
//	's' topicId[16] partition[4] base[8] segmentId[16] → the segment's manifest bytes (below)
//	'i' segmentId[16]                            → topicId[16] partition[4] base[8]
//	'e' topicId[16] partition[4] epoch[4] start[8] segmentId[16] → base[8]
//	'x' topicId[16] partition[4] segmentId[16]   → empty: the segment's objects are missing (MarkMissing)
//	'o' topicId[16] partition[4]                 → int64: the log start offset DeleteRecords set
//	'd' topicId[16]                              → the topic's name: deleted, its objects to be removed
//
// The 's' keys list a partition's segments by base offset, then segment
// id (the order of Segments); a segment's 'i' key and its id make its 's'
// key. The 'o' key is Kafka's logStartOffset of a tiered partition when
// it lies below the local log (RaiseLogStartOffset only moves it up);
// remote segments wholly below it are expired. A 'd' key
// (MarkTopicDeleted) survives restarts until the topic's objects are gone
// and ForgetTopic removes every key of the topic. The 'o', 'd' and 'x'
// keys are not in the bucket: a refresh from the bucket does not restore
// them.
//
// The 'e' keys map each leader epoch of a COPY_SEGMENT_FINISHED segment,
// at the offset the epoch starts at in it, to the segment, for epoch
// lookups; they exist from COPY_SEGMENT_FINISHED until
// DELETE_SEGMENT_STARTED. SegmentForEpochOffset seeks the epoch's keys
// down from the offset, no further than the longest readable segment of
// the partition reaches.
//
// Layout version 1 keyed segments by base offset alone ('s' topicId
// partition base, 'e' topicId partition epoch start: one segment per
// base offset). Open migrates it in place: it writes every segment's
// version 2 keys, then deletes the version 1 keys, then sets the version,
// each step synced before the next; the keys of the two versions differ
// in length, so that after a crash at any point the next Open migrates
// what is left. Any other layout version refuses to open: move the
// directory away, and the broker refreshes a new one from the bucket,
// partition by partition.
//
// # Manifest format, versions 1 to 3
//
// The manifest object of a remote segment, also the value of its 's' key.
// All integers big-endian:
//
//	magic          4 bytes "SRSM"
//	version        int16: 1, or 3 when the segment has packed objects (2 is still read)
//	crc            uint32: CRC-32C (Castagnoli) of every byte after this field
//	topicId        16 bytes
//	partition      int32
//	segmentId      16 bytes
//	state          int8: 0 COPY_SEGMENT_STARTED, 1 COPY_SEGMENT_FINISHED, 2 DELETE_SEGMENT_STARTED
//	startOffset    int64: the segment's base offset
//	endOffset      int64: its last offset, inclusive
//	maxTimestamp   int64: ms; -1 when the segment has no timestamps
//	eventTimestamp int64: ms, when the state was set (in COPY_SEGMENT_STARTED, the upload's latest heartbeat)
//	brokerId       int32: the broker that set it
//	segmentSize    int64: bytes of the .log object
//	topic          int16 length, then that many bytes: the topic's name at upload (informational)
//	epochs         int32 count, then count × (int32 leader epoch, int64 start offset),
//	               ascending, the first at startOffset, all ≤ endOffset
//	objects        int8 count, then count × (int8 kind, int64 size): the segment's
//	               other objects: 0 .log, 1 .index, 2 .timeindex,
//	               3 .leader-epoch-checkpoint, 4 .snapshot, 5 .txnindex, 6 .indexes
//
// versions 2 and 3 (appended):
//
//	packed         int8 count ≥ 1, then count × (int8 kind, int64 offset, int64 size):
//	               objects with no object of their own, whose bytes are
//	               [offset, offset+size) of the segment's .indexes object
//	               (listed above, never packed itself; the .log is never packed)
//
// version 3 only (appended):
//
//	uploadEpoch    int32 ≥ 0: the partition's leader epoch under which the
//	               upload ran (0 when read from versions 1 and 2)
//
// A manifest without packed objects is written as version 1, and one with
// them as version 3, so each metadata value has one encoding.
//
// The .txnindex (kind 5) of a segment uploaded by a broker that serves
// transactions is always listed, packed, with size 0 when the segment
// holds no ABORT marker (KIP-1058's txnIndexEmpty: readers skip the GET).
// Manifests of older brokers do not list it; their segments hold no
// aborted transaction (those brokers refused transactional producers),
// and readers treat both the same. The format is unchanged: readers of
// versions 1 to 3 accept a packed entry of size 0.
//
// DecodeManifest accepts exactly this: nothing after the last field, at
// most MaxManifestSize bytes, and metadata that Validates; anything else
// is an error wrapping ErrManifestCorrupt, ErrManifestVersion or
// ErrInvalidMetadata, never a panic (FuzzDecodeManifest, seed corpus in
// testdata/fuzz). Every value has one encoding.
//
// Versioning: a change of the format gets a new version number; readers
// refuse versions they do not know (ErrManifestVersion), so brokers that
// read version N+1 must be deployed before any writes it. New fields are
// appended after the last field of the previous version, so a reader of
// N+1 can read N.
package index
