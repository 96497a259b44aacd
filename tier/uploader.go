package tier

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
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
	// SettleGrace is how long an upload may go without a heartbeat: an
	// unfinished upload of another live broker whose manifest was written
	// less than this ago is left to it, and an upload writes its
	// COPY_SEGMENT_FINISHED state only within half of it from its last
	// heartbeat (0: DefaultSettleGrace).
	SettleGrace time.Duration
	// Heartbeat is how often an upload under way rewrites its
	// COPY_SEGMENT_STARTED manifest with a fresh time while its broker
	// leads (0: SettleGrace/8, so that a heartbeat may fail a few times
	// before the upload's half grace runs out; at most SettleGrace/4).
	Heartbeat time.Duration
}

// DefaultSettleGrace is SettleGrace's default.
const DefaultSettleGrace = time.Hour

// Leadership is what a copy pass runs under: this broker leads the
// partition at Epoch for as long as Leading says so (nil: always). The
// caller cancels the pass's context when leadership moves; Leading is
// checked again before each segment, before each heartbeat of an upload
// and before each FINISHED state, from the uploads' goroutines too (it
// must be safe for concurrent use).
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

func (u *Uploader) heartbeat() time.Duration {
	d := u.grace() / 8
	if u.Heartbeat > 0 {
		d = min(u.Heartbeat, u.grace()/4) // a try or two within the half grace
	}
	return max(d, time.Millisecond)
}

// CopyStats describes one CopyPartition pass.
type CopyStats struct {
	Copied    int   // segments now COPY_SEGMENT_FINISHED
	Bytes     int64 // bytes of their objects
	Finished  int   // COPY_SEGMENT_STARTED entries found whole and finished
	Abandoned int   // unfinished uploads (or deletions) cleaned up
	// Unsettled counts uploads of other live brokers, heartbeating within
	// the settle grace, that may still finish: nothing is uploaded while
	// any is left.
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
// wholly below lso and past the remote log end. lso is the partition's
// last stable offset (plog.Log.LastStableOffset of the high watermark, as
// Kafka's RemoteLogManager bounds its copies): no record of a transaction
// still open, or whose marker is not yet below the high watermark,
// reaches the bucket, and every record that does is committed. It
// stops at the first failure; the next pass resumes there. It uploads
// nothing while another live broker's upload may still finish
// (st.Unsettled), and stops with ErrNotLeading, abandoning its unfinished
// upload, once lead no longer holds.
func (u *Uploader) CopyPartition(ctx context.Context, tp index.TopicIDPartition, topic string, src SegmentSource, lso int64, lead Leadership) (CopyStats, error) {
	var st CopyStats
	if err := u.cleanup(ctx, tp, &st); err != nil {
		return st, err
	}
	if _, err := u.RepairMissing(ctx, tp); err != nil {
		return st, err
	}
	if st.Unsettled > 0 {
		return st, nil
	}
	// Copy from the end of what the bucket holds without a gap from the
	// local log's start on (index.ContiguousEnd): a gap (an overlapping
	// segment deleted, say) is filled again from the local log.
	segs := src.Segments()
	from := int64(0)
	if len(segs) > 0 {
		from = segs[0].BaseOffset
	}
	remoteEnd, ok, err := u.Index.ContiguousEnd(tp, from)
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
	for _, seg := range segs {
		if !seg.Sealed || seg.NextOffset > lso {
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
// finished; an upload of another broker that is alive and whose manifest
// heartbeat is younger than the settle grace is left to it (st.Unsettled:
// it may still finish, and its objects must then be there); any other is
// deleted from the bucket and the index, as are deletions left in
// DELETE_SEGMENT_STARTED.
func (u *Uploader) cleanup(ctx context.Context, tp index.TopicIDPartition, st *CopyStats) error {
	segs, err := u.Index.Segments(tp)
	if err != nil {
		return err
	}
	for _, m := range segs {
		switch m.State {
		case index.CopySegmentStarted:
			finished, beat, err := u.uploadState(ctx, &m)
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
			if beat > 0 && u.mayStillFinish(&m, beat) {
				st.Unsettled++
				continue
			}
			err = u.deleteSegment(ctx, m)
			if errors.Is(err, errFinishedMeanwhile) {
				// Its uploader wrote the FINISHED state before this
				// cleanup's fence: adopt it.
				if _, err := u.update(&m, index.CopySegmentFinished); err != nil {
					return err
				}
				st.Finished++
				continue
			}
			if err != nil {
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
// upload finished (after the index was written); beat is the time (ms)
// the manifest was last written with, its latest heartbeat, or 0 when no
// manifest of it is there. A missing or unreadable manifest is no error;
// a bucket that does not answer is.
func (u *Uploader) uploadState(ctx context.Context, m *index.SegmentMetadata) (finished bool, beat int64, err error) {
	got, err := readManifest(ctx, u.Store, ManifestKey(m))
	switch {
	case errors.Is(err, ErrNotFound) || errors.Is(err, errBadManifest):
		return false, 0, nil
	case err != nil:
		return false, 0, err
	}
	return got.SegmentID == m.SegmentID && got.State == index.CopySegmentFinished, max(got.EventTimestamp, 1), nil
}

// mayStillFinish reports whether an unfinished upload, whose STARTED
// manifest is in the bucket with the heartbeat time beat, belongs to
// another broker that may still finish it: one that is alive, whose last
// heartbeat is within the settle grace. (This broker's own uploads are
// never under way outside a pass.) The time is the bucket's, not the
// index's: the index learned the upload when it refreshed, perhaps many
// heartbeats ago.
func (u *Uploader) mayStillFinish(m *index.SegmentMetadata, beat int64) bool {
	if m.BrokerID == u.BrokerID || (u.PeerAlive != nil && !u.PeerAlive(m.BrokerID)) {
		return false
	}
	return u.now()-max(beat, m.EventTimestamp) < u.grace().Milliseconds()
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
		if err := u.deleteSegment(ctx, m); errors.Is(err, errFinishedMeanwhile) {
			continue
		} else if err != nil {
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
// in DELETE_SEGMENT_STARTED (a compare-and-swap: markDeleting), the index
// entry likewise, the other objects deleted, then the manifest, then the
// index entry. An unfinished upload found finished in the bucket is left
// as it is: errFinishedMeanwhile.
func (u *Uploader) deleteSegment(ctx context.Context, m index.SegmentMetadata) error {
	// An unfinished upload is fenced in the bucket first, so that one
	// found finished there is adopted, not deleted; a finished segment
	// leaves the index's reads first, as Kafka's RemoteLogManager does.
	unfinished := m.State == index.CopySegmentStarted
	if unfinished {
		if err := markDeleting(ctx, u.Store, &m, true); err != nil {
			return err
		}
	}
	if m.State != index.DeleteSegmentStarted {
		var err error
		if m, err = u.update(&m, index.DeleteSegmentStarted); err != nil {
			return err
		}
	}
	if !unfinished {
		if err := markDeleting(ctx, u.Store, &m, false); err != nil {
			return err
		}
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

// segUpload is a segment whose objects are going up (startCopy).
type segUpload struct {
	u      *Uploader
	seg    *plog.SealedSegment
	m      index.SegmentMetadata // read-only while the heartbeat runs
	topic  string
	total  int64
	lead   Leadership
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   []error

	// lease is the time (ms) of the upload's latest STARTED manifest in
	// the bucket that counts: the first, then each heartbeat that landed
	// within half the grace of the one before. Written by the heartbeat
	// goroutine; read by fenced once it has stopped.
	lease atomic.Int64
	// etag is the ETag of the upload's latest manifest: each later write
	// of it is conditional on it (If-Match), so none lands once another
	// broker has fenced the upload. Written by startCopy, then by the
	// heartbeat goroutine; read by finish once it has stopped.
	etag string
	// taken: a heartbeat found the manifest changed by another broker
	// (its condition failed): the upload is fenced.
	taken    bool
	beatStop chan struct{}
	beatDone chan struct{}
	stopOnce sync.Once
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
	} else {
		// (The roll's snapshot failed, on a full disk.) A replica rebuilt
		// from this segment's end would start without producers: without
		// the transactions open there, whose aborts it could not index.
		u.logger().Warn("uploading a segment without its producer snapshot; a replica rebuilt from its end starts without producer state",
			"partition", tp.String(), "topic", topic, "base", seg.BaseOffset, "end", seg.NextOffset-1)
	}
	// The .txnindex is always listed: with size 0 when the segment holds
	// no ABORT marker (KIP-1058's txnIndexEmpty), so that reads know the
	// segment has no aborted transactions without a GET.
	small = append(small, object{index.ObjectTransactionIndex, bytes.NewReader(seg.TxnIndex), int64(len(seg.TxnIndex))})
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
	su := &segUpload{u: u, seg: seg, topic: topic, lead: lead, m: index.SegmentMetadata{
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
	// would be forgotten by the index that is to clean them up. The key
	// is new (a fresh segment id): If-None-Match, so that a deleter's
	// fence (a DELETE_SEGMENT_STARTED manifest) is never overwritten.
	etag, err := casManifest(ctx, u.Store, m, Cond{IfAbsent: true})
	if err != nil {
		return nil, err
	}
	su.etag = etag
	su.lease.Store(start)
	// The objects go up side by side: on S3 a small object costs a round
	// trip as a large one does, so in series they would add up.
	putCtx, cancel := context.WithCancel(ctx)
	su.cancel = cancel
	su.beatStop, su.beatDone = make(chan struct{}), make(chan struct{})
	go su.heartbeat(putCtx)
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

// abort stops the objects' uploads and the heartbeat and releases the
// segment; the entry stays COPY_SEGMENT_STARTED for the next pass to
// clean up.
func (su *segUpload) abort() {
	su.cancel()
	su.wg.Wait()
	su.stopHeartbeat()
	su.seg.Close()
}

// heartbeat rewrites the upload's STARTED manifest with the current time
// every Uploader.Heartbeat while the broker leads at the upload's epoch,
// so that a new leader (and the upload's own deadline) ages the upload by
// its latest sign of life rather than by its start: a slow upload of a
// leader is never given up, and one whose broker froze, died or lost
// leadership stops heartbeating and is settled after the grace.
//
// The lease it keeps holds this invariant: while the upload may still
// write its FINISHED state (now - lease < grace/2), the bucket holds a
// manifest of it written at lease or later. A heartbeat is therefore
// written only while the lease runs, and extends it only if it landed
// before the lease ran out; one that landed later (the broker froze
// mid-request) ends the lease, since a new leader may have deleted the
// upload meanwhile. A new leader deletes an upload only once its newest
// manifest is a whole grace old, so by then the upload's lease has run
// out by at least half the grace, the margin left for a FINISHED write
// already in flight (and clock skew).
//
// It runs until stopHeartbeat, ctx's end, or the lease's end; it uses
// ctx, the upload's, so that no heartbeat lands after abort.
func (su *segUpload) heartbeat(ctx context.Context) {
	defer close(su.beatDone)
	u := su.u
	half := u.grace().Milliseconds() / 2
	t := time.NewTicker(u.heartbeat())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-su.beatStop:
			return
		case <-t.C:
		}
		lease := su.lease.Load()
		now := u.now()
		if !su.lead.leading() || now-lease >= half {
			return // no longer ours to keep alive; finish finds it fenced
		}
		m := su.m
		m.EventTimestamp = now
		etag, err := casManifest(ctx, u.Store, &m, Cond{IfMatch: su.etag})
		if errors.Is(err, ErrPreconditionFailed) {
			su.taken = true // another broker fenced it
			return
		}
		if err != nil {
			if ctx.Err() == nil {
				u.logger().Debug("upload heartbeat failed; retrying", "partition", m.Partition.String(), "segment_id", m.SegmentID.String(), "err", err)
			}
			continue // the lease may still allow another try
		}
		su.etag = etag
		if u.now()-lease >= half {
			return // landed too late to count
		}
		su.lease.Store(now)
	}
}

// stopHeartbeat stops the heartbeat and waits until it has ended, with
// any manifest PUT of it returned, so that no STARTED manifest lands
// after the FINISHED one or after the upload's deletion.
func (su *segUpload) stopHeartbeat() {
	su.stopOnce.Do(func() { close(su.beatStop) })
	<-su.beatDone
}

// abandon deletes the objects, manifest and index entry of an upload
// that will not finish (best effort: what stays is settled by a later
// pass, SettleOwn or the leader after the grace). Its context is not the
// pass's, which is cancelled when leadership moves. The heartbeat must
// have stopped.
func (su *segUpload) abandon() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := su.u.deleteSegment(ctx, su.m); err != nil {
		su.u.logger().Warn("abandon upload", "partition", su.m.Partition.String(), "segment_id", su.m.SegmentID.String(), "err", err)
	}
}

// fenced reports why the upload may no longer write its FINISHED state:
// the broker no longer leads at the upload's epoch, or half the settle
// grace has passed since its last heartbeat that counts (a grace after
// the newest manifest a new leader may delete its objects). The heartbeat
// must have stopped.
func (su *segUpload) fenced(ctx context.Context) error {
	switch {
	case ctx.Err() != nil || !su.lead.leading():
		return fmt.Errorf("%w: segment %d of %s (epoch %d)", ErrNotLeading, su.m.StartOffset, su.m.Partition, su.m.UploadEpoch)
	case su.taken:
		return fmt.Errorf("%w: segment %d of %s (epoch %d): another broker changed its manifest", ErrNotLeading, su.m.StartOffset, su.m.Partition, su.m.UploadEpoch)
	case su.u.now()-su.lease.Load() >= su.u.grace().Milliseconds()/2:
		return fmt.Errorf("%w: segment %d of %s: no heartbeat of its manifest within half the settle grace %v (the broker was frozen, or the bucket did not take it)", ErrNotLeading, su.m.StartOffset, su.m.Partition, su.u.grace())
	}
	return nil
}

// finish waits for the objects, then writes the manifest in
// COPY_SEGMENT_FINISHED and the index entry, if the upload is not fenced
// (else it abandons the upload and returns ErrNotLeading). It returns the
// bytes uploaded.
func (su *segUpload) finish(ctx context.Context) (int64, error) {
	su.wg.Wait()
	su.stopHeartbeat()
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
	// The fence: the FINISHED state lands only over the upload's own
	// latest manifest, never over a deleter's DELETE_SEGMENT_STARTED nor
	// where a deleter removed it.
	if _, err := casManifest(ctx, u.Store, m, Cond{IfMatch: su.etag}); err != nil {
		if errors.Is(err, ErrPreconditionFailed) {
			m.State = index.CopySegmentStarted
			su.abandon()
			return 0, fmt.Errorf("%w: segment %d of %s (epoch %d): fenced on the store: %v", ErrNotLeading, m.StartOffset, m.Partition, m.UploadEpoch, err)
		}
		m.State = index.CopySegmentStarted
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
