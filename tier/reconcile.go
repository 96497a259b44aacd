package tier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"strata/index"
)

// Reconciliation: finding and deleting orphaned objects, those of no
// segment that anyone will finish or delete. See "Reconciliation" in the
// package doc for what counts as an orphan and why.

// Reconciler deletes orphaned objects from the store. One Reconciler
// serves a broker; its methods must not run concurrently with each
// other.
type Reconciler struct {
	Store    ObjectStore
	Index    *index.Index
	BrokerID int32
	// Grace is how old the newest object of a segment (or of a deleted
	// topic) must be before it is deleted: well beyond the uploader's
	// heartbeat (an upload under way rewrites its manifest every
	// Uploader.Heartbeat) plus clock skew.
	Grace time.Duration
	// MaxSegments bounds the segments deleted by one call (default 1000);
	// the rest wait for the next.
	MaxSegments int
	Logger      *slog.Logger     // nil: slog.Default()
	Now         func() time.Time // nil: time.Now
}

// ReconcileStats reports one reconciliation call.
type ReconcileStats struct {
	Segments int // segments (sets of objects sharing a key stem) examined
	Orphans  int // orphaned segments deleted
	Objects  int // objects deleted
	Young    int // orphan candidates within the grace period, left for later
	// Corrupt counts segments whose manifest does not decode (perhaps a
	// newer format): left alone.
	Corrupt int
	// Unrecognized counts keys outside the layout (or with a suffix it
	// does not name): never ours to delete. UnrecognizedSample holds the
	// first few, for the log.
	Unrecognized       int
	UnrecognizedSample []string
}

func (st *ReconcileStats) add(o ReconcileStats) {
	st.Segments += o.Segments
	st.Orphans += o.Orphans
	st.Objects += o.Objects
	st.Young += o.Young
	st.Corrupt += o.Corrupt
	st.Unrecognized += o.Unrecognized
	for _, k := range o.UnrecognizedSample {
		if len(st.UnrecognizedSample) < 3 {
			st.UnrecognizedSample = append(st.UnrecognizedSample, k)
		}
	}
}

// Add adds o's counts to st (a broker sums its partitions' calls).
func (st *ReconcileStats) Add(o ReconcileStats) { st.add(o) }

func (st *ReconcileStats) unrecognized(key string) {
	st.Unrecognized++
	if len(st.UnrecognizedSample) < 3 {
		st.UnrecognizedSample = append(st.UnrecognizedSample, key)
	}
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Reconciler) logger() *slog.Logger {
	if r.Logger != nil {
		return r.Logger
	}
	return slog.Default()
}

func (r *Reconciler) maxSegments() int {
	if r.MaxSegments > 0 {
		return r.MaxSegments
	}
	return 1000
}

// stem is the objects of one segment attempt as listed: the keys sharing
// "<topic id>/<partition>/<base>-<segment id>".
type stem struct {
	key      SegmentKey // of the first object
	prefix   string     // the stem itself
	objects  []string   // keys with a suffix of the layout, manifest excluded
	manifest bool       // the manifest was listed
	newest   time.Time  // newest modification time of the listed objects
}

// knownSuffix reports whether a suffix is one the layout writes.
func knownSuffix(s string) bool {
	if s == ManifestSuffix {
		return true
	}
	for k := index.ObjectKind(0); k.Valid(); k++ {
		if k.Suffix() == s {
			return true
		}
	}
	return false
}

// stems lists the store under prefix and calls fn with each segment's
// objects, in key order; keys outside the layout are counted in st. fn
// returning false stops the listing.
func stems(ctx context.Context, store ObjectStore, prefix string, st *ReconcileStats, fn func(*stem) bool) error {
	var cur *stem
	for info, err := range store.List(ctx, prefix) {
		if err != nil {
			return err
		}
		if strings.HasPrefix(info.Key, SnapshotPrefix) {
			continue // the metadata snapshots (snapshot.go), ours
		}
		k, perr := ParseSegmentKey(info.Key)
		if perr != nil || !knownSuffix(k.Suffix) {
			st.unrecognized(info.Key)
			continue
		}
		p := strings.TrimSuffix(info.Key, k.Suffix)
		if cur != nil && cur.prefix != p {
			if !fn(cur) {
				return nil
			}
			cur = nil
		}
		if cur == nil {
			cur = &stem{key: k, prefix: p}
		}
		if k.Suffix == ManifestSuffix {
			cur.manifest = true
		} else {
			cur.objects = append(cur.objects, info.Key)
		}
		if info.ModTime.After(cur.newest) {
			cur.newest = info.ModTime
		}
	}
	if cur != nil {
		fn(cur)
	}
	return nil
}

// ReconcilePartition deletes the orphaned segments of a partition this
// broker leads: those the index does not know whose manifest is missing
// or still in COPY_SEGMENT_STARTED or DELETE_SEGMENT_STARTED, or in
// COPY_SEGMENT_FINISHED but superseded by the segment the index holds at
// the same base offset (two leaders uploaded it), once their newest
// object is older than Grace. Other segments in COPY_SEGMENT_FINISHED,
// those with a manifest that does not decode, and those the index knows
// (the uploader settles them) are left alone.
func (r *Reconciler) ReconcilePartition(ctx context.Context, tp index.TopicIDPartition) (ReconcileStats, error) {
	var st ReconcileStats
	var orphans []*stem
	err := stems(ctx, r.Store, PartitionPrefix(tp), &st, func(s *stem) bool {
		st.Segments++
		if _, err := r.Index.Segment(tp, s.key.SegmentID); err == nil {
			return true // the uploader's (an upload under way, or its cleanup)
		}
		orphans = append(orphans, s)
		return len(orphans) < r.maxSegments()
	})
	if err != nil {
		return st, fmt.Errorf("reconcile %s: %w", tp, err)
	}
	for _, s := range orphans {
		if err := r.settle(ctx, s, false, &st); err != nil {
			return st, fmt.Errorf("reconcile %s: %w", tp, err)
		}
	}
	return st, nil
}

// ReconcileDeletedTopics deletes the objects of topics the cluster
// deleted: every segment under a topic id for which known returns false
// and whose deletion is recorded in the bucket by the cluster that owns
// it while the cluster snapshot does not name it (DeletableTopic,
// deletions.go), once the newest object
// under that topic id is older than Grace. A topic id the cluster merely
// does not know (a fresh cluster pointed at another cluster's bucket, a
// restore under way) keeps its objects. known is asked when the listing
// reaches a topic, again once its objects are listed and once more before
// they are deleted, so that a topic the metadata learns meanwhile is
// spared; it must answer true whenever unsure (this broker stopped being
// the controller, say). Segments whose manifest does not decode are left
// alone.
func (r *Reconciler) ReconcileDeletedTopics(ctx context.Context, known func(index.UUID) bool) (ReconcileStats, error) {
	var st ReconcileStats
	named, err := ReadSnapshotTopics(ctx, r.Store)
	if err != nil {
		return st, fmt.Errorf("reconcile deleted topics: %w", err)
	}
	var unrecorded []string // unknown topic ids whose deletion is not recorded
	var deletableErr error
	type topic struct {
		id     index.UUID
		known  bool // at the start of its listing: skipped
		stems  []*stem
		newest time.Time
	}
	var cur *topic
	var doomed []*topic
	budget := r.maxSegments()
	finish := func() {
		if cur == nil || cur.known || len(cur.stems) == 0 {
			return
		}
		if r.now().Sub(cur.newest) < r.Grace {
			st.Young += len(cur.stems)
		} else if !known(cur.id) {
			switch ok, err := DeletableTopic(ctx, r.Store, named, cur.id); {
			case err != nil:
				deletableErr = errors.Join(deletableErr, err)
			case !ok:
				unrecorded = append(unrecorded, cur.id.String())
			default:
				doomed = append(doomed, cur)
				budget -= len(cur.stems)
			}
		}
	}
	err = stems(ctx, r.Store, "", &st, func(s *stem) bool {
		st.Segments++
		if cur == nil || cur.id != s.key.Partition.TopicID {
			finish()
			if budget <= 0 {
				return false
			}
			cur = &topic{id: s.key.Partition.TopicID}
			cur.known = known(cur.id)
		}
		if cur.known {
			return true
		}
		if s.newest.After(cur.newest) {
			cur.newest = s.newest
		}
		if len(cur.stems) < budget {
			cur.stems = append(cur.stems, s)
		}
		return true
	})
	if err != nil {
		return st, fmt.Errorf("reconcile deleted topics: %w", err)
	}
	finish()
	if len(unrecorded) > 0 {
		r.logger().Info("left the objects of topic ids the cluster does not know: no deletion of them is recorded in the bucket by the cluster that owns it",
			"topic_ids", len(unrecorded), "sample", strings.Join(unrecorded[:min(len(unrecorded), 3)], ","))
	}
	if deletableErr != nil {
		return st, fmt.Errorf("reconcile deleted topics: %w", deletableErr)
	}
	for _, t := range doomed {
		if known(t.id) {
			continue
		}
		before := st.Orphans
		for _, s := range t.stems {
			if err := r.settle(ctx, s, true, &st); err != nil {
				return st, fmt.Errorf("reconcile deleted topic %s: %w", t.id, err)
			}
		}
		r.logger().Info("deleted objects of a topic the cluster no longer has", "topic_id", t.id.String(), "segments", st.Orphans-before)
	}
	return st, nil
}

// superseded reports whether a finished segment the index does not know
// lost to another at its base offset: two leaders uploaded the range, and
// the index keeps the one index.Prefer picks, which every broker reads.
func (r *Reconciler) superseded(m *index.SegmentMetadata) bool {
	cur, err := r.Index.SegmentForOffset(m.Partition, m.StartOffset)
	if err != nil || cur.SegmentID == m.SegmentID || !index.Prefer(&cur, m) {
		return false
	}
	// Only when the index's readable segments hold every offset of it:
	// a longer segment of a former leader (its upload landed after this
	// leader's refresh) may hold offsets that nothing else does yet, and
	// which followers' local retention may already have let go.
	start, ok, err := r.Index.LogStart(m.Partition)
	if err != nil || !ok || start > m.StartOffset {
		return false
	}
	end, ok, err := r.Index.ContiguousEnd(m.Partition, m.StartOffset)
	return err == nil && ok && end >= m.EndOffset
}

// settle deletes one orphan candidate if it still is one. With anyState
// (a deleted topic) a manifest in COPY_SEGMENT_FINISHED does not protect
// it; otherwise it does.
func (r *Reconciler) settle(ctx context.Context, s *stem, anyState bool, st *ReconcileStats) error {
	young := !anyState && r.now().Sub(s.newest) < r.Grace
	if young && !s.manifest {
		st.Young++
		return nil
	}
	mkey := s.prefix + ManifestSuffix
	var m *index.SegmentMetadata
	var etag string
	if s.manifest {
		got, tag, err := readManifestTagged(ctx, r.Store, mkey)
		etag = tag
		switch {
		case errors.Is(err, ErrNotFound):
			return nil // deleted since the listing: someone is at it
		case errors.Is(err, errBadManifest):
			st.Corrupt++
			r.logger().Warn("remote segment with an unreadable manifest left alone", "manifest", mkey, "err", err)
			return nil
		case err != nil:
			return err
		}
		if got.State == index.CopySegmentFinished && !anyState {
			if !r.superseded(&got) {
				return nil // live
			}
			if young {
				st.Young++
				return nil
			}
		}
		if young && got.State != index.DeleteSegmentStarted {
			// Perhaps an upload under way elsewhere. A deletion under
			// way is not: nothing brings such a segment back, so there
			// is no need to wait (and the manifest this pass rewrote
			// before a failure is new).
			st.Young++
			return nil
		}
		m = &got
	} else if _, err := r.Store.Head(ctx, mkey); !errors.Is(err, ErrNotFound) {
		return err // written since the listing (nil), or the store failed
	}
	keys := s.objects
	if m != nil {
		if m.State != index.DeleteSegmentStarted {
			// As the uploader deletes: the manifest first says the
			// segment is going, so that a refresh never brings it back,
			// written over the version read (If-Match), so that an
			// upload that heartbeat or finished since is left alone.
			m.State, m.EventTimestamp, m.BrokerID = index.DeleteSegmentStarted, r.now().UnixMilli(), r.BrokerID
			if _, err := casManifest(ctx, r.Store, m, Cond{IfMatch: etag}); errors.Is(err, ErrPreconditionFailed) {
				st.Young++
				return nil // changed since it was read: the next pass looks again
			} else if err != nil {
				return err
			}
		}
		for k := index.ObjectKind(0); k.Valid(); k++ {
			if key := ObjectKey(m, k); !slices.Contains(keys, key) {
				keys = append(keys, key)
			}
		}
	}
	if len(keys) > 0 {
		if err := r.Store.DeleteMany(ctx, keys); err != nil {
			return fmt.Errorf("delete orphaned segment %s: %w", s.prefix, err)
		}
	}
	if m != nil {
		if err := r.Store.Delete(ctx, mkey); err != nil {
			return fmt.Errorf("delete manifest %s: %w", mkey, err)
		}
	}
	st.Orphans++
	st.Objects += len(s.objects)
	if s.manifest {
		st.Objects++
	}
	r.logger().Debug("deleted orphaned remote segment", "stem", s.prefix, "objects", len(s.objects), "manifest", s.manifest)
	return nil
}
