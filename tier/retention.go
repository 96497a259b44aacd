package tier

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"strata/index"
)

// RetentionPolicy is what one remote retention pass of a partition
// applies (see "Remote retention" in the package doc).
type RetentionPolicy struct {
	// RetentionMs is retention.ms: segments whose max timestamp is older
	// than now minus it are deleted. -1: no limit by time.
	RetentionMs int64
	// RetentionBytes is retention.bytes: the oldest segments are deleted
	// while the partition's size stays above it without them. -1: no
	// limit by size.
	RetentionBytes int64
	// LocalOnlyBytes is the size of the local segments not (yet) in the
	// remote log, which count toward retention.bytes with the remote
	// segments (Kafka's onlyLocalLogSegmentsSize).
	LocalOnlyBytes int64
	// LogStartOffset is the partition's log start offset (DeleteRecords):
	// segments wholly below it are deleted whatever the limits. -1: none.
	LogStartOffset int64
}

// RetentionStats describes one ExpirePartition pass.
type RetentionStats struct {
	Deleted  int   // segments deleted (DELETE_SEGMENT_FINISHED) for retention
	Bytes    int64 // their .log sizes
	Attempts int   // deletions started, finished or not (RemoteDeleteRequestsPerSec)
	Failed   int   // deletions that failed (RemoteDeleteErrorsPerSec)
	Resumed  int   // deletions an earlier pass left in DELETE_SEGMENT_STARTED, finished now
	// NewLogStart is the offset after the last segment deleted for
	// retention (the remote log start moves there or beyond); -1 when
	// nothing was deleted.
	NewLogStart int64
}

// ExpirePartition runs one remote retention pass for a partition this
// broker leads, as Kafka's RemoteLogManager expiration task does: first
// it finishes deletions an earlier pass left in DELETE_SEGMENT_STARTED,
// then, oldest first, it deletes the COPY_SEGMENT_FINISHED segments that
// lie wholly below the log start offset, or whose max timestamp is at or
// before now - retention.ms, or whose removal still leaves the partition
// (the remote segments not below the log start plus LocalOnlyBytes) at or
// above retention.bytes; it stops at the first segment none of these
// applies to. A failing store
// stops the pass with its error; the next pass resumes. It must not run
// concurrently with CopyPartition of the same partition.
func (u *Uploader) ExpirePartition(ctx context.Context, tp index.TopicIDPartition, pol RetentionPolicy) (RetentionStats, error) {
	st := RetentionStats{NewLogStart: -1}
	segs, err := u.Index.Segments(tp)
	if err != nil {
		return st, err
	}
	var remoteBytes int64
	finished := segs[:0:0]
	for _, m := range segs {
		switch m.State {
		case index.DeleteSegmentStarted:
			st.Attempts++
			if err := u.deleteSegment(ctx, m); err != nil {
				st.Failed++
				return st, err
			}
			st.Resumed++
		case index.CopySegmentFinished:
			finished = append(finished, m)
			if pol.LogStartOffset < 0 || m.EndOffset >= pol.LogStartOffset {
				remoteBytes += m.SegmentSize // what is below the log start goes anyway
			}
		}
	}
	byTime := pol.RetentionMs >= 0
	cleanupUntil := int64(-1)
	if byTime {
		cleanupUntil = u.now() - pol.RetentionMs
		byTime = cleanupUntil >= 0
	}
	breached := int64(-1) // bytes above retention.bytes still to remove
	if pol.RetentionBytes >= 0 {
		breached = remoteBytes + pol.LocalOnlyBytes - pol.RetentionBytes
	}
	for _, m := range finished {
		if ctx.Err() != nil {
			return st, ctx.Err()
		}
		// Kafka's order: the log start (the size debt left alone: such
		// segments are not in the total), then time and size, each of
		// which lowers the debt by the segment, not below zero.
		belowStart := pol.LogStartOffset >= 0 && m.EndOffset < pol.LogStartOffset
		expired := belowStart
		if !expired && byTime {
			ts := m.MaxTimestamp
			if ts < 0 {
				ts = m.EventTimestamp // no record timestamps: when it was uploaded
			}
			expired = ts <= cleanupUntil
		}
		if !expired && breached > 0 && breached-m.SegmentSize >= 0 {
			expired = true
		}
		if !expired {
			break
		}
		st.Attempts++
		if err := u.deleteSegment(ctx, m); err != nil {
			st.Failed++
			return st, err
		}
		if !belowStart && breached > 0 {
			breached = max(0, breached-m.SegmentSize)
		}
		st.Deleted++
		st.Bytes += m.SegmentSize
		st.NewLogStart = m.EndOffset + 1
		u.logger().Debug("deleted remote segment for retention", "partition", tp.String(), "base", m.StartOffset,
			"end", m.EndOffset, "bytes", m.SegmentSize, "segment_id", m.SegmentID.String())
	}
	return st, nil
}

// RemoteLogSize is the size of a partition's remote log: the .log bytes
// of its COPY_SEGMENT_FINISHED segments (Kafka's RemoteLogSizeBytes).
func RemoteLogSize(idx *index.Index, tp index.TopicIDPartition) (size int64, segments int, err error) {
	segs, err := idx.Segments(tp)
	if err != nil {
		return 0, 0, err
	}
	for _, m := range segs {
		if m.State == index.CopySegmentFinished {
			size += m.SegmentSize
			segments++
		}
	}
	return size, segments, nil
}

// DeletePartition removes a partition's whole remote log: every segment
// the index knows, oldest first, by the same steps as retention, then any
// object left under the partition's prefix (uploads of earlier leaders
// this index never learnt). For remote.storage.enable turned off with
// remote.log.delete.on.disable=true. It returns the segments deleted and
// the deletions attempted and failed, as ExpirePartition.
func (u *Uploader) DeletePartition(ctx context.Context, tp index.TopicIDPartition) (RetentionStats, error) {
	st := RetentionStats{NewLogStart: -1}
	segs, err := u.Index.Segments(tp)
	if err != nil {
		return st, err
	}
	for _, m := range segs {
		st.Attempts++
		err := u.deleteSegment(ctx, m)
		if errors.Is(err, errFinishedMeanwhile) {
			// An upload this index holds unfinished finished in the
			// bucket: it goes too, as the finished segment it is.
			if m, err = u.update(&m, index.CopySegmentFinished); err == nil {
				err = u.deleteSegment(ctx, m)
			}
		}
		if err != nil {
			st.Failed++
			return st, err
		}
		st.Deleted++
		st.Bytes += m.SegmentSize
		st.NewLogStart = m.EndOffset + 1
	}
	if _, err := deletePrefix(ctx, u.Store, PartitionPrefix(tp)); err != nil {
		return st, err
	}
	return st, nil
}

// DeleteTopic removes a deleted topic's objects and index entries: every
// object under the topic's prefix (manifests last, so that an interrupted
// run leaves manifests for the next to find), then everything the index
// holds of the topic, its pending-deletion mark included
// (index.ForgetTopic). It is idempotent, and several brokers may run it
// at once. It returns the number of objects deleted.
func DeleteTopic(ctx context.Context, store ObjectStore, idx *index.Index, topicID index.UUID) (int, error) {
	if topicID.IsZero() {
		return 0, fmt.Errorf("delete topic: zero topic id")
	}
	n, err := deletePrefix(ctx, store, TopicPrefix(topicID))
	if err != nil {
		return n, err
	}
	return n, idx.ForgetTopic(topicID)
}

// deletePrefix deletes every object of the layout under prefix: the
// others first, then the manifests, in DeleteMany batches. Keys outside
// the layout (someone else's objects) stay, as in the reconciliation.
func deletePrefix(ctx context.Context, store ObjectStore, prefix string) (int, error) {
	var objs, manifests []string
	for info, err := range store.List(ctx, prefix) {
		if err != nil {
			return 0, fmt.Errorf("list %s: %w", prefix, err)
		}
		if _, err := ParseSegmentKey(info.Key); err != nil {
			continue
		}
		if strings.HasSuffix(info.Key, ManifestSuffix) {
			manifests = append(manifests, info.Key)
		} else {
			objs = append(objs, info.Key)
		}
	}
	n := 0
	for _, keys := range [][]string{objs, manifests} {
		for len(keys) > 0 {
			b := keys[:min(len(keys), 1000)]
			if err := store.DeleteMany(ctx, b); err != nil {
				return n, fmt.Errorf("delete objects under %s: %w", prefix, err)
			}
			n += len(b)
			keys = keys[len(b):]
		}
	}
	return n, nil
}
