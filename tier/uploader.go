package tier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"strata/broker/plog"
	"strata/index"
)

// SegmentSource is the local log of a partition as the uploader reads it
// (*plog.Log).
type SegmentSource interface {
	Segments() []plog.SegmentInfo
	OpenSealedSegment(base int64) (*plog.SealedSegment, error)
}

// Uploader copies a partition leader's sealed segments to the store and
// records them in the index (see "Uploads" in the package doc). One
// Uploader serves every partition of a broker; CopyPartition must not run
// concurrently for one partition.
type Uploader struct {
	Store    ObjectStore
	Index    *index.Index
	BrokerID int32
	// Throttle caps the upload rate (nil: none).
	Throttle *Throttle
	Logger   *slog.Logger     // nil: slog.Default()
	Now      func() time.Time // nil: time.Now
}

// CopyStats describes one CopyPartition pass.
type CopyStats struct {
	Copied    int   // segments now COPY_SEGMENT_FINISHED
	Bytes     int64 // bytes of their objects
	Finished  int   // COPY_SEGMENT_STARTED entries found whole and finished
	Abandoned int   // unfinished uploads (or deletions) cleaned up
}

func (u *Uploader) now() int64 {
	if u.Now != nil {
		return u.Now().UnixMilli()
	}
	return time.Now().UnixMilli()
}

func (u *Uploader) logger() *slog.Logger {
	if u.Logger != nil {
		return u.Logger
	}
	return slog.Default()
}

// CopyPartition runs one pass for a partition this broker leads: it first
// finishes or cleans up what an earlier pass (or process) left unfinished,
// then uploads, oldest first, every sealed and flushed segment that lies
// wholly below hw (the high watermark) and past the remote log end. It
// stops at the first failure; the next pass resumes there.
func (u *Uploader) CopyPartition(ctx context.Context, tp index.TopicIDPartition, topic string, src SegmentSource, hw int64) (CopyStats, error) {
	var st CopyStats
	if err := u.cleanup(ctx, tp, &st); err != nil {
		return st, err
	}
	remoteEnd, ok, err := u.Index.LogEnd(tp)
	if err != nil {
		return st, err
	}
	if !ok {
		remoteEnd = -1
	}
	for _, seg := range src.Segments() {
		if !seg.Sealed || seg.NextOffset > hw {
			break
		}
		if seg.NextOffset-1 <= remoteEnd || seg.NextOffset == seg.BaseOffset {
			continue
		}
		n, err := u.copySegment(ctx, tp, topic, src, seg.BaseOffset)
		if errors.Is(err, plog.ErrSegmentNotReady) {
			break // not flushed yet, or deleted meanwhile: the next pass sees
		}
		if err != nil {
			return st, err
		}
		st.Copied++
		st.Bytes += n
	}
	return st, nil
}

// cleanup settles every entry of the partition that is not
// COPY_SEGMENT_FINISHED: a COPY_SEGMENT_STARTED upload whose manifest is
// in the bucket in COPY_SEGMENT_FINISHED (the crash came after it) is
// finished; any other is deleted from the bucket and the index, as are
// deletions left in DELETE_SEGMENT_STARTED.
func (u *Uploader) cleanup(ctx context.Context, tp index.TopicIDPartition, st *CopyStats) error {
	segs, err := u.Index.Segments(tp)
	if err != nil {
		return err
	}
	for _, m := range segs {
		switch m.State {
		case index.CopySegmentStarted:
			got, err := readManifest(ctx, u.Store, ManifestKey(&m))
			if err == nil && got.SegmentID == m.SegmentID && got.State == index.CopySegmentFinished {
				if _, err := u.update(&m, index.CopySegmentFinished); err != nil {
					return err
				}
				st.Finished++
				continue
			}
			if err != nil && !errors.Is(err, ErrNotFound) && !errors.Is(err, errBadManifest) {
				return err // the bucket is unreachable: try again next pass
			}
			if err := u.deleteSegment(ctx, m); err != nil {
				return err
			}
			st.Abandoned++
		case index.DeleteSegmentStarted:
			if err := u.deleteSegment(ctx, m); err != nil {
				return err
			}
			st.Abandoned++
		}
	}
	return nil
}

func (u *Uploader) update(m *index.SegmentMetadata, s index.State) (index.SegmentMetadata, error) {
	return u.Index.UpdateSegment(index.SegmentUpdate{
		Partition: m.Partition, SegmentID: m.SegmentID, State: s, EventTimestamp: u.now(), BrokerID: u.BrokerID,
	})
}

// deleteSegment removes a segment as the layout says: manifest rewritten
// in DELETE_SEGMENT_STARTED, the other objects deleted, then the manifest,
// then the index entry.
func (u *Uploader) deleteSegment(ctx context.Context, m index.SegmentMetadata) error {
	if m.State != index.DeleteSegmentStarted {
		var err error
		if m, err = u.update(&m, index.DeleteSegmentStarted); err != nil {
			return err
		}
	}
	if err := u.putManifest(ctx, &m); err != nil {
		return err
	}
	keys := make([]string, 0, 6)
	for k := index.ObjectKind(0); k.Valid(); k++ {
		keys = append(keys, ObjectKey(&m, k))
	}
	if err := u.Store.DeleteMany(ctx, keys); err != nil {
		return fmt.Errorf("delete segment %s of %s: %w", m.SegmentID, m.Partition, err)
	}
	if err := u.Store.Delete(ctx, ManifestKey(&m)); err != nil {
		return fmt.Errorf("delete manifest of %s: %w", m.SegmentID, err)
	}
	_, err := u.update(&m, index.DeleteSegmentFinished)
	return err
}

func (u *Uploader) putManifest(ctx context.Context, m *index.SegmentMetadata) error {
	b, err := index.EncodeManifest(m)
	if err != nil {
		return err
	}
	if err := u.Store.Put(ctx, ManifestKey(m), bytes.NewReader(b), int64(len(b))); err != nil {
		return fmt.Errorf("put manifest of %s: %w", m.SegmentID, err)
	}
	return nil
}

// copySegment uploads one segment: index entry COPY_SEGMENT_STARTED,
// manifest in that state, the objects, the manifest in
// COPY_SEGMENT_FINISHED, then the index entry. It returns the bytes
// uploaded.
func (u *Uploader) copySegment(ctx context.Context, tp index.TopicIDPartition, topic string, src SegmentSource, base int64) (int64, error) {
	seg, err := src.OpenSealedSegment(base)
	if err != nil {
		return 0, err
	}
	defer seg.Close()
	type object struct {
		kind index.ObjectKind
		r    io.Reader
		size int64
	}
	var objs []object
	objs = append(objs, object{index.ObjectLog, io.NewSectionReader(seg.Log, 0, seg.Size), seg.Size})
	for _, f := range []struct {
		kind index.ObjectKind
		file io.ReaderAt
		size func() (int64, error)
	}{{index.ObjectOffsetIndex, seg.Index, seg.Index.Size}, {index.ObjectTimeIndex, seg.TimeIndex, seg.TimeIndex.Size}} {
		n, err := f.size()
		if err != nil {
			return 0, fmt.Errorf("segment %d of %s: %w", base, tp, err)
		}
		objs = append(objs, object{f.kind, io.NewSectionReader(f.file, 0, n), n})
	}
	epochs := make([]index.EpochEntry, len(seg.LeaderEpochs))
	for i, e := range seg.LeaderEpochs {
		epochs[i] = index.EpochEntry{Epoch: e.Epoch, StartOffset: e.StartOffset}
	}
	if len(epochs) == 0 {
		// A log without leader epochs (never the case for a leader's
		// appends): the segment is recorded in epoch 0.
		epochs = []index.EpochEntry{{Epoch: 0, StartOffset: seg.BaseOffset}}
		seg.LeaderEpochs = []plog.EpochEntry{{Epoch: 0, StartOffset: seg.BaseOffset}}
	}
	ck := seg.EpochCheckpoint()
	objs = append(objs, object{index.ObjectLeaderEpochCheckpoint, bytes.NewReader(ck), int64(len(ck))})
	if seg.Snapshot != nil {
		objs = append(objs, object{index.ObjectProducerSnapshot, bytes.NewReader(seg.Snapshot), int64(len(seg.Snapshot))})
	}
	m := index.SegmentMetadata{
		Partition:      tp,
		SegmentID:      index.NewUUID(),
		Topic:          topic,
		StartOffset:    seg.BaseOffset,
		EndOffset:      seg.NextOffset - 1,
		MaxTimestamp:   max(seg.MaxTimestamp, -1),
		EventTimestamp: u.now(),
		BrokerID:       u.BrokerID,
		SegmentSize:    seg.Size,
		LeaderEpochs:   epochs,
		State:          index.CopySegmentStarted,
	}
	var total int64
	for _, o := range objs {
		m.Objects = append(m.Objects, index.ObjectEntry{Kind: o.kind, Size: o.size})
		total += o.size
	}
	if err := u.Index.AddSegment(m); err != nil {
		return 0, err
	}
	// The STARTED manifest goes first: a leader's refresh replaces its
	// index with what the bucket's manifests say, so objects without one
	// would be forgotten by the index that is to clean them up.
	if err := u.putManifest(ctx, &m); err != nil {
		return 0, err
	}
	// The objects go up side by side: on S3 a small object costs a round
	// trip as a large one does, so in series they would add up.
	putCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(objs))
	var wg sync.WaitGroup
	for i, o := range objs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := u.Store.Put(putCtx, ObjectKey(&m, o.kind), u.Throttle.Reader(putCtx, o.r), o.size); err != nil {
				errs[i] = fmt.Errorf("upload %s of segment %d of %s: %w", o.kind.Suffix(), base, tp, err)
				cancel()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return 0, err
		}
	}
	if err := errors.Join(errs...); err != nil {
		return 0, err
	}
	m.State, m.EventTimestamp = index.CopySegmentFinished, u.now()
	if err := u.putManifest(ctx, &m); err != nil {
		return 0, err
	}
	if _, err := u.Index.UpdateSegment(index.SegmentUpdate{
		Partition: tp, SegmentID: m.SegmentID, State: index.CopySegmentFinished, EventTimestamp: m.EventTimestamp, BrokerID: u.BrokerID,
	}); err != nil {
		return 0, err
	}
	u.logger().Debug("copied segment to remote storage", "partition", tp.String(), "topic", topic, "base", base, "end", m.EndOffset, "bytes", total, "segment_id", m.SegmentID.String())
	return total, nil
}
