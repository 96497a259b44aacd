// Package index is the Badger index of remote (tiered) segments: for each
// partition, by topic id, partition and base offset, Kafka's
// RemoteLogSegmentMetadata of every segment copied (or being copied) to the
// object store, with the lookups a broker needs: the segment holding an
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
// to DELETE_SEGMENT_FINISHED, at which the index forgets it and its base
// offset is free again. Setting the current state again is allowed, so
// retries are idempotent; anything else is ErrInvalidTransition. As in
// Kafka's RemoteLogMetadataCache, lookups for reading (by offset, epoch,
// timestamp, log start/end) see COPY_SEGMENT_FINISHED segments only, and
// listings see every state, so that cleanups find abandoned uploads.
// Segment ids are fresh for every upload attempt; a base offset held by
// one id refuses another (ErrSegmentExists) until the first is deleted.
//
// # Database layout
//
// One Badger database (under the broker's data directory), written with
// synced writes: a call that changed the index returns after the change
// is on disk. All integers big-endian, so keys sort by offset.
//
//	'm' 'v'                                    → uint16 layout version (1)
//	'm' 'r'                                    → empty: left by earlier versions (a rebuild mark), ignored
//	's' topicId[16] partition[4] base[8]       → the segment's manifest bytes (below)
//	'i' segmentId[16]                          → topicId[16] partition[4] base[8]
//	'e' topicId[16] partition[4] epoch[4] start[8] → base[8]
//	'o' topicId[16] partition[4]               → int64: the log start offset DeleteRecords set
//	'd' topicId[16]                            → the topic's name: deleted, its objects to be removed
//
// The 'o' key is Kafka's logStartOffset of a tiered partition when it
// lies below the local log (RaiseLogStartOffset only moves it up); remote
// segments wholly below it are expired. A 'd' key (MarkTopicDeleted)
// survives restarts until the topic's objects are gone and ForgetTopic
// removes every key of the topic. Neither is in the bucket: a refresh
// from the bucket does not restore them.
//
// The 'e' keys map each leader epoch of a readable segment, at the
// offset the epoch starts at in it, to the segment, for epoch lookups;
// they exist from COPY_SEGMENT_FINISHED until DELETE_SEGMENT_STARTED.
// Lookups by offset seek the greatest base at or below the offset;
// lookups by timestamp scan the partition in offset order (max timestamps
// are not monotonic across segments). LogStart, LogEnd and LogStartOffset,
// which every fetch of a tiered partition asks for, are kept in memory
// from one write of the partition to the next (memo.go).
//
// Another layout version refuses to open: move the directory away, and
// the broker refreshes a new one from the bucket, partition by partition.
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
