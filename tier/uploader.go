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
	// PeerAlive tells whether another broker is registered, and so may
	// still finish an upload it started (nil: every broker may).
	PeerAlive func(brokerID int32) bool
	// SettleGrace is how long an upload may take: an unfinished upload of
	// another live broker younger than this is left to it, and an upload
	// writes its COPY_SEGMENT_FINISHED state only within half of it from
	// its start (0: DefaultSettleGrace).
	SettleGrace time.Duration
}

// DefaultSettleGrace is SettleGrace's default.
const DefaultSettleGrace = time.Hour

// Leadership is what a copy pass runs under: this broker leads the
// partition at Epoch for as long as Leading says so (nil: always). The
// caller cancels the pass's context when leadership moves; Leading is
// checked again before each segment and before each FINISHED state.
type Leadership struct {
	Epoch   int32
	Leading func() bool
}

func (l Leadership) leading() bool { return l.Leading == nil || l.Leading() }

// ErrNotLeading ends a copy pass whose broker no longer leads the
// partition at the pass's epoch; its unfinished upload was abandoned.
var ErrNotLeading = errors.New("no longer the partition's leader at the upload's epoch")

func (u *Uploader) grace() time.Duration {
	if u.SettleGrace > 0 {
		return u.SettleGrace
	}
	return DefaultSettleGrace
}

// CopyStats describes one CopyPartition pass.
type CopyStats struct {
	Copied    int   // segments now COPY_SEGMENT_FINISHED
	Bytes     int64 // bytes of their objects
	Finished  int   // COPY_SEGMENT_STARTED entries found whole and finished
	Abandoned int   // unfinished uploads (or deletions) cleaned up
	// Unsettled counts uploads of other live brokers, younger than the
	// settle grace, that may still finish: nothing is uploaded while any
	// is left.
	Unsettled int
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
// stops at the first failure; the next pass resumes there. It uploads
// nothing while another live broker's upload may still finish
// (st.Unsettled), and stops with ErrNotLeading, abandoning its unfinished
// upload, once lead no longer holds.
func (u *Uploader) CopyPartition(ctx context.Context, tp index.TopicIDPartition, topic string, src SegmentSource, hw int64, lead Leadership) (CopyStats, error) {
	var st CopyStats
	if err := u.cleanup(ctx, tp, &st); err != nil {
		return st, err
	}
	if st.Unsettled > 0 {
		return st, nil
	}
	remoteEnd, ok, err := u.Index.LogEnd(tp)
	if err != nil {
		return st, err
	}
	if !ok {
		remoteEnd = -1
	}
	// Two segments at a time: the next one's index entry, manifest and
	// objects start while the previous one's objects finish, and
	// segments are finished (FINISHED manifest, then index) strictly in
	// order, so the remote log end never passes a segment not uploaded.
	var pending *segUpload
	finish := func() error {
		if pending == nil {
			return nil
		}
		n, err := pending.finish(ctx)
		pending = nil
		if err != nil {
			return err
		}
		st.Copied++
		st.Bytes += n
		return nil
	}
	for _, seg := range src.Segments() {
		if !seg.Sealed || seg.NextOffset > hw {
			break
		}
		if seg.NextOffset-1 <= remoteEnd || seg.NextOffset == seg.BaseOffset {
			continue
		}
		if !lead.leading() || ctx.Err() != nil {
			if err := finish(); err != nil {
				return st, err
			}
			return st, ErrNotLeading
		}
		next, err := u.startCopy(ctx, tp, topic, src, seg.BaseOffset, lead)
		if err != nil {
			if ferr := finish(); ferr != nil {
				return st, ferr
			}
			if errors.Is(err, plog.ErrSegmentNotReady) {
				break // not flushed yet, or deleted meanwhile: the next pass sees
			}
			return st, err
		}
		if err := finish(); err != nil {
			next.abort() // left COPY_SEGMENT_STARTED: the next pass cleans it up
			if errors.Is(err, ErrNotLeading) {
				next.abandon() // no next pass of ours: settle it now
			}
			return st, err
		}
		pending = next
	}
	return st, finish()
}

// cleanup settles every entry of the partition that is not
// COPY_SEGMENT_FINISHED: a COPY_SEGMENT_STARTED upload whose manifest is
// in the bucket in COPY_SEGMENT_FINISHED (the crash came after it) is
// finished; an upload of another broker that is alive, younger than the
// settle grace, is left to it (st.Unsettled: it may still finish, and its
// objects must then be there); any other is deleted from the bucket and
// the index, as are deletions left in DELETE_SEGMENT_STARTED.
func (u *Uploader) cleanup(ctx context.Context, tp index.TopicIDPartition, st *CopyStats) error {
	segs, err := u.Index.Segments(tp)
	if err != nil {
		return err
	}
	for _, m := range segs {
		switch m.State {
		case index.CopySegmentStarted:
			finished, present, err := u.uploadState(ctx, &m)
			if err != nil {
				return err // the bucket is unreachable: try again next pass
			}
			if finished {
				if _, err := u.update(&m, index.CopySegmentFinished); err != nil {
					return err
				}
				st.Finished++
				continue
			}
			if present && u.mayStillFinish(&m) {
				st.Unsettled++
				continue
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

// uploadState reads the manifest of an upload the index holds in
// COPY_SEGMENT_STARTED: finished when the bucket's manifest says the
// upload finished (after the index was written), present when a manifest
// of it is there at all. A missing or unreadable manifest is no error; a
// bucket that does not answer is.
func (u *Uploader) uploadState(ctx context.Context, m *index.SegmentMetadata) (finished, present bool, err error) {
	got, err := readManifest(ctx, u.Store, ManifestKey(m))
	switch {
	case errors.Is(err, ErrNotFound) || errors.Is(err, errBadManifest):
		return false, false, nil
	case err != nil:
		return false, false, err
	}
	return got.SegmentID == m.SegmentID && got.State == index.CopySegmentFinished, true, nil
}

// mayStillFinish reports whether an unfinished upload, whose STARTED
// manifest is in the bucket, belongs to another broker that may still
// finish it: one that is alive, within the settle grace of the upload's
// start. (This broker's own uploads are never under way outside a pass.)
func (u *Uploader) mayStillFinish(m *index.SegmentMetadata) bool {
	if m.BrokerID == u.BrokerID || (u.PeerAlive != nil && !u.PeerAlive(m.BrokerID)) {
		return false
	}
	return u.now()-m.EventTimestamp < u.grace().Milliseconds()
}

// SettleOwn deletes the unfinished uploads this broker left in a partition
// it does not lead (a pass cut short by a crash, or by the loss of
// leadership with the bucket down), so that the leader need not wait out
// the settle grace for them. It must not run while this broker copies the
// partition.
func (u *Uploader) SettleOwn(ctx context.Context, tp index.TopicIDPartition) (int, error) {
	segs, err := u.Index.Segments(tp)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, m := range segs {
		if m.State != index.CopySegmentStarted || m.BrokerID != u.BrokerID {
			continue
		}
		finished, _, err := u.uploadState(ctx, &m)
		if err != nil {
			return n, err
		}
		if finished {
			continue // the leader adopts it
		}
		if err := u.deleteSegment(ctx, m); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
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

// segUpload is a segment whose objects are going up (startCopy).
type segUpload struct {
	u      *Uploader
	seg    *plog.SealedSegment
	m      index.SegmentMetadata
	topic  string
	total  int64
	lead   Leadership
	start  int64 // ms, the STARTED state's time
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   []error
}

// startCopy starts uploading one segment: index entry
// COPY_SEGMENT_STARTED, manifest in that state, then the objects, in the
// background; finish completes it.
func (u *Uploader) startCopy(ctx context.Context, tp index.TopicIDPartition, topic string, src SegmentSource, base int64, lead Leadership) (*segUpload, error) {
	seg, err := src.OpenSealedSegment(base)
	if err != nil {
		return nil, err
	}
	done := false
	defer func() {
		if !done {
			seg.Close()
		}
	}()
	type object struct {
		kind index.ObjectKind
		r    io.Reader
		size int64
	}
	// The .log goes up as an object of its own; the small objects are
	// packed one after another in the .indexes object (a PUT of a few
	// KiB costs the bucket about a tenth of a PUT of a segment).
	var small []object
	for _, f := range []struct {
		kind index.ObjectKind
		file io.ReaderAt
		size func() (int64, error)
	}{{index.ObjectOffsetIndex, seg.Index, seg.Index.Size}, {index.ObjectTimeIndex, seg.TimeIndex, seg.TimeIndex.Size}} {
		n, err := f.size()
		if err != nil {
			return nil, fmt.Errorf("segment %d of %s: %w", base, tp, err)
		}
		small = append(small, object{f.kind, io.NewSectionReader(f.file, 0, n), n})
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
	small = append(small, object{index.ObjectLeaderEpochCheckpoint, bytes.NewReader(ck), int64(len(ck))})
	if seg.Snapshot != nil {
		small = append(small, object{index.ObjectProducerSnapshot, bytes.NewReader(seg.Snapshot), int64(len(seg.Snapshot))})
	}
	var packed []index.ObjectEntry
	var readers []io.Reader
	var packSize int64
	for _, o := range small {
		packed = append(packed, index.ObjectEntry{Kind: o.kind, Size: o.size, Packed: true, Offset: packSize})
		readers = append(readers, o.r)
		packSize += o.size
	}
	objs := []object{
		{index.ObjectLog, io.NewSectionReader(seg.Log, 0, seg.Size), seg.Size},
		{index.ObjectIndexes, io.MultiReader(readers...), packSize},
	}
	start := u.now()
	su := &segUpload{u: u, seg: seg, topic: topic, lead: lead, start: start, m: index.SegmentMetadata{
		Partition:      tp,
		SegmentID:      index.NewUUID(),
		Topic:          topic,
		StartOffset:    seg.BaseOffset,
		EndOffset:      seg.NextOffset - 1,
		MaxTimestamp:   max(seg.MaxTimestamp, -1),
		EventTimestamp: start,
		BrokerID:       u.BrokerID,
		SegmentSize:    seg.Size,
		LeaderEpochs:   epochs,
		State:          index.CopySegmentStarted,
		UploadEpoch:    max(lead.Epoch, 0),
	}}
	m := &su.m
	for _, o := range objs {
		m.Objects = append(m.Objects, index.ObjectEntry{Kind: o.kind, Size: o.size})
		su.total += o.size
	}
	m.Objects = append(m.Objects, packed...)
	if err := u.Index.AddSegment(*m); err != nil {
		return nil, err
	}
	// The STARTED manifest goes first: a leader's refresh replaces its
	// index with what the bucket's manifests say, so objects without one
	// would be forgotten by the index that is to clean them up.
	if err := u.putManifest(ctx, m); err != nil {
		return nil, err
	}
	// The objects go up side by side: on S3 a small object costs a round
	// trip as a large one does, so in series they would add up.
	putCtx, cancel := context.WithCancel(ctx)
	su.cancel = cancel
	su.errs = make([]error, len(objs))
	for i, o := range objs {
		su.wg.Add(1)
		go func() {
			defer su.wg.Done()
			if err := u.Store.Put(putCtx, ObjectKey(m, o.kind), u.Throttle.Reader(putCtx, o.r), o.size); err != nil {
				su.errs[i] = fmt.Errorf("upload %s of segment %d of %s: %w", o.kind.Suffix(), base, tp, err)
				cancel()
			}
		}()
	}
	done = true
	return su, nil
}

// abort stops the objects' uploads and releases the segment; the entry
// stays COPY_SEGMENT_STARTED for the next pass to clean up.
func (su *segUpload) abort() {
	su.cancel()
	su.wg.Wait()
	su.seg.Close()
}

// abandon deletes the objects, manifest and index entry of an upload
// that will not finish (best effort: what stays is settled by a later
// pass, SettleOwn or the leader after the grace). Its context is not the
// pass's, which is cancelled when leadership moves.
func (su *segUpload) abandon() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := su.u.deleteSegment(ctx, su.m); err != nil {
		su.u.logger().Warn("abandon upload", "partition", su.m.Partition.String(), "segment_id", su.m.SegmentID.String(), "err", err)
	}
}

// fenced reports why the upload may no longer write its FINISHED state:
// the broker no longer leads at the upload's epoch, or half the settle
// grace has passed since the upload started (after the grace a new leader
// may delete its objects).
func (su *segUpload) fenced(ctx context.Context) error {
	switch {
	case ctx.Err() != nil || !su.lead.leading():
		return fmt.Errorf("%w: segment %d of %s (epoch %d)", ErrNotLeading, su.m.StartOffset, su.m.Partition, su.m.UploadEpoch)
	case su.u.now()-su.start >= su.u.grace().Milliseconds()/2:
		return fmt.Errorf("%w: segment %d of %s took more than half the settle grace %v", ErrNotLeading, su.m.StartOffset, su.m.Partition, su.u.grace())
	}
	return nil
}

// finish waits for the objects, then writes the manifest in
// COPY_SEGMENT_FINISHED and the index entry, if the upload is not fenced
// (else it abandons the upload and returns ErrNotLeading). It returns the
// bytes uploaded.
func (su *segUpload) finish(ctx context.Context) (int64, error) {
	su.wg.Wait()
	su.cancel()
	su.seg.Close()
	if err := su.fenced(ctx); err != nil {
		su.abandon()
		return 0, err
	}
	for _, err := range su.errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return 0, err
		}
	}
	if err := errors.Join(su.errs...); err != nil {
		return 0, err
	}
	u, m := su.u, &su.m
	m.State, m.EventTimestamp = index.CopySegmentFinished, u.now()
	if err := u.putManifest(ctx, m); err != nil {
		return 0, err
	}
	if _, err := u.Index.UpdateSegment(index.SegmentUpdate{
		Partition: m.Partition, SegmentID: m.SegmentID, State: index.CopySegmentFinished, EventTimestamp: m.EventTimestamp, BrokerID: u.BrokerID,
	}); err != nil {
		return 0, err
	}
	u.logger().Debug("copied segment to remote storage", "partition", m.Partition.String(), "topic", su.topic, "base", m.StartOffset, "end", m.EndOffset, "bytes", su.total, "segment_id", m.SegmentID.String())
	return su.total, nil
}
