package remotelog

// Tiered storage housekeeping: bucket lifecycle rules and the
// reconciliation of orphaned objects, run after an upload pass
// (manager.go), in a goroutine of their own so that a slow listing never
// delays uploads, one at a time.
//
// Lifecycle rules (remote.log.storage.lifecycle.rules.enable, off by
// default): the broker that is the active controller (in embedded mode,
// the broker itself) keeps the bucket's rules in line with the tiered
// topics of its metadata (tier.LifecycleStore.SyncLifecycle): one rule per
// topic with remote.storage.enable=true and a time-based retention
// (cleanup.policy with delete, retention.ms >= 0), expiring its objects
// retention.ms + remote.log.storage.lifecycle.margin.ms after upload,
// rounded up to days, and one rule aborting incomplete multipart uploads
// after a day. Only the controller writes, so that two brokers'
// read-modify-writes of the bucket's configuration cannot lose each other's
// updates. It syncs when the wanted rules change, and again after the
// reconciliation interval (at least 10 minutes; an hour when
// reconciliation is off) to repair edits by hand. Stores without lifecycle rules (file tier) log that once.
//
// Reconciliation (remote.log.reconciliation.interval.ms, default an hour,
// -1 off): every broker deletes the orphaned segments of the tiered
// partitions it leads (tier.Reconciler.ReconcilePartition), and the
// controller, from its complete metadata, the objects of topic ids the
// cluster deleted: no longer in its metadata, their deletion recorded in
// the bucket (ReconcileDeletedTopics, tier/deletions.go). Nothing younger than
// the grace period is deleted: max(remote.log.reconciliation.grace.ms,
// 10 × remote.log.manager.task.interval.ms).
//
// Metrics (Kafka has no names for these): strata_remote_log_orphan_objects_deleted_total,
// strata_remote_log_reconciliation_errors_total,
// strata_remote_log_unrecognized_objects (keys outside the layout found by
// the last pass, left alone) and strata_remote_log_lifecycle_sync_errors_total.

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"strata/index"
	"strata/tier"
)

// tierHousekeeping is the state of lifecycle sync and reconciliation. Its
// fields other than running are used by the housekeeping goroutine only.
type tierHousekeeping struct {
	running atomic.Bool

	lifecycleOn bool
	margin      int64
	store       tier.LifecycleStore // nil: the store has no lifecycle rules
	synced      string              // the policy last written; "" after an error or without the controllership
	syncedAt    time.Time
	resync      time.Duration
	loggedNone  bool
	loggedAbort bool

	reconciler     *tier.Reconciler
	reconcileEvery time.Duration // 0: off
	nextReconcile  time.Time

	orphanObjects, reconcileErrors, lifecycleErrors prometheus.Counter
	unrecognized                                    prometheus.Gauge
}

// newTierHousekeeping reads the configs; Open calls it.
func (rm *Manager) newTierHousekeeping() *tierHousekeeping {
	h := &tierHousekeeping{
		lifecycleOn:     rm.cfg.RemoteLogStorageLifecycleRulesEnable,
		margin:          rm.cfg.RemoteLogStorageLifecycleMarginMs,
		resync:          time.Hour,
		orphanObjects:   mOrphanObjectsDeletedTotal.NewCounter(),
		reconcileErrors: mReconciliationErrorsTotal.NewCounter(),
		unrecognized:    mUnrecognizedObjects.NewGauge(),
		lifecycleErrors: mLifecycleSyncErrorsTotal.NewCounter(),
	}
	h.store, _ = rm.store.(tier.LifecycleStore)
	if ms := rm.cfg.RemoteLogReconciliationIntervalMs; ms > 0 {
		h.reconcileEvery = time.Duration(ms) * time.Millisecond
		h.resync = max(h.reconcileEvery, 10*time.Minute)
		h.nextReconcile = time.Now().Add(h.reconcileEvery)
	}
	grace := rm.tierGrace(rm.interval)
	h.reconciler = &tier.Reconciler{Store: rm.store, Index: rm.idx, BrokerID: rm.cfg.ID, Grace: grace, Logger: rm.log}
	rm.reg.MustRegister(h.orphanObjects, h.reconcileErrors, h.unrecognized, h.lifecycleErrors)
	return h
}

// isController reports whether this broker is the active controller (or
// the embedded one), whose metadata is the cluster's.
func (rm *Manager) isController() bool {
	return rm.b.Metadata().ControllerID == rm.cfg.ID
}

// tierHousekeeping starts a lifecycle sync and reconciliation in the
// background unless one is still running.
func (rm *Manager) tierHousekeeping() {
	h := rm.house
	if h == nil || !h.running.CompareAndSwap(false, true) {
		return
	}
	rm.wg.Add(1)
	go func() {
		defer rm.wg.Done()
		defer h.running.Store(false)
		rm.syncLifecycle(h)
		rm.reconcileTier(h)
	}()
}

// lifecyclePolicy is the rules the metadata asks for.
func (rm *Manager) lifecyclePolicy(h *tierHousekeeping) tier.LifecyclePolicy {
	md := rm.b.Metadata()
	r := rm.b.Resolver(md)
	p := tier.LifecyclePolicy{MarginMs: h.margin, AbortMultipartDays: 1}
	for _, t := range md.Topics {
		ts := r.Topic(t.Configs)
		if !ts.RemoteStorageEnable {
			continue
		}
		ret := ts.Log.RetentionMs
		if !ts.CleanupDelete() {
			ret = -1 // retention does not delete: nor may the bucket
		}
		p.Topics = append(p.Topics, tier.TopicLifecycle{TopicID: index.UUID(t.ID), RetentionMs: ret})
	}
	slices.SortFunc(p.Topics, func(a, b tier.TopicLifecycle) int { return strings.Compare(a.TopicID.String(), b.TopicID.String()) })
	return p
}

func (rm *Manager) syncLifecycle(h *tierHousekeeping) {
	if !h.lifecycleOn {
		return
	}
	if h.store == nil {
		if !h.loggedNone {
			h.loggedNone = true
			rm.log.Info("remote.log.storage.lifecycle.rules.enable has no effect: the tier has no bucket lifecycle rules", "tier", rm.store.String())
		}
		return
	}
	if !rm.isController() {
		h.synced = ""
		return
	}
	p := rm.lifecyclePolicy(h)
	key := fmt.Sprint(p)
	if key == h.synced && time.Since(h.syncedAt) < h.resync {
		return
	}
	res, err := h.store.SyncLifecycle(rm.ctx, p)
	if err != nil {
		h.synced = ""
		h.lifecycleErrors.Inc()
		if rm.ctx.Err() == nil {
			rm.log.Warn("sync bucket lifecycle rules; retrying next pass", "tier", rm.store.String(), "err", err)
		}
		return
	}
	h.synced, h.syncedAt = key, time.Now()
	if res.Skipped > 0 {
		h.lifecycleErrors.Inc()
		rm.log.Warn("bucket lifecycle configuration full: topics left without a rule", "tier", rm.store.String(), "skipped", res.Skipped, "max_rules", tier.MaxLifecycleRules)
	}
	if res.AbortUnsupported && !h.loggedAbort {
		h.loggedAbort = true
		rm.log.Info("the bucket refuses rules aborting incomplete multipart uploads; relying on the server's own cleanup of stale uploads", "tier", rm.store.String())
	}
	if res.Changed {
		rm.log.Info("synced bucket lifecycle rules", "tier", rm.store.String(), "rules", res.Rules, "foreign_rules_kept", res.Foreign)
	}
}

func (rm *Manager) reconcileTier(h *tierHousekeeping) {
	if h.reconcileEvery == 0 || time.Now().Before(h.nextReconcile) {
		return
	}
	h.nextReconcile = time.Now().Add(h.reconcileEvery)
	var total tier.ReconcileStats
	count := func(st tier.ReconcileStats, err error, what string) {
		total.Add(st)
		h.orphanObjects.Add(float64(st.Objects))
		if err != nil {
			h.reconcileErrors.Inc()
			if rm.ctx.Err() == nil {
				rm.log.Warn("reconcile remote storage; retrying next interval", "of", what, "err", err)
			}
		}
	}
	for _, p := range rm.b.Partitions() {
		if rm.ctx.Err() != nil {
			return
		}
		if _, ok := rm.tiered(p); !ok {
			continue
		}
		st, err := h.reconciler.ReconcilePartition(rm.ctx, tierPartition(p))
		count(st, err, fmt.Sprintf("%s-%d", p.Topic(), p.Index()))
	}
	if rm.isController() && rm.ctx.Err() == nil {
		known := func(id index.UUID) bool {
			md := rm.b.Metadata()
			if md.ControllerID != rm.cfg.ID {
				return true // no longer the one who knows
			}
			_, ok := md.TopicIDs[[16]byte(id)]
			return ok
		}
		st, err := h.reconciler.ReconcileDeletedTopics(rm.ctx, known)
		// The whole listing saw every key: its count is the bucket's.
		h.unrecognized.Set(float64(st.Unrecognized))
		count(st, err, "deleted topics")
		total.Unrecognized, total.UnrecognizedSample = st.Unrecognized, st.UnrecognizedSample
	}
	if total.Orphans > 0 || total.Unrecognized > 0 || total.Corrupt > 0 {
		rm.log.Info("reconciled remote storage", "tier", rm.store.String(), "orphaned_segments_deleted", total.Orphans,
			"objects_deleted", total.Objects, "young_candidates", total.Young, "unreadable_manifests", total.Corrupt,
			"unrecognized_objects", total.Unrecognized, "unrecognized_sample", strings.Join(total.UnrecognizedSample, ","))
	}
}
